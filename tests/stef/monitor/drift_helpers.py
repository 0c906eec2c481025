"""Helpers of the drift tests in tests/stef/monitor: fast thresholds, samples, cyclic score lists."""

from __future__ import annotations

from stef.monitor.models import DriftSample, DriftThresholds

FAST = DriftThresholds(n_resamples=500)
"""Fewer resamples keep the tests fast; the decision logic is the same."""


def sample(
    scores: list[float], unscored: int = 0, verdicts: tuple[str, ...] = (), filters: tuple[str, ...] = ()
) -> DriftSample:
    return DriftSample(tuple(scores), records=len(scores) + unscored, verdicts=verdicts, filter_statuses=filters)


def cycle(values: list[float], n: int) -> list[float]:
    return [values[i % len(values)] for i in range(n)]
