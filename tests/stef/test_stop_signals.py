"""Tests of stef/stop_signals.py: a SIGTERM whose handler's exception DuckDB swallowed in a running
query (``RuntimeError('Query interrupted')``) is still known to the command, and the CLI and the
nightly's drift step act on it (exit 143, no traceback; the day not marked done)."""

from __future__ import annotations

import doctest
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from typing import Any

import duckdb
import pytest

import stef.stop_signals
from stef import stop_signals

LONG_QUERY = "SELECT sum(x) FROM range(20000000000) t(x)"
"""A query that runs for minutes: only an interrupt ends it."""


class _Termination(BaseException):
    """What Prefect's SIGTERM handler raises while a flow runs (its ``TerminationSignal``)."""


def _raise_termination(signum: int, frame: object) -> None:
    raise _Termination(signum)


@contextmanager
def _handler(signum: int, handler: Any) -> Iterator[None]:
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)


def _sigterm_later(delay_s: float = 0.3) -> threading.Timer:
    timer = threading.Timer(delay_s, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    return timer


def test_doctests() -> None:
    assert doctest.testmod(stef.stop_signals).failed == 0


def test_a_sigterm_whose_exception_duckdb_swallowed_is_still_received() -> None:
    with stop_signals.recording(), _handler(signal.SIGTERM, _raise_termination):
        assert stop_signals.received() is None
        timer = _sigterm_later()
        with pytest.raises(RuntimeError, match="Query interrupted") as raised:
            duckdb.connect().execute(LONG_QUERY).fetchall()
        timer.join()
        assert raised.value.__context__ is None  # the handler's exception is gone
        assert stop_signals.received() == signal.SIGTERM
        assert stop_signals.received() == signal.SIGTERM  # it stays known for the command
    assert stop_signals.received() is None  # a later command starts afresh


def test_other_signals_are_not_stop_signals_and_the_previous_wakeup_fd_is_restored() -> None:
    reader, writer = os.pipe()
    os.set_blocking(writer, False)
    previous = signal.set_wakeup_fd(writer)
    try:
        with stop_signals.recording(), _handler(signal.SIGUSR1, lambda signum, frame: None):
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.05)
            assert stop_signals.received() is None
        assert signal.set_wakeup_fd(writer) == writer  # the owner before the block has its fd back
    finally:
        signal.set_wakeup_fd(previous)
        os.close(reader)
        os.close(writer)


def test_outside_the_main_thread_nothing_is_recorded_and_nothing_fails() -> None:
    seen: list[int | None] = []

    def worker() -> None:
        with stop_signals.recording():
            seen.append(stop_signals.received())

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [None]


def test_the_cli_exits_143_when_duckdb_swallowed_the_sigterm_of_prefects_handler(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """While a flow runs Prefect's handler takes SIGTERM (``capture_sigterm``); its exception,
    raised in a DuckDB query, came out as ``RuntimeError('Query interrupted')``: the command
    printed Prefect's traceback and exited 1, or went on and exited 0 (a drift check)."""
    import typer
    from prefect.utilities.engine import capture_sigterm

    from flows.cli import common

    monkeypatch.setattr(common, "_INTERRUPTED", threading.Event())
    try:
        raise RuntimeError("Query interrupted")
    except RuntimeError:
        exc_info = sys.exc_info()
    with pytest.raises(typer.Exit) as stopped, common.interruptible(lambda: "nothing kept"), capture_sigterm():
        timer = _sigterm_later()
        try:
            duckdb.connect().execute(LONG_QUERY).fetchall()
        finally:
            timer.join()
            logged = logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1, "Flow run failed", (), exc_info)
            assert common._NoStefTraceback().filter(logged) and logged.exc_info is None
    assert stopped.value.exit_code == 143
    assert "interrupted by SIGTERM: nothing kept" in capsys.readouterr().err


class _FailedState:
    """A task run's failed state, as ``check_drift(..., return_state=True)`` returns it."""

    message = "Task run encountered an exception RuntimeError: Query interrupted"

    def is_completed(self) -> bool:
        return False

    def result(self, raise_on_failure: bool = True) -> BaseException:
        return RuntimeError("Query interrupted")


def test_the_drift_step_raises_a_failure_that_a_stop_signal_caused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed drift check is reported and the night goes on, unless the process received a stop
    signal: then the failure is the interrupt's, and the flow must stop before the day is marked done."""
    import tasks.drift

    monkeypatch.setattr(tasks.drift, "check_drift", lambda *args, **kwargs: _FailedState())
    with stop_signals.recording():
        step = tasks.drift.nightly_drift_step(None, date(2026, 11, 26), "v")
        assert step.error == "RuntimeError: Query interrupted" and step.checks == []
        with _handler(signal.SIGTERM, lambda signum, frame: None):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
        with pytest.raises(RuntimeError, match="Query interrupted"):
            tasks.drift.nightly_drift_step(None, date(2026, 11, 26), "v")


def test_a_process_forked_during_the_recording_does_not_write_into_its_pipe() -> None:
    """A scoring pool's worker inherited the wake-up descriptor: its time-cap SIGALRM ticks (and
    any signal it handled) went into the command's pipe, filling it until a SIGTERM was lost."""
    with stop_signals.recording(), _handler(signal.SIGTERM, lambda signum, frame: None):
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            previous = signal.set_wakeup_fd(-1)
            os.kill(os.getpid(), signal.SIGTERM)  # handled by the child's inherited no-op handler
            time.sleep(0.05)
            os._exit(0 if previous == -1 else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0  # the child had no wake-up descriptor
        time.sleep(0.05)
        assert stop_signals.received() is None  # and its SIGTERM is not the command's


class _FailedWithoutError(_FailedState):
    """A failed state that holds no exception (its message only)."""

    def result(self, raise_on_failure: bool = True) -> BaseException:  # type: ignore[override]
        return None  # type: ignore[return-value]


def test_a_failure_without_an_error_after_a_stop_signal_raises_an_error_not_ctrl_c(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Raised as KeyboardInterrupt, it was reported as "interrupted by SIGINT" (130) after a SIGTERM."""
    import tasks.drift

    monkeypatch.setattr(tasks.drift, "check_drift", lambda *args, **kwargs: _FailedWithoutError())
    with stop_signals.recording():
        with _handler(signal.SIGTERM, lambda signum, frame: None):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
        with pytest.raises(RuntimeError, match="Query interrupted"):
            tasks.drift.nightly_drift_step(None, date(2026, 11, 26), "v")
