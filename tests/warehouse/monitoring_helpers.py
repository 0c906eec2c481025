"""Helpers of the monitoring tests: the rollout's first day, fast thresholds, a ``drift_checks`` row."""

from __future__ import annotations

from stef.models import EVALUATOR_VERSION
from stef.monitor.models import DriftThresholds
from tests.support.rollout import D1, day

__all__ = ["D1", "FAST", "day"]

FAST = DriftThresholds(n_resamples=300)


def _row(**overrides: object) -> dict[str, object]:
    row: dict[str, object] = {
        "agent_id": "bird",
        "kind": "version",
        "baseline_version": "v1",
        "candidate_version": "v2.0",
        "evaluator_version": EVALUATOR_VERSION,
        "window_start": day(0),
        "window_end": day(6),
        "baseline_window_start": day(0),
        "baseline_window_end": day(6),
        "n_baseline": 10,
        "n_candidate": 12,
        "verdict": "drift",
        "direction": "worse",
        "statistics": {"summary": {"mean_delta": -3.0}},
        "source": "cli",
    }
    row.update(overrides)
    return row
