"""Daily metrics per day x agent x agent version x evaluator version, and read helpers."""

from __future__ import annotations

from datetime import UTC, date, datetime

import duckdb
import polars as pl

from stef.models import EVALUATOR_VERSION
from warehouse.transaction import transaction

_DAY_METRICS_SQL = """
WITH line_counts AS (
    SELECT agent_id, agent_version, count(*) AS records, sum(quarantined) AS n_quarantined
    FROM (
        SELECT agent_id, agent_version, 0 AS quarantined FROM agent_runs WHERE log_date = $log_date
        UNION ALL
        SELECT agent_id, agent_version, 1 AS quarantined FROM quarantine WHERE log_date = $log_date
    )
    WHERE agent_id IS NOT NULL AND agent_version IS NOT NULL
    GROUP BY agent_id, agent_version
), scores AS (
    SELECT
        agent_id,
        agent_version,
        count(*) FILTER (WHERE status = 'evaluated') AS evaluated,
        avg(score) FILTER (WHERE status = 'evaluated') AS mean_score,
        avg(p_correct) FILTER (WHERE status = 'evaluated') AS mean_p_correct,
        quantile_cont(score, 0.5) FILTER (WHERE status = 'evaluated') AS p50_score,
        quantile_cont(score, 0.9) FILTER (WHERE status = 'evaluated') AS p90_score,
        count(*) FILTER (WHERE band = 'excellent') AS n_excellent,
        count(*) FILTER (WHERE band = 'good') AS n_good,
        count(*) FILTER (WHERE band = 'marginal') AS n_marginal,
        count(*) FILTER (WHERE band = 'poor') AS n_poor,
        sum(cost_usd) AS judge_cost_usd,
        sum(tokens) AS judge_tokens,
        count(*) FILTER (WHERE status = 'evaluated' AND judge <> 'symbolic') AS n_llm_judged,
        count(*) FILTER (WHERE judge_fallback_reason IS NOT NULL) AS n_judge_fallback
    FROM evaluations
    WHERE log_date = $log_date AND evaluator_version = $version
      AND agent_id IS NOT NULL AND agent_version IS NOT NULL
    GROUP BY agent_id, agent_version
)
SELECT
    $log_date::DATE AS log_date,
    coalesce(l.agent_id, s.agent_id) AS agent_id,
    coalesce(l.agent_version, s.agent_version) AS agent_version,
    $version AS evaluator_version,
    coalesce(l.records, 0) AS records,
    coalesce(s.evaluated, 0) AS evaluated,
    CASE WHEN coalesce(l.records, 0) = 0 THEN 0.0 ELSE coalesce(s.evaluated, 0) / l.records END AS coverage,
    s.mean_score,
    s.mean_p_correct,
    s.p50_score,
    s.p90_score,
    coalesce(s.n_excellent, 0) AS n_excellent,
    coalesce(s.n_good, 0) AS n_good,
    coalesce(s.n_marginal, 0) AS n_marginal,
    coalesce(s.n_poor, 0) AS n_poor,
    coalesce(l.n_quarantined, 0) AS n_quarantined,
    s.judge_cost_usd,
    s.judge_tokens,
    coalesce(s.n_llm_judged, 0) AS n_llm_judged,
    coalesce(s.n_judge_fallback, 0) AS n_judge_fallback,
    $now::TIMESTAMP AS computed_at
FROM line_counts AS l
FULL OUTER JOIN scores AS s ON l.agent_id = s.agent_id AND l.agent_version = s.agent_version
"""


def day_metrics(conn: duckdb.DuckDBPyConnection, log_date: date, evaluator_version: str) -> pl.DataFrame:
    """One day's metrics as :func:`compute_daily_metrics` computes them, read without storing them
    (a read-only connection will do): for a stored day whose metrics were never computed (the
    nightly run stopped between storing the day and its metrics).

    Returns:
        Rows shaped like :func:`read_daily_metrics` (``computed_at``: now), sorted by agent and version.
    """
    now = datetime.now(UTC).replace(tzinfo=None)
    frame: pl.DataFrame = conn.sql(
        f"SELECT * FROM ({_DAY_METRICS_SQL}) ORDER BY agent_id, agent_version",
        params={"log_date": log_date, "version": evaluator_version, "now": now},
    ).pl()
    return frame


def compute_daily_metrics(
    conn: duckdb.DuckDBPyConnection,
    log_date: date,
    evaluator_version: str = EVALUATOR_VERSION,
    *,
    mark_done: bool = True,
) -> pl.DataFrame:
    """Compute and replace one day's ``daily_agent_metrics`` rows (one transaction).

    Per agent x agent version: ``records`` = log lines of the day (``agent_runs`` +
    ``quarantine``), ``evaluated`` = evaluations with status ``evaluated``, ``coverage`` =
    evaluated / records, mean / P50 / P90 of Φ over evaluated rows (``quantile_cont``, linear
    interpolation), the mean calibrated P(correct) ``mean_p_correct``, counts per band and ``n_quarantined``; the LLM judge's cost: ``judge_cost_usd``
    and ``judge_tokens`` (sums, ``NULL`` without model calls), ``n_llm_judged`` (model verdicts)
    and ``n_judge_fallback`` (records that fell back to the symbolic judge). Quarantined lines that are not JSON
    objects name no agent: they count in the day totals (``stored_days``) but in no row here.
    Marks the day done for :func:`day_is_done` unless ``mark_done`` is false (the nightly flow marks
    it after the day's drift checks: :func:`mark_day_done`).

    Args:
        conn: a read-write warehouse connection.
        log_date: the day.
        evaluator_version: whose evaluations to summarise.
        mark_done: mark the day done in the same transaction.

    Returns:
        The rows written, shaped like :func:`read_daily_metrics` (empty when the day has no
        rows).

    Raises:
        WarehouseError: the write failed (rolled back).

    Example: scores 10, 20, 30, 40 plus one ``parse_error`` give records 5, evaluated 4,
    coverage 0.8, mean 25, P50 25, P90 37.
    """
    now = datetime.now(UTC).replace(tzinfo=None)
    params = {"log_date": log_date, "version": evaluator_version}
    with transaction(conn, f"computing metrics of {log_date.isoformat()} failed and was rolled back"):
        conn.execute(
            "DELETE FROM daily_agent_metrics WHERE log_date = $log_date AND evaluator_version = $version", params
        )
        conn.execute(f"INSERT INTO daily_agent_metrics BY NAME {_DAY_METRICS_SQL}", {**params, "now": now})
        if mark_done:
            _mark_done(conn, log_date, evaluator_version, now)
    return read_daily_metrics(conn, log_date, log_date, evaluator_version=evaluator_version)


def mark_day_done(conn: duckdb.DuckDBPyConnection, log_date: date, evaluator_version: str = EVALUATOR_VERSION) -> None:
    """Mark ``log_date`` done for ``evaluator_version`` (:func:`day_is_done`): the nightly flow calls
    it after the day's drift checks, so a run stopped before them leaves the day for a rerun.

    Raises:
        WarehouseError: the write failed (rolled back).
    """
    with transaction(conn, f"marking {log_date.isoformat()} done failed and was rolled back"):
        _mark_done(conn, log_date, evaluator_version, datetime.now(UTC).replace(tzinfo=None))


def _mark_done(conn: duckdb.DuckDBPyConnection, log_date: date, evaluator_version: str, now: datetime) -> None:
    conn.execute(
        "UPDATE stored_days SET metrics_at = $now WHERE log_date = $log_date AND evaluator_version = $version",
        {"log_date": log_date, "version": evaluator_version, "now": now},
    )


def read_daily_metrics(
    conn: duckdb.DuckDBPyConnection,
    start: date | None = None,
    end: date | None = None,
    *,
    evaluator_version: str | None = None,
) -> pl.DataFrame:
    """Stored daily metrics, optionally limited to ``start <= log_date <= end`` and one version.

    Args:
        conn: a warehouse connection (read-only is fine).
        start: first day (inclusive); ``None`` for no lower bound.
        end: last day (inclusive); ``None`` for no upper bound.
        evaluator_version: only this evaluator version; ``None`` for all.

    Returns:
        One row per log_date x agent_id x agent_version x evaluator_version, sorted by those
        keys; columns as in ``daily_agent_metrics`` (log_date Date, counts Int64, coverage and
        scores Float64, computed_at Datetime).
    """
    frame: pl.DataFrame = conn.sql(
        """
        SELECT * FROM daily_agent_metrics
        WHERE ($start::DATE IS NULL OR log_date >= $start)
          AND ($end::DATE IS NULL OR log_date <= $end)
          AND ($version::VARCHAR IS NULL OR evaluator_version = $version)
        ORDER BY log_date, agent_id, agent_version, evaluator_version
        """,
        params={"start": start, "end": end, "version": evaluator_version},
    ).pl()
    return frame


def day_is_done(conn: duckdb.DuckDBPyConnection, log_date: date, evaluator_version: str = EVALUATOR_VERSION) -> bool:
    """Whether ``log_date`` was stored and marked done with ``evaluator_version`` (its metrics
    computed; in the nightly flow, its drift checks run too: :func:`mark_day_done`).

    Args:
        conn: a warehouse connection (read-only is fine).
        log_date: the day.
        evaluator_version: the evaluator version to check.

    Returns:
        ``True`` when :func:`warehouse.store_day` and :func:`compute_daily_metrics` both
        completed for that day and version (backfill skips such days unless forced).
    """
    rows = conn.execute(
        "SELECT count(*) FROM stored_days WHERE log_date = $log_date AND evaluator_version = $version AND metrics_at IS NOT NULL",
        {"log_date": log_date, "version": evaluator_version},
    ).fetchall()
    return bool(rows[0][0])
