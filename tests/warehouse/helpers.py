"""Shared helpers of the tests in tests/warehouse (from test_warehouse.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import date
from pathlib import Path
from typing import Any

import duckdb

from stef.logs import LogLine, parse_line, read_log_file
from stef.models import Band, Evaluation, EvaluationStatus
from tests.support.checkout import FIXTURES
from warehouse import (
    store_day,
)

AGENT_LOGS = FIXTURES / "agent_logs"


DAY = date(2026, 11, 20)


NEXT_DAY = date(2026, 11, 21)


TABLES = {
    "agent_runs",
    "evaluations",
    "quarantine",
    "judge_cache",
    "daily_agent_metrics",
    "drift_checks",
    "stored_days",
    "schema_version",
}


def line(number: int, source: str = "agent.jsonl", **fields: Any) -> LogLine:
    """A LogLine parsed from a JSON object with ``fields`` (question/sql default to valid text)."""
    payload = {"question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders", **fields}
    parsed = parse_line(json.dumps(payload).encode(), source, number)
    assert parsed is not None
    return parsed


def bad_line(number: int, raw: bytes, source: str = "agent.jsonl") -> LogLine:
    parsed = parse_line(raw, source, number)
    assert parsed is not None and parsed.record is None
    return parsed


def scored(run_id: str, score: float, band: Band, **extra: Any) -> Evaluation:
    return Evaluation(run_id=run_id, status=EvaluationStatus.EVALUATED, score=score, band=band, confidence=0.9, **extra)


def failed(
    run_id: str, status: EvaluationStatus = EvaluationStatus.PARSE_ERROR, reason: str = "cannot parse"
) -> Evaluation:
    return Evaluation(run_id=run_id, status=status, status_reason=reason)


def count(conn: duckdb.DuckDBPyConnection, sql: str, *params: Any) -> int:
    return int(conn.execute(sql, list(params)).fetchall()[0][0])


_HOLDER = textwrap.dedent(
    """
    import sys, time
    import duckdb
    conn = duckdb.connect(sys.argv[1])
    print("ready", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.close()
    """
)


def _hold(path: Path, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    return holder


def _fixture_day() -> tuple[list[LogLine], list[Evaluation]]:
    """The fixture day: 8 lines, 2 rejected by the reader (one with a run_id), 6 valid records."""
    lines = [entry for path in sorted(AGENT_LOGS.glob("*.jsonl")) for entry in read_log_file(path)]
    evaluations = [scored(entry.record.run_id, 80.0, Band.GOOD) for entry in lines if entry.record is not None]
    rejected = [entry for entry in lines if entry.record is None and entry.run_id is not None]
    evaluations += [
        failed(entry.run_id or "", EvaluationStatus.INVALID_INPUT, entry.reason or "") for entry in rejected
    ]
    return lines, evaluations


def _metrics_day(conn: duckdb.DuckDBPyConnection) -> None:
    """Agent a/v1: scores 10, 20, 30, 40 + one parse error; agent a/v2: 95 + a non-JSON line."""
    lines = [line(i, run_id=f"v1-{i}", agent_id="a", agent_version="v1") for i in range(1, 6)]
    lines.append(line(6, run_id="v2-1", agent_id="a", agent_version="v2"))
    lines.append(bad_line(7, b'{"run_id": "cut-off'))
    lines.append(bad_line(8, b'{"run_id": "v2-2", "agent_id": "a", "agent_version": "v2"}'))
    evaluations = [scored(f"v1-{i}", 10.0 * i, Band.POOR) for i in range(1, 5)]
    evaluations += [failed("v1-5"), scored("v2-1", 95.0, Band.EXCELLENT)]
    evaluations.append(failed("v2-2", EvaluationStatus.INVALID_INPUT, "no sql"))
    store_day(conn, DAY, lines, evaluations)
