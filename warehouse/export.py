"""Export a window of evaluations for BI tools: CSV, Parquet or JSON lines, streamed by DuckDB (any size).

One row per evaluation (scored or not) joined with its run: the identifiers, the scores and
verdicts, the question and SQL as logged, and the evidence as JSON text. DuckDB's ``COPY … TO``
writes the file as it reads the tables, so the export never holds the window in memory.

In a CSV file, every text cell that a spreadsheet would run as a formula (first character ``=``,
``+``, ``-``, ``@``, tab, carriage return, NUL or their full-width forms, also after leading
spaces: :func:`stef.display.looks_like_formula`) gets a leading ``'`` (:func:`stef.display.spreadsheet_text_sql`,
computed by DuckDB); numbers stay numbers. Parquet and JSON lines hold the values exactly.
"""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path
from typing import Literal

import duckdb

from stef.display import one_line, spreadsheet_text_sql
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

TEXT_COLUMNS: frozenset[str] = frozenset(
    {
        "run_id",
        "agent_id",
        "agent_version",
        "app_id",
        "evaluator_version",
        "status",
        "status_reason",
        "band",
        "verdict",
        "filter_status",
        "judge",
        "dialect",
        "question",
        "enriched_question",
        "sql",
        "timestamp",
        "suspected_errors",
        "flags",
        "evidence",
    }
)
"""The ``VARCHAR`` columns of :data:`EXPORT_COLUMNS`: guarded against spreadsheet formulas in a CSV
export (the others are dates, timestamps and numbers)."""

_COPY_OPTIONS: dict[str, str] = {
    "csv": "FORMAT csv, HEADER true",
    "parquet": "FORMAT parquet, COMPRESSION zstd",
    "jsonl": "FORMAT json",  # newline-delimited: one JSON object per line
}


def export_target(out: str | Path) -> Path:
    """The file an export writes, checked before anything is read.

    Args:
        out: the ``--out`` value as given (a ``str`` keeps a trailing ``/``, which :class:`Path` drops).

    Returns:
        ``out`` as a :class:`Path`.

    Raises:
        WarehouseError: ``out`` is empty, ends in ``/`` (a folder) or is an existing folder: an
            export is one file, so it needs a file name.

    >>> export_target("exports/w48.csv")
    PosixPath('exports/w48.csv')
    >>> export_target("exports/")
    Traceback (most recent call last):
    ...
    warehouse.errors.WarehouseError: export output exports/ is a folder; pass a file name, e.g. exports/evaluations.csv
    """
    text = str(out)
    if not text:
        raise WarehouseError("export output is empty; pass a file name, e.g. evaluations.csv")
    if text.endswith(("/", os.sep)) or Path(text).is_dir():
        folder = text if text.endswith(("/", os.sep)) else text + "/"
        raise WarehouseError(
            f"export output {one_line(text)} is a folder; pass a file name, e.g. {one_line(folder)}evaluations.csv"
        )
    return Path(text)


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
        out: the file to write (replaced when it exists; not a folder, see :func:`export_target`).
        start: first day (inclusive).
        end: last day (inclusive).
        evaluator_version: whose evaluations.
        export_format: ``csv`` (header row; a text cell that
            :func:`stef.display.looks_like_formula` gets a leading ``'``), ``parquet`` (zstd) or ``jsonl`` (one object
            per line); Parquet and JSON lines hold every value exactly.
        agent_id: only this agent.

    Returns:
        The number of rows written, ordered by day, agent, version and run id.

    Raises:
        WarehouseError: an unknown format, ``end`` before ``start``, ``out`` is a folder, or DuckDB
            cannot write ``out``.
    """
    if export_format not in _COPY_OPTIONS:
        raise WarehouseError(f"unknown export format {export_format!r}; use one of {', '.join(_COPY_OPTIONS)}")
    if end < start:
        raise WarehouseError(f"export end {end.isoformat()} is before its start {start.isoformat()}")
    target = str(export_target(out)).replace("'", "''")  # COPY takes no parameter for its target: a quoted literal
    guarded = TEXT_COLUMNS if export_format == "csv" else frozenset()
    columns = ", ".join(
        f"{spreadsheet_text_sql(expression) if name in guarded else expression} AS {name}"
        for name, expression in EXPORT_COLUMNS
    )
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
