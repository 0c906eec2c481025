"""Pool worker processes that end with the process that started them.

A ``concurrent.futures.ProcessPoolExecutor`` worker waits for work on its call queue. When the
pool's process is killed (``kill -9``, the OOM killer, a CI timeout), no shutdown message comes
and, since the forked worker holds both ends of the queue's pipe, no end-of-file either: the
worker waits forever, re-parented to PID 1, holding its memory (about 150 MB for a scoring
worker). :func:`exit_with_parent`, called in the worker's initializer, ends it instead.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import threading
import time

SCORING_GC_THRESHOLD = 10_000
"""First-generation threshold of Python's cyclic garbage collector in a scoring worker (Python's
default: 700 allocations). Scoring one record allocates thousands of container objects (sqlglot
trees, whose parent links make them cyclic, and the pipeline's models), so at 700 the collector
walks the young objects many times per record. At 10,000: 5,000 of the bench's records scored in
2.43–2.46 s of CPU instead of 2.60–2.98 s, the process's peak memory 1 MB larger."""


def settle_scoring_worker() -> None:
    """Garbage collection for a forked scoring worker: what it inherited (modules, rules,
    calibrators) is frozen (:func:`gc.freeze`: never garbage, never scanned again) and young
    objects are collected every :data:`SCORING_GC_THRESHOLD` allocations.

    >>> import gc
    >>> before = gc.get_threshold()
    >>> settle_scoring_worker(); gc.get_threshold()[0] == SCORING_GC_THRESHOLD
    True
    >>> gc.set_threshold(*before); gc.unfreeze()
    """
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(SCORING_GC_THRESHOLD, middle, old)


PARENT_POLL_S = 1.0
"""How often a worker checks its parent where the kernel cannot notify it (no ``pidfd_open``), in seconds."""


def exit_with_parent(parent_pid: int) -> None:
    """End this process (``os._exit(1)``) as soon as process ``parent_pid`` is gone.

    Call it first thing in a pool worker (its ``initializer``), with the pid of the process that
    creates the pool (``os.getpid()`` there). A daemon thread waits on a pidfd of the parent
    (Linux 5.3+: the kernel wakes it when the parent exits, no polling) or, where there is none,
    checks ``os.getppid()`` every :data:`PARENT_POLL_S` seconds. A worker whose parent already
    died before this call exits at once. The kernel's parent-death signal (``PR_SET_PDEATHSIG``)
    is not used: it fires when the *thread* that forked the worker ends, and a pool may be
    started from a task thread that ends long before the pool does.

    Args:
        parent_pid: the pool's process.
    """
    if os.getppid() != parent_pid:
        os._exit(1)
    try:
        pidfd: int | None = os.pidfd_open(parent_pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or a seccomp filter
        pidfd = None

    def watch() -> None:
        try:
            if pidfd is not None:
                watcher = select.poll()  # not select(): it refuses descriptors above 1023
                watcher.register(pidfd, select.POLLIN)
                while not watcher.poll():  # readable once the parent has exited
                    pass
                os._exit(1)
        except (OSError, ValueError):  # the kernel refused the wait: poll the parent's pid instead
            pass
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="stef-exit-with-parent", daemon=True).start()


def leave_interrupts_to_parent() -> None:
    """Let a pool worker's parent handle Ctrl-C and SIGTERM.

    Call it in the worker's ``initializer``:
    - SIGINT is ignored. A terminal's Ctrl-C reaches every process of its group, and the
      parent stops the run and shuts the pool down.
    - SIGTERM gets its default action, ending the worker at once. A forked worker inherits the
      handler of the command's :func:`flows.cli.common.interruptible`, which would make it print
      a traceback of its own and report an interrupt nobody reads.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
