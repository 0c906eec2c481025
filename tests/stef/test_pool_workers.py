"""Tests of stef/pool_workers.py: pool workers end with the process that started them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

POOL_THEN_WAIT = """
import os, sys, time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing
from stef.pool_workers import exit_with_parent
pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork"), initializer=exit_with_parent, initargs=(os.getpid(),))
pids = {f.result() for f in [pool.submit(os.getpid) for _ in range(8)]}
print(" ".join(map(str, sorted(pids))), flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_exit_when_their_pool_process_is_killed() -> None:
    """Killed with SIGKILL (no exit handler runs), the pool's process leaves no worker behind;
    without :func:`exit_with_parent` they would wait on their call queue forever."""
    parent = subprocess.Popen([sys.executable, "-c", POOL_THEN_WAIT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        workers = [int(pid) for pid in parent.stdout.readline().split()]
        assert workers and all(_alive(pid) for pid in workers)
        assert parent.pid not in workers
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:  # do not leak them when the test fails
        os.kill(pid, signal.SIGKILL)
    assert left == []


def test_a_worker_whose_parent_is_already_gone_exits_at_once() -> None:
    """The initializer given a pid that is not the parent's (it died before the worker started) ends the process."""
    done = subprocess.run(
        [sys.executable, "-c", "from stef.pool_workers import exit_with_parent; exit_with_parent(-5); print('alive')"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, "")


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # as flows.cli.common.interruptible's handler does


def test_both_scoring_pools_leave_ctrl_c_and_sigterm_to_the_command() -> None:
    """The workers of `stef evaluate`'s pool and of the nightly's scoring pool are forked from a
    command whose handlers raise on SIGINT and SIGTERM: in a worker, SIGINT is ignored and SIGTERM
    has its default action, so a terminal's Ctrl-C does not make each idle worker print a
    KeyboardInterrupt traceback of its own."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from flows.cli.parallel import _init_worker
    from stef.pipeline.rules import RuleBook
    from tasks.scoring_pool import shared_pool, shutdown_pool

    before = signal.signal(signal.SIGINT, _raise_interrupt), signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(1, context, _init_worker, (os.getpid(), RuleBook(), None, None)) as pool:
            evaluate_handlers = (
                pool.submit(signal.getsignal, signal.SIGINT).result(),
                pool.submit(signal.getsignal, signal.SIGTERM).result(),
            )
        try:
            scoring = shared_pool(1)
            nightly_handlers = (
                scoring.submit(signal.getsignal, signal.SIGINT).result(),
                scoring.submit(signal.getsignal, signal.SIGTERM).result(),
            )
        finally:
            shutdown_pool()
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
    assert evaluate_handlers == nightly_handlers == (signal.SIG_IGN, signal.SIG_DFL)


def test_both_scoring_pools_collect_young_objects_less_often_than_python_does() -> None:
    """The workers of both scoring pools freeze what they inherited and raise the collector's
    first-generation threshold to SCORING_GC_THRESHOLD (Python's default: 700); this process keeps its own."""
    import gc
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from flows.cli.parallel import _init_worker
    from stef.pipeline.rules import RuleBook
    from stef.pool_workers import SCORING_GC_THRESHOLD
    from tasks.scoring_pool import shared_pool, shutdown_pool

    own = gc.get_threshold()
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(1, context, _init_worker, (os.getpid(), RuleBook(), None, None)) as pool:
        evaluate_worker = pool.submit(gc.get_threshold).result(), pool.submit(gc.get_freeze_count).result()
    try:
        scoring = shared_pool(1)
        nightly_worker = scoring.submit(gc.get_threshold).result(), scoring.submit(gc.get_freeze_count).result()
    finally:
        shutdown_pool()
    for threshold, frozen in (evaluate_worker, nightly_worker):
        assert threshold == (SCORING_GC_THRESHOLD, own[1], own[2]) and frozen > 0
    assert gc.get_threshold() == own and own[0] < SCORING_GC_THRESHOLD
