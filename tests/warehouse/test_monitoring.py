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


def test_lowest_scores_of_named_runs_only(rollout: Path) -> None:
    with connect(rollout, read_only=True) as c:
        everything = read_lowest_scores(c, day(0), day(6), EVALUATOR_VERSION, limit=10_000)
        chosen = [everything[-1]["run_id"], everything[7]["run_id"], "no-such-run"]
        named = read_lowest_scores(c, day(0), day(6), EVALUATOR_VERSION, limit=10, run_ids=chosen)
        assert read_lowest_scores(c, day(0), day(6), EVALUATOR_VERSION, run_ids=[]) == []
    assert [row["run_id"] for row in named] == [everything[7]["run_id"], everything[-1]["run_id"]]


def test_store_drift_checks_replaces_the_same_check(conn: duckdb.DuckDBPyConnection) -> None:
    assert store_drift_checks(conn, [_row()]) == 1
    assert store_drift_checks(conn, [_row(verdict="no_drift", direction=None)]) == 1  # same key: replaced
    assert store_drift_checks(conn, [_row(window_end=day(7))]) == 1  # another window: kept
    assert store_drift_checks(conn, []) == 0
    assert store_drift_checks(conn, [_row(source="nightly"), _row(source="cli", verdict="no_drift")]) == 1  # first wins
    assert read_drift_checks(conn, end=day(6)).get_column("source").to_list() == ["nightly"]
    store_drift_checks(conn, [_row(verdict="no_drift", direction=None)])
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


def test_migration_0007_adds_error_rate_columns_and_keeps_old_rows_readable(tmp_path: Path) -> None:
    from stef.monitor.report import latest_drift
    from warehouse.migrate import available_migrations

    path = tmp_path / "old.duckdb"
    old = duckdb.connect(str(path))  # a warehouse as stef left it before migration 0007
    old.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP NOT NULL)")
    for migration in available_migrations()[:6]:
        old.execute(migration.sql)
        old.execute("INSERT INTO schema_version VALUES (?, now())", [migration.version])
    old.execute(
        "INSERT INTO drift_checks (checked_at, agent_id, baseline_version, candidate_version, evaluator_version, "
        "window_start, window_end, n_baseline, n_candidate, verdict, direction, statistics, kind, source) "
        "VALUES (now(), 'bird', 'v1', 'v2.0', ?, ?, ?, 200, 150, 'drift', 'worse', ?, 'version', 'nightly')",
        [
            EVALUATOR_VERSION,
            day(0),
            day(6),
            json.dumps({"summary": {"mean_baseline": 71.0, "mean_candidate": 62.5, "mean_delta": -8.5}}),
        ],
    )
    old.close()

    with connect(path) as conn:  # applies 0007
        columns = {row[0]: row[1] for row in conn.execute("DESCRIBE drift_checks").fetchall()}
        frame = read_drift_checks(conn)
    assert {
        "error_rate_baseline": "DOUBLE",
        "error_rate_baseline_ci": "DOUBLE[]",
        "error_rate_candidate": "DOUBLE",
        "error_rate_candidate_ci": "DOUBLE[]",
        "error_rate_delta": "DOUBLE",
        "error_rate_delta_ci": "DOUBLE[]",
        "category_shifts": "JSON",
        "sentence": "VARCHAR",
    }.items() <= columns.items()
    (row,) = frame.to_dicts()
    assert row["error_rate_delta"] is None and row["sentence"] is None and row["verdict"] == "drift"
    (summary,) = latest_drift([row])
    assert summary["sentence"] == "bird v2.0 scores a mean Φ of 62.5, against 71.0 for v1: worse."


def test_error_rate_columns_round_trip(conn: duckdb.DuckDBPyConnection) -> None:
    shifts = [
        {"category": "Condition-Related Errors", "baseline_share": 0.1, "candidate_share": 0.3, "significant": True}
    ]
    row = _row(
        error_rate_baseline=0.35,
        error_rate_baseline_ci=[0.31, 0.39],
        error_rate_candidate=0.5,
        error_rate_candidate_ci=[0.45, 0.55],
        error_rate_delta=0.15,
        error_rate_delta_ci=[0.09, 0.21],
        category_shifts=shifts,
        sentence="bird v2.0 answers an estimated 50 % (45–55 %) of questions wrongly, up from 35 % (31–39 %) for v1: worse.",
    )
    store_drift_checks(conn, [row])
    (stored,) = read_drift_checks(conn).to_dicts()
    for key in ("error_rate_baseline", "error_rate_candidate", "error_rate_delta", "sentence"):
        assert stored[key] == row[key]
    assert stored["error_rate_delta_ci"] == [0.09, 0.21]
    assert json.loads(stored["category_shifts"]) == shifts


def test_checks_covering_a_day_and_replacing_a_nights_checks(conn: duckdb.DuckDBPyConnection) -> None:
    from warehouse.monitoring import read_drift_checks_covering

    store_drift_checks(
        conn,
        [
            _row(source="nightly"),  # candidate window day 0 … 6
            _row(
                kind="temporal",
                source="nightly",
                baseline_version="v2.0",
                window_start=day(7),
                window_end=day(13),
                baseline_window_start=day(0),
                baseline_window_end=day(6),
            ),
            _row(
                source="cli",
                window_start=day(10),
                window_end=day(12),
                baseline_window_start=day(10),
                baseline_window_end=day(12),
            ),
        ],
    )
    covering = read_drift_checks_covering(conn, day(3), EVALUATOR_VERSION)
    assert sorted((r["kind"], r["window_end"]) for r in covering) == [("temporal", day(13)), ("version", day(6))]
    assert read_drift_checks_covering(conn, day(3), "another-version") == []
    # a re-planned night replaces every nightly check ending that day, whatever its windows were
    store_drift_checks(
        conn,
        [_row(source="nightly", baseline_window_start=day(-3), verdict="no_drift", direction=None)],
        replace_nightly=[day(6)],
        evaluator_version=EVALUATOR_VERSION,
    )
    after = read_drift_checks(conn).to_dicts()
    assert sorted((r["source"], r["window_end"], r["verdict"]) for r in after) == [
        ("cli", day(12), "drift"),
        ("nightly", day(6), "no_drift"),
        ("nightly", day(13), "drift"),
    ]
    with pytest.raises(WarehouseError, match="needs their evaluator version"):
        store_drift_checks(conn, [], replace_nightly=[day(6)])


def test_sample_rows_carry_what_the_error_rate_needs(rollout: Path) -> None:
    with connect(rollout, read_only=True) as c:
        rows = read_drift_sample_rows(c, "bird", "v2.0", day(3), day(3), EVALUATOR_VERSION)
    scored = [r for r in rows if r[0] == "evaluated"]
    p_correct, judge, schema_checked, observed_checked, categories, question = scored[0][4:]
    assert (p_correct, judge, schema_checked, observed_checked) == (None, "symbolic", False, False)
    assert categories == ["Condition-Related Errors"]
    assert question.startswith("How many orders were placed in 'Region ")
    unscored = [r for r in rows if r[0] != "evaluated"]
    assert unscored and unscored[0][8] == []
