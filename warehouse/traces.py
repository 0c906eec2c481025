"""Warehouse reads for pushing scores back to trace stores (``stef push``, issue 19)."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import duckdb

__all__ = ["pulled_answers_by_file", "read_span_evaluations"]

_PULLED = """
    pulled AS (
        SELECT run_id, raw->>'$.span_id' AS span_id, raw->>'$.trace_id' AS trace_id, source_file
        FROM agent_runs WHERE log_date = $day AND raw->>'$.span_id' IS NOT NULL
        UNION ALL
        SELECT q.run_id, try(json_extract_string(q.raw, '$.span_id')), try(json_extract_string(q.raw, '$.trace_id')),
               q.source_file
        FROM quarantine AS q
        WHERE q.log_date = $day AND q.run_id IS NOT NULL AND try(json_valid(q.raw))
          AND try(json_extract_string(q.raw, '$.span_id')) IS NOT NULL
          AND q.run_id NOT IN (SELECT run_id FROM agent_runs WHERE log_date = $day)
    )"""
"""The day's answers pulled from traces (a ``span_id`` in the stored line), quarantined ones included."""


def read_span_evaluations(
    conn: duckdb.DuckDBPyConnection,
    log_date: date,
    evaluator_version: str | None = None,
    source_file_name: str | None = None,
    source_file_prefix: str | None = None,
) -> list[dict[str, Any]]:
    """The day's evaluations of answers pulled from traces, one per answer, by run id.

    An answer is pulled from a trace when its stored log line has ``span_id`` (``stef pull``);
    quarantined lines with a ``span_id`` (spans the mapping could not read) come too, with the
    status and reason the nightly stored. Per answer the evaluation of ``evaluator_version``, or
    by default the newest one (latest ``evaluated_at``). ``source_file_name`` /
    ``source_file_prefix``: only the lines of day files of that name (``phoenix-<project>.jsonl``)
    or name prefix (``phoenix-``). A quarantined line whose run id belongs to a stored answer (a
    duplicate) is left out: its evaluation is the other line's. One row per span.

    Returns:
        Dicts with ``run_id``, ``span_id``, ``trace_id``, ``status``, ``reason``, ``score``,
        ``verdict``, ``p_correct``, ``filter_status``, ``band``, ``evaluator_version``,
        ``rationale``, ``missing_filters``, ``extra_filters``, ``suspected`` (lists of text).
    """
    rows = conn.execute(
        f"""
        WITH {_PULLED}
        SELECT p.run_id, p.span_id, p.trace_id, e.status, e.status_reason, e.score, e.verdict,
               e.evidence->>'$.p_correct', e.filter_status, e.band, e.evaluator_version,
               e.evidence->>'$.rationale', e.evidence->'$.alignment.missing', e.evidence->'$.alignment.extra',
               e.suspected_errors
        FROM pulled AS p JOIN evaluations AS e ON e.run_id = p.run_id AND e.log_date = $day
        WHERE ($version IS NULL OR e.evaluator_version = $version)
          AND ($file IS NULL OR regexp_replace(p.source_file, '^.*[/\\\\]', '') = $file)
          AND ($prefix IS NULL OR starts_with(regexp_replace(p.source_file, '^.*[/\\\\]', ''), $prefix))
        QUALIFY row_number() OVER (PARTITION BY p.span_id ORDER BY e.evaluated_at DESC, e.evaluator_version DESC) = 1
        ORDER BY p.run_id
        """,
        {"day": log_date, "version": evaluator_version, "file": source_file_name, "prefix": source_file_prefix},
    ).fetchall()
    out: list[dict[str, Any]] = []
    for row in rows:
        suspected = json.loads(row[14]) if row[14] else []
        out.append(
            {
                "run_id": row[0],
                "span_id": row[1],
                "trace_id": row[2],
                "status": row[3],
                "reason": row[4],
                "score": row[5],
                "verdict": row[6],
                "p_correct": None if row[7] is None else float(row[7]),
                "filter_status": row[8],
                "band": row[9],
                "evaluator_version": row[10],
                "rationale": row[11],
                "missing_filters": _texts(row[12]),
                "extra_filters": _texts(row[13]),
                "suspected": [
                    f"{item.get('category')}: {item.get('evidence')}" for item in suspected if isinstance(item, dict)
                ],
            }
        )
    return out


def pulled_answers_by_file(
    conn: duckdb.DuckDBPyConnection, log_date: date, evaluator_version: str | None = None
) -> dict[str, tuple[int, int]]:
    """Per day file (its name, ``otlp-traces.jsonl``): how many of the day's answers pulled from
    traces it holds, and how many of them have an evaluation (of ``evaluator_version``, or any):
    why :func:`read_span_evaluations` found nothing to send.
    """
    rows = conn.execute(
        f"""
        WITH {_PULLED}
        SELECT regexp_replace(p.source_file, '^.*[/\\\\]', '') AS file, count(DISTINCT p.span_id),
               count(DISTINCT p.span_id) FILTER (WHERE e.run_id IS NOT NULL)
        FROM pulled AS p LEFT JOIN evaluations AS e
          ON e.run_id = p.run_id AND e.log_date = $day AND ($version IS NULL OR e.evaluator_version = $version)
        GROUP BY file ORDER BY file
        """,
        {"day": log_date, "version": evaluator_version},
    ).fetchall()
    return {str(row[0]): (int(row[1]), int(row[2])) for row in rows}


def _texts(value: str | None) -> list[str]:
    parsed = json.loads(value) if value else []
    return [str(item) for item in parsed] if isinstance(parsed, list) else []
