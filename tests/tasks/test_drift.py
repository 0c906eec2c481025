"""Tests of tasks/drift.py: the night's checks stored by the task, its thresholds and alert texts on real checks,
the doctests, and the nightly drift step under the session's Prefect test harness (alert event, artifact, a failing
check that loses nothing)."""

from __future__ import annotations

import doctest
import json
from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest

import stef.monitor.alerts
import stef.monitor.formatting
import tasks.backfill
import tasks.drift
import tasks.drift_checks
from stef.models import EVALUATOR_VERSION
from stef.monitor.alerts import DRIFT_EVENT, drift_event, drift_markdown
from stef.monitor.drift import thresholds_from_env
from stef.monitor.models import DriftError, DriftThresholds
from tasks.drift import DRIFT_ARTIFACT_KEY, check_drift
from tasks.drift_checks import run_drift_check
from tests.support.monitoring_support import write_log_day
from tests.tasks.helpers import MONDAY, _wait_for_drift_event, record
from tests.warehouse.monitoring_helpers import FAST, day
from warehouse import connect, day_is_done
from warehouse.monitoring import (
    read_drift_checks,
)


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
    assert "| v1 → v2.0 |" in rows[0] and "**drift** | worse | – | – | -10.00 [" in rows[0]


def test_task_module_doctests() -> None:
    for module in (tasks.drift, tasks.drift_checks, tasks.backfill, stef.monitor.alerts, stef.monitor.formatting):
        assert doctest.testmod(module).failed == 0, module.__name__


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
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


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_checks_are_never_stale_after_a_backfill_of_earlier_days(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`stef nightly` for the newest day, then `stef backfill` of the days before: the report, the artifact and
    `stef drift` give the same verdict on the newest day's check, computed on every day now stored."""
    from prefect.artifacts import Artifact

    from flows.backfill import backfill
    from flows.nightly import nightly
    from stef.display import md_text
    from tasks.report import collect

    logs = tmp_path / "logs"
    sunday = MONDAY + timedelta(days=6)
    for offset in range(7):
        today = MONDAY + timedelta(days=offset)
        records = [record(f"{today}-a-{i}", "v1.0", 100 * offset + i, correct=True) for i in range(15)]
        records += [record(f"{today}-b-{i}", "v1.1", 100 * offset + i, correct=i % 3 == 0) for i in range(15)]
        write_log_day(logs, today, records)
    warehouse_path = tmp_path / "wh.duckdb"
    thresholds = {"min_samples": 20, "n_resamples": 300}
    monkeypatch.setenv("STEF_DRIFT_THRESHOLDS", json.dumps(thresholds))

    newest = nightly(log_date=sunday, logs_root=str(logs), warehouse=str(warehouse_path))
    first = {c["kind"]: c for c in newest.drift_checks}
    assert (first["version"]["verdict"], first["version"]["n_baseline"]) == ("insufficient_data", 15)

    backfill(start=MONDAY, end=sunday - timedelta(days=1), logs_root=str(logs), warehouse=str(warehouse_path))

    with connect(warehouse_path, read_only=True) as conn:
        stored = [
            row
            for row in read_drift_checks(conn).to_dicts()
            if row["window_end"] == sunday and row["kind"] == "version"
        ]
        report = collect(conn, "wh", "2026-W48")
    assert len(stored) == 1, stored  # recomputed in place, never duplicated
    check = stored[0]
    assert (check["verdict"], check["direction"], check["n_baseline"], check["n_candidate"]) == (
        "drift",
        "worse",
        105,
        105,
    )
    # every v1.0 answer is a clean one the judge is surer of than its operating point allows (a share of
    # wrong answers below 0 with its whole interval): that share is not estimated, and Φ decides
    assert check["error_rate_delta"] is None
    assert check["sentence"].startswith("shop v1.1 scores a mean Φ of ") and ": worse" in check["sentence"]

    headline = {row["agent_version"]: row for row in report.headline}
    assert (headline["v1.1"]["drift_verdict"], headline["v1.1"]["drift_direction"]) == ("drift", "worse")
    assert headline["v1.1"]["drift_sentence"] == check["sentence"]

    artifact = cast(Artifact | None, Artifact.get(DRIFT_ARTIFACT_KEY))  # the last night's: Saturday's backfill
    assert artifact is not None
    text = str(artifact.data)
    assert "## Checks recomputed: this day falls in their windows" in text
    assert md_text(check["sentence"]) in text

    live = run_drift_check(warehouse_path, "shop", store=False, thresholds=DriftThresholds(**thresholds)).summary()
    assert (live["verdict"], live["direction"], live["sentence"]) == ("drift", "worse", check["sentence"])
    assert live["error_rate_delta"] is None


class _Webhook:
    """A Slack-compatible incoming webhook on 127.0.0.1 that records the JSON bodies posted to it."""

    def __init__(self, status: int = 200) -> None:
        import http.server
        import threading

        received: list[dict[str, object]] = []
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/drift"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.usefixtures("prefect_harness")
def test_new_worse_drifts_are_posted_to_the_webhook_as_their_sentence(
    rollout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect import flow

    from stef.monitor.alerts import NOTIFY_WEBHOOK_ENV
    from tasks.drift import notify_webhook, publish_drift

    checks = check_drift.fn(str(rollout), day(6), EVALUATOR_VERSION, FAST)
    worse = [c for c in checks if c["verdict"] == "drift" and c["direction"] == "worse"]
    assert len(worse) == 1
    hook = _Webhook()
    try:
        monkeypatch.setenv(NOTIFY_WEBHOOK_ENV, hook.url)
        hostile = {**worse[0], "recomputed": True, "previous_verdict": "no_drift", "previous_direction": None}
        hostile["sentence"] = "bird <!channel> v2.0 & *co*: " + worse[0]["sentence"]

        @flow
        def night() -> None:
            publish_drift([*checks, hostile], day(6))
            publish_drift([{**hostile, "previous_verdict": "drift", "previous_direction": "worse"}], day(6))

        night()
        assert hook.received == [
            {"text": worse[0]["sentence"], "mrkdwn": False},
            {"text": "bird &lt;!channel&gt; v2.0 &amp; *co*: " + worse[0]["sentence"], "mrkdwn": False},
        ]  # the night's worse check and the recomputed one that newly turned worse; not the one already worse
    finally:
        hook.close()
    failing = _Webhook(status=500)
    try:
        assert notify_webhook(failing.url, worse[0]) is False  # logged, never raised: the night goes on
    finally:
        failing.close()
    assert notify_webhook("http://127.0.0.1:9/unreachable", worse[0], timeout_s=1.0) is False
