"""Fixtures of the tests in tests/tasks: a warehouse holding one report week (W48 of agent ``bird``) and its report
data."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import duckdb
import pytest

from stef.models import EVALUATOR_VERSION, FilterStatus, Verdict
from stef.monitor.report import ReportData
from tasks.drift_checks import plan_version_check, run_check
from tasks.report import collect
from tests.support.monitoring_support import answers, store_answers
from tests.tasks.helpers import MONDAY
from warehouse import connect
from warehouse.monitoring import store_drift_checks


@pytest.fixture(scope="module")
def week_conn() -> Iterator[duckdb.DuckDBPyConnection]:
    """W48 of agent ``bird``: v1 every day (scores 70, 90), v2 from Thursday (40, 80 and a parse
    error); the week before holds v1 only; one stored version check ending on Sunday."""
    conn = connect(":memory:")
    for offset in range(-3, 7):
        day = MONDAY + timedelta(days=offset)
        batch = answers(f"v1-{offset}", "bird", "v1", [70.0, 90.0] * 3)
        if offset >= 3:
            batch += answers(
                f"v2-{offset}",
                "bird",
                "v2",
                [40.0, 80.0] * 3 + [None],
                verdict=Verdict.INCORRECT,
                filter_status=FilterStatus.NOT_APPLIED,
            )
        store_answers(conn, day, batch)
    plan = plan_version_check(conn, "bird", EVALUATOR_VERSION, end=MONDAY + timedelta(days=6))
    from stef.monitor.models import DriftThresholds

    store_drift_checks(conn, [run_check(conn, plan, DriftThresholds(min_samples=5, n_resamples=200)).row("nightly")])
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def data(week_conn: duckdb.DuckDBPyConnection) -> ReportData:
    return collect(week_conn, "memory", "2026-W48")
