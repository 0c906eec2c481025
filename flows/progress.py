"""Evaluation progress of the flows, for whoever shows it (the CLI's progress bar).

The nightly flow reports how far its evaluation batches are (:func:`evaluation_started`,
:func:`batch_evaluated`, :func:`evaluation_finished`); a command that runs flows in its own
process registers a :class:`EvaluationProgress` with :func:`showing_progress` (``stef nightly``,
``stef backfill`` and ``stef demo`` draw a rich progress bar on a terminal). Without one,
reporting does nothing, so a deployment served by a worker is unaffected. A reporter that fails
is dropped with a warning: showing progress never fails a run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from typing import Protocol

_logger = logging.getLogger(__name__)


class EvaluationProgress(Protocol):
    """What a progress display receives while a day is evaluated (records, in input order)."""

    def started(self, log_date: date, records: int, batches: int) -> None:
        """Evaluation of ``records`` records of ``log_date`` in ``batches`` batches begins."""

    def advanced(self, records: int) -> None:
        """One batch of ``records`` records is evaluated."""

    def finished(self) -> None:
        """The day's evaluation is over (also after an error)."""


_REPORTERS: list[EvaluationProgress] = []
_LOCK = threading.Lock()


@contextmanager
def showing_progress(reporter: EvaluationProgress) -> Iterator[EvaluationProgress]:
    """Send the flows' evaluation progress to ``reporter`` inside the ``with`` block."""
    with _LOCK:
        _REPORTERS.append(reporter)
    try:
        yield reporter
    finally:
        with _LOCK:
            if reporter in _REPORTERS:
                _REPORTERS.remove(reporter)


def _each(method: str, *args: object) -> None:
    with _LOCK:
        reporters = list(_REPORTERS)
    for reporter in reporters:
        try:
            getattr(reporter, method)(*args)
        except Exception as exc:  # a display must not fail the run: stop showing it
            _logger.warning("progress display %r failed and is switched off: %s", reporter, exc)
            with _LOCK:
                if reporter in _REPORTERS:
                    _REPORTERS.remove(reporter)


def evaluation_started(log_date: date, records: int, batches: int) -> None:
    """Report that ``records`` records of ``log_date`` are evaluated in ``batches`` batches."""
    _each("started", log_date, records, batches)


def batch_evaluated(records: int) -> None:
    """Report one finished batch of ``records`` records."""
    _each("advanced", records)


def evaluation_finished() -> None:
    """Report the end of a day's evaluation."""
    _each("finished")
