"""Flow test of tasks/backfill.py under the session's Prefect test harness: an interrupted and resumed backfill
through ``stef backfill``."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from stef.models import EVALUATOR_VERSION
from tasks.report import REPORT_ARTIFACT_KEY
from tests.support.monitoring_support import write_log_day
from tests.tasks.helpers import MONDAY, record
from warehouse import connect, day_is_done

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]


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


class _Stopped(BaseException):
    """A kill during the drift checks (as SIGKILL would stop the process there)."""


def test_a_day_stopped_during_its_drift_checks_is_not_done_and_a_rerun_checks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The day was marked done with its metrics, before the drift checks: a run killed during them
    left it done without its checks, and the next backfill skipped it."""
    import flows.nightly
    from flows.nightly import nightly
    from warehouse.monitoring import read_drift_checks

    logs = tmp_path / "logs"
    day = MONDAY
    write_log_day(logs, day, [record(f"{day}-{i}", "v1.0", i, correct=i != 3) for i in range(4)])
    warehouse_path = tmp_path / "wh.duckdb"
    real_step = flows.nightly.nightly_drift_step

    def stopped(*args: object, **kwargs: object) -> object:
        raise _Stopped

    monkeypatch.setattr(flows.nightly, "nightly_drift_step", stopped)
    with pytest.raises(_Stopped):
        nightly(log_date=day, logs_root=str(logs), warehouse=str(warehouse_path))
    with connect(warehouse_path, read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM daily_agent_metrics").fetchone() == (1,)  # stored, metrics too
        assert not day_is_done(conn, day, EVALUATOR_VERSION)  # but not done: its checks did not run
    monkeypatch.setattr(flows.nightly, "nightly_drift_step", real_step)
    arguments = ["backfill", "--start", day.isoformat(), "--end", day.isoformat()]
    rerun = CliRunner().invoke(app, [*arguments, "--logs-root", str(logs), "--warehouse", str(warehouse_path)])
    assert rerun.exit_code == 0, rerun.output
    assert "1 days run, 0 skipped" in " ".join(rerun.stdout.split()) or "1 day run, 0 skipped" in " ".join(
        rerun.stdout.split()
    )
    with connect(warehouse_path, read_only=True) as conn:
        assert day_is_done(conn, day, EVALUATOR_VERSION)
        assert read_drift_checks(conn).height >= 1  # the checks of the day ran
        assert conn.execute("SELECT count(*) FROM agent_runs").fetchone() == (4,)
