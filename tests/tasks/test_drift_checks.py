"""Tests of tasks/drift_checks.py: planning (versions, windows) and running drift checks over a warehouse."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stef.models import EVALUATOR_VERSION
from stef.monitor.models import DriftError, DriftKind, DriftPlan, DriftThresholds
from stef.monitor.sentence import drift_sentence
from tasks.drift_checks import nightly_plans, plan_temporal_check, plan_version_check, run_check, run_drift_check
from tests.support.monitoring_support import answers, store_answers
from tests.warehouse.monitoring_helpers import FAST, day
from warehouse import WarehouseError, connect
from warehouse.monitoring import (
    read_drift_checks,
    version_first_days,
)


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


def test_a_start_without_an_end_is_the_window_of_both_sides(rollout: Path) -> None:
    """``--start`` alone means the same as ``--start`` with the default end: both sides from that day."""
    with connect(rollout, read_only=True) as c:
        alone = plan_version_check(c, "bird", EVALUATOR_VERSION, start=day(5))
        with_end = plan_version_check(c, "bird", EVALUATOR_VERSION, start=day(5), end=day(6))
    assert alone.candidate_window == alone.baseline_window == (day(5), day(6))
    assert (alone.baseline_window, alone.candidate_window) == (with_end.baseline_window, with_end.candidate_window)


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
            r"agent 'nobody' has no scored evaluations of evaluator version .* \(agents with evaluations: bird, solo\)",
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
        plan_version_check(c, evaluator_version=EVALUATOR_VERSION, **arguments)


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


def test_an_agent_without_scored_answers_leaves_the_other_agents_checked(rollout: Path) -> None:
    """A new agent whose only answers of the night are unscored (parse errors) gets its temporal check
    (nothing to compare: insufficient data), and the other agents' checks of the night are still planned."""
    with connect(rollout) as c:
        store_answers(
            c,
            day(7),
            answers("v2-7", "bird", "v2.0", [60.0, 80.0] * 5) + answers("broken-7", "aaa-broken", "v1", [None] * 3),
        )
        plans = nightly_plans(c, day(7), EVALUATOR_VERSION)
        broken = run_check(c, plans[0], FAST)
    assert [(p.agent_id, p.kind.value, p.candidate_version) for p in plans] == [
        ("aaa-broken", "temporal", "v1"),
        ("bird", "version", "v2.0"),
        ("bird", "temporal", "v2.0"),
    ]
    assert (broken.result.verdict.value, broken.result.n_candidate, broken.result.records_candidate) == (
        "insufficient_data",
        0,
        3,
    )


def test_a_release_whose_every_answer_is_unscored_is_checked_against_the_one_before(tmp_path: Path) -> None:
    """A new version that only produced unscored answers (parse errors) is a release: the night compares it
    with the version before and reports its coverage collapse (100 % -> 0 %) as drift for the worse."""
    with connect(tmp_path / "w.duckdb") as c:
        store_answers(c, day(0), answers("v1-0", "bird", "v1", [60.0, 80.0] * 60))
        store_answers(c, day(1), answers("v2-1", "bird", "v2", [None] * 120))
        assert version_first_days(c, "bird", EVALUATOR_VERSION) == {"v1": day(0), "v2": day(1)}
        plans = nightly_plans(c, day(1), EVALUATOR_VERSION)
        assert [(p.kind.value, p.baseline_version, p.candidate_version) for p in plans] == [
            ("version", "v1", "v2"),
            ("temporal", "v2", "v2"),
        ]
        check = run_check(c, plans[0], FAST)
    result = check.result
    assert (result.verdict.value, result.direction.value) == ("drift", "worse")
    assert (result.n_baseline, result.records_baseline, result.n_candidate, result.records_candidate) == (
        120,
        120,
        0,
        120,
    )
    assert result.coverage is not None and result.coverage.delta == pytest.approx(-1.0)
    assert drift_sentence(check.summary()) == (
        "bird v2 has no scored answers to compare with v1; it scores 0 % of its answers, down from 100 %: worse."
    )


def test_after_a_rollback_the_night_checks_the_version_that_ran_against_its_past(tmp_path: Path) -> None:
    """v2 replaced v1 for a day, then v1 came back: the temporal check of the following nights is of v1 (the
    answers of the night), which got worse, not of v2 (no answers in its window: insufficient data)."""
    with connect(tmp_path / "w.duckdb") as c:
        for offset in range(7):
            version, score = ("v2", 80.0) if offset == 3 else ("v1", 80.0 if offset < 3 else 40.0)
            store_answers(c, day(offset), answers(f"{version}-{offset}", "bird", version, [score] * 50))
        plans = nightly_plans(c, day(6), EVALUATOR_VERSION, window_days=3)
        checks = [run_check(c, plan, FAST) for plan in plans]
    assert [(p.kind.value, p.baseline_version, p.candidate_version) for p in plans] == [
        ("version", "v1", "v2"),
        ("temporal", "v1", "v1"),
    ]
    temporal = checks[1].result
    assert (plans[1].baseline_window, plans[1].candidate_window) == ((day(1), day(3)), (day(4), day(6)))
    assert (temporal.verdict.value, temporal.direction.value) == ("drift", "worse")
    assert (temporal.n_baseline, temporal.n_candidate) == (100, 150)
    assert temporal.mean is not None and temporal.mean.delta == pytest.approx(40.0 - 80.0)


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
        run_drift_check(rollout, **arguments)


def test_run_drift_check_needs_an_existing_warehouse(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match=r"warehouse .*missing.duckdb does not exist; run `stef nightly`"):
        run_drift_check(tmp_path / "missing.duckdb", "bird")
    assert not (tmp_path / "missing.duckdb").exists()


def test_seeded_bootstrap_makes_checks_reproducible(rollout: Path) -> None:
    first = run_drift_check(rollout, "bird", thresholds=FAST, store=False).summary()
    second = run_drift_check(rollout, "bird", thresholds=FAST, store=False).summary()
    assert first["mean_delta_ci"] == second["mean_delta_ci"]  # seeded bootstrap: same data, same interval
    assert np.isfinite(first["mean_delta_ci"]).all()


def test_refresh_recomputes_every_check_a_stored_day_touches(rollout: Path) -> None:
    from tasks.drift import check_drift
    from tasks.drift_checks import plan_from_row, refresh_checks

    check_drift.fn(str(rollout), day(6), EVALUATOR_VERSION, FAST)  # the night of day 6: three checks
    run_drift_check(rollout, "bird", start=day(3), end=day(5), thresholds=DriftThresholds(min_samples=50))  # cli
    with connect(rollout) as conn:
        stored = read_drift_checks(conn).to_dicts()
        assert all(plan_from_row(row).candidate_window[1] == row["window_end"] for row in stored)
        refreshed, later, failures = refresh_checks(conn, day(3), EVALUATOR_VERSION, FAST)
    assert failures == []
    assert later == [day(4), day(5), day(6)]  # the stored days whose nightly windows can hold day 3
    by_source = sorted(
        (source, check.plan.kind.value, check.plan.candidate_window[1]) for check, source, _, _ in refreshed
    )
    assert by_source == [
        ("cli", "version", day(5)),  # rerun with its own plan and thresholds
        ("nightly", "temporal", day(4)),
        ("nightly", "temporal", day(5)),
        ("nightly", "temporal", day(6)),
        ("nightly", "temporal", day(6)),  # agent solo, on day 6 only
        ("nightly", "version", day(4)),
        ("nightly", "version", day(5)),
        ("nightly", "version", day(6)),
    ]
    cli = next(check for check, source, _, _ in refreshed if source == "cli")
    assert cli.result.thresholds.min_samples == 50
    previous = {(c.plan.kind.value, c.plan.candidate_window[1]): (v, d) for c, _, v, d in refreshed}
    assert previous[("version", day(6))] == ("drift", "worse") and previous[("version", day(4))] == (None, None)


def test_refresh_keeps_a_check_it_cannot_recompute(rollout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tasks.drift_checks
    from tasks.drift import check_drift
    from tasks.drift_checks import refresh_checks

    check_drift.fn(str(rollout), day(6), EVALUATOR_VERSION, FAST)
    run_drift_check(rollout, "bird", start=day(3), end=day(5), thresholds=FAST)  # a cli check over day 3
    real = tasks.drift_checks.run_check

    def failing(conn: object, plan: DriftPlan, thresholds: object = None) -> object:
        if plan.candidate_window[1] == day(5) and plan.kind is DriftKind.VERSION:
            raise DriftError("the window's evaluations were rescored")
        return real(conn, plan, thresholds)  # type: ignore[arg-type]

    monkeypatch.setattr(tasks.drift_checks, "run_check", failing)
    with connect(rollout) as conn:
        refreshed, _, failures = refresh_checks(conn, day(3), EVALUATOR_VERSION, FAST)
    assert failures == [
        "bird version v1 -> v2.0 2026-11-19…2026-11-25 (nightly): the window's evaluations were rescored",
        "bird version v1 -> v2.0 2026-11-23…2026-11-25 (cli): the window's evaluations were rescored",
    ]
    # every other check was recomputed
    assert sorted((c.plan.kind.value, c.plan.candidate_window[1]) for c, *_ in refreshed) == [
        ("temporal", day(4)),
        ("temporal", day(5)),
        ("temporal", day(6)),
        ("temporal", day(6)),
        ("version", day(4)),
        ("version", day(6)),
    ]
