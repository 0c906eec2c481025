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
from tasks.evaluate import POOL_BATCH_MAX, batches, pool_batch_size


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


@pytest.mark.parametrize(
    ("records", "processes", "expected"),
    [
        (0, 2, 1),
        (120, 2, 120),
        (500, 2, 500),
        (600, 2, 300),
        (1_000, 2, 500),
        (20_000, 2, 1_000),
        (21_000, 2, 955),
        (100_000, 2, 1_000),
        (5_000, 4, 625),
        (20_000, 1, 1_000),
        (7_777, 3, 865),
    ],
)
def test_pool_batch_size_hand_computed(records: int, processes: int, expected: int) -> None:
    """E.g. 21,000 records on 2 processes: 21 tasks of at most 1,000 are needed, rounded up to 22 (a
    multiple of 2), so 955 records each; 7,777 on 3: 8 tasks rounded up to 9, 865 each; 600 on 2:
    one task would do, rounded up to 2 of 300."""
    assert pool_batch_size(records, processes) == expected


def test_pool_batch_size_gives_every_process_the_same_share() -> None:
    """Over a grid of day sizes and pool sizes: no task above POOL_BATCH_MAX records, never more
    tasks than batches of 500 would make, and above 500 records a number of tasks that is a
    multiple of the processes, all of the same size but the last (at most one record per task less)."""
    for processes in (1, 2, 3, 4, 8):
        for records in [*range(1, 3_000, 37), *range(3_000, 120_000, 1_333), 250_000, 1_000_003]:
            size = pool_batch_size(records, processes)
            sizes = [len(b) for b in batches(list(range(records)), size)]  # type: ignore[arg-type]
            assert sum(sizes) == records and max(sizes) <= POOL_BATCH_MAX
            assert len(sizes) <= -(-records // 500)
            if records > 500:
                assert len(sizes) % processes == 0 or len(sizes) == -(-records // 500), (records, processes, sizes)
                assert max(sizes) - min(sizes) <= len(sizes), (records, processes)


def test_pool_batch_size_rejects_an_empty_pool() -> None:
    with pytest.raises(ValueError, match="at least one process"):
        pool_batch_size(100, 0)
    with pytest.raises(ValueError, match="at least 0"):
        pool_batch_size(-1, 2)
