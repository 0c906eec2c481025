"""Tests of metrics (moved from test_warehouse.py)."""

from __future__ import annotations

from datetime import date

import duckdb
import pytest

from stef.models import Band
from tests.warehouse.helpers import (
    DAY,
    NEXT_DAY,
    _metrics_day,
    count,
    line,
    scored,
)
from warehouse import (
    compute_daily_metrics,
    day_is_done,
    read_daily_metrics,
    store_day,
)


def test_daily_metrics_against_hand_computed_values(conn: duckdb.DuckDBPyConnection) -> None:
    _metrics_day(conn)
    frame = compute_daily_metrics(conn, DAY)
    rows = {row["agent_version"]: row for row in frame.iter_rows(named=True)}
    assert set(rows) == {"v1", "v2"}  # the non-JSON line names no agent: no row of its own
    v1 = rows["v1"]
    assert (v1["records"], v1["evaluated"], v1["n_quarantined"]) == (5, 4, 0)
    assert v1["coverage"] == pytest.approx(0.8)
    assert v1["mean_score"] == pytest.approx(25.0)
    assert v1["p50_score"] == pytest.approx(25.0)
    assert v1["p90_score"] == pytest.approx(37.0)
    assert (v1["n_excellent"], v1["n_good"], v1["n_marginal"], v1["n_poor"]) == (0, 0, 0, 4)
    v2 = rows["v2"]
    assert (v2["records"], v2["evaluated"], v2["n_quarantined"], v2["n_excellent"]) == (2, 1, 1, 1)
    assert v2["coverage"] == pytest.approx(0.5)
    assert v2["mean_score"] == v2["p50_score"] == v2["p90_score"] == pytest.approx(95.0)
    stored = conn.execute("SELECT lines, quarantined FROM stored_days").fetchall()
    assert stored == [(8, 2)]


def test_metrics_recomputed_replace_the_day(conn: duckdb.DuckDBPyConnection) -> None:
    _metrics_day(conn)
    compute_daily_metrics(conn, DAY)
    compute_daily_metrics(conn, DAY)
    assert count(conn, "SELECT count(*) FROM daily_agent_metrics") == 2


def test_day_is_done_only_after_store_and_metrics(conn: duckdb.DuckDBPyConnection) -> None:
    assert not day_is_done(conn, DAY)
    _metrics_day(conn)
    assert not day_is_done(conn, DAY)
    compute_daily_metrics(conn, DAY)
    assert day_is_done(conn, DAY)
    assert not day_is_done(conn, DAY, "another-evaluator")
    assert not day_is_done(conn, NEXT_DAY)


@pytest.mark.parametrize(
    ("start", "end", "expected_days"),
    [
        pytest.param(None, None, [DAY, NEXT_DAY], id="all_days"),
        pytest.param(NEXT_DAY, None, [NEXT_DAY], id="from_start"),
        pytest.param(None, DAY, [DAY], id="up_to_end"),
        pytest.param(date(2027, 1, 1), None, [], id="nothing_in_range"),
    ],
)
def test_read_daily_metrics_filters_by_day(
    conn: duckdb.DuckDBPyConnection, start: date | None, end: date | None, expected_days: list[date]
) -> None:
    for day, run_id in ((DAY, "r1"), (NEXT_DAY, "r2")):
        store_day(conn, day, [line(1, run_id=run_id)], [scored(run_id, 50.0, Band.MARGINAL)])
        compute_daily_metrics(conn, day)
    frame = read_daily_metrics(conn, start, end)
    assert frame["log_date"].to_list() == expected_days
    assert "p90_score" in frame.columns
