"""Tests of the monitoring commands of the CLI (flows/cli/monitoring.py) that run no flow:
``stef drift``, ``stef serve --check``, and the errors of every command before any work."""

from __future__ import annotations

import json
import shutil
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from stef.models import EVALUATOR_VERSION, FilterStatus, Verdict
from tasks.drift_checks import run_drift_check
from tests.support.monitoring_support import answers, store_answers
from warehouse import connect
from warehouse.monitoring import read_drift_checks

D1 = date(2026, 11, 20)
SUMMARY_KEYS = {
    "verdict",
    "direction",
    "n_baseline",
    "n_candidate",
    "mean_delta",
    "mean_delta_ci",
    "ks_pvalue",
    "psi",
    "wasserstein_norm",
    "error_rate_baseline",
    "error_rate_baseline_ci",
    "error_rate_candidate",
    "error_rate_candidate_ci",
    "error_rate_delta",
    "error_rate_delta_ci",
    "error_rate_with_unscored_baseline",
    "error_rate_with_unscored_candidate",
    "error_rate_with_unscored_delta",
    "error_rate_with_unscored_delta_ci",
    "error_rate_method",
    "category_shifts",
    "paired_questions",
    "paired_error_rate_delta",
    "paired_error_rate_delta_ci",
    "sentence",
}


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Agent ``bird``: v1 (scores 70/90) on days 0–6, v2 (60/80) on days 3–6; agent ``small`` with 20 answers per version."""
    path = tmp_path_factory.mktemp("cli") / "wh.duckdb"
    with connect(path) as conn:
        for offset in range(7):
            day = D1 + timedelta(days=offset)
            batch = answers(f"v1-{offset}", "bird", "v1", [70.0, 90.0] * 20)
            if offset >= 3:
                batch += answers(
                    f"v2-{offset}",
                    "bird",
                    "v2",
                    [60.0, 80.0] * 20,
                    verdict=Verdict.POTENTIALLY_INCORRECT,
                    filter_status=FilterStatus.PARTIALLY_APPLIED,
                )
            if offset == 6:
                batch += answers("s1", "small", "a", [50.0, 70.0] * 10) + answers("s2", "small", "b", [10.0, 30.0] * 10)
            store_answers(conn, day, batch)
    return path


@pytest.fixture
def warehouse_file(template: Path, tmp_path: Path) -> Path:
    path = tmp_path / "wh.duckdb"
    shutil.copyfile(template, path)
    return path


def test_drift_json_is_one_line_with_the_contract_keys(warehouse_file: Path) -> None:
    result = _invoke("drift", "--warehouse", str(warehouse_file), "--agent", "bird", "--json")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    summary = json.loads(lines[0])
    assert summary.keys() >= SUMMARY_KEYS
    assert (summary["verdict"], summary["direction"], summary["n_baseline"], summary["n_candidate"]) == (
        "drift",
        "worse",
        280,
        160,
    )
    assert summary["mean_delta"] == pytest.approx(-10.0)
    expected = run_drift_check(warehouse_file, "bird", store=False).summary()
    assert summary == expected  # same seed, same intervals
    with connect(warehouse_file, read_only=True) as conn:
        stored = read_drift_checks(conn).to_dicts()
    assert [(r["agent_id"], r["source"], r["verdict"]) for r in stored] == [("bird", "cli", "drift")]


def test_drift_tables_name_the_verdict_and_statistics(warehouse_file: Path) -> None:
    result = _invoke(
        "drift",
        "--warehouse",
        str(warehouse_file),
        "--agent",
        "bird",
        "--baseline",
        "v1",
        "--candidate",
        "v2",
        "--start",
        "2026-11-23",
        "--end",
        "2026-11-26",
        "--no-store",
    )
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "drift / worse" in out
    # the synthetic rows carry no p_correct (as rows stored before migration 0005): mean Φ decides, and says so
    assert "in short bird v2 scores a mean Φ of 70.0, against 80.0 for v1: worse." in out
    assert "v1 2026-11-23 … 2026-11-26 (160 scored of 160)" in out
    assert "mean delta -10" in out and "reaches the threshold 1.25 Φ points" in out
    for name in (
        "wrong answers (estimated)",
        "wrong, unscored counted",
        "mean Φ",
        "P90 Φ",
        "coverage",
        "KS p-value",
        "Wasserstein / σ",
        "PSI (10-point bins)",
        "χ² verdict p",
    ):
        assert name in out
    with connect(warehouse_file, read_only=True) as conn:
        assert read_drift_checks(conn).height == 0


@pytest.mark.parametrize(
    ("args", "verdict"),
    [
        pytest.param(("--agent", "small"), "insufficient_data", id="twenty_per_side"),
        pytest.param(("--agent", "small", "--min-samples", "10"), "drift", id="lower_minimum"),
        pytest.param(("--agent", "small", "--min-samples", "10", "--mean-delta", "50"), "drift", id="p90_still_fires"),
        pytest.param(
            ("--agent", "small", "--min-samples", "10", "--mean-delta", "50", "--p90-delta", "50"),
            "no_drift",
            id="higher_effect_thresholds",
        ),
        pytest.param(
            ("--agent", "bird", "--temporal", "--candidate", "v1", "--window-days", "3"), "no_drift", id="temporal"
        ),
    ],
)
def test_drift_thresholds_and_kinds_from_options(warehouse_file: Path, args: tuple[str, ...], verdict: str) -> None:
    result = _invoke("drift", "--warehouse", str(warehouse_file), "--json", "--no-store", *args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verdict"] == verdict


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ("--agent", "nobody"),
            r"agent 'nobody' has no evaluations in .* \(agents with evaluations: bird, small\)",
            id="unknown_agent",
        ),
        pytest.param(
            ("--agent", "bird", "--candidate", "v7"),
            r"agent 'bird' has no candidate version 'v7' \(its versions, oldest first: v1, v2\)",
            id="unknown_version",
        ),
        pytest.param(
            ("--agent", "bird", "--start", "2026-11-26", "--end", "2026-11-25"),
            r"window end 2026-11-25 is before its start 2026-11-26",
            id="empty_window",
        ),
        pytest.param(
            ("--agent", "bird", "--start", "2026-11-26", "--end", "2026-11-01"),
            r"window end 2026-11-01 is before its start 2026-11-26",
            id="end_before_start_and_every_version",
        ),
        pytest.param(
            ("--agent", "bird", "--temporal", "--start", "0001-01-01"),
            r"a date out of range: the options put a day before 0001-01-01 or after 9999-12-31",
            id="window_before_year_one",
        ),
        pytest.param(
            ("--agent", "bird", "--window-days", "1000000"),
            r"Invalid value for '--window-days'",
            id="window_of_three_thousand_years",
        ),
        pytest.param(
            ("--agent", "bird", "--end", "2026-11-21"),
            r"agent 'bird' has no version before 'v1' to compare with",
            id="one_version_up_to_the_end",
        ),
        pytest.param(
            ("--agent", "bird", "--temporal", "--baseline", "v1"),
            r"--baseline does not apply to --temporal",
            id="temporal_with_baseline",
        ),
    ],
)
def test_drift_errors_are_one_line_and_exit_2(warehouse_file: Path, args: tuple[str, ...], message: str) -> None:
    import re

    result = _invoke("drift", "--warehouse", str(warehouse_file), *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert re.search(r"^error: " + message, result.stderr), result.stderr


def test_drift_on_a_missing_warehouse_creates_nothing(tmp_path: Path) -> None:
    result = _invoke("drift", "--warehouse", str(tmp_path / "none.duckdb"), "--agent", "bird")
    assert result.exit_code == 2
    assert "does not exist; run `stef nightly` or `stef backfill` first" in result.stderr
    assert not (tmp_path / "none.duckdb").exists()


def _deny_writing(monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB refuses to open any file for writing, as for a file the user may only read (the
    tests may run as root, for whom file modes do not apply): the message DuckDB gives then."""
    import duckdb

    real_connect = duckdb.connect

    def connect_read_only(database: str = ":memory:", read_only: bool = False, **kwargs: Any) -> Any:
        if not read_only and database != ":memory:":
            raise duckdb.IOException(f'IO Error: Cannot open file "{database}": Permission denied')
        return real_connect(database, read_only=read_only, **kwargs)

    monkeypatch.setattr(duckdb, "connect", connect_read_only)


def test_drift_on_a_warehouse_it_may_not_write_suggests_no_store(
    warehouse_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _deny_writing(monkeypatch)
    denied = _invoke("drift", "--warehouse", str(warehouse_file), "--agent", "bird")
    assert denied.exit_code == 2 and denied.stdout == ""
    assert "Permission denied (to run the check without recording it, add --no-store" in denied.stderr
    read_only = _invoke("drift", "--warehouse", str(warehouse_file), "--agent", "bird", "--no-store", "--json")
    assert read_only.exit_code == 0, read_only.output
    assert json.loads(read_only.stdout)["verdict"] == "drift"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("report", "--week", "2026-11-23"), "week '2026-11-23' is not an ISO week", id="report_bad_week"),
        pytest.param(
            ("report", "--week", "2026-W48", "--warehouse", "{missing}"),
            "does not exist; run `stef nightly`",
            id="report_missing_warehouse",
        ),
        pytest.param(
            ("report", "--week", "2026-W48", "--out", "{tmp}/week.xlsx"),
            "stef report writes an HTML page and its Markdown twin, not a .xlsx file; name it",
            id="report_workbook_name",
        ),
        pytest.param(
            ("backfill", "--start", "2026-11-26", "--end", "2026-11-20"),
            "backfill end 2026-11-20 is before its start 2026-11-26",
            id="backfill_reversed",
        ),
        pytest.param(
            ("backfill", "--start", "2000-01-01", "--end", "2026-11-20"),
            "longer than the limit of 3660",
            id="backfill_too_long",
        ),
        pytest.param(
            ("serve", "--timezone", "Mars/Olympus", "--check"),
            "--timezone 'Mars/Olympus' is not an IANA time zone",
            id="serve_timezone",
        ),
        pytest.param(
            ("serve", "--weekly-cron", "monday", "--check"),
            "--weekly-cron 'monday' is not a valid cron expression",
            id="serve_cron",
        ),
    ],
)
def test_bad_options_fail_before_any_work(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = _invoke(
        *[a.replace("{missing}", str(tmp_path / "none.duckdb")).replace("{tmp}", str(tmp_path)) for a in args]
    )
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.stderr.split())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ("report", "--week", "2026-W48"),
        ("drift", "--agent", "bird"),
        ("quarantine", "--date", "2026-11-24"),
        ("export", "--start", "2026-11-24", "--end", "2026-11-26", "--out", "{tmp}/x.csv"),
        ("review", "stats"),
        ("catalog", "learn", "--out", "{tmp}/catalog.json"),
    ],
    ids=lambda command: command[0] if isinstance(command, tuple) else str(command),
)
def test_a_warehouse_that_is_a_folder_is_named_as_one(tmp_path: Path, command: tuple[str, ...]) -> None:
    """``--warehouse data/`` (a folder that exists) was refused with "warehouse data does not exist"."""
    folder = tmp_path / "data"
    folder.mkdir()
    result = _invoke(*[a.replace("{tmp}", str(tmp_path)) for a in command], "--warehouse", str(folder))
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: warehouse {folder} is a folder, not a DuckDB file; pass the file, e.g. --warehouse "
        f"{folder / 'stef.duckdb'}\n"
    )
    assert list(folder.iterdir()) == []


def test_quarantine_of_a_day_without_rejected_lines_says_so_in_one_line(warehouse_file: Path) -> None:
    """A stored day whose every line was read printed a table title and headers without a row."""
    line = f"no quarantined lines on 2026-11-20 in {warehouse_file}: every log line of that day was read\n"
    table = _invoke("quarantine", "--date", "2026-11-20", "--warehouse", str(warehouse_file))
    assert (table.exit_code, table.stdout, table.stderr) == (0, line, "")
    as_json = _invoke("quarantine", "--date", "2026-11-20", "--warehouse", str(warehouse_file), "--json")
    assert (as_json.exit_code, as_json.stdout, as_json.stderr) == (0, "", line)  # no JSON object, the line aside


def test_quarantine_json_writes_the_terminal_controls_of_a_raw_line_as_escapes(tmp_path: Path) -> None:
    """``--json`` (``ensure_ascii=False``) wrote the C1 control ``\\x9b`` (an 8-bit CSI) and bidi
    overrides of a stored raw line as they are, for the terminal to act on."""
    from datetime import date

    from tests.warehouse.helpers import bad_line
    from warehouse import store_day

    raw = '{"run_id": "r1\u202etxt.exe", "question": 5, "sql": "x\x9b2J\x7f \u2028é"}'
    warehouse = tmp_path / "wh.duckdb"
    with connect(warehouse) as conn:
        store_day(conn, date(2026, 11, 20), [bad_line(1, raw.encode())], [])
    result = _invoke("quarantine", "--date", "2026-11-20", "--warehouse", str(warehouse), "--json")
    assert result.exit_code == 0, result.output
    (line,) = result.stdout.splitlines()
    assert not any(char in line for char in "\x9b\x7f\u202e\u2028") and "é" in line
    assert "\\u009b2J\\u007f \\u2028é" in line and "r1\\u202etxt.exe" in line
    assert json.loads(line)["raw"] == raw  # the same text, escaped


def test_serve_check_prints_the_schedules() -> None:
    result = _invoke("serve", "--check", "--timezone", "Europe/Zurich", "--warehouse", "/data/wh.duckdb")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "STEF deployments (schedules fire only with a Prefect server):"
    assert lines[1] == (
        "  stef-nightly: flows.nightly.nightly, schedule 0 2 * * * (Europe/Zurich), "
        'parameters {"logs_root": "./logs", "warehouse": "/data/wh.duckdb"}'
    )
    assert lines[2].startswith(
        "  stef-weekly-report: flows.weekly_report.weekly_report, schedule 0 6 * * 1 (Europe/Zurich), "
    )
    assert lines[3].startswith("  stef-backfill: flows.backfill.backfill, no schedule (run on demand), ")


def test_serve_without_a_server_explains_how_to_start_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        result = _invoke("serve")
    assert result.exit_code == 2
    assert "stef serve needs a Prefect server for its schedules: start one with `prefect server start`" in " ".join(
        result.stderr.split()
    )


def test_help_lists_the_monitoring_commands() -> None:
    result = _invoke("--help")
    assert result.exit_code == 0
    for command in ("drift", "backfill", "report", "serve"):
        assert f" {command} " in result.stdout


def test_export_writes_the_window_for_a_bi_tool(warehouse_file: Path, tmp_path: Path) -> None:
    import duckdb

    out = tmp_path / "exports" / "w48.parquet"
    result = _invoke(
        "export", "--warehouse", str(warehouse_file), "--start", "2026-11-20", "--end", "2026-11-26", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    with connect(warehouse_file, read_only=True) as conn:
        (stored,) = conn.execute("SELECT count(*) FROM evaluations").fetchall()
    (exported,) = duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}')").fetchall()
    assert exported == stored
    assert " ".join(result.stdout.split()).startswith(f"exported {stored[0]} evaluations of ")
    reversed_window = _invoke(
        "export", "--warehouse", str(warehouse_file), "--start", "2026-11-26", "--end", "2026-11-20", "--out", str(out)
    )
    assert (reversed_window.exit_code, reversed_window.stderr.strip()) == (
        2,
        "error: export end 2026-11-20 is before its start 2026-11-26",
    )


def test_export_of_an_agent_without_evaluations_names_the_agent(warehouse_file: Path, tmp_path: Path) -> None:
    window = ("--start", "2026-11-20", "--end", "2026-11-26", "--out", str(tmp_path / "x.csv"))
    result = _invoke("export", "--warehouse", str(warehouse_file), *window, "--agent", "nobody")
    assert result.exit_code == 2
    assert " ".join(result.stderr.split()).startswith("error: no evaluations of agent 'nobody' in ")


@pytest.mark.parametrize(
    "options",
    [(), ("--no-store",), ("--evaluator-version", "stef-0.2.0+symbolic-10")],
    ids=["storing", "no_store", "evaluator_version"],
)
def test_drift_leaves_an_empty_duckdb_file_as_it_is(tmp_path: Path, options: tuple[str, ...]) -> None:
    """stef drift (which stores its check) on an empty DuckDB file, e.g. a wrong --warehouse, created
    the 15 STEF tables in it before saying the agent has no evaluations; now it says, as the
    read-only commands do, that the file holds no STEF tables, and leaves it without tables."""
    empty = tmp_path / "other.duckdb"
    duckdb.connect(str(empty)).close()
    result = _invoke("drift", "--agent", "bird", "--warehouse", str(empty), *options)
    assert result.exit_code == 2, result.output
    assert " ".join(result.stderr.split()).startswith(
        f"error: warehouse {empty} holds no STEF tables yet (no migration applied: an empty DuckDB file"
    )
    with duckdb.connect(str(empty), read_only=True) as conn:
        assert conn.execute("SHOW TABLES").fetchall() == []


@pytest.mark.parametrize(
    "command",
    [
        ("export", "--start", "2026-11-20", "--end", "2026-11-26", "--out", "{tmp}/x.csv"),
        ("report", "--week", "2026-W48", "--out", "{tmp}/r.html"),
        ("drift", "--agent", "bird", "--no-store"),
        ("drift", "--agent", "bird"),
    ],
)
def test_an_evaluator_version_the_warehouse_never_stored_is_an_error(
    warehouse_file: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A mistyped --evaluator-version wrote an empty export ("exported 0 evaluations of nope") or
    an empty report ("No evaluations are stored for 2026-W48"), exit code 0, as if the week had none;
    stef drift said "(agents with evaluations: none)", as if the warehouse held no evaluation."""
    args = [part.replace("{tmp}", str(tmp_path)) for part in command]
    result = _invoke(*args, "--warehouse", str(warehouse_file), "--evaluator-version", "stef-0.2.0+symbolc-7")
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert message == (
        f"error: --evaluator-version 'stef-0.2.0+symbolc-7': no evaluation of that version is stored in "
        f"{warehouse_file} (stored, newest first: {EVALUATOR_VERSION})"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["wh.duckdb"]  # nothing written
    with connect(warehouse_file, read_only=True) as conn:
        assert read_drift_checks(conn).height == 0  # no drift check stored either


@pytest.mark.parametrize("kind", ["existing_folder", "trailing_slash"])
def test_export_to_a_folder_says_a_file_name_is_needed(warehouse_file: Path, tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "exports"
    if kind == "existing_folder":
        folder.mkdir()
        out = str(folder)
    else:
        out = f"{folder}/"
    window = ("--start", "2026-11-20", "--end", "2026-11-26")
    result = _invoke("export", "--warehouse", str(warehouse_file), *window, "--out", out)
    assert result.exit_code == 2, result.output
    assert " ".join(result.stderr.split()) == (
        f"error: export output {out} is a folder; pass a file name, e.g. {folder}/evaluations.csv"
    )
    assert (folder.is_dir() and not any(folder.iterdir())) if kind == "existing_folder" else not folder.exists()


@pytest.mark.parametrize("name", ["week.xlsx", "week.XLS", "week.ods"])
def test_export_to_a_workbook_name_is_refused(warehouse_file: Path, tmp_path: Path, name: str) -> None:
    """``--out week.xlsx`` wrote CSV text under a workbook's name, which Excel refuses to open."""
    out = tmp_path / name
    window = ("--start", "2026-11-20", "--end", "2026-11-26")
    result = _invoke("export", "--warehouse", str(warehouse_file), *window, "--out", str(out))
    assert result.exit_code == 2, result.output
    suffix = out.suffix.lower()
    assert " ".join(result.stderr.split()) == (
        f"error: --out {out}: stef export writes CSV, Parquet or JSON lines, not {suffix} workbooks; "
        f"name it {out.with_suffix('.csv')} (a spreadsheet opens it)"
    )
    assert not out.exists()
    forced = _invoke("export", "--warehouse", str(warehouse_file), *window, "--out", str(out), "--format", "csv")
    assert forced.exit_code == 0, forced.output  # an explicit --format is what was asked for
    assert out.read_text(encoding="utf-8").startswith("log_date,run_id,")


def test_export_csv_shows_formulas_of_the_logs_as_text(tmp_path: Path) -> None:
    import csv

    path = tmp_path / "wh.duckdb"
    with connect(path) as conn:
        store_answers(conn, D1, answers("=cmd|' /C calc'!A0", "@agent", "-v1", [80.0]))
    out = tmp_path / "ex.csv"
    result = _invoke(
        "export", "--warehouse", str(path), "--start", "2026-11-20", "--end", "2026-11-20", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    with out.open(encoding="utf-8", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["run_id"], row["agent_id"], row["agent_version"], row["score"]) == (
        "'=cmd|' /C calc'!A0-0",
        "'@agent",
        "'-v1",
        "80.0",
    )


def test_drift_names_the_answers_only_another_evaluator_version_scored(warehouse_file: Path) -> None:
    """Days 0–2 scored before ``--schema-dir`` (another evaluator version): the check of the newest
    version compares v1's days 3–6 only; it said nothing of the 120 answers of v1 and the 40 of v2 it could not see."""
    from stef.models import EVALUATOR_VERSION

    with connect(warehouse_file) as conn:
        for table in ("evaluations", "daily_agent_metrics"):
            conn.execute(
                f"UPDATE {table} SET evaluator_version = 'stef-old' WHERE log_date < ? "
                "OR (agent_version = 'v2' AND log_date = ?)",  # and the candidate's first day
                [D1 + timedelta(3), D1 + timedelta(3)],
            )
    args = ("drift", "--warehouse", str(warehouse_file), "--agent", "bird", "--start", "2026-11-20", "--no-store")
    summary = json.loads(_invoke(*args, "--json").stdout)
    assert (summary["evaluator_version"], summary["n_baseline"], summary["n_candidate"]) == (
        EVALUATOR_VERSION,
        160,
        120,
    )
    assert summary["left_out"] == [
        {
            "side": "baseline",
            "agent_version": "v1",
            "evaluator_version": "stef-old",
            "evaluations": 120,
            "first_day": "2026-11-20",
            "last_day": "2026-11-22",
        },
        {
            "side": "candidate",
            "agent_version": "v2",
            "evaluator_version": "stef-old",
            "evaluations": 40,
            "first_day": "2026-11-23",
            "last_day": "2026-11-23",
        },
    ]
    shown = " ".join(_invoke(*args).stdout.split())
    assert (
        "left out baseline: 120 answers of v1 (2026-11-20 … 2026-11-22) scored only by evaluator stef-old, not "
        "compared; to compare like with like, score those days again with the same options (stef backfill --force)"
    ) in shown


def test_drift_of_a_named_evaluator_version_migrates_an_older_warehouse_as_without_it(warehouse_file: Path) -> None:
    """The check of --evaluator-version opened the warehouse read-only first: on a warehouse of an
    older schema that open is refused ("open it once for writing"), while the same command without
    the option migrated it and ran. Opened as the command opens it, both run."""
    from stef.models import EVALUATOR_VERSION

    with connect(warehouse_file) as conn:  # the schema before migration 0010
        conn.execute("DROP TABLE campaign_skipped")
        conn.execute("DELETE FROM schema_version WHERE version = 10")
    result = _invoke(
        "drift",
        "--warehouse",
        str(warehouse_file),
        "--agent",
        "bird",
        "--evaluator-version",
        EVALUATOR_VERSION,
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verdict"] == "drift"
    with connect(warehouse_file, read_only=True) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (10,)


@pytest.mark.parametrize(
    "command",
    [
        ("export", "--start", D1.isoformat(), "--end", (D1 + timedelta(days=6)).isoformat()),
        ("export", "--start", D1.isoformat(), "--end", D1.isoformat(), "--format", "parquet"),
        ("review", "sample", "--n", "5"),
        ("catalog", "learn"),
    ],
    ids=["export", "export_parquet", "review_sample", "catalog_learn"],
)
@pytest.mark.parametrize("spelling", ["same", "dotted", "hard_link"])
def test_an_out_that_names_the_warehouse_is_refused_and_the_warehouse_kept(
    warehouse_file: Path, command: tuple[str, ...], spelling: str
) -> None:
    """``--out`` naming the warehouse replaced it with a CSV / JSON / HTML file (exit 0): every
    later command then failed with "not a valid DuckDB database file"."""
    before = warehouse_file.read_bytes()
    out = {
        "same": str(warehouse_file),
        "dotted": f"{warehouse_file.parent}/./sub/../{warehouse_file.name}",
        "hard_link": str(warehouse_file.with_name("link.duckdb")),
    }[spelling]
    if spelling == "hard_link":
        Path(out).hardlink_to(warehouse_file)
    result = _invoke(*command, "--warehouse", str(warehouse_file), "--out", out)
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: --out {Path(out)} is the warehouse this command reads: writing it there would destroy it; "
        "give --out another file name\n"
    )
    assert warehouse_file.read_bytes() == before
    with connect(warehouse_file, read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM evaluations").fetchone() == (480,)


def test_catalog_learn_refuses_to_write_over_a_log_file_it_learns_from(tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "2026-11-24"
    logs.mkdir(parents=True)
    day = logs / "agent-logs.jsonl"
    day.write_text(
        json.dumps({"run_id": "r1", "app_id": "a", "question": "How many users?", "sql": "SELECT 1 FROM users"}) + "\n",
        encoding="utf-8",
    )
    before = day.read_bytes()
    for given in (day, tmp_path / "logs"):
        result = _invoke("catalog", "learn", str(given), "--out", str(day))
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"error: --out {day} is the log file this command reads")
        assert day.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("evaluate", "", "--out", "x.jsonl"), "an argument is empty or blank"),
        (("evaluate", "logs", "--out", "x.jsonl", "--schema-dir", ""), "--schema-dir is empty or blank"),
        (("nightly", "--date", "2026-11-24", "--warehouse", ""), "--warehouse is empty or blank"),
        (("nightly", "--date", "2026-11-24", "--logs-root="), "--logs-root is empty or blank"),
        (
            ("export", "--start", "2026-11-24", "--end", "2026-11-24", "--out", "x.csv", "--agent", ""),
            "--agent is empty or blank",
        ),
        (("review", "import", "labels.csv", "--reviewer", ""), "--reviewer is empty or blank"),
        (("review", "import", "labels.csv", "--reviewer", "  "), "--reviewer is empty or blank"),
        (("review", "import", "labels.csv", "--reviewer=\t"), "--reviewer is empty or blank"),
        (("evaluate", " ", "--out", "x.jsonl"), "an argument is empty or blank"),
        (("report", "--out", ""), "--out is empty or blank"),
    ],
    ids=[
        "argument",
        "schema_dir",
        "warehouse",
        "equals",
        "agent",
        "reviewer",
        "blank_reviewer",
        "tab_reviewer",
        "blank_argument",
        "report_out",
    ],
)
def test_an_empty_value_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], named: str
) -> None:
    """An empty path read as the working folder (``stef evaluate ""`` scored every log file
    there), an empty ``--warehouse`` wrote ``./stef.duckdb``, an empty ``--reviewer`` stored the
    login name: each without a word."""
    monkeypatch.chdir(tmp_path)
    result = _invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {named}: give a value, or leave the option out for its default (see `")
    assert len(result.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ("nightly", "--date", "2026-11-24", "--notify-webhook", "", "--logs-root", "missing"),
        ("push", "otlp", "--endpoint", "http://127.0.0.1:9", "--header=X-Empty=", "--date", "2026-11-30"),
        ("evaluate", "missing.jsonl", "--out", "x.jsonl", "--api-base", ""),
        ("drift", "--agent", " ", "--warehouse", "missing.duckdb"),
    ],
    ids=["notify_webhook", "header", "api_base", "blank_agent"],
)
def test_an_option_whose_empty_value_means_something_is_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    """``--notify-webhook "$UNSET"`` (no webhook), ``--api-base ""`` (the environment's) and a
    header with an empty value are valid, as is an agent id of white space (the log contract accepts
    one); the command goes on to its own checks."""
    monkeypatch.chdir(tmp_path)
    result = _invoke(*args)
    assert "is empty or blank: give a value" not in result.stderr and "an argument is empty" not in result.stderr
