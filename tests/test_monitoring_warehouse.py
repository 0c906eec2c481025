"""Tests of warehouse/monitoring.py and the planning/running of drift checks in tasks/drift.py
(plain functions and task bodies through ``.fn``; no Prefect run)."""

from __future__ import annotations

import doctest
import json
import shutil
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pytest

import stef.monitor.alerts
import stef.monitor.formatting
import tasks.backfill
import tasks.drift
import tasks.drift_checks
from stef.models import EVALUATOR_VERSION, FilterStatus, Verdict
from stef.monitor.alerts import DRIFT_EVENT, drift_event, drift_markdown
from stef.monitor.drift import thresholds_from_env
from stef.monitor.models import DriftError, DriftKind, DriftThresholds
from tasks.drift import check_drift
from tasks.drift_checks import nightly_plans, plan_temporal_check, plan_version_check, run_drift_check
from tests.support.monitoring_support import answers, store_answers
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

D1 = date(2026, 11, 20)
FAST = DriftThresholds(n_resamples=300)


def day(offset: int) -> date:
    return D1 + timedelta(days=offset)


@pytest.fixture
def conn() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = connect(":memory:")
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def rollout_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse file: agent ``bird`` with v1 on days 0–6 (scores 70/90) and v2 from day 3 (scores 60/80,
    one parse error per day), agent ``solo`` with one version on day 6."""
    path = tmp_path_factory.mktemp("rollout") / "wh.duckdb"
    connection = connect(path)
    try:
        for offset in range(7):
            batch = answers(f"v1-{offset}", "bird", "v1", [70.0, 90.0] * 20)
            if offset >= 3:
                batch += answers(
                    f"v2-{offset}",
                    "bird",
                    "v2.0",
                    [60.0, 80.0] * 20 + [None],
                    verdict=Verdict.POTENTIALLY_INCORRECT,
                    filter_status=FilterStatus.NOT_APPLIED,
                )
            if offset == 6:
                batch += answers("solo", "solo", "s1", [50.0] * 5)
            store_answers(connection, day(offset), batch)
    finally:
        connection.close()
    return path


@pytest.fixture
def rollout(rollout_template: Path, tmp_path: Path) -> Path:
    """A private copy of the rollout warehouse (tests may write to it)."""
    path = tmp_path / "wh.duckdb"
    shutil.copyfile(rollout_template, path)
    return path


# --------------------------------------------------------------------------- schema and reads


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
        assert rows[0][1:] in {
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


def _row(**overrides: object) -> dict[str, object]:
    row: dict[str, object] = {
        "agent_id": "bird",
        "kind": "version",
        "baseline_version": "v1",
        "candidate_version": "v2.0",
        "evaluator_version": EVALUATOR_VERSION,
        "window_start": day(0),
        "window_end": day(6),
        "baseline_window_start": day(0),
        "baseline_window_end": day(6),
        "n_baseline": 10,
        "n_candidate": 12,
        "verdict": "drift",
        "direction": "worse",
        "statistics": {"summary": {"mean_delta": -3.0}},
        "source": "cli",
    }
    row.update(overrides)
    return row


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


# --------------------------------------------------------------------------- planning


def test_default_plan_is_newest_version_against_the_one_before(rollout: Path) -> None:
    with connect(rollout, read_only=True) as c:
        plan = plan_version_check(c, "bird", EVALUATOR_VERSION)
    assert (plan.kind, plan.baseline_version, plan.candidate_version) == (DriftKind.VERSION, "v1", "v2.0")
    assert plan.candidate_window == plan.baseline_window == (day(0), day(6))


def test_baseline_that_stopped_earlier_uses_its_own_last_window(tmp_path: Path) -> None:
    path = tmp_path / "switch.duckdb"
    with connect(path) as c:
        for offset in range(10):
            version = "v1" if offset < 4 else "v2"
            store_answers(c, day(offset), answers(f"{version}-{offset}", "bird", version, [70.0, 90.0] * 5))
        plan = plan_version_check(c, "bird", EVALUATOR_VERSION)
        explicit = plan_version_check(c, "bird", EVALUATOR_VERSION, start=day(3), end=day(9))
    assert plan.candidate_window == (day(3), day(9))
    assert plan.baseline_window == (day(-3), day(3))  # v1's last day is day 3
    assert explicit.baseline_window == explicit.candidate_window == (day(3), day(9))


def test_temporal_plan_compares_with_the_previous_window(rollout: Path) -> None:
    with connect(rollout, read_only=True) as c:
        plan = plan_temporal_check(c, "bird", EVALUATOR_VERSION, version="v1", end=day(6), window_days=3)
    assert (plan.kind, plan.baseline_version, plan.candidate_version) == (DriftKind.TEMPORAL, "v1", "v1")
    assert (plan.baseline_window, plan.candidate_window) == ((day(1), day(3)), (day(4), day(6)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param(
            {"agent_id": "nobody"},
            r"agent 'nobody' has no evaluations of evaluator version .* \(agents with evaluations: bird, solo\)",
            id="unknown_agent",
        ),
        pytest.param(
            {"candidate": "v9"},
            r"agent 'bird' has no candidate version 'v9' \(its versions, oldest first: v1, v2.0\)",
            id="unknown_version",
        ),
        pytest.param(
            {"agent_id": "solo"},
            r"agent 'solo' has no version before 's1' to compare with .* --temporal",
            id="single_version",
        ),
        pytest.param(
            {"baseline": "v1", "candidate": "v1"},
            r"baseline and candidate are the same version 'v1'",
            id="same_version",
        ),
        pytest.param(
            {"start": day(5), "end": day(4)}, r"window end 2026-11-24 is before its start 2026-11-25", id="empty_window"
        ),
    ],
)
def test_plans_that_cannot_be_made_are_clear_errors(rollout: Path, kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"agent_id": "bird", **kwargs}
    with connect(rollout, read_only=True) as c, pytest.raises(DriftError, match=message):
        plan_version_check(c, evaluator_version=EVALUATOR_VERSION, **arguments)  # type: ignore[arg-type]


def test_nightly_plans_end_at_the_day(rollout: Path) -> None:
    with connect(rollout, read_only=True) as c:
        early = nightly_plans(c, day(2), EVALUATOR_VERSION)
        late = nightly_plans(c, day(6), EVALUATOR_VERSION)
    assert [(p.agent_id, p.kind.value, p.candidate_version) for p in early] == [("bird", "temporal", "v1")]
    assert [
        (p.agent_id, p.kind.value, p.baseline_version, p.candidate_version, p.candidate_window[1]) for p in late
    ] == [
        ("bird", "version", "v1", "v2.0", day(6)),
        ("bird", "temporal", "v2.0", "v2.0", day(6)),
        ("solo", "temporal", "s1", "s1", day(6)),
    ]


# --------------------------------------------------------------------------- running


def test_run_drift_check_compares_and_stores(rollout: Path) -> None:
    check = run_drift_check(rollout, "bird", thresholds=FAST)
    summary = check.summary()
    assert (summary["verdict"], summary["direction"]) == ("drift", "worse")
    assert (summary["n_baseline"], summary["n_candidate"], summary["records_candidate"]) == (280, 160, 164)
    assert summary["mean_delta"] == pytest.approx(70.0 - 80.0)
    assert summary["coverage_delta"] == pytest.approx(160 / 164 - 1.0)
    assert summary["filter_status_chi2_pvalue"] is not None and summary["filter_status_chi2_pvalue"] < 1e-10
    with connect(rollout, read_only=True) as c:
        stored = read_drift_checks(c).to_dicts()
    assert len(stored) == 1
    assert (stored[0]["verdict"], stored[0]["direction"], stored[0]["source"], stored[0]["n_candidate"]) == (
        "drift",
        "worse",
        "cli",
        160,
    )
    assert json.loads(stored[0]["statistics"])["summary"]["mean_delta"] == pytest.approx(-10.0)
    run_drift_check(rollout, "bird", thresholds=FAST)  # the same check again: replaced
    with connect(rollout, read_only=True) as c:
        assert read_drift_checks(c).height == 1


def test_run_drift_check_without_storing_opens_read_only(rollout: Path) -> None:
    check = run_drift_check(rollout, "bird", temporal=True, end=day(6), window_days=3, thresholds=FAST, store=False)
    assert (
        check.plan.kind is DriftKind.TEMPORAL and check.result.verdict.value == "insufficient_data"
    )  # 120 v2.0 scores vs 0
    with connect(rollout, read_only=True) as c:
        assert read_drift_checks(c).height == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        pytest.param(
            {"agent_id": "nobody"},
            DriftError,
            r"agent 'nobody' has no evaluations in .*wh.duckdb \(agents with evaluations: bird, solo\)",
            id="unknown_agent",
        ),
        pytest.param(
            {"temporal": True, "baseline": "v1"},
            DriftError,
            r"--baseline does not apply to --temporal",
            id="temporal_with_baseline",
        ),
    ],
)
def test_run_drift_check_errors(rollout: Path, kwargs: dict[str, object], error: type[Exception], message: str) -> None:
    arguments: dict[str, object] = {"agent_id": "bird", **kwargs}
    with pytest.raises(error, match=message):
        run_drift_check(rollout, **arguments)  # type: ignore[arg-type]


def test_run_drift_check_needs_an_existing_warehouse(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match=r"warehouse .*missing.duckdb does not exist; run `stef nightly`"):
        run_drift_check(tmp_path / "missing.duckdb", "bird")
    assert not (tmp_path / "missing.duckdb").exists()


def test_check_drift_task_stores_the_nights_checks(rollout: Path) -> None:
    checks = check_drift.fn(str(rollout), day(6), EVALUATOR_VERSION, FAST)
    assert [(c["agent_id"], c["kind"], c["verdict"]) for c in checks] == [
        ("bird", "version", "drift"),
        ("bird", "temporal", "insufficient_data"),
        ("solo", "temporal", "insufficient_data"),
    ]
    with connect(rollout, read_only=True) as c:
        stored = read_drift_checks(c).to_dicts()
    assert sorted((r["agent_id"], r["kind"], r["source"]) for r in stored) == [
        ("bird", "temporal", "nightly"),
        ("bird", "version", "nightly"),
        ("solo", "temporal", "nightly"),
    ]
    bird_temporal = next(r for r in stored if r["agent_id"] == "bird" and r["kind"] == "temporal")
    assert (bird_temporal["baseline_window_start"], bird_temporal["baseline_window_end"]) == (day(-7), day(-1))
    assert (bird_temporal["window_start"], bird_temporal["window_end"]) == (day(0), day(6))
    assert (bird_temporal["n_baseline"], bird_temporal["n_candidate"]) == (0, 160)  # v2.0 has no earlier week


# --------------------------------------------------------------------------- settings, alerting, doctests


def test_thresholds_from_env() -> None:
    assert thresholds_from_env({}) == DriftThresholds()
    assert thresholds_from_env({"STEF_DRIFT_THRESHOLDS": '{"min_samples": 50, "mean_delta": 2}'}) == DriftThresholds(
        min_samples=50, mean_delta=2.0
    )
    with pytest.raises(
        DriftError,
        match=r"\$STEF_DRIFT_THRESHOLDS is not a valid set of drift thresholds \(min_samples: Input should be",
    ):
        thresholds_from_env({"STEF_DRIFT_THRESHOLDS": '{"min_samples": 0}'})
    with pytest.raises(
        DriftError, match=r"\$STEF_DRIFT_THRESHOLDS is not a valid set of drift thresholds \(value: Invalid JSON"
    ):
        thresholds_from_env({"STEF_DRIFT_THRESHOLDS": "min_samples=5"})


def test_drift_event_names_agent_versions_and_deltas(rollout: Path) -> None:
    summary = run_drift_check(rollout, "bird", thresholds=FAST, store=False).summary()
    event = drift_event(summary)
    assert event["event"] == DRIFT_EVENT == "stef.drift.detected"
    assert event["resource"] == {
        "prefect.resource.id": "stef.agent.bird",
        "prefect.resource.name": "bird",
        "stef.agent-version": "v2.0",
        "stef.drift-kind": "version",
    }
    assert [r["prefect.resource.role"] for r in event["related"]] == ["baseline", "candidate"]
    payload = event["payload"]
    assert (payload["baseline_version"], payload["candidate_version"], payload["direction"]) == ("v1", "v2.0", "worse")
    assert payload["mean_delta"] == pytest.approx(-10.0) and len(payload["mean_delta_ci"]) == 2
    json.dumps(event)  # JSON-ready: Prefect sends it as is


def test_drift_markdown_has_one_row_per_check(rollout: Path) -> None:
    checks = check_drift.fn(str(rollout), day(6), EVALUATOR_VERSION, FAST)
    text = drift_markdown(checks, "STEF drift checks 2026-11-26")
    lines = text.splitlines()
    assert lines[0] == "# STEF drift checks 2026-11-26"
    rows = [line for line in lines if line.startswith(("| bird", "| solo"))]
    assert len(rows) == 3
    assert "| v1 → v2.0 |" in rows[0] and "**drift** | worse | -10.00 [" in rows[0]


def test_task_module_doctests() -> None:
    for module in (tasks.drift, tasks.drift_checks, tasks.backfill, stef.monitor.alerts, stef.monitor.formatting):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_seeded_bootstrap_makes_checks_reproducible(rollout: Path) -> None:
    first = run_drift_check(rollout, "bird", thresholds=FAST, store=False).summary()
    second = run_drift_check(rollout, "bird", thresholds=FAST, store=False).summary()
    assert first["mean_delta_ci"] == second["mean_delta_ci"]  # seeded bootstrap: same data, same interval
    assert np.isfinite(first["mean_delta_ci"]).all()
