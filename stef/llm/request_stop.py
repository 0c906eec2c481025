"""Stopping this process's model requests at once when its run is interrupted (Ctrl-C, SIGTERM).

All model calls of a process run on one event loop (:class:`stef.llm.judge._LoopThread`), which
registers itself here (:func:`register_loop`) and starts no request while :func:`stopped` holds.
Three things stop them, each lifted by its owner:

* :func:`stop_for_signal`: the CLI's signal handler (:func:`flows.cli.common.interruptible`), the
  moment the signal arrives; lifted by :func:`clear_signal` when the command has unwound;
* :func:`stop_for_interrupt`: the nightly flow, when an interrupt reaches its wait on a batch;
  lifted at the end of the interrupted run's task-runner shutdown (:func:`stopped_block`);
* :func:`stopped_block`: that shutdown itself, for its duration.

Each one cancels the requests queued or in flight on the loop (a request already on its way may
still reach the server; a queued one never starts). This module imports only a few standard
modules when loaded, and :func:`stop_for_signal` takes no lock and imports nothing, so a signal's
handler can call it whatever the main thread holds, even while another thread is still importing
the judge.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio


class _State:
    """The process's stop state (class attributes: one per process)."""

    loop: tuple[asyncio.AbstractEventLoop, Callable[[], None]] | None = None
    """The judge's event loop and the callback that cancels its tasks (:func:`register_loop`),
    ``None`` before the first model call."""
    signalled = False
    """Set by :func:`stop_for_signal` until :func:`clear_signal`."""
    interrupted = False
    """Set by :func:`stop_for_interrupt` until a :func:`stopped_block` ends normally (or :func:`clear_signal`)."""
    depth = 0
    """:func:`stopped_block` blocks open now."""
    lock = threading.Lock()
    """Guards :attr:`depth` (never taken by :func:`stop_for_signal`)."""


def register_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Make ``loop`` the one whose tasks a stop cancels (the judge's loop, when it starts)."""
    import asyncio

    def cancel_all() -> None:
        for task in asyncio.all_tasks(loop):
            task.cancel()

    _State.loop = (loop, cancel_all)


def stopped() -> bool:
    """Whether no model request may start now (a signal, an interrupted flow or a stopped block)."""
    return bool(_State.signalled or _State.interrupted or _State.depth)


def stop_for_signal() -> None:
    """Stop the model requests because the process got Ctrl-C or SIGTERM: cancel those queued or
    in flight, start none until :func:`clear_signal`. Safe in a signal's handler (no lock, no import).
    """
    _State.signalled = True
    _cancel_all(_State.loop)


def clear_signal() -> None:
    """End :func:`stop_for_signal`, and a :func:`stop_for_interrupt` still in force (the
    interrupted command has unwound)."""
    _State.signalled = False
    _State.interrupted = False


def stop_for_interrupt() -> None:
    """Stop the model requests because an interrupt reached a flow run: cancel those queued or in
    flight, start none until a :func:`stopped_block` (the run's task-runner shutdown, which waits
    for its threads) ends normally. No lock, no import."""
    _State.interrupted = True
    _cancel_all(_State.loop)


@contextlib.contextmanager
def stopped_block() -> Iterator[None]:
    """A block in which no model request starts, and those queued or in flight when it begins are
    cancelled: an interrupted run's task-runner shutdown. A normal end also lifts
    :func:`stop_for_interrupt` (the run's threads are joined); an end by an exception (a second
    signal during the shutdown, its threads maybe still running) does not. It never lifts
    :func:`stop_for_signal` (the command may still be unwinding)."""
    with _State.lock:
        _State.depth += 1
    ended = False
    try:
        _cancel_all(_State.loop)
        yield
        ended = True
    finally:
        with _State.lock:
            _State.depth -= 1
            if ended and not _State.depth:
                _State.interrupted = False


def _cancel_all(registered: tuple[asyncio.AbstractEventLoop, Callable[[], None]] | None) -> None:
    """Cancel every task on the registered loop, in its own thread (returns at once; no lock taken,
    nothing imported). No loop, or a closed one: nothing runs on it."""
    if registered is None:
        return
    loop, cancel_all = registered
    if loop.is_closed():
        return
    try:
        loop.call_soon_threadsafe(cancel_all)
    except RuntimeError:  # the loop was closed meanwhile
        pass
