"""Tests of flows/cli/nightly.py: `stef demo` and `stef nightly`; moved from tests/test_cli.py."""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest

from tests.flows.cli.cli_support import invoke


@pytest.fixture
def flow_cli(prefect_harness: None) -> None:
    """The Prefect harness, with Prefect's console logging set up before CliRunner swaps streams.

    Prefect configures its console handler when ``prefect.main`` is first imported and binds it
    to the ``sys.stderr`` of that moment; inside ``CliRunner.invoke`` that is a stream closed
    when the call returns, which would break logging in every later test.
    """
    import flows.nightly  # noqa: F401  (imports prefect.main)


def _bundled_day_counts() -> Counter[tuple[str, str]]:
    """Parseable records per (day, agent_version) in the bundled sample logs."""
    counts: Counter[tuple[str, str]] = Counter()
    root = resources.files("flows.demo_data")
    for folder in root.iterdir():
        if folder.is_dir() and folder.name[:2] == "20":
            for file in folder.iterdir():
                for line in file.read_text(encoding="utf-8").splitlines():
                    try:
                        counts[(folder.name, json.loads(line)["agent_version"])] += 1
                    except json.JSONDecodeError:
                        continue
    return counts


@pytest.mark.flow
@pytest.mark.usefixtures("flow_cli")
def test_demo_runs_the_nightly_flow_for_every_bundled_day(tmp_path: Path) -> None:
    from warehouse import connect, read_daily_metrics

    workdir = tmp_path / "demo dir [x]"  # the next commands are quoted for a shell, printed as text (not markup)
    result = invoke("demo", "--workdir", str(workdir))
    assert result.exit_code == 0, result.output
    tmp_path = workdir
    days = sorted({day for day, _ in _bundled_day_counts()})
    assert sorted(p.name for p in (tmp_path / "stef-demo" / "logs").iterdir()) == days
    assert (tmp_path / "stef-demo" / "labels.jsonl").is_file()
    for day in days:
        assert day in result.stdout
    # the day with a rejected line: its coverage is of all lines, the table's of each version's records
    assert re.search(
        r"2026-11-25: 120 lines, \d+ scored, \d+ unscored \(typed status\), [1-9]\d* quarantined, "
        r"coverage 9\d\.\d% of all lines",
        result.stdout,
    )
    # it ends with its result, the drift sentence, and next commands that work as printed
    tail = result.stdout.splitlines()
    verdict = next(
        i for i, line in enumerate(tail) if line.startswith("drift: bird-analyst v1.5.0 answers an estimated")
    )
    assert re.search(r": worse \(\+\d+ points, 95% CI \+\d+ points to \+\d+ points\)\.$", tail[verdict])
    assert tail[verdict + 1] == "Next:"
    drift_command, report_command = shlex.split(tail[verdict + 2]), shlex.split(tail[verdict + 3])
    warehouse = str(tmp_path / "stef-demo.duckdb")
    assert drift_command == ["stef", "drift", "--agent", "bird-analyst", "--warehouse", warehouse]
    assert report_command[:6] == ["stef", "report", "--warehouse", warehouse, "--week", "2026-W48"]
    again = invoke(*drift_command[1:], "--no-store", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["sentence"] == tail[verdict].removeprefix("drift: ")
    # the bundled labels: importing them and measuring STEF's calls work as printed
    check = next(i for i, line in enumerate(tail) if line.startswith("Check STEF's calls against the answers' labels"))
    imported = invoke(*shlex.split(tail[check + 1])[1:])
    assert imported.exit_code == 0, imported.output
    assert "1 rows of answers not stored left out (--skip-unknown)" in " ".join(imported.stdout.split())
    stats = invoke(*shlex.split(tail[check + 2])[1:], "--json")
    assert stats.exit_code == 0, stats.output
    labelled = (tmp_path / "stef-demo" / "labels.jsonl").read_text(encoding="utf-8").splitlines()
    measured = json.loads(stats.stdout)
    assert measured["n"] == len(labelled) - 1 and 0.5 < measured["auroc"] <= 1.0
    # a week without evaluations: the report says so, and names the newest stored week
    empty = invoke("report", "--warehouse", warehouse, "--week", "2026-W40", "--out", str(tmp_path / "w40.html"))
    assert empty.exit_code == 0, empty.output
    assert (
        f"No evaluations are stored for 2026-W40 in {warehouse}: the report says so; the newest stored day, "
        f"{days[-1]}, is in 2026-W48 (--week 2026-W48)."
    ) in " ".join(empty.stdout.split())
    conn = connect(str(tmp_path / "stef-demo.duckdb"))
    try:
        frame = read_daily_metrics(conn)
    finally:
        conn.close()
    stored = {
        (row["log_date"].isoformat(), row["agent_version"]): row["records"] for row in frame.iter_rows(named=True)
    }
    assert stored == dict(_bundled_day_counts())


def test_nightly_rejects_a_malformed_date_before_importing_prefect() -> None:
    result = invoke("nightly", "--date", "2026-13-01")
    assert result.exit_code == 2
    assert "--date" in result.output and "2026-13-01" in result.output


@pytest.mark.flow
@pytest.mark.usefixtures("flow_cli")
def test_nightly_without_logs_for_the_day_is_a_clean_error(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    result = invoke(
        "nightly",
        "--date",
        "2026-11-20",
        "--logs-root",
        str(tmp_path / "logs"),
        "--warehouse",
        str(tmp_path / "wh.duckdb"),
    )
    assert result.exit_code == 2
    assert "error:" in result.stderr and "2026-11-20" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.flow
@pytest.mark.usefixtures("flow_cli")
@pytest.mark.parametrize("command", ["nightly", "backfill"])
def test_a_folder_given_as_the_warehouse_is_one_error_before_any_flow_runs(tmp_path: Path, command: str) -> None:
    """It was DuckDB's "IO Error: Could not read from file ...: Is a directory", after Prefect's own
    ERROR lines of the failed flow run."""
    import shutil

    day = "2026-11-26"
    (tmp_path / "logs" / day).mkdir(parents=True)
    shutil.copyfile(
        str(resources.files("flows.demo_data") / day / "agent-logs.jsonl"), tmp_path / "logs" / day / "a.jsonl"
    )
    folder = tmp_path / "wh"
    folder.mkdir()
    days = ("--date", day) if command == "nightly" else ("--start", day, "--end", day)
    result = invoke(command, *days, "--logs-root", str(tmp_path / "logs"), "--warehouse", f"{folder}/")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        f"error: warehouse {folder} is a folder, not a DuckDB file; pass the file, e.g. --warehouse {folder / 'stef.duckdb'}"
    )
    assert "Flow run" not in result.output and list(folder.iterdir()) == []


@pytest.mark.flow
@pytest.mark.usefixtures("flow_cli")
def test_nightly_posts_a_worse_drift_to_the_notify_webhook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import date

    from stef.monitor.alerts import NOTIFY_WEBHOOK_ENV
    from tests.support.monitoring_support import write_log_day
    from tests.tasks.helpers import record
    from tests.tasks.test_drift import _Webhook

    day = date(2026, 11, 26)
    records = [record(f"a-{i}", "v1.0", i, correct=True) for i in range(30)]
    records += [record(f"b-{i}", "v1.1", i, correct=i % 2 == 0) for i in range(30)]
    write_log_day(tmp_path / "logs", day, records)
    monkeypatch.setenv("STEF_DRIFT_THRESHOLDS", json.dumps({"min_samples": 20, "n_resamples": 200}))
    monkeypatch.delenv(NOTIFY_WEBHOOK_ENV, raising=False)
    hook = _Webhook()
    try:
        result = invoke(
            *("nightly", "--date", day.isoformat(), "--logs-root", str(tmp_path / "logs")),
            *("--warehouse", str(tmp_path / "wh.duckdb"), "--notify-webhook", hook.url),
        )
        assert result.exit_code == 0, result.output
        sentence = next(line for line in result.stdout.splitlines() if line.startswith("drift: shop v1.1 "))
        assert hook.received == [{"text": sentence.removeprefix("drift: "), "mrkdwn": False}]
    finally:
        hook.close()
        monkeypatch.delenv(NOTIFY_WEBHOOK_ENV, raising=False)


@pytest.mark.flow
@pytest.mark.usefixtures("flow_cli")
def test_nightly_loads_the_lines_it_read_while_prefect_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`stef nightly` reads the day's files during its start-up and the flow's load task takes
    those lines (no second read); none are left in the process after the command."""
    from datetime import date

    import tasks.logs
    from tests.support.monitoring_support import write_log_day
    from tests.tasks.helpers import record

    day = date(2026, 11, 26)
    write_log_day(tmp_path / "logs", day, [record(f"a-{i}", "v1.0", i, correct=True) for i in range(5)])
    taken: list[int | None] = []
    take = tasks.logs._take_prefetched

    def recording_take(folder: Path, files: list[Path]) -> list[object] | None:
        lines = take(folder, files)
        taken.append(None if lines is None else len(lines))
        return lines

    monkeypatch.setattr(tasks.logs, "_take_prefetched", recording_take)
    result = invoke(
        *("nightly", "--date", day.isoformat(), "--logs-root", str(tmp_path / "logs")),
        *("--warehouse", str(tmp_path / "wh.duckdb")),
    )
    assert result.exit_code == 0, result.output
    assert taken == [5] and tasks.logs._PREFETCHED == {}
    assert "2026-11-26: 5 lines, 5 scored" in " ".join(result.stdout.split())


@pytest.mark.flow
@pytest.mark.usefixtures("flow_cli")
def test_a_day_that_fails_validation_keeps_its_rejected_lines_to_inspect(tmp_path: Path) -> None:
    from tests.tasks.helpers import record

    day_folder = tmp_path / "logs" / "2026-11-26"
    day_folder.mkdir(parents=True)
    good = [json.dumps(record(f"ok-{i}", "v1", i, correct=True)) for i in range(3)]
    bad_time = json.dumps({**record("late", "v1", 7, correct=True), "timestamp": "yesterday-ish"})
    no_sql = json.dumps({k: v for k, v in record("nosql", "v1", 8, correct=True).items() if k != "sql"})
    (day_folder / "agent.jsonl").write_text("\n".join([*good, "not json", no_sql, bad_time]) + "\n", encoding="utf-8")
    warehouse = tmp_path / "wh.duckdb"
    result = invoke(
        *("nightly", "--date", "2026-11-26", "--logs-root", str(tmp_path / "logs"), "--warehouse", str(warehouse))
    )
    assert result.exit_code == 2
    error = result.stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: 3 of 6 log lines in ")
    source = day_folder / "agent.jsonl"
    assert f"first bad lines: {source}:4: " in error[0]  # file:line: reason, so the logs can be fixed
    assert "The 3 rejected lines are stored in the warehouse's quarantine table" in error[0]
    # the command to list them works as printed: the day and the warehouse of the run (it said `--date DAY`)
    assert f"(`stef quarantine --date 2026-11-26 --warehouse {warehouse}`)" in error[0]

    listed = invoke("quarantine", "--date", "2026-11-26", "--warehouse", str(warehouse), "--json")
    assert listed.exit_code == 0, listed.output
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(row["source_file"], row["line_number"]) for row in rows] == [(str(source), n) for n in (4, 5, 6)]
    assert "timestamp" in rows[2]["reason"] and "yesterday-ish" in rows[2]["reason"]
    table = invoke("quarantine", "--date", "2026-11-26", "--warehouse", str(warehouse))
    assert f"{source}:5" in " ".join(table.stdout.split())
    never = invoke("quarantine", "--date", "2026-11-25", "--warehouse", str(warehouse))  # no run stored that day
    assert (never.exit_code, never.stdout) == (0, "")
    assert "2026-11-25 is not stored in" in " ".join(never.stderr.split())


@pytest.mark.flow
@pytest.mark.usefixtures("flow_cli")
def test_report_headline_and_stef_drift_agree_after_nightly_then_backfill(tmp_path: Path) -> None:
    """Issue 17 acceptance: the newest demo day by `stef nightly`, the earlier ones by `stef backfill`;
    then the report's headline (sentence and estimated share of wrong answers) says what `stef drift` says."""
    import shutil

    root = resources.files("flows.demo_data")
    days = sorted(folder.name for folder in root.iterdir() if folder.is_dir() and folder.name[:2] == "20")
    logs = tmp_path / "logs"
    for day in days:
        (logs / day).mkdir(parents=True)
        shutil.copyfile(str(root / day / "agent-logs.jsonl"), logs / day / "agent-logs.jsonl")
    warehouse = str(tmp_path / "wh.duckdb")
    common = ("--logs-root", str(logs), "--warehouse", warehouse, "--quiet")
    night = invoke("nightly", "--date", days[-1], *common)
    assert night.exit_code == 0, night.output
    back = invoke("backfill", "--start", days[0], "--end", days[-2], *common)
    assert back.exit_code == 0, back.output

    drift = invoke("drift", "--agent", "bird-analyst", "--warehouse", warehouse, "--no-store", "--json")
    assert drift.exit_code == 0, drift.output
    check = json.loads(drift.stdout)
    report = invoke("report", "--warehouse", warehouse, "--week", "2026-W48", "--out", str(tmp_path / "r.html"))
    assert report.exit_code == 0, report.output
    markdown = (tmp_path / "r.md").read_text(encoding="utf-8")
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    sentence = check["sentence"]
    assert check["verdict"] == "drift" and check["direction"] == "worse"
    assert markdown.split("\n- **", 1)[1].split("**\n", 1)[0].replace("\\(", "(").replace("\\)", ")") == sentence
    assert sentence in " ".join(report.stdout.split()) or sentence in report.stdout.replace("\n", " ")
    assert sentence.split(";")[0] in html
    # the headline's estimated share of wrong answers is the check's candidate and baseline estimate
    candidate = f"{100 * check['error_rate_candidate']:.0f} % [{100 * check['error_rate_candidate_ci'][0]:.0f}–"
    baseline = f"{100 * check['error_rate_baseline']:.0f} % [{100 * check['error_rate_baseline_ci'][0]:.0f}–"
    headline = markdown.split("## Headline\n\n", 1)[1].split("\n\n", 1)[0]
    assert f"| {check['candidate_version']} | " in headline and candidate in headline and baseline in headline
    assert candidate in html and f"{100 * check['error_rate_candidate']:.0f} %" in sentence
