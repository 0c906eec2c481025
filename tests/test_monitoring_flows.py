"""Flow tests of the monitoring half under the session's Prefect test harness: the nightly drift
step (alert event, artifact, a failing check that loses nothing), an interrupted and resumed
backfill through ``stef backfill``, and ``stef report`` (the weekly report flow)."""

from __future__ import annotations

import json
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from stef.models import EVALUATOR_VERSION
from tasks.drift import DRIFT_ARTIFACT_KEY, DRIFT_EVENT
from tasks.report import REPORT_ARTIFACT_KEY
from tests.support.monitoring_support import write_log_day
from warehouse import connect, day_is_done
from warehouse.monitoring import read_drift_checks

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

MONDAY = date(2026, 11, 23)


def record(run_id: str, version: str, number: int, correct: bool, agent: str = "shop") -> dict[str, Any]:
    """A log record whose SQL applies the asked filter (scores high) or ignores it and filters another year (scores low)."""
    question = f"How many orders were placed in region 'Region {number}' in 2025?"
    sql = (
        f"SELECT COUNT(*) FROM orders WHERE region = 'Region {number}' AND order_year = 2025"
        if correct
        else "SELECT COUNT(*) FROM orders WHERE order_year = 2024"
    )
    return {
        "run_id": run_id,
        "timestamp": "2026-11-26T10:00:00+00:00",
        "agent_id": agent,
        "agent_version": version,
        "question": question,
        "sql": sql,
        "dialect": "postgres",
        "app_id": "shop",
    }


def _wait_for_drift_event(agent_id: str, candidate: str) -> Any | None:
    """The ``stef.drift.detected`` event of ``agent_id``/``candidate`` stored by the test API (waits up to 10 s)."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all()
    deadline = time.monotonic() + 10.0
    while True:
        with get_client(sync_client=True) as client:
            page = client.read_events(EventFilter(event=EventNameFilter(name=[DRIFT_EVENT])), limit=50)
        for event in page.events:
            if event.resource.id == f"stef.agent.{agent_id}" and event.payload.get("candidate_version") == candidate:
                return event
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)


def test_nightly_alerts_on_a_worse_version_and_survives_a_failing_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.artifacts import Artifact

    from flows.nightly import nightly

    day = MONDAY + timedelta(days=3)
    logs = tmp_path / "logs"
    records = [record(f"v1-{i}", "v1.0", i, correct=True) for i in range(30)]
    records += [record(f"v2-{i}", "v1.1", i, correct=i % 2 == 0) for i in range(30)]  # half of v1.1 ignores the filter
    write_log_day(logs, day, records)
    warehouse_path = tmp_path / "wh.duckdb"
    monkeypatch.setenv("STEF_DRIFT_THRESHOLDS", json.dumps({"min_samples": 20, "n_resamples": 300}))

    summary = nightly(log_date=day, logs_root=str(logs), warehouse=str(warehouse_path))

    assert summary.drift_error is None
    checks = {c["kind"]: c for c in summary.drift_checks}
    assert set(checks) == {"version", "temporal"}
    version = checks["version"]
    assert (version["baseline_version"], version["candidate_version"], version["verdict"], version["direction"]) == (
        "v1.0",
        "v1.1",
        "drift",
        "worse",
    )
    assert (version["n_baseline"], version["n_candidate"]) == (30, 30)
    assert checks["temporal"]["verdict"] == "insufficient_data"  # no earlier week
    with connect(warehouse_path, read_only=True) as conn:
        stored = read_drift_checks(conn).to_dicts()
        means = dict(
            conn.execute("SELECT agent_version, avg(score) FROM evaluations GROUP BY agent_version").fetchall()
        )
    expected_delta = means["v1.1"] - means["v1.0"]  # the judge's own scores, read back
    assert expected_delta < -10.0
    assert version["mean_delta"] == pytest.approx(expected_delta)
    assert sorted((r["kind"], r["verdict"], r["source"]) for r in stored) == [
        ("temporal", "insufficient_data", "nightly"),
        ("version", "drift", "nightly"),
    ]

    artifact = cast(Artifact | None, Artifact.get(DRIFT_ARTIFACT_KEY))  # sync call: not a coroutine
    assert artifact is not None and artifact.type == "markdown"
    assert "| shop | version | v1.0 → v1.1 |" in str(artifact.data) and "**drift** | worse" in str(artifact.data)

    # the event reached the Prefect API, with agent, versions and deltas
    event = _wait_for_drift_event("shop", "v1.1")
    assert event is not None, "no stef.drift.detected event reached the API"
    assert event.resource.get("stef.agent-version") == "v1.1"
    assert (event.payload["baseline_version"], event.payload["direction"]) == ("v1.0", "worse")
    assert event.payload["mean_delta"] == pytest.approx(expected_delta)

    # the same night again with unusable thresholds: the check fails, the day is still stored and done
    monkeypatch.setenv("STEF_DRIFT_THRESHOLDS", "{not json")
    rerun = nightly(log_date=day, logs_root=str(logs), warehouse=str(warehouse_path))
    assert rerun.drift_checks == [] and rerun.drift_error is not None
    assert rerun.drift_error.startswith("DriftError: $STEF_DRIFT_THRESHOLDS is not a valid set of drift thresholds")
    assert (rerun.records, rerun.evaluated) == (60, 60)
    with connect(warehouse_path, read_only=True) as conn:
        assert day_is_done(conn, day, EVALUATOR_VERSION)
        assert conn.execute("SELECT count(*) FROM agent_runs").fetchall() == [(60,)]
        assert read_drift_checks(conn).height == 2  # the earlier checks are kept


def test_interrupted_backfill_resumes_and_stores_each_day_once(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    days = [MONDAY + timedelta(days=i) for i in range(7)]
    for index, day in enumerate(days):
        version = "v1.0" if index < 4 else "v1.1"
        write_log_day(logs, day, [record(f"{day}-{i}", version, i, correct=i != 3) for i in range(4)])
    broken = logs / days[3].isoformat() / "agent.jsonl"
    good_text = broken.read_text(encoding="utf-8")
    broken.write_text('{"run_id": "cut off\n' * 4, encoding="utf-8")  # day 4 cannot be read: the run stops there
    warehouse_path = tmp_path / "wh.duckdb"
    arguments = [
        "backfill",
        "--start",
        days[0].isoformat(),
        "--end",
        days[-1].isoformat(),
        "--logs-root",
        str(logs),
        "--warehouse",
        str(warehouse_path),
    ]

    first = CliRunner().invoke(app, arguments)
    assert first.exit_code == 2, first.output
    assert "error: 4 of 4 log lines in" in first.output and "are bad (100.0%)" in first.output
    assert [line[:10] for line in first.stdout.splitlines() if ": 4 lines, " in line] == [
        d.isoformat() for d in days[:3]
    ]
    with connect(warehouse_path, read_only=True) as conn:
        assert [day_is_done(conn, d, EVALUATOR_VERSION) for d in days] == [True] * 3 + [False] * 4

    broken.write_text(good_text, encoding="utf-8")
    second = CliRunner().invoke(app, arguments)
    assert second.exit_code == 0, second.output
    lines = second.stdout.splitlines()
    assert [line for line in lines if "skipped" in line and "already done" in line][:3] == [
        f"{d}: skipped (already done with {EVALUATOR_VERSION}; --force redoes it)" for d in days[:3]
    ]
    assert sum(1 for line in lines if ": 4 lines, " in line) == 4
    assert any(line.endswith("4 days run, 3 skipped (already done), 0 without logs") for line in lines)

    with connect(warehouse_path, read_only=True) as conn:
        per_day = conn.execute(
            "SELECT log_date, count(*), count(DISTINCT run_id) FROM agent_runs GROUP BY log_date ORDER BY log_date"
        ).fetchall()
        assert per_day == [(d, 4, 4) for d in days]
        assert conn.execute(
            "SELECT count(*), count(DISTINCT (log_date, evaluator_version)) FROM stored_days"
        ).fetchall() == [(7, 7)]
        assert conn.execute("SELECT count(*), count(DISTINCT run_id) FROM evaluations").fetchall() == [(28, 28)]
        assert conn.execute("SELECT count(*) FROM quarantine").fetchall() == [(0,)]
        assert all(day_is_done(conn, d, EVALUATOR_VERSION) for d in days)

    # the weekly report of that week, through the CLI and the weekly_report flow
    from prefect.artifacts import Artifact

    out = tmp_path / "reports" / "w48.html"
    report = CliRunner().invoke(
        app, ["report", "--week", "2026-W48", "--warehouse", str(warehouse_path), "--out", str(out)]
    )
    assert report.exit_code == 0, report.output
    assert f"HTML report: {out}" in report.stdout and "Weekly report 2026-W48" in report.stdout
    page = out.read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == 3 and "The 10 lowest-scoring queries" in page
    assert out.with_suffix(".md").is_file()
    artifact = cast(Artifact | None, Artifact.get(REPORT_ARTIFACT_KEY))  # sync call: not a coroutine
    assert artifact is not None and artifact.type == "table" and "2026-W48" in (artifact.description or "")
