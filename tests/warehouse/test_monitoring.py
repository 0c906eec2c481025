"""Tests of warehouse/monitoring.py: the drift-check columns, the reads of versions, days, samples and lowest
scores, the drift-check writes."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from stef.models import EVALUATOR_VERSION
from tests.warehouse.monitoring_helpers import _row, day
from warehouse import WarehouseError, connect
from warehouse.monitoring import (
    agents_on_day,
    done_days,
    known_agents,
    last_day,
    latest_evaluator_version,
    read_drift_checks,
    read_drift_sample_rows,
    read_lowest_scores,
    store_drift_checks,
    version_first_days,
)


def test_migration_adds_the_drift_check_columns(conn: duckdb.DuckDBPyConnection) -> None:
    columns = {row[0]: row[1] for row in conn.execute("DESCRIBE drift_checks").fetchall()}
    assert {
        "kind": "VARCHAR",
        "baseline_window_start": "DATE",
        "baseline_window_end": "DATE",
        "source": "VARCHAR",
    }.items() <= columns.items()


def test_reads_of_versions_days_and_samples(rollout: Path) -> None:
    with connect(rollout, read_only=True) as c:
        assert known_agents(c) == ["bird", "solo"]
        assert agents_on_day(c, day(2), EVALUATOR_VERSION) == ["bird"]
        assert agents_on_day(c, day(6), EVALUATOR_VERSION) == ["bird", "solo"]
        assert version_first_days(c, "bird", EVALUATOR_VERSION) == {"v1": day(0), "v2.0": day(3)}
        assert version_first_days(c, "bird", EVALUATOR_VERSION, until=day(2)) == {"v1": day(0)}
        assert last_day(c, "bird", EVALUATOR_VERSION, "v2.0") == day(6)
        assert last_day(c, "bird", EVALUATOR_VERSION, "v2.0", until=day(2)) is None
        assert latest_evaluator_version(c, "bird") == EVALUATOR_VERSION
        assert latest_evaluator_version(c, "bird", end=day(-1)) is None
        rows = read_drift_sample_rows(c, "bird", "v2.0", day(3), day(4), EVALUATOR_VERSION)
        assert len(rows) == 82
        assert sum(1 for status, *_ in rows if status == "parse_error") == 2
        assert rows[0][1:4] in {
            (60.0, "POTENTIALLY_INCORRECT", "NOT_APPLIED"),
            (80.0, "POTENTIALLY_INCORRECT", "NOT_APPLIED"),
        }
        assert done_days(c, day(-3), day(10), EVALUATOR_VERSION) == {day(i) for i in range(7)}
        assert done_days(c, day(0), day(6), "another-version") == set()


def test_lowest_scores_carry_their_evidence(rollout: Path) -> None:
    with connect(rollout, read_only=True) as c:
        worst = read_lowest_scores(c, day(0), day(6), EVALUATOR_VERSION, limit=10)
    assert [row["score"] for row in worst] == [50.0] * 5 + [60.0] * 5
    first = worst[0]
    assert (first["agent_id"], first["run_id"], first["log_date"]) == ("solo", "solo-0", day(6))
    assert first["question"].startswith("How many orders were placed in 'Region ")
    assert first["sql"].startswith("SELECT COUNT(*) FROM orders")
    v2 = worst[5]
    assert v2["missing"] == ["region = region 1"] and v2["extra"] == ["id <> 1"] and v2["wrong"] == []
    assert v2["suspected_errors"] == [
        {"category": "Condition-Related Errors", "subcategory": "Explicit Condition Missing", "evidence": "synthetic"}
    ]


def test_store_drift_checks_replaces_the_same_check(conn: duckdb.DuckDBPyConnection) -> None:
    assert store_drift_checks(conn, [_row()]) == 1
    assert store_drift_checks(conn, [_row(verdict="no_drift", direction=None)]) == 1  # same key: replaced
    assert store_drift_checks(conn, [_row(window_end=day(7))]) == 1  # another window: kept
    assert store_drift_checks(conn, []) == 0
    frame = read_drift_checks(conn)
    assert frame.height == 2
    assert frame.get_column("verdict").to_list() == ["no_drift", "drift"]
    assert json.loads(frame.get_column("statistics")[0]) == {"summary": {"mean_delta": -3.0}}
    assert read_drift_checks(conn, start=day(7)).height == 1
    assert read_drift_checks(conn, agent_id="other").height == 0


def test_store_drift_checks_rejects_incomplete_rows(conn: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(WarehouseError, match=r"drift check row lacks agent_id, verdict"):
        store_drift_checks(conn, [_row(agent_id=None, verdict=None)])
    assert read_drift_checks(conn).height == 0
