"""Tests of tasks/artifacts.py (the summary table) and the doctests of tasks/artifacts.py and tasks/evaluate.py."""

from __future__ import annotations

import doctest
import json

import tasks.artifacts
import tasks.evaluate
from tasks import (
    summary_table,
)


def test_summary_table_rows_are_json_ready_and_sorted() -> None:
    metrics = [
        {
            "agent_id": "b",
            "agent_version": "v1",
            "records": 3,
            "coverage": 2 / 3,
            "mean_score": None,
            "p90_score": None,
            "n_excellent": 0,
            "n_good": 0,
            "n_marginal": 0,
            "n_poor": 0,
            "n_quarantined": 1,
        },
        {
            "agent_id": "a",
            "agent_version": "v2",
            "records": 4,
            "coverage": 1.0,
            "mean_score": 81.25,
            "p90_score": 97.0,
            "n_excellent": 2,
            "n_good": 1,
            "n_marginal": 1,
            "n_poor": 0,
            "n_quarantined": 0,
        },
    ]
    rows = summary_table(metrics)
    assert [(r["agent"], r["version"], r["coverage"], r["mean"]) for r in rows] == [
        ("a", "v2", "100.0 %", 81.2),  # shares as percentages
        ("b", "v1", "66.7 %", None),
    ]
    assert json.loads(json.dumps(rows)) == rows


def test_tasks_doctests() -> None:
    for module in (tasks.artifacts, tasks.evaluate):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
