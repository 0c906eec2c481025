"""Which stopping signal (SIGINT, SIGTERM) this process received during a command, whichever
handler took it.

A signal handler that raises (Python's ``KeyboardInterrupt``, the CLI's SIGTERM handler,
Prefect's ``TerminationSignal`` while a flow runs) can lose its exception on the way: DuckDB
catches it inside a running query and raises ``RuntimeError('Query interrupted')`` instead, and a
step that reports its failures without failing the run (the nightly's drift step) would then go on
as if nothing had happened. :func:`recording` points Python's signal wake-up file descriptor
(:func:`signal.set_wakeup_fd`) at a pipe: the interpreter writes the number of every signal it
handles in Python into it, before any handler runs, whatever the handler. :func:`received` reads it.

Only the main thread can set the wake-up descriptor; elsewhere :func:`recording` records nothing
and :func:`received` answers ``None`` (the caller's other checks still apply). A process forked
during the recording (a scoring pool's worker) gets no wake-up descriptor: its own signals (the
time cap's SIGALRM ticks) are not the command's, and they would fill the pipe. The pipe holds
1 MiB where Linux allows it (otherwise 64 KiB): nothing reads it until a failure asks, and the
in-process time cap's ticks (four a second at most) would fill 64 KiB in about 4.5 hours.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

STOP_SIGNALS = frozenset({int(signal.SIGINT), int(signal.SIGTERM)})
"""The signals that stop a command (Ctrl-C, a scheduler's or ``kill``'s SIGTERM)."""

PIPE_BYTES = 1 << 20
"""Size asked for the wake-up pipe (``F_SETPIPE_SZ``; Linux's default limit for a user is 1 MiB)."""


class _State:
    """The process's recording (class attributes: one per process)."""

    reader: int | None = None
    """Read end of the wake-up pipe while :func:`recording` is active."""
    writer: int | None = None
    """Its write end, the interpreter's wake-up descriptor."""
    seen: ClassVar[list[int]] = []
    """Stop signals read from the pipe, in order of arrival."""


@contextmanager
def recording() -> Iterator[None]:
    """Record the stop signals this process receives during the block (main thread only).

    The wake-up descriptor set before the block is restored after it (unless something else
    replaced this one meanwhile: then that one stays). Outside the main thread nothing is recorded.
    Nested blocks share the outer one's recording.

    Yields:
        Nothing; call :func:`received` inside the block.
    """
    if _State.writer is not None:
        yield
        return
    reader, writer = os.pipe()
    os.set_blocking(reader, False)
    os.set_blocking(writer, False)
    try:
        import fcntl

        fcntl.fcntl(writer, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError):  # not Linux, or over the system's limit: the default size
        pass
    try:
        previous = signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        os.close(reader)
        os.close(writer)
        yield
        return
    _State.reader, _State.writer, _State.seen = reader, writer, []
    try:
        yield
    finally:
        current = signal.set_wakeup_fd(previous, warn_on_full_buffer=False)
        if current != writer:  # another owner replaced ours during the block: it keeps its own
            signal.set_wakeup_fd(current, warn_on_full_buffer=False)
        _State.reader = _State.writer = None
        _State.seen = []
        os.close(reader)
        os.close(writer)


def _forget_in_child() -> None:
    """After a fork: the child does not write its signals into the parent's pipe."""
    if _State.writer is not None:
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:  # not the main thread (cannot happen right after a fork)
            pass
        _State.reader = _State.writer = None
        _State.seen = []


os.register_at_fork(after_in_child=_forget_in_child)


def received() -> int | None:
    """The first stop signal (SIGINT or SIGTERM) received since :func:`recording` began, or ``None``.

    Non-blocking; safe to call from any thread and from a logging filter.

    >>> received() is None  # outside a recording
    True
    """
    reader = _State.reader
    if reader is not None:
        while True:
            try:
                chunk = os.read(reader, 512)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            _State.seen.extend(number for number in chunk if number in STOP_SIGNALS)
    return _State.seen[0] if _State.seen else None
