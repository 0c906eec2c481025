"""Tests of tasks/ through ``.fn()`` (no Prefect run needed), plus their pure helpers."""

from __future__ import annotations

import doctest
import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from prefect.states import Failed

import tasks.artifacts
import tasks.evaluate
from stef.errors import InputError, RulesError
from stef.logs import LogLine, parse_line
from stef.models import AgentLogRecord, EvaluationStatus
from tasks import (
    LogQualityError,
    compute_metrics,
    evaluate_batch,
    load_logs,
    quarantine_evaluations,
    store_results,
    summary_table,
    validate_logs,
)
from tasks._runtime import retry_on_io_error
from tasks.evaluate import batches
from warehouse import WarehouseLockedError, connect

DAY = date(2026, 11, 20)


def jsonl_line(number: int, **fields: Any) -> LogLine:
    payload = {"question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders", **fields}
    parsed = parse_line(json.dumps(payload).encode(), "day.jsonl", number)
    assert parsed is not None
    return parsed


# --------------------------------------------------------------------------- load_logs


def test_load_logs_reads_every_file_of_the_day_in_name_order(log_day: Path) -> None:
    lines = load_logs.fn(str(log_day), DAY)
    assert [(Path(x.source).name, x.line_number) for x in lines] == [
        ("sales-agent.jsonl", 1),
        ("sales-agent.jsonl", 2),
        ("sales-agent.jsonl", 3),
        ("sales-agent.jsonl", 4),
        ("sales-agent.jsonl", 5),
        ("support-agent.jsonl", 1),
        ("support-agent.jsonl", 3),
        ("support-agent.jsonl", 4),
    ]
    rejected = [(x.line_number, x.run_id) for x in lines if x.record is None]
    assert rejected == [(5, None), (4, "support-0003")]


def test_load_logs_accepts_a_file_url(log_day: Path) -> None:
    lines = load_logs.fn(log_day.as_uri(), DAY)
    assert len(lines) == 8
    assert lines[0].record is not None and lines[0].record.run_id == "sales-0001"
    assert lines[0].source.startswith("file://")


@pytest.mark.parametrize(
    ("prepare", "match"),
    [
        pytest.param(
            lambda root: None, r"no logs for 2026-11-20: folder .*2026-11-20 does not exist", id="missing_day_folder"
        ),
        pytest.param(
            lambda root: (root / "2026-11-20").mkdir(parents=True),
            r"no \*\.jsonl files in .*2026-11-20",
            id="empty_day_folder",
        ),
    ],
)
def test_load_logs_fails_clearly_without_logs(tmp_path: Path, prepare: Any, match: str) -> None:
    prepare(tmp_path)
    with pytest.raises(InputError, match=match):
        load_logs.fn(str(tmp_path), DAY)


# --------------------------------------------------------------------------- validate_logs


def test_validate_logs_quarantines_failing_rows_with_their_line_numbers() -> None:
    lines = [
        jsonl_line(1, run_id="r1", timestamp="2026-11-20T08:00:00Z"),
        jsonl_line(2, run_id="r2", timestamp="yesterday-ish"),
        jsonl_line(3, run_id="r1", timestamp="2026-11-20T09:00:00Z"),
        jsonl_line(4, run_id="r3"),
    ]
    checked = validate_logs.fn(lines, max_bad_share=0.5)
    assert [x.line_number for x in checked] == [1, 2, 3, 4]
    assert [x.record is not None for x in checked] == [True, False, False, True]
    assert checked[1].reason == (
        "failed expectation expect_column_values_to_be_dateutil_parseable(column=timestamp): value 'yesterday-ish'"
    )
    assert checked[2].reason == (
        "failed expectation expect_column_values_to_be_unique(column=run_id): duplicate run_id 'r1', first seen at day.jsonl:1"
    )
    assert (checked[1].run_id, checked[2].run_id) == ("r2", "r1")
    assert checked[0] is lines[0]


def test_validate_logs_fails_loudly_above_the_bad_share() -> None:
    lines = [jsonl_line(i, run_id=f"r{i}") for i in range(1, 10)]
    lines.append(parse_line(b"{not json", "day.jsonl", 10))  # type: ignore[arg-type]
    lines.append(jsonl_line(11, run_id="r1"))
    assert len(validate_logs.fn(lines, max_bad_share=2 / 11)) == 11  # exactly at the limit: accepted
    with pytest.raises(
        LogQualityError,
        match=r"2 of 11 log lines .* are bad \(18\.2%\), above the limit of 5\.0%; most common reasons: 1 x not valid JSON; 1 x failed expectation",
    ):
        validate_logs.fn(lines)


@pytest.mark.parametrize("share", [pytest.param(-0.1, id="negative"), pytest.param(1.5, id="above_one")])
def test_validate_logs_rejects_a_bad_threshold(share: float) -> None:
    with pytest.raises(ValueError, match=r"max_bad_share must be within \[0, 1\]"):
        validate_logs.fn([jsonl_line(1, run_id="r1")], max_bad_share=share)


def test_validate_logs_of_an_empty_day_is_empty() -> None:
    assert validate_logs.fn([], max_bad_share=0.0) == []


# --------------------------------------------------------------------------- evaluate_batch


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


# --------------------------------------------------------------------------- store + metrics


def test_quarantine_evaluations_only_for_lines_with_a_free_run_id() -> None:
    valid = jsonl_line(1, run_id="r1", agent_id="bot", agent_version="v1")
    no_sql = parse_line(b'{"run_id": "r2", "agent_id": "bot", "question": "q"}', "day.jsonl", 2)
    duplicate = LogLine("day.jsonl", 3, None, "duplicate run_id", valid.raw, "r1")
    no_run_id = parse_line(b"not json", "day.jsonl", 4)
    again = parse_line(b'{"run_id": "r2", "question": "q"}', "day.jsonl", 5)
    extra = quarantine_evaluations([valid, no_sql, duplicate, no_run_id, again], [])  # type: ignore[list-item]
    assert [(e.run_id, e.status, e.agent_id, e.agent_version) for e in extra] == [
        ("r2", EvaluationStatus.INVALID_INPUT, "bot", "unknown")
    ]
    assert extra[0].status_reason == "invalid record: field `sql`: Field required"


def test_store_results_and_compute_metrics_write_the_warehouse(log_day: Path, tmp_path: Path) -> None:
    lines = validate_logs.fn(load_logs.fn(str(log_day), DAY), max_bad_share=0.3)
    evaluations = evaluate_batch.fn([x.record for x in lines if x.record is not None], None)
    warehouse_path = str(tmp_path / "wh" / "stef.duckdb")
    summary = store_results.fn(warehouse_path, DAY, lines, evaluations)
    assert (summary.lines, summary.runs, summary.evaluations, summary.quarantined) == (8, 6, 7, 2)
    metrics = compute_metrics.fn(warehouse_path, DAY)
    assert sorted((m["agent_id"], m["agent_version"], m["records"]) for m in metrics) == [
        ("sales-analyst", "v2.3.0", 2),
        ("sales-analyst", "v2.4.0", 2),  # line 5 is cut-off JSON: it names no agent
        ("support-bot", "v1.0.0", 3),
    ]
    conn = connect(warehouse_path, read_only=True)
    try:
        assert conn.execute("SELECT count(*) FROM evaluations").fetchall() == [(7,)]
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("error", "retry"),
    [
        pytest.param(OSError("disk hiccup"), True, id="os_error"),
        pytest.param(WarehouseLockedError("locked"), False, id="locked_warehouse_waits_in_connect"),
        pytest.param(InputError("no folder"), False, id="missing_input"),
        pytest.param(ValueError("bug"), False, id="programming_error"),
    ],
)
def test_io_tasks_retry_only_on_io_errors(error: Exception, retry: bool) -> None:
    assert retry_on_io_error(None, None, Failed(data=error)) is retry


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
        ("a", "v2", 1.0, 81.2),
        ("b", "v1", 0.6667, None),
    ]
    assert json.loads(json.dumps(rows)) == rows


def test_tasks_doctests() -> None:
    for module in (tasks.artifacts, tasks.evaluate):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__


@pytest.mark.parametrize(
    ("logs_root", "message"),
    [
        pytest.param(
            "s3://bucket/logs",
            r"--logs-root s3://bucket/logs: this URL scheme needs an extra package",
            id="missing_fsspec_backend",
        ),
        pytest.param("foo://somewhere", r"--logs-root foo://somewhere: not a readable location", id="unknown_protocol"),
    ],
)
def test_unreadable_logs_root_url_is_a_clear_error(logs_root: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_logs.fn(logs_root, date(2026, 11, 20))
