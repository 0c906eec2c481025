"""The per-record time cap of an evaluation: its configured value and the process-wide SIGALRM timer.

:func:`configured_time_cap_s` reads ``$STEF_TIME_CAP_S`` (default :data:`DEFAULT_TIME_CAP_S`
seconds); :class:`_RecordAlarm` raises :class:`RecordTimeout` in a record that runs past its
deadline, and :func:`_check_deadline` checks the deadline between stages. Used by
:func:`stef.pipeline.evaluate.evaluate_many`; the configured cap is also read outside the pipeline
(the CLI, and packages that must not import :mod:`stef.pipeline`), so this module imports nothing from it.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from stef.errors import ConfigError

DEFAULT_TIME_CAP_S = 2.0
"""Per-record evaluation time cap in seconds (``None`` or 0 switches it off)."""
MIN_TIME_CAP_S = 0.001
"""Smallest per-record cap accepted from the environment (1 ms): the cap's timer ticks at a quarter of it."""
TIME_CAP_ENV_VAR = "STEF_TIME_CAP_S"
"""Environment variable overriding :data:`DEFAULT_TIME_CAP_S` (seconds; ``0``: no cap)."""


def configured_time_cap_s() -> float | None:
    """The per-record time cap: ``$STEF_TIME_CAP_S`` seconds, else :data:`DEFAULT_TIME_CAP_S`;
    ``None`` when the variable is ``0`` (no cap).

    Raises:
        ConfigError: the variable is not a number of seconds >= 0.
    """
    raw = os.environ.get(TIME_CAP_ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_TIME_CAP_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value == 0.0 or MIN_TIME_CAP_S <= value < float("inf")):  # also rejects nan
        raise ConfigError(
            f"{TIME_CAP_ENV_VAR}={raw!r} is not a number of seconds >= {MIN_TIME_CAP_S:g} (0 switches the per-record cap off)"
        )
    return value or None


class RecordTimeout(Exception):
    """Raised inside :func:`stef.pipeline.evaluate.evaluate` when the per-record time cap expires."""


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.perf_counter() > deadline:
        raise RecordTimeout


_FINALIZER_CODES = frozenset({"__del__", "unraisable_hook", "_parse_value_tb", "format_exception"})
"""Code names of the places where an exception cannot reach the record's loop: a finalizer run by the
garbage collector, and the unraisable-exception hook printing what one raised."""


def _in_finalizer(frame: object, depth: int = 64) -> bool:
    """Whether the interrupted ``frame`` (or one of its ``depth`` callers) is a finalizer or the
    unraisable hook: an exception raised there is swallowed (“Exception ignored in …”), so the tick
    waits for the next one, back in the record's own code."""
    current = frame
    for _ in range(depth):
        if current is None:
            return False
        code = getattr(current, "f_code", None)
        if code is not None and code.co_name in _FINALIZER_CODES:
            return True
        current = getattr(current, "f_back", None)
    return False


class _RecordAlarm:
    """The per-record time cap: a SIGALRM interval timer that raises :class:`RecordTimeout` in
    the record that passed its deadline.

    The handler and a periodic timer (a tick of a quarter of the cap, 0.25 ms to 0.25 s) are set up
    once for a whole batch; each record only sets :attr:`deadline`, so no system call is made per
    record. A record is interrupted at most one tick after its cap. Signals can only be handled in
    the main thread of a process, so the timer interrupts work there (``stef evaluate``,
    process-pool workers); in other threads (the nightly flow's thread pool) it does nothing: the
    deadline is checked between stages, and the size caps (:data:`stef.pipeline.clean.MAX_SQL_CHARS`,
    :data:`stef.pipeline.evaluate.MAX_TEXT_CHARS`) bound each stage.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.usable = (
            bool(seconds) and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
        )
        self.deadline: float | None = None
        """``time.perf_counter()`` value after which the current record is interrupted (``None``: no record running)."""
        self._previous: object = None
        self._previous_timer: tuple[float, float] = (0.0, 0.0)

    def _on_tick(self, signum: int, frame: object) -> None:
        deadline = self.deadline
        if deadline is not None and time.perf_counter() > deadline and not _in_finalizer(frame):
            raise RecordTimeout  # again at every tick until the record is abandoned (the loop clears the deadline)

    def __enter__(self) -> _RecordAlarm:
        if self.usable:
            tick = max(0.00025, min(0.25, self.seconds / 4))  # type: ignore[operator]
            self._previous = signal.signal(signal.SIGALRM, self._on_tick)
            self._previous_timer = signal.setitimer(signal.ITIMER_REAL, tick, tick)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.usable:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)  # type: ignore[arg-type]
            if any(self._previous_timer):  # an enclosing batch's timer: running again
                signal.setitimer(signal.ITIMER_REAL, *self._previous_timer)
