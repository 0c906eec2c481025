"""Tests of tasks/evaluate.py through ``.fn()``: evaluating a batch, splitting records into batches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stef.errors import RulesError
from stef.models import AgentLogRecord, EvaluationStatus
from tasks import (
    evaluate_batch,
)
from tasks.evaluate import batches


def test_evaluate_batch_returns_one_evaluation_per_record_in_order() -> None:
    records = [
        AgentLogRecord(run_id="a", question="How many orders were placed?", sql="SELECT COUNT(*) FROM orders"),
        AgentLogRecord(run_id="b", question="", sql="SELECT 1"),
        AgentLogRecord(
            run_id="c",
            question="Total revenue per region",
            sql="SELECT region, SUM(revenue) FROM sales GROUP BY region",
        ),
    ]
    evaluations = evaluate_batch.fn(records, None)
    assert [e.run_id for e in evaluations] == ["a", "b", "c"]
    assert evaluations[1].status is EvaluationStatus.INVALID_INPUT


def test_evaluate_batch_uses_a_rules_folder(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "shop.json").write_text(json.dumps({"app_id": "shop", "default_dialect": "mysql"}), encoding="utf-8")
    record = AgentLogRecord(run_id="a", app_id="shop", question="How many orders?", sql="SELECT COUNT(*) FROM `orders`")
    (evaluation,) = evaluate_batch.fn([record], str(rules))
    assert evaluation.run_id == "a"
    assert evaluation.status is EvaluationStatus.EVALUATED


def test_evaluate_batch_rejects_a_missing_rules_folder(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match=r"rules folder does not exist"):
        evaluate_batch.fn([], str(tmp_path / "nope"))


@pytest.mark.parametrize(
    ("count", "size", "expected"),
    [
        pytest.param(0, 500, [], id="no_records"),
        pytest.param(1000, 500, [500, 500], id="exact_multiple"),
        pytest.param(1001, 500, [500, 500, 1], id="remainder"),
    ],
)
def test_batches_split_records(count: int, size: int, expected: list[int]) -> None:
    records = [AgentLogRecord(run_id=str(i), question="q", sql="SELECT 1") for i in range(count)]
    assert [len(b) for b in batches(records, size)] == expected


def test_batches_reject_a_zero_size() -> None:
    with pytest.raises(ValueError, match=r"batch size must be at least 1"):
        batches([], 0)
