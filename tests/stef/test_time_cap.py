"""Tests of stef/time_cap.py: the per-record alarm's tick (the cap itself is tested through evaluate_many in
tests/stef/pipeline/test_evaluate.py)."""

from __future__ import annotations

import pytest


def test_a_tick_never_raises_inside_a_finalizer() -> None:
    """An exception raised in a __del__ is swallowed by the interpreter ("Exception ignored in"): the tick
    waits for the record's own code instead of raising where nobody can catch it."""
    import sys
    import time

    from stef.time_cap import RecordTimeout, _RecordAlarm

    alarm = _RecordAlarm(0.2)
    alarm.deadline = time.perf_counter() - 1.0  # the record is past its cap
    raised: list[bool] = []

    class Finalized:
        def __del__(self) -> None:
            try:
                alarm._on_tick(14, sys._getframe())
                raised.append(False)
            except RecordTimeout:
                raised.append(True)

    Finalized()  # collected at once: __del__ runs here
    assert raised == [False]
    with pytest.raises(RecordTimeout):
        alarm._on_tick(14, sys._getframe())  # in ordinary code the tick raises
