"""Export a window of evaluations for BI tools: CSV, Parquet or JSON lines, written by DuckDB (any size).

One row per evaluation (scored or not) joined with its run: the identifiers, the scores and
verdicts, the question and SQL as logged, and the evidence as JSON text. DuckDB's ``COPY … TO``
writes the file :data:`EXPORT_CHUNK_ROWS` rows at a time in the export's order, so no window
outgrows DuckDB's memory limit; the file is written under
``<out>.partial`` and renamed when complete, so a killed export leaves no cut-off file.

In a CSV file, every text cell that a spreadsheet would run as a formula (first character ``=``,
``+``, ``-``, ``@``, tab, carriage return, NUL or their full-width forms, also after leading
spaces: :func:`stef.display.looks_like_formula`) gets a leading ``'`` (:func:`stef.display.spreadsheet_text_sql`,
computed by DuckDB); numbers stay numbers. Parquet and JSON lines hold the values exactly.
"""

from __future__ import annotations

import os
import shutil
from datetime import date
from pathlib import Path
from typing import Literal

import duckdb
import polars as pl

from stef.display import one_line, spreadsheet_text_sql
from warehouse.errors import WarehouseError
from warehouse.store import registered

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
            export is one file, so it needs a file name; or ``out`` is ``-`` (standard output: DuckDB
            writes the export to a file; ``./-`` still names one).

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
    if text == "-":
        raise WarehouseError(
            "export output - (standard output) is not supported: DuckDB writes the export to a file; "
            "pass a file name, e.g. evaluations.csv"
        )
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
    target = export_target(out)
    guarded = TEXT_COLUMNS if export_format == "csv" else frozenset()
    columns = ", ".join(
        f"{spreadsheet_text_sql(expression) if name in guarded else expression} AS {name}"
        for name, expression in EXPORT_COLUMNS
    )
    window = """
        WHERE e.log_date BETWEEN $start AND $end AND e.evaluator_version = $version
          AND ($agent::VARCHAR IS NULL OR e.agent_id = $agent)
    """
    params = {"start": start, "end": end, "version": evaluator_version, "agent": agent_id}
    partial = target.with_name(target.name + ".partial")  # renamed at the end: never a cut-off file under `out`
    try:
        written = _copy_in_chunks(conn, columns, window, params, partial, export_format)
        partial.replace(target)
    except duckdb.Error as exc:
        raise WarehouseError(f"exporting to {out} failed: {exc}") from exc
    except OSError as exc:
        raise WarehouseError(f"exporting to {out} failed: {exc.strerror or exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return written


EXPORT_CHUNK_ROWS = 5_000
"""Rows per ``COPY`` of a CSV or JSON lines export: DuckDB sorts each chunk's rows (evidence JSON
of a few KB each) within its memory limit, where one ``COPY`` of a 20k-row window ran out of the
default 256 MB."""


def _copy(conn: duckdb.DuckDBPyConnection, query: str, params: dict[str, object], path: Path, options: str) -> int:
    """``COPY (query) TO path``; the rows written."""
    quoted = str(path).replace("'", "''")  # COPY takes no parameter for its target: a quoted literal
    written = conn.execute(f"COPY ({query}) TO '{quoted}' ({options})", params).fetchall()
    return int(written[0][0]) if written and written[0] else 0


def _copy_in_chunks(
    conn: duckdb.DuckDBPyConnection,
    columns: str,
    window: str,
    params: dict[str, object],
    path: Path,
    export_format: ExportFormat,
) -> int:
    """Write the window's rows to ``path`` in the export's order, :data:`EXPORT_CHUNK_ROWS` rows per
    ``COPY``: the order is read first (row ids only), then each chunk is copied to a part file; CSV
    (one header) and JSON lines parts are appended as they come, Parquet parts are read back in
    order into one file (no sort: DuckDB keeps the files' order)."""
    order = conn.execute(
        f"SELECT e.rowid FROM evaluations AS e {window} ORDER BY e.log_date, e.agent_id, e.agent_version, e.run_id",
        params,
    ).fetchall()
    parts: list[Path] = []
    written = 0
    try:
        with path.open("wb") as handle:
            for first in range(0, max(len(order), 1), EXPORT_CHUNK_ROWS):
                rows = [row for (row,) in order[first : first + EXPORT_CHUNK_ROWS]]
                ids = pl.DataFrame(
                    {"position": range(first, first + len(rows)), "row": rows},
                    schema={"position": pl.Int64, "row": pl.Int64},
                )
                part = path.with_name(f"{path.name}.{len(parts):05d}")
                parts.append(part)
                if export_format == "csv":
                    options = f"FORMAT csv, HEADER {'true' if first == 0 else 'false'}"
                else:
                    options = _COPY_OPTIONS[export_format]
                with registered(conn, "_stef_export_chunk", ids):
                    query = f"""
                        SELECT {columns} FROM _stef_export_chunk AS c
                        JOIN evaluations AS e ON e.rowid = c."row"
                        LEFT JOIN agent_runs AS r USING (run_id)
                        ORDER BY c.position
                    """
                    written += _copy(conn, query, {}, part, options)
                if export_format != "parquet":
                    with part.open("rb") as chunk:
                        shutil.copyfileobj(chunk, handle)
                    part.unlink()
        if export_format == "parquet":
            files = ", ".join("'" + str(part).replace("'", "''") + "'" for part in parts)
            _copy(conn, f"SELECT * FROM read_parquet([{files}])", {}, path, _COPY_OPTIONS["parquet"])
    finally:
        for part in parts:
            part.unlink(missing_ok=True)
    return written
