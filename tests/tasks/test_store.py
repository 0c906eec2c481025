"""Tests of tasks/store.py through ``.fn()``: quarantine rows, storing results and computing metrics."""

from __future__ import annotations

from pathlib import Path

from stef.logs import LogLine, parse_line
from stef.models import EvaluationStatus
from tasks import (
    compute_metrics,
    evaluate_batch,
    load_logs,
    quarantine_evaluations,
    store_results,
    validate_logs,
)
from tests.tasks.helpers import DAY, jsonl_line
from warehouse import connect


def test_quarantine_evaluations_only_for_lines_with_a_free_run_id() -> None:
    valid = jsonl_line(1, run_id="r1", agent_id="bot", agent_version="v1")
    no_sql = parse_line(b'{"run_id": "r2", "agent_id": "bot", "question": "q"}', "day.jsonl", 2)
    duplicate = LogLine("day.jsonl", 3, None, "duplicate run_id", valid.raw, "r1")
    no_run_id = parse_line(b"not json", "day.jsonl", 4)
    again = parse_line(b'{"run_id": "r2", "question": "q"}', "day.jsonl", 5)
    extra = quarantine_evaluations([valid, no_sql, duplicate, no_run_id, again], [])
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
