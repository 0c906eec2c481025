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
from tasks.evaluate import POOL_BATCH_MAX, batches, evaluation_batches, pool_task_count, split_evenly


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
        (120, 2, 1),
        (500, 2, 1),
        (600, 2, 2),
        (1_000, 2, 2),
        (20_000, 2, 20),
        (21_000, 2, 22),
        (100_000, 2, 100),
        (5_000, 4, 8),
        (1_000, 4, 2),
        (1_500, 4, 3),
        (20_000, 1, 20),
        (7_777, 3, 9),
        (1_027_000, 2, 1_028),
    ],
)
def test_pool_task_count_hand_computed(records: int, processes: int, expected: int) -> None:
    """E.g. 21,000 records on 2 processes: 21 tasks of at most 1,000 are needed, rounded up to 22 (a
    multiple of 2); 1,500 on 4: 2 needed, rounded up to 4, but batches of 500 make only 3."""
    assert pool_task_count(records, processes) == expected


def _records(count: int) -> list[AgentLogRecord]:
    record = AgentLogRecord(run_id="r", question="q", sql="SELECT 1")
    return [record] * count


def test_split_evenly_gives_sizes_that_differ_by_at_most_one() -> None:
    assert [len(b) for b in split_evenly(_records(10), 4)] == [3, 3, 2, 2]
    assert [len(b) for b in split_evenly(_records(2), 4)] == [1, 1]  # no empty batch
    assert split_evenly([], 3) == []
    with pytest.raises(ValueError, match="at least 1"):
        split_evenly(_records(3), 0)


def test_pool_batches_are_the_fewest_even_tasks_of_at_most_the_cap() -> None:
    """Over a grid of day and pool sizes: exactly ``pool_task_count`` batches of sizes differing by
    at most one, none above POOL_BATCH_MAX, never more than batches of 500 would make, a multiple
    of the processes on days of at least 1,000 records per process, and no fewer tasks possible:
    one multiple of the processes less would put more than POOL_BATCH_MAX records in a task."""
    for processes in (1, 2, 3, 4, 8):
        for count in [*range(1, 3_000, 37), *range(3_000, 120_000, 1_333), 250_000, 1_000_003, 1_027_000]:
            parts = evaluation_batches(_records(count), None, processes)
            sizes = [len(b) for b in parts]
            tasks = len(sizes)
            assert tasks == pool_task_count(count, processes), (count, processes)
            assert sum(sizes) == count and max(sizes) <= POOL_BATCH_MAX and max(sizes) - min(sizes) <= 1
            assert tasks <= -(-count // 500)
            if count >= 1_000 * processes:
                assert tasks % processes == 0, (count, processes)
            fewer = tasks - processes
            assert fewer < 1 or -(-count // fewer) > POOL_BATCH_MAX or tasks == -(-count // 500), (count, processes)


def test_evaluation_batches_keep_the_users_size_and_500_outside_the_pool() -> None:
    """An explicit size wins; threads, Dask and a model judge (0 pool processes) keep BATCH_SIZE."""
    assert [len(b) for b in evaluation_batches(_records(1_200), 300, 2)] == [300, 300, 300, 300]
    assert [len(b) for b in evaluation_batches(_records(1_200), None, 0)] == [500, 500, 200]
    assert [len(b) for b in evaluation_batches(_records(1_200), None, 2)] == [600, 600]
    with pytest.raises(ValueError, match="at least 0"):
        evaluation_batches(_records(3), None, -1)


def test_pool_task_count_rejects_an_empty_pool() -> None:
    with pytest.raises(ValueError, match="at least one process"):
        pool_task_count(100, 0)
    with pytest.raises(ValueError, match="at least 0"):
        pool_task_count(-1, 2)
