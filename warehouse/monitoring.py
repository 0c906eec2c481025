"""Reads for drift checks, backfills and the weekly report, and the ``drift_checks`` writes.

Typed functions over the tables of DESIGN.md §4; they take an open connection (a read-only one
is fine except for :func:`store_drift_checks`) and return plain Python values or polars frames.
Only :mod:`stef` models are imported: the statistics live in :mod:`stef.monitor.statistics`, the callers
turn the rows read here into its samples.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

import duckdb
import polars as pl

from stef.monitor.models import DRIFT_RESULT_COLUMNS
from warehouse.errors import WarehouseError
from warehouse.store import registered
from warehouse.transaction import transaction

DRIFT_COLUMNS: tuple[str, ...] = (
    "checked_at",
    "agent_id",
    "kind",
    "baseline_version",
    "candidate_version",
    "evaluator_version",
    "window_start",
    "window_end",
    "baseline_window_start",
    "baseline_window_end",
    "n_baseline",
    "n_candidate",
    "verdict",
    "direction",
    "statistics",
    "source",
    *DRIFT_RESULT_COLUMNS,
)
"""Columns of a ``drift_checks`` row as :func:`store_drift_checks` takes and :func:`read_drift_checks` returns them."""

_DRIFT_SCHEMA = pl.Schema(
    {
        "checked_at": pl.Datetime("us"),
        "agent_id": pl.String(),
        "kind": pl.String(),
        "baseline_version": pl.String(),
        "candidate_version": pl.String(),
        "evaluator_version": pl.String(),
        "window_start": pl.Date(),
        "window_end": pl.Date(),
        "baseline_window_start": pl.Date(),
        "baseline_window_end": pl.Date(),
        "n_baseline": pl.Int64(),
        "n_candidate": pl.Int64(),
        "verdict": pl.String(),
        "direction": pl.String(),
        "statistics": pl.String(),
        "source": pl.String(),
        "error_rate_baseline": pl.Float64(),
        "error_rate_baseline_ci": pl.List(pl.Float64),
        "error_rate_candidate": pl.Float64(),
        "error_rate_candidate_ci": pl.List(pl.Float64),
        "error_rate_delta": pl.Float64(),
        "error_rate_delta_ci": pl.List(pl.Float64),
        "category_shifts": pl.String(),
        "sentence": pl.String(),
    }
)
"""Columns of the frame :func:`store_drift_checks` inserts (a polars frame, as the day's rows in
:mod:`warehouse.store`: no pandas import)."""

_JSON_COLUMNS = frozenset({"statistics", "category_shifts"})
"""``drift_checks`` columns of type JSON (read back as text)."""

_SAME_CHECK = """
    d.agent_id = i.agent_id AND d.kind = i.kind AND d.baseline_version = i.baseline_version
    AND d.candidate_version = i.candidate_version AND d.evaluator_version = i.evaluator_version
    AND d.window_start = i.window_start AND d.window_end = i.window_end
    AND coalesce(d.baseline_window_start, d.window_start) = coalesce(i.baseline_window_start, i.window_start)
    AND coalesce(d.baseline_window_end, d.window_end) = coalesce(i.baseline_window_end, i.window_end)
"""


# --------------------------------------------------------------------------- agents, versions, days


def newest_stored_day(conn: duckdb.DuckDBPyConnection) -> date | None:
    """The newest day stored in the warehouse (``stored_days``, any evaluator version), or ``None``."""
    row = conn.execute("SELECT max(log_date) FROM stored_days").fetchone()
    return row[0] if row is not None else None


def latest_evaluator_version(
    conn: duckdb.DuckDBPyConnection,
    agent_id: str | None = None,
    start: date | None = None,
    end: date | None = None,
    *,
    app_id: str | None = None,
) -> str | None:
    """The evaluator version of the most recently stored evaluations (newest day, then newest write).

    Args:
        conn: a warehouse connection.
        agent_id: only this agent's evaluations; ``None`` for all.
        start: only evaluations of this day or later.
        end: only evaluations of this day or earlier.
        app_id: only this app's evaluations; ``None`` for all.

    Returns:
        The version, or ``None`` when nothing matches.
    """
    rows = conn.execute(
        """
        SELECT evaluator_version FROM evaluations
        WHERE ($agent::VARCHAR IS NULL OR agent_id = $agent) AND ($app::VARCHAR IS NULL OR app_id = $app)
          AND ($start::DATE IS NULL OR log_date >= $start) AND ($end::DATE IS NULL OR log_date <= $end)
        GROUP BY evaluator_version ORDER BY max(log_date) DESC, max(evaluated_at) DESC, evaluator_version LIMIT 1
        """,
        {"agent": agent_id, "app": app_id, "start": start, "end": end},
    ).fetchall()
    return str(rows[0][0]) if rows else None


def stored_evaluator_versions(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Every evaluator version with an evaluation stored, newest first (by its newest day, then write).

    >>> from warehouse import connect
    >>> with connect(":memory:") as conn:
    ...     stored_evaluator_versions(conn)
    []
    """
    rows = conn.execute(
        """
        SELECT evaluator_version FROM evaluations
        GROUP BY evaluator_version ORDER BY max(log_date) DESC, max(evaluated_at) DESC, evaluator_version
        """
    ).fetchall()
    return [str(row[0]) for row in rows]


def answers_of_other_versions(
    conn: duckdb.DuckDBPyConnection,
    start: date,
    end: date,
    evaluator_version: str,
    *,
    agent_id: str | None = None,
    agent_version: str | None = None,
) -> list[dict[str, Any]]:
    """The answers from ``start`` to ``end`` that ``evaluator_version`` did not evaluate, by the
    evaluator versions that did (newest first, as :func:`latest_evaluator_version` orders them): a
    day scored only before ``--schema-dir`` or a refit calibrator, left out of a report or a drift
    check of the newer version. An answer both versions evaluated (a day scored again) is not counted.

    Args:
        agent_id, agent_version: only this agent's answers, of this agent version (``None``: all).

    Returns:
        ``evaluator_version``, ``evaluations`` (answers), ``first_day`` and ``last_day`` of each.
    """
    rows = conn.execute(
        """
        SELECT evaluator_version, count(*), min(log_date), max(log_date) FROM evaluations
        WHERE log_date BETWEEN $start AND $end AND evaluator_version <> $version
          AND ($agent IS NULL OR agent_id = $agent) AND ($agent_version IS NULL OR agent_version = $agent_version)
          AND run_id NOT IN (
            SELECT run_id FROM evaluations WHERE evaluator_version = $version AND log_date BETWEEN $start AND $end
          )
        GROUP BY evaluator_version ORDER BY max(log_date) DESC, max(evaluated_at) DESC, evaluator_version
        """,
        {
            "start": start,
            "end": end,
            "version": evaluator_version,
            "agent": agent_id,
            "agent_version": agent_version,
        },
    ).fetchall()
    return [
        {"evaluator_version": str(version), "evaluations": int(n), "first_day": first, "last_day": last}
        for version, n, first, last in rows
    ]


def known_agents(conn: duckdb.DuckDBPyConnection, evaluator_version: str | None = None) -> list[str]:
    """Agent ids with stored evaluations (of ``evaluator_version`` if given), sorted."""
    rows = conn.execute(
        "SELECT DISTINCT agent_id FROM evaluations WHERE agent_id IS NOT NULL "
        "AND ($version::VARCHAR IS NULL OR evaluator_version = $version) ORDER BY agent_id",
        {"version": evaluator_version},
    ).fetchall()
    return [str(row[0]) for row in rows]


def agents_on_day(conn: duckdb.DuckDBPyConnection, log_date: date, evaluator_version: str) -> list[str]:
    """Agent ids with evaluations of ``evaluator_version`` on ``log_date``, sorted."""
    rows = conn.execute(
        "SELECT DISTINCT agent_id FROM evaluations WHERE log_date = $day AND evaluator_version = $version "
        "AND agent_id IS NOT NULL ORDER BY agent_id",
        {"day": log_date, "version": evaluator_version},
    ).fetchall()
    return [str(row[0]) for row in rows]


def version_first_days(
    conn: duckdb.DuckDBPyConnection, agent_id: str, evaluator_version: str, until: date | None = None
) -> dict[str, date]:
    """Agent version -> first day it has evaluations of ``evaluator_version`` of valid records (up to
    ``until``): a scored answer, or an unscored one of a stored run (``agent_runs``). Rows of rejected
    lines do not make a version (their version is whatever the broken line said); a release whose every
    answer went unscored (parse errors, non-SELECT statements) does, so its coverage collapse is checked.

    Args:
        conn: a warehouse connection.
        agent_id: the agent.
        evaluator_version: whose evaluations count.
        until: ignore days after this one (``None``: no limit).

    Returns:
        ``{"v1.4.0": date(2026, 11, 24), ...}`` (empty when the agent has none).
    """
    rows = conn.execute(
        """
        SELECT agent_version, min(first_day) FROM (
            SELECT agent_version, min(log_date) AS first_day FROM evaluations
            WHERE agent_id = $agent AND evaluator_version = $version AND agent_version IS NOT NULL
              AND status = 'evaluated' AND ($until::DATE IS NULL OR log_date <= $until)
            GROUP BY agent_version
            UNION ALL
            -- a version named only by rejected lines is no release to check; one of unscored valid records
            -- is (joined apart: only the few unscored rows meet agent_runs, 2-3x faster than OR EXISTS)
            SELECT e.agent_version, min(e.log_date) FROM evaluations AS e
            JOIN agent_runs AS r ON r.run_id = e.run_id AND r.log_date = e.log_date
            WHERE e.agent_id = $agent AND e.evaluator_version = $version AND e.agent_version IS NOT NULL
              AND e.status <> 'evaluated' AND ($until::DATE IS NULL OR e.log_date <= $until)
            GROUP BY e.agent_version
        )
        GROUP BY agent_version
        """,
        {"agent": agent_id, "version": evaluator_version, "until": until},
    ).fetchall()
    return {str(version): first for version, first in rows}


def last_day(
    conn: duckdb.DuckDBPyConnection,
    agent_id: str,
    evaluator_version: str,
    agent_version: str | None = None,
    until: date | None = None,
) -> date | None:
    """The newest day with evaluations of the agent (and version), up to ``until``; ``None`` if none."""
    rows = conn.execute(
        """
        SELECT max(log_date) FROM evaluations
        WHERE agent_id = $agent AND evaluator_version = $version
          AND ($agent_version::VARCHAR IS NULL OR agent_version = $agent_version)
          AND ($until::DATE IS NULL OR log_date <= $until)
        """,
        {"agent": agent_id, "version": evaluator_version, "agent_version": agent_version, "until": until},
    ).fetchall()
    value = rows[0][0]
    return value if isinstance(value, date) else None


def read_drift_sample_rows(
    conn: duckdb.DuckDBPyConnection,
    agent_id: str,
    agent_version: str,
    start: date,
    end: date,
    evaluator_version: str,
) -> list[tuple[Any, ...]]:
    """Every evaluation of one agent version in a window, as the drift check reads it.

    Args:
        conn: a warehouse connection.
        agent_id: the agent.
        agent_version: the agent version.
        start: first day (inclusive).
        end: last day (inclusive).
        evaluator_version: whose evaluations.

    Returns:
        One tuple per evaluation (scored or not), ordered by day and run id: ``(status, score,
        verdict, filter_status, p_correct, judge, schema_checked, observed_checked, categories,
        question)`` — ``schema_checked`` / ``observed_checked`` tell whether the evidence holds a
        schema / observed-catalog report (which calibrator gave ``p_correct``), ``categories`` the
        distinct suspected error categories (list), ``question`` the logged question (``None``
        when the run is missing).
    """
    # the evidence is parsed once per row: both reports are extracted by one multi-path json_extract
    rows = conn.execute(
        """
        SELECT status, score, verdict, filter_status, p_correct, judge,
               coalesce(json_type(reports[1]) = 'OBJECT', false) AS schema_checked,
               coalesce(json_type(reports[2]) = 'OBJECT', false) AS observed_checked,
               categories, question
        FROM (
            SELECT e.log_date, e.run_id, e.status, e.score, e.verdict, e.filter_status, e.p_correct, e.judge,
                   json_extract(e.evidence, ['$.schema_report', '$.observed_report']) AS reports,
                   coalesce(list_distinct(json_extract_string(e.suspected_errors, '$[*].category')), []) AS categories,
                   r.question
            FROM evaluations AS e LEFT JOIN agent_runs AS r USING (run_id)
            WHERE e.agent_id = $agent AND e.agent_version = $agent_version AND e.evaluator_version = $version
              AND e.log_date BETWEEN $start AND $end
        )
        ORDER BY log_date, run_id
        """,
        {"agent": agent_id, "agent_version": agent_version, "version": evaluator_version, "start": start, "end": end},
    ).fetchall()
    return [(str(row[0]), *row[1:]) for row in rows]


def done_days(conn: duckdb.DuckDBPyConnection, start: date, end: date, evaluator_version: str) -> set[date]:
    """Days in ``start … end`` stored with their metrics computed for ``evaluator_version``.

    The set version of :func:`warehouse.day_is_done`, in one query (backfill planning).
    """
    rows = conn.execute(
        "SELECT log_date FROM stored_days WHERE log_date BETWEEN $start AND $end "
        "AND evaluator_version = $version AND metrics_at IS NOT NULL",
        {"start": start, "end": end, "version": evaluator_version},
    ).fetchall()
    return {row[0] for row in rows}


def fallback_counts(conn: duckdb.DuckDBPyConnection, start: date, end: date, evaluator_version: str) -> dict[date, int]:
    """Per day in ``start … end``: how many of its ``evaluator_version`` evaluations fell back to the
    symbolic verdict (``judge_fallback_reason`` set). Days without one are absent (so is every day
    of the symbolic judge, which never falls back).

    Returns:
        ``{day: records that fell back}``, counts > 0 only.
    """
    rows = conn.execute(
        "SELECT log_date, count(*) FROM evaluations WHERE log_date BETWEEN $start AND $end "
        "AND evaluator_version = $version AND judge_fallback_reason IS NOT NULL GROUP BY log_date",
        {"start": start, "end": end, "version": evaluator_version},
    ).fetchall()
    return {row[0]: int(row[1]) for row in rows}


def judge_spend_since(
    conn: duckdb.DuckDBPyConnection, since: datetime, log_date: date, evaluator_version: str
) -> float:
    """Money (USD) a model-judged run of ``log_date`` that started at ``since`` (UTC, naive) spent,
    as the warehouse shows it: the ``cost_usd`` of the verdicts it added to ``judge_cache`` (cached
    verdicts of earlier runs are not counted) plus that of the day's evaluations that fell back
    (their failed requests; fallbacks are never cached). A cost litellm does not know counts 0.

    Returns:
        The sum, >= 0.
    """
    cached = conn.execute(
        "SELECT coalesce(sum(cost_usd), 0) FROM judge_cache WHERE created_at >= $since AND cost_usd > 0",
        {"since": since},
    ).fetchall()[0][0]
    fallen = conn.execute(
        "SELECT coalesce(sum(cost_usd), 0) FROM evaluations WHERE log_date = $day AND evaluator_version = $version "
        "AND judge_fallback_reason IS NOT NULL AND cost_usd > 0",
        {"day": log_date, "version": evaluator_version},
    ).fetchall()[0][0]
    return float(cached) + float(fallen)


# --------------------------------------------------------------------------- drift_checks


def _check_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two rows the same check (as :data:`_SAME_CHECK` compares them)."""
    return (
        row.get("agent_id"),
        row.get("kind") or "version",
        row.get("baseline_version"),
        row.get("candidate_version"),
        row.get("evaluator_version"),
        row.get("window_start"),
        row.get("window_end"),
        row.get("baseline_window_start") or row.get("window_start"),
        row.get("baseline_window_end") or row.get("window_end"),
    )


def _drift_table(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    columns: dict[str, list[Any]] = {name: [] for name in DRIFT_COLUMNS}
    now = datetime.now(UTC).replace(tzinfo=None)
    seen: set[tuple[Any, ...]] = set()
    for row in rows:
        key = _check_key(row)
        if key in seen:
            continue  # the same check twice in one batch: the first row wins
        seen.add(key)
        missing = [
            name
            for name in (
                "agent_id",
                "baseline_version",
                "candidate_version",
                "evaluator_version",
                "window_start",
                "window_end",
                "verdict",
            )
            if row.get(name) is None
        ]
        if missing:
            raise WarehouseError(f"drift check row lacks {', '.join(missing)}: {dict(row)!r}")
        for name in DRIFT_COLUMNS:
            value = row.get(name)
            if name == "checked_at" and value is None:
                value = now
            elif name == "kind" and value is None:
                value = "version"
            elif name in ("statistics", "category_shifts") and value is not None and not isinstance(value, str):
                value = json.dumps(value, allow_nan=False)
            columns[name].append(value)
    return pl.DataFrame(columns, schema=_DRIFT_SCHEMA)


def store_drift_checks(
    conn: duckdb.DuckDBPyConnection,
    rows: Sequence[Mapping[str, Any]],
    *,
    replace_nightly: Sequence[date] = (),
    evaluator_version: str | None = None,
) -> int:
    """Store drift check results; a check with the same key replaces the earlier row (one transaction).

    The key is agent, kind, both versions, evaluator version and both windows (not the source), so
    rerunning a night (or ``stef drift`` with the same settings) never duplicates a check; when
    ``rows`` hold the same check twice, the first one is stored.

    Args:
        conn: a read-write warehouse connection.
        rows: mappings with the :data:`DRIFT_COLUMNS` keys (``checked_at`` defaults to now in
            UTC, ``kind`` to ``version``, ``statistics`` and ``category_shifts`` may be dicts or
            lists: they are stored as JSON).
        replace_nightly: days whose nightly checks (``source = 'nightly'``, window ending that day,
            of ``evaluator_version``) are deleted first, in the same transaction: ``rows`` hold
            their re-planned checks (a check planned earlier with other windows must not linger).
        evaluator_version: the evaluator version of ``replace_nightly`` (required with it).

    Returns:
        The number of rows written.

    Raises:
        WarehouseError: a row lacks a required key, ``replace_nightly`` without
            ``evaluator_version``, or the write failed (rolled back).
    """
    if replace_nightly and evaluator_version is None:
        raise WarehouseError("replacing nightly drift checks needs their evaluator version")
    table = _drift_table(rows)
    if table.height == 0 and not replace_nightly:
        return 0
    with (
        transaction(conn, f"storing {table.height} drift checks failed and was rolled back"),
        registered(conn, "_stef_drift", table),
    ):
        if replace_nightly:
            conn.execute(
                "DELETE FROM drift_checks WHERE source = 'nightly' AND evaluator_version = $version "
                "AND list_contains($days, window_end)",
                {"version": evaluator_version, "days": sorted(set(replace_nightly))},
            )
        conn.execute(f"DELETE FROM drift_checks AS d USING _stef_drift AS i WHERE {_SAME_CHECK}")
        conn.execute(f"INSERT INTO drift_checks BY NAME SELECT {', '.join(DRIFT_COLUMNS)} FROM _stef_drift")
    return table.height


def read_drift_checks_covering(
    conn: duckdb.DuckDBPyConnection, log_date: date, evaluator_version: str
) -> list[dict[str, Any]]:
    """Stored checks of ``evaluator_version`` whose candidate or baseline window contains ``log_date``.

    These are the checks that storing (or restoring) that day makes stale.

    Returns:
        One dict per check with the :data:`DRIFT_COLUMNS` (``statistics`` as JSON text), by
        ``window_end``, ``agent_id``, ``kind``, ``candidate_version``.
    """
    frame = conn.sql(
        f"""
        SELECT {", ".join(f"CAST({c} AS VARCHAR) AS {c}" if c in _JSON_COLUMNS else c for c in DRIFT_COLUMNS)}
        FROM drift_checks
        WHERE evaluator_version = $version
          AND ($day BETWEEN window_start AND window_end
               OR $day BETWEEN coalesce(baseline_window_start, window_start) AND coalesce(baseline_window_end, window_end))
        ORDER BY window_end, agent_id, kind, candidate_version, checked_at
        """,
        params={"day": log_date, "version": evaluator_version},
    ).pl()
    return list(frame.to_dicts())


def read_drift_checks(
    conn: duckdb.DuckDBPyConnection,
    start: date | None = None,
    end: date | None = None,
    *,
    agent_id: str | None = None,
    evaluator_version: str | None = None,
) -> pl.DataFrame:
    """Stored drift checks whose candidate window ends in ``start … end``, oldest first.

    Args:
        conn: a warehouse connection.
        start: first ``window_end`` (inclusive); ``None`` for no bound.
        end: last ``window_end`` (inclusive); ``None`` for no bound.
        agent_id: only this agent.
        evaluator_version: only this evaluator version.

    Returns:
        A frame with the :data:`DRIFT_COLUMNS` (``statistics`` and ``category_shifts`` as JSON text;
        the error-rate columns NULL for checks stored before migration 0007), sorted by
        ``window_end``, ``agent_id``, ``kind``, ``candidate_version``, ``checked_at``.
    """
    frame: pl.DataFrame = conn.sql(
        f"""
        SELECT {", ".join(f"CAST({c} AS VARCHAR) AS {c}" if c in _JSON_COLUMNS else c for c in DRIFT_COLUMNS)}
        FROM drift_checks
        WHERE ($start::DATE IS NULL OR window_end >= $start)
          AND ($end::DATE IS NULL OR window_end <= $end)
          AND ($agent::VARCHAR IS NULL OR agent_id = $agent)
          AND ($version::VARCHAR IS NULL OR evaluator_version = $version)
        ORDER BY window_end, agent_id, kind, candidate_version, checked_at
        """,
        params={"start": start, "end": end, "agent": agent_id, "version": evaluator_version},
    ).pl()
    return frame


# --------------------------------------------------------------------------- weekly report


def read_scored_rows(conn: duckdb.DuckDBPyConnection, start: date, end: date, evaluator_version: str) -> pl.DataFrame:
    """Every evaluation of ``evaluator_version`` in ``start … end`` (scored or not).

    Returns:
        Columns ``log_date`` (Date), ``agent_id``, ``agent_version``, ``status``, ``score``
        (Float64, null unless scored), ``p_correct`` (Float64, null unless scored or stored
        before migration 0005), ``band``, ``filter_status``, ``verdict``; rows without an
        agent (unreadable quarantined lines) are left out.
    """
    frame: pl.DataFrame = conn.sql(
        """
        SELECT log_date, agent_id, agent_version, status, score, p_correct, band, filter_status, verdict
        FROM evaluations
        WHERE log_date BETWEEN $start AND $end AND evaluator_version = $version
          AND agent_id IS NOT NULL AND agent_version IS NOT NULL
        ORDER BY log_date, agent_id, agent_version, run_id
        """,
        params={"start": start, "end": end, "version": evaluator_version},
    ).pl()
    return frame


def _json_list(text: str | None) -> list[Any]:
    if not text:
        return []
    value = json.loads(text)
    return list(value) if isinstance(value, list) else []


def read_breakdown_rows(
    conn: duckdb.DuckDBPyConnection, start: date, end: date, evaluator_version: str
) -> list[tuple[Any, ...]]:
    """Every evaluation of ``evaluator_version`` in ``start … end`` for the report's breakdowns.

    Returns:
        ``(agent_id, agent_version, app_id, run_id, status, score, verdict, filter_status, p_correct,
        judge, schema_checked, observed_checked, categories, question)`` tuples: the fields of
        :func:`read_drift_sample_rows` after the agent, version, ``app_id`` (``None`` when the
        record named none) and run id; rows without an agent (unreadable quarantined lines) are left out.
    """
    return conn.execute(
        """
        SELECT e.agent_id, e.agent_version, e.app_id, e.run_id,
               e.status, e.score, e.verdict, e.filter_status, e.p_correct, e.judge,
               coalesce(json_type(e.evidence, '$.schema_report') = 'OBJECT', false) AS schema_checked,
               coalesce(json_type(e.evidence, '$.observed_report') = 'OBJECT', false) AS observed_checked,
               coalesce(list_distinct(json_extract_string(e.suspected_errors, '$[*].category')), []) AS categories,
               r.question
        FROM evaluations AS e LEFT JOIN agent_runs AS r USING (run_id)
        WHERE e.log_date BETWEEN $start AND $end AND e.evaluator_version = $version
          AND e.agent_id IS NOT NULL AND e.agent_version IS NOT NULL
        ORDER BY e.agent_id, e.agent_version, e.log_date, e.run_id
        """,
        {"start": start, "end": end, "version": evaluator_version},
    ).fetchall()


def read_lowest_scores(
    conn: duckdb.DuckDBPyConnection,
    start: date,
    end: date,
    evaluator_version: str,
    limit: int = 10,
    agent_id: str | None = None,
    agent_version: str | None = None,
    run_ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The ``limit`` lowest-scoring evaluations in ``start … end`` with their evidence.

    Args:
        conn: a warehouse connection.
        start: first day (inclusive).
        end: last day (inclusive).
        evaluator_version: whose evaluations.
        limit: how many.
        agent_id, agent_version: only this agent / version (``None``: all).
        run_ids: only these runs (``None``: all).

    Returns:
        Dicts with ``log_date``, ``run_id``, ``agent_id``, ``agent_version``, ``score``,
        ``band``, ``filter_status``, ``verdict``, ``confidence``, ``rationale``, ``question``,
        ``enriched_question``, ``sql``, ``missing`` / ``extra`` / ``wrong`` (filter lists) and
        ``suspected_errors`` (``[{category, subcategory, evidence}]``), lowest score first (ties
        by day and run id).
    """
    rows = conn.execute(
        """
        SELECT e.log_date, e.run_id, e.agent_id, e.agent_version, e.score, e.band, e.filter_status, e.verdict,
               e.confidence, json_extract_string(e.evidence, '$.rationale') AS rationale,
               r.question, r.enriched_question, r.sql,
               CAST(json_extract(e.evidence, '$.alignment.missing') AS VARCHAR) AS missing,
               CAST(json_extract(e.evidence, '$.alignment.extra') AS VARCHAR) AS extra,
               CAST(json_extract(e.evidence, '$.alignment.wrong') AS VARCHAR) AS wrong,
               CAST(e.suspected_errors AS VARCHAR) AS suspected_errors
        FROM evaluations AS e LEFT JOIN agent_runs AS r USING (run_id)
        WHERE e.log_date BETWEEN $start AND $end AND e.evaluator_version = $version AND e.status = 'evaluated'
          AND ($agent IS NULL OR e.agent_id = $agent) AND ($agent_version IS NULL OR e.agent_version = $agent_version)
          AND ($run_ids::VARCHAR[] IS NULL OR list_contains($run_ids::VARCHAR[], e.run_id))
        ORDER BY e.score, e.log_date, e.run_id
        LIMIT $limit
        """,
        {
            "start": start,
            "end": end,
            "version": evaluator_version,
            "limit": limit,
            "agent": agent_id,
            "agent_version": agent_version,
            "run_ids": None if run_ids is None else list(run_ids),
        },
    ).fetchall()
    names = (
        "log_date",
        "run_id",
        "agent_id",
        "agent_version",
        "score",
        "band",
        "filter_status",
        "verdict",
        "confidence",
        "rationale",
        "question",
        "enriched_question",
        "sql",
        "missing",
        "extra",
        "wrong",
        "suspected_errors",
    )
    out: list[dict[str, Any]] = []
    for row in rows:
        item = dict(zip(names, row, strict=True))
        for key in ("missing", "extra", "wrong", "suspected_errors"):
            item[key] = _json_list(item[key])
        out.append(item)
    return out
