"""Export a window of evaluations for BI tools: CSV, Parquet or JSON lines, streamed by DuckDB (any size).

One row per evaluation (scored or not) joined with its run: the identifiers, the scores and
verdicts, the question and SQL as logged, and the evidence as JSON text. DuckDB's ``COPY … TO``
writes the file as it reads the tables, so the export never holds the window in memory.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Literal

import duckdb

from warehouse.errors import WarehouseError

ExportFormat = Literal["csv", "parquet", "jsonl"]
"""The file formats of :func:`export_evaluations`."""

EXPORT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("log_date", "e.log_date"),
    ("run_id", "e.run_id"),
    ("agent_id", "e.agent_id"),
    ("agent_version", "e.agent_version"),
    ("app_id", "e.app_id"),
    ("evaluator_version", "e.evaluator_version"),
    ("status", "e.status"),
    ("status_reason", "e.status_reason"),
    ("score", "e.score"),
    ("band", "e.band"),
    ("p_correct", "e.p_correct"),
    ("verdict", "e.verdict"),
    ("confidence", "e.confidence"),
    ("filter_status", "e.filter_status"),
    ("judge", "e.judge"),
    ("dialect", "e.dialect"),
    ("question", "r.question"),
    ("enriched_question", "r.enriched_question"),
    ("sql", "r.sql"),
    ("timestamp", 'r."timestamp"'),
    ("latency_ms", "r.latency_ms"),
    ("agent_cost_usd", "r.cost_usd"),
    ("judge_cost_usd", "e.cost_usd"),
    ("suspected_errors", "CAST(e.suspected_errors AS VARCHAR)"),
    ("flags", "CAST(e.flags AS VARCHAR)"),
    ("evidence", "CAST(e.evidence AS VARCHAR)"),
    ("evaluated_at", "e.evaluated_at"),
)
"""``(column, expression)`` of an exported row; the JSON columns are exported as JSON text."""

_COPY_OPTIONS: dict[str, str] = {
    "csv": "FORMAT csv, HEADER true",
    "parquet": "FORMAT parquet, COMPRESSION zstd",
    "jsonl": "FORMAT json",  # newline-delimited: one JSON object per line
}


def export_evaluations(
    conn: duckdb.DuckDBPyConnection,
    out: str | Path,
    start: date,
    end: date,
    evaluator_version: str,
    export_format: ExportFormat = "csv",
    *,
    agent_id: str | None = None,
) -> int:
    """Write every evaluation of ``evaluator_version`` in ``start … end`` to ``out``.

    Args:
        conn: a warehouse connection (read-only is enough).
        out: the file to write (replaced when it exists).
        start: first day (inclusive).
        end: last day (inclusive).
        evaluator_version: whose evaluations.
        export_format: ``csv`` (header row), ``parquet`` (zstd) or ``jsonl`` (one object per line).
        agent_id: only this agent.

    Returns:
        The number of rows written, ordered by day, agent, version and run id.

    Raises:
        WarehouseError: an unknown format, ``end`` before ``start``, or DuckDB cannot write ``out``.
    """
    if export_format not in _COPY_OPTIONS:
        raise WarehouseError(f"unknown export format {export_format!r}; use one of {', '.join(_COPY_OPTIONS)}")
    if end < start:
        raise WarehouseError(f"export end {end.isoformat()} is before its start {start.isoformat()}")
    target = str(Path(out)).replace("'", "''")  # COPY takes no parameter for its target: a quoted literal
    columns = ", ".join(f"{expression} AS {name}" for name, expression in EXPORT_COLUMNS)
    query = f"""
        SELECT {columns}
        FROM evaluations AS e LEFT JOIN agent_runs AS r USING (run_id)
        WHERE e.log_date BETWEEN $start AND $end AND e.evaluator_version = $version
          AND ($agent::VARCHAR IS NULL OR e.agent_id = $agent)
        ORDER BY e.log_date, e.agent_id, e.agent_version, e.run_id
    """
    params = {"start": start, "end": end, "version": evaluator_version, "agent": agent_id}
    try:
        written = conn.execute(f"COPY ({query}) TO '{target}' ({_COPY_OPTIONS[export_format]})", params).fetchall()
    except duckdb.Error as exc:
        raise WarehouseError(f"exporting to {out} failed: {exc}") from exc
    return int(written[0][0]) if written and written[0] else 0
