"""Tests of flows/cli/main.py: `python -m flows.cli` errors without a traceback, importing the app loads no heavy library; moved from tests/test_cli.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.flows.cli.cli_support import FIXTURE, FIXTURE_RUN_IDS, HEAVY_MODULES, invoke, read_jsonl
from tests.support.checkout import REPO_ROOT, checkout_env


def test_console_script_exits_2_without_traceback(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "flows.cli",
        "evaluate",
        str(FIXTURE),
        "--out",
        str(tmp_path / "o.jsonl"),
        "--dialect",
        "nosuch",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env=checkout_env(), timeout=120, check=False
    )
    assert done.returncode == 2
    assert "error:" in done.stderr and "nosuch" in done.stderr
    assert "Traceback" not in done.stderr


def test_sql_that_sqlglot_parses_as_a_command_is_not_echoed_on_stderr(tmp_path: Path) -> None:
    """sqlglot warns, quoting the statement, when it falls back to a raw Command (``EXPLAIN …``):
    the agent's SQL (here with an ESC sequence) must not reach the terminal that way; the answer
    gets its status in the output, with both workers (forked from the command's process)."""
    logs = tmp_path / "explain.jsonl"
    records = [{"run_id": f"e{i}", "question": "How many rows?", "sql": "EXPLAIN SELECT 1 \x1b[31m"} for i in range(3)]
    logs.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    done = _stef(tmp_path, "evaluate", str(logs), "--out", str(tmp_path / "o.jsonl"), "--workers", "2")
    assert done.returncode == 0, done.stderr
    assert "unsupported syntax" not in done.stderr and "\x1b" not in done.stderr
    assert [row["run_id"] for row in read_jsonl(tmp_path / "o.jsonl")] == ["e0", "e1", "e2"]


def test_evaluate_imports_no_heavy_library(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    code = textwrap.dedent(
        f"""
        import json, sys
        from typer.testing import CliRunner
        import flows.cli.main
        from flows.cli.main import app
        result = CliRunner().invoke(app, ["evaluate", {str(FIXTURE)!r}, "--out", {str(out)!r}])
        loaded = sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules)
        print(json.dumps({{"exit_code": result.exit_code, "loaded": loaded, "cli": flows.cli.main.__file__}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=checkout_env(),
        timeout=120,
        check=True,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(report.pop("cli")).resolve().is_relative_to(REPO_ROOT)  # the checkout under test, not an installed copy
    assert report == {"exit_code": 0, "loaded": []}
    assert len(read_jsonl(out)) == len(FIXTURE_RUN_IDS)


def _stef(tmp_path: Path, *args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    """The real command line (``python -m flows.cli``), as cron or CI runs it (``environ``: extra variables)."""
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**checkout_env(), **environ},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ("nightly", "--date", "2026-13-01"),
            "error: Invalid value for '--date' / '--log-date': '2026-13-01' is not a day of the calendar (month must be in 1..12). "
            "(see `stef nightly --help`)",
            id="bad_date",
        ),
        pytest.param(
            ("nightly", "--log-date", "2026-11-31"),  # the deployment parameter's name works too
            "error: Invalid value for '--date' / '--log-date': '2026-11-31' is not a day of the calendar (day is out of range for month). "
            "(see `stef nightly --help`)",
            id="log_date_alias",
        ),
        pytest.param(
            ("drift", "--agent", "bird", "--json", "true"),
            "error: Got unexpected extra argument(s) (true) (see `stef drift --help`)",
            id="flag_with_a_value",
        ),
        pytest.param(("drift",), "error: Missing option '--agent'. (see `stef drift --help`)", id="missing_option"),
        pytest.param(
            ("no-such-command",), "error: No such command 'no-such-command'. (see `stef --help`)", id="command"
        ),
        pytest.param(
            ("campaign", "run", "--bogus"),
            "error: No such option: --bogus (Possible options: --out, --runs) (see `stef campaign run --help`)",
            id="subgroup_option",
        ),
    ],
)
def test_usage_errors_are_one_error_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done = _stef(tmp_path, *args)
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (2, "", [message])


def test_backfill_and_nightly_without_logs_fail_at_once_and_store_nothing(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh.duckdb"
    missing = tmp_path / "nonexistent"
    backfill = _stef(
        tmp_path,
        *("backfill", "--logs-root", str(missing), "--start", "2026-11-01", "--end", "2026-11-03"),
        *("--warehouse", str(warehouse)),
    )
    assert (backfill.returncode, backfill.stdout) == (2, "")
    assert backfill.stderr.splitlines() == [
        f"error: no logs for any day of 2026-11-01 … 2026-11-03 in {missing} "
        f"(expected {missing}/<YYYY-MM-DD>/*.jsonl); nothing was run or stored"
    ]
    nightly = _stef(
        tmp_path, "nightly", "--date", "2026-11-01", "--logs-root", str(missing), "--warehouse", str(warehouse)
    )
    assert (nightly.returncode, nightly.stderr.splitlines()) == (
        2,
        [
            f"error: no logs for 2026-11-01 in {missing} (expected {missing}/2026-11-01/*.jsonl); nothing was run or stored"
        ],
    )
    assert not warehouse.exists()  # no empty warehouse left behind for a green-looking run
    unknown = _stef(tmp_path, "nightly", "--date", "2026-11-01", "--logs-root", "nosuch://bucket/logs")
    assert (unknown.returncode, unknown.stderr.splitlines()) == (
        2,
        ["error: --logs-root nosuch://bucket/logs: not a readable location (Protocol not known: nosuch)"],
    )


def test_a_day_of_log_files_not_named_jsonl_names_them(tmp_path: Path) -> None:
    """``B.JSONL``, ``c.json``, ``d.jsonl.gz`` are not read (only ``*.jsonl``): the error said only
    "no logs for 2026-11-01 … (expected …/*.jsonl)" while the folder was full of logs."""
    warehouse = tmp_path / "wh.duckdb"
    day = tmp_path / "logs" / "2026-11-01"
    day.mkdir(parents=True)
    for name in ("B.JSONL", "c.json", "d.jsonl.gz", "notes.txt"):
        (day / name).write_text('{"run_id": "r1", "question": "q", "sql": "SELECT 1"}\n', encoding="utf-8")
    logs = tmp_path / "logs"
    nightly = _stef(
        tmp_path, "nightly", "--date", "2026-11-01", "--logs-root", str(logs), "--warehouse", str(warehouse)
    )
    assert (nightly.returncode, nightly.stderr.splitlines()) == (
        2,
        [
            f"error: no logs for 2026-11-01 in {logs} (expected {logs}/2026-11-01/*.jsonl; not *.jsonl, so not "
            "read: B.JSONL, c.json, d.jsonl.gz); nothing was run or stored"
        ],
    )
    backfill = _stef(
        tmp_path,
        *("backfill", "--logs-root", str(logs), "--start", "2026-10-31", "--end", "2026-11-01"),
        *("--warehouse", str(warehouse)),
    )
    assert backfill.stderr.splitlines() == [
        f"error: no logs for any day of 2026-10-31 … 2026-11-01 in {logs} (expected {logs}/<YYYY-MM-DD>/*.jsonl; "
        "2026-11-01: not *.jsonl, so not read: B.JSONL, c.json, d.jsonl.gz); nothing was run or stored"
    ]
    assert not warehouse.exists()


def test_bad_drift_thresholds_fail_the_night_before_any_work(tmp_path: Path, log_day: Path) -> None:
    """A bad ``$STEF_DRIFT_THRESHOLDS`` used to surface only as an ERROR log line of the drift step
    (exit 0, no drift sentence); it is now an error line before anything is stored."""
    warehouse = tmp_path / "wh.duckdb"
    for args in (
        ("nightly", "--date", "2026-11-20"),
        ("backfill", "--start", "2026-11-20", "--end", "2026-11-20"),
    ):
        where = ("--logs-root", str(log_day), "--warehouse", str(warehouse))
        done = _stef(tmp_path, *args, *where, STEF_DRIFT_THRESHOLDS='{"mean_dleta": 2}')
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(
            "error: $STEF_DRIFT_THRESHOLDS is not a valid set of drift thresholds (mean_dleta"
        )
    assert not warehouse.exists()


def test_tables_are_not_cut_at_80_columns_when_piped(tmp_path: Path) -> None:
    """Cron logs and CI pipe the output: the consoles then use 200 columns, a terminal (or $COLUMNS) its own."""
    code = "from flows.cli.common import console, err_console; print(console.width, err_console.width)"
    env = {key: value for key, value in checkout_env().items() if key != "COLUMNS"}
    piped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert piped.stdout.split() == ["200", "200"]
    narrow = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**env, "COLUMNS": "100"}, check=True
    )
    assert narrow.stdout.split() == ["100", "100"]


def test_help_shows_flags_without_a_value(tmp_path: Path) -> None:
    """``--json`` is a flag: the help does not show ``--json <bool>`` as if it took a value."""
    done = _stef(tmp_path, "drift", "--help")
    assert done.returncode == 0
    lines = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith("│ ") and " --" in line}
    for flag in ("--json", "--temporal", "--no-store"):
        assert "<bool>" not in lines[flag], lines[flag]
    assert "<int" in lines["--min-samples"]  # an option with a value keeps its type


def test_demo_quiet_shows_its_result_without_prefect_info_lines(tmp_path: Path) -> None:
    done = _stef(tmp_path, "demo", "--quiet", "--workdir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "| INFO" not in done.stderr and "| INFO" not in done.stdout  # Prefect's info lines are hidden
    assert all("| WARNING" in line or "| ERROR" in line for line in done.stderr.splitlines() if " | " in line)
    assert any(line.startswith("drift: bird-analyst v1.5.0 answers an estimated") for line in done.stdout.splitlines())


def test_nightly_quiet_says_an_error_it_raises_on_purpose_in_its_one_error_line_only(tmp_path: Path) -> None:
    """With ``--quiet`` a day over the bad-share limit printed Prefect's ERROR line of the failed
    flow run ("Encountered exception during execution: LogQualityError(...)") above the command's
    ``error:`` line, which says the same."""
    day = tmp_path / "logs" / "2026-11-20"
    day.mkdir(parents=True)
    good = json.dumps({"run_id": "a", "question": "How many rows?", "sql": "SELECT COUNT(*) FROM t"})
    (day / "a.jsonl").write_text(f"not json\n{good}\n[1]\n", encoding="utf-8")
    common = ("nightly", "--date", "2026-11-20", "--logs-root", str(tmp_path / "logs"))
    done = _stef(tmp_path, *common, "--warehouse", str(tmp_path / "wh.duckdb"), "--quiet")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: 2 of 3 log lines in ") and "above the limit of 5.0%" in line


def _night(tmp_path: Path, warehouse: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``stef nightly --quiet`` of 2026-11-20 from ``tmp_path/logs`` into ``warehouse``."""
    logs = str(tmp_path / "logs")
    return _stef(
        tmp_path,
        "nightly",
        "--date",
        "2026-11-20",
        "--logs-root",
        logs,
        "--warehouse",
        str(warehouse),
        "--quiet",
        *options,
    )


def test_nightly_quiet_leaves_off_the_failed_task_line_of_an_error_it_prints(tmp_path: Path) -> None:
    """With ``--quiet`` a warehouse refused inside the check-warehouse task printed Prefect's ERROR line
    "Task run 'check-warehouse-…' - Finished in state Failed('Task run encountered an exception
    WarehouseError: …')" (a line with the error's text but no exception attached) above the
    command's ``error:`` line; another error's failed-state line is kept (the filter, directly)."""
    import logging

    from flows.cli.common import _NoStefErrorLines

    day = tmp_path / "logs" / "2026-11-20"
    day.mkdir(parents=True)
    (day / "a.jsonl").write_text(json.dumps({"run_id": "a", "question": "How many?", "sql": "SELECT 1"}) + "\n")
    csv = tmp_path / "export.csv"
    csv.write_text("a,b\n1,2\n", encoding="utf-8")
    done = _night(tmp_path, csv)
    assert done.returncode == 2, done.stderr
    assert "| ERROR" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"error: warehouse {csv} is not a DuckDB database file")

    def line(message: str) -> logging.LogRecord:
        return logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, message, None, None)

    quiet = _NoStefErrorLines()
    assert not quiet.filter(
        line("Finished in state Failed('Task run encountered an exception WarehouseError: x.csv is not')")
    )
    assert quiet.filter(line("Finished in state Failed('Task run encountered an exception KeyError: 'x'')"))
    assert quiet.filter(line("Finished in state Failed('Task run encountered an exception WarehouseErrorX: y')"))


@pytest.mark.parametrize(
    "args",
    [
        ("version",),
        ("quarantine", "--date", "2026-11-20", "--json"),
        ("quarantine", "--date", "2026-11-20"),
        ("--help",),
        ("nightly", "--help"),
    ],
    ids=["version", "quarantine_json", "quarantine_table", "help", "command_help"],
)
def test_a_closed_standard_output_ends_any_command_quietly_with_141(tmp_path: Path, args: tuple[str, ...]) -> None:
    """``stef quarantine --json | head -0`` or ``stef version | true`` exited 1 (click's handling of
    the broken pipe; rich's for a table) while ``stef evaluate --out - | head`` exits 141 as a Unix filter does: every
    command now ends with 141 and prints nothing when its reader is gone; so does ``stef --help | true`` (the
    console of Typer's help exited 1)."""
    warehouse = tmp_path / "wh.duckdb"
    if args[0] == "quarantine":
        day = tmp_path / "logs" / "2026-11-20"
        day.mkdir(parents=True)
        (day / "a.jsonl").write_text(
            "[1]\n" + json.dumps({"run_id": "a", "question": "How many?", "sql": "SELECT 1"}) + "\n"
        )
        stored = _night(tmp_path, warehouse, "--max-bad-share", "1")
        assert stored.returncode == 0, stored.stderr
    done = _run_with_a_gone_reader(
        tmp_path, (*args, *(("--warehouse", str(warehouse)) if args[0] == "quarantine" else ())), "stdout"
    )
    assert (done.returncode, done.stderr) == (141, "")


def _run_with_a_gone_reader(
    tmp_path: Path, args: tuple[str, ...], closed: Literal["stdout", "stderr"]
) -> subprocess.CompletedProcess[str]:
    """``python -m flows.cli ARGS`` with the reader of ``closed`` gone before the command writes (the
    other stream: standard error captured, or standard output written to a file)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        with (tmp_path / "out.txt").open("w") as output:
            return subprocess.run(
                [sys.executable, "-m", "flows.cli", *args],
                stdout=write_end if closed == "stdout" else output,
                stderr=subprocess.PIPE if closed == "stdout" else write_end,
                text=True,
                cwd=tmp_path,
                env=checkout_env(),
                timeout=120,
                check=False,
            )
    finally:
        os.close(write_end)


def test_a_closed_standard_error_is_no_closed_standard_output(tmp_path: Path) -> None:
    """rich points descriptor 1 at /dev/null whichever of its streams broke: a usage error written to
    a closed standard error, with standard output a file, exited 141 as if a reader of the output
    had gone (review of e030013); 141 is only for a standard output that is a pipe."""
    done = _run_with_a_gone_reader(tmp_path, ("evaluate", "--nosuch-option"), "stderr")
    assert done.returncode in (1, 2)


def test_console_drops_the_info_lines_of_evaluation_batches_only() -> None:
    """Issue 17 item 3: one line per batch is gone from the console (the progress bar says it);
    the batches' warnings and every other task's lines stay."""
    import logging

    from flows.cli.common import _NoBatchLines

    def record(level: int, task_name: str | None) -> logging.LogRecord:
        made = logging.LogRecord("prefect.task_runs", level, __file__, 1, "Finished in state Completed()", None, None)
        if task_name is not None:
            made.task_name = task_name
        return made

    keep = _NoBatchLines().filter
    assert not keep(record(logging.INFO, "evaluate-batch"))
    assert keep(record(logging.WARNING, "evaluate-batch"))
    assert keep(record(logging.INFO, "store-results"))
    assert keep(record(logging.INFO, None))


def test_progress_bar_draws_the_day_and_its_records() -> None:
    import io
    from datetime import date

    from rich.console import Console

    import flows.cli.common
    from flows.cli.common import _ProgressBar

    stream = io.StringIO()
    original = flows.cli.common.err_console
    flows.cli.common.err_console = Console(file=stream, force_terminal=True, width=100)
    try:
        bar = _ProgressBar()
        bar.started(date(2026, 11, 24), 1000, 2)
        bar.advanced(500)
        bar._progress.refresh()
        bar.advanced(500)
        bar._progress.refresh()
        bar.finished()
    finally:
        flows.cli.common.err_console = original
    drawn = stream.getvalue()
    assert "evaluating 2026-11-24" in drawn and "500/1000" in drawn and "1000/1000" in drawn


def test_nightly_on_a_new_prefect_home_registers_no_block_types(tmp_path: Path) -> None:
    """Issue 20: the temporary Prefect API skips block-type registration at start (it imported every
    installed Prefect collection, Dask among them, on each start); a nightly still runs end to end
    on a Prefect home that has never seen a server, and the server's database holds no block type."""
    import shutil
    import sqlite3
    from importlib import resources

    day = "2026-11-26"
    logs = tmp_path / "logs"
    shutil.copytree(str(resources.files("flows.demo_data").joinpath(day)), logs / day)
    home = tmp_path / "prefect-home"
    env = checkout_env(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env.pop("PREFECT_API_URL", None)
    command = [sys.executable, "-m", "flows.cli", "nightly", "--date", day, "--logs-root", str(logs)]
    command += ["--warehouse", str(tmp_path / "wh.duckdb"), "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    assert f"{day}: 120 lines, " in done.stdout
    with sqlite3.connect(home / "prefect.db") as db:
        (block_types,) = db.execute("SELECT count(*) FROM block_type").fetchone()
        (flow_runs,) = db.execute("SELECT count(*) FROM flow_run WHERE state_type = 'COMPLETED'").fetchone()
    assert (block_types, flow_runs) == (0, 1)


def _description(help_text: str) -> list[list[str]]:
    """The paragraphs (lists of lines) between a help's usage line and its first panel."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Usage:")) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("╭"))
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:end]:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [paragraph for paragraph in paragraphs if paragraph]


@pytest.mark.parametrize("command", [("drift",), ("evaluate",), ("backfill",), ("demo",), ("campaign", "run")])
def test_help_paragraphs_fill_an_80_column_terminal(tmp_path: Path, command: tuple[str, ...]) -> None:
    """A docstring wrapped at 100 columns reads as whole paragraphs at 80, not a long line and a short one in turn."""
    env = {**checkout_env(), "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", *command, "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    paragraphs = _description(done.stdout)
    assert len(paragraphs) >= 2, done.stdout  # the summary and at least one more paragraph
    for paragraph in paragraphs:
        for line in paragraph[:-1]:  # every line but a paragraph's last is filled to the terminal's width
            assert len(line) >= 60, (line, paragraph)
    assert "``" not in done.stdout  # RST literals read as quotes


def test_command_help_of_every_command_is_its_docstring_reflowed() -> None:
    from flows.cli.common import command_help
    from flows.cli.main import app

    def commands(typer_app):  # type: ignore[no-untyped-def]
        yield from typer_app.registered_commands
        for group in typer_app.registered_groups:
            yield from commands(group.typer_instance)

    seen = 0
    for command in commands(app):
        assert command.help == command_help(command.callback.__doc__), command.name
        assert "\n" not in command.help.replace("\n\n", ""), command.name  # no line break inside a paragraph
        seen += 1
    assert seen >= 25


def test_a_logs_root_that_is_a_day_folder_or_a_file_is_named_as_such(tmp_path: Path) -> None:
    """``--logs-root logs/2026-11-01`` (the day folder) or ``--logs-root logs/2026-11-01/a.jsonl``:
    the error only gave the path it looked for (``logs/2026-11-01/2026-11-01/*.jsonl``)."""
    day = tmp_path / "logs" / "2026-11-01"
    day.mkdir(parents=True)
    log = day / "a.jsonl"
    log.write_text('{"run_id": "r1", "question": "q", "sql": "SELECT 1"}\n', encoding="utf-8")
    warehouse = str(tmp_path / "wh.duckdb")
    nightly = _stef(tmp_path, "nightly", "--date", "2026-11-01", "--logs-root", str(day), "--warehouse", warehouse)
    assert nightly.stderr.splitlines() == [
        f"error: no logs for 2026-11-01 in {day} (expected {day}/2026-11-01/*.jsonl; {day} holds *.jsonl files "
        f"itself, so it is a day folder: --logs-root is the folder of the day folders, here probably --logs-root "
        f"{day.parent}); nothing was run or stored"
    ]
    backfill = _stef(
        tmp_path,
        "backfill",
        "--start",
        "2026-11-01",
        "--end",
        "2026-11-02",
        "--logs-root",
        str(log),
        "--warehouse",
        warehouse,
    )
    assert backfill.stderr.splitlines() == [
        f"error: no logs for any day of 2026-11-01 … 2026-11-02 in {log} (expected {log}/<YYYY-MM-DD>/*.jsonl; "
        f"--logs-root {log} is a file, not the folder of the day folders); nothing was run or stored"
    ]
    assert not (tmp_path / "wh.duckdb").exists()


_DAY_OPTIONS = [
    pytest.param(("nightly",), "--date", "'--date' / '--log-date'", (), id="nightly"),
    pytest.param(("nightly",), "--log-date", "'--date' / '--log-date'", (), id="nightly_log_date"),
    pytest.param(("backfill",), "--start", "'--start'", ("--end", "2026-12-02"), id="backfill_start"),
    pytest.param(("backfill",), "--end", "'--end'", ("--start", "2026-11-30"), id="backfill_end"),
    pytest.param(("quarantine",), "--date", "'--date' / '--log-date'", (), id="quarantine"),
    pytest.param(("quarantine",), "--log-date", "'--date' / '--log-date'", (), id="quarantine_log_date"),
    pytest.param(("drift",), "--start", "'--start'", ("--agent", "a"), id="drift_start"),
    pytest.param(("drift",), "--end", "'--end'", ("--agent", "a"), id="drift_end"),
    pytest.param(("export",), "--start", "'--start'", ("--end", "2026-12-02", "--out", "x.csv"), id="export_start"),
    pytest.param(("export",), "--end", "'--end'", ("--start", "2026-11-30", "--out", "x.csv"), id="export_end"),
    pytest.param(("review", "sample"), "--start", "'--start'", ("--out", "s.csv"), id="review_sample_start"),
    pytest.param(("review", "sample"), "--end", "'--end'", ("--out", "s.csv"), id="review_sample_end"),
    pytest.param(("catalog", "learn"), "--start", "'--start'", ("--warehouse", "w.duckdb"), id="catalog_learn_start"),
    pytest.param(("catalog", "learn"), "--end", "'--end'", ("--warehouse", "w.duckdb"), id="catalog_learn_end"),
    pytest.param(("pull", "phoenix"), "--date", "'--date'", ("--endpoint", "http://127.0.0.1:9", "--project", "p"), id="pull_phoenix"),
    pytest.param(("pull", "otlp"), "--date", "'--date'", ("--input", "traces.jsonl"), id="pull_otlp"),
    pytest.param(("push", "phoenix"), "--date", "'--date'", ("--endpoint", "http://127.0.0.1:9"), id="push_phoenix"),
    pytest.param(("push", "otlp"), "--date", "'--date'", ("--endpoint", "http://127.0.0.1:9"), id="push_otlp"),
]  # fmt: skip


def _day_options_of_the_app() -> set[tuple[str, ...]]:
    """(command words..., option) of every option of the ``stef`` app that takes a day or a date."""
    import typer

    from flows.cli.main import app

    found: set[tuple[str, ...]] = set()

    def walk(command: Any, path: tuple[str, ...]) -> None:
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, (*path, name))
        for param in getattr(command, "params", []):
            for opt in param.opts:
                if opt in ("--date", "--day", "--start", "--end") or opt.endswith(("-date", "-day")):
                    found.add((*path, opt))

    walk(typer.main.get_command(app), ())
    return found


def test_every_day_option_is_covered_by_the_iso_date_tests() -> None:
    covered = {(*param.values[0], param.values[1]) for param in _DAY_OPTIONS}  # type: ignore[index]
    assert _day_options_of_the_app() == covered


@pytest.mark.parametrize(
    "value", ["2026-12-1", "2026-1-01", "20261201", "2026-W49-2", "2026-12-01T00:00", "2026-02-30"]
)
@pytest.mark.parametrize(("command", "option", "label", "others"), _DAY_OPTIONS)
def test_a_day_that_is_not_iso_yyyy_mm_dd_is_one_usage_error_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
    option: str,
    label: str,
    others: tuple[str, ...],
    value: str,
) -> None:
    """``2026-12-1`` was read as 2026-12-01 (``strptime``): every day option takes ``YYYY-MM-DD`` only."""

    monkeypatch.chdir(tmp_path)
    result = invoke(*command, option, value, *others)
    (line,) = result.output.splitlines()
    assert result.exit_code == 2
    problem = (
        "is not a day of the calendar (day is out of range for month)"
        if value == "2026-02-30"
        else "is not a date of the form YYYY-MM-DD"
    )
    assert line.startswith(f"error: Invalid value for {label}: '{value}' {problem}. (see `")
    assert line.endswith(f" {' '.join(command)} --help`)")  # `stef ...` (CliRunner calls the program `root`)
    assert list(tmp_path.iterdir()) == []  # nothing written, no warehouse created


_VALID_DAY_RUNS = [
    pytest.param(("backfill", "--start", "2026-12-01", "--end", "2026-12-01", "--logs-root", "logs"),
                 "error: no logs for any day of 2026-12-01 … 2026-12-01 in logs", id="backfill"),
    pytest.param(("quarantine", "--date", "2026-12-01"), "error: warehouse", id="quarantine"),
    pytest.param(("drift", "--agent", "a", "--start", "2026-12-01", "--end", "2026-12-01"), "error: warehouse", id="drift"),
    pytest.param(("export", "--start", "2026-12-01", "--end", "2026-12-01", "--out", "x.csv"), "error: warehouse", id="export"),
    pytest.param(("review", "sample", "--start", "2026-12-01", "--end", "2026-12-01", "--out", "s.csv"), "error: warehouse", id="review_sample"),
    pytest.param(("catalog", "learn", "--warehouse", "w.duckdb", "--start", "2026-12-01", "--end", "2026-12-01"), "error: warehouse", id="catalog_learn"),
    pytest.param(("pull", "otlp", "--input", "traces.jsonl", "--date", "2026-12-01"), "error: traces.jsonl: no such file or folder", id="pull_otlp"),
    pytest.param(("push", "phoenix", "--endpoint", "http://127.0.0.1:9", "--date", "2026-12-01"), "error: warehouse", id="push_phoenix"),
    pytest.param(("push", "otlp", "--endpoint", "http://127.0.0.1:9", "--date", "2026-12-01"), "error: warehouse", id="push_otlp"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "error"), _VALID_DAY_RUNS)
def test_an_iso_day_is_still_read_and_the_command_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], error: str
) -> None:
    """With ``2026-12-01`` each command gets past its options to its own first check (here: no logs,
    no warehouse, no trace file in an empty folder)."""

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STEF_WAREHOUSE", raising=False)
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.output.startswith(error) and "Invalid value" not in result.output


@pytest.mark.parametrize(
    ("args", "error"),
    [
        pytest.param(("backfill", "--logs-root", "logs"), "error: backfill end 2026-12-01 is before its start 2026-12-05", id="backfill"),
        pytest.param(("drift", "--agent", "a"), "error: window end 2026-12-01 is before its start 2026-12-05", id="drift"),
        pytest.param(("export", "--out", "x.csv"), "error: export end 2026-12-01 is before its start 2026-12-05", id="export"),
        pytest.param(("review", "sample", "--out", "s.csv"), "error: review sample end 2026-12-01 is before its start 2026-12-05", id="review_sample"),
        pytest.param(("catalog", "learn", "--warehouse", "w.duckdb"), "error: catalog learn end 2026-12-01 is before its start 2026-12-05", id="catalog_learn"),
    ],
)  # fmt: skip
def test_a_range_that_ends_before_it_starts_is_refused_before_anything_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], error: str
) -> None:

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STEF_WAREHOUSE", raising=False)
    result = invoke(*args, "--start", "2026-12-05", "--end", "2026-12-01")
    assert (result.exit_code, result.output.splitlines()) == (2, [error])


def test_an_error_logged_after_ctrl_c_shows_no_traceback_on_the_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during a DuckDB query of a task: DuckDB raises RuntimeError('Query interrupted') instead
    of the KeyboardInterrupt, and Prefect logged that task failure with its traceback above the
    command's one "interrupted by SIGINT" line (tests/flows/test_interrupt_cli.py, a timing that CI hit)."""
    import logging
    import os
    import signal
    import sys
    import threading
    import time

    import typer

    from flows.cli import common

    monkeypatch.setattr(common, "_INTERRUPTED", threading.Event())
    try:
        raise RuntimeError("Query interrupted")
    except RuntimeError:
        exc_info = sys.exc_info()

    def record() -> logging.LogRecord:
        return logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, "Task run failed", (), exc_info)

    before = record()
    assert common._NoStefTraceback().filter(before) and before.exc_info is not None  # a bug keeps its traceback
    # a test process started in the background of a script ignores SIGINT, and interruptible() keeps
    # an ignored SIGINT ignored: Python's default handler for the test
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(typer.Exit) as stopped, common.interruptible(lambda: "nothing kept"):
            os.kill(os.getpid(), signal.SIGINT)  # the handler raises at the next bytecode
            time.sleep(1)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stopped.value.exit_code == 130
    after = record()
    assert (
        common._NoStefTraceback().filter(after) and after.exc_info is None and after.getMessage() == "Task run failed"
    )


def test_ctrl_c_gives_up_the_queued_model_requests_before_the_command_unwinds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model requests stop the moment Ctrl-C arrives, while the command is still unwinding:
    a slow unwinding (the flow run reported as crashed to a busy API) that ends in another error
    (a Ctrl-C that pydantic turned into its serialization error, which the task runner's shutdown
    did not take for an interrupt) starts none of the queued requests. A CI run saw all 12 of 12
    made after the signal. The command still exits 130 with its one line; after it, requests
    start again."""
    import os
    import signal
    import threading
    import time

    import typer

    from flows.cli import common
    from stef.llm import request_stop
    from stef.llm.evaluate import LLMEvaluator
    from stef.llm.judge import ModelRequestsAbandoned
    from stef.llm.settings import JudgeSettings
    from stef.models import AgentLogRecord, EvaluationStatus
    from tests.support.llm_server import stub_llm_server, synthetic_records

    monkeypatch.setattr(common, "_INTERRUPTED", threading.Event())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-placeholder")
    records = [AgentLogRecord.model_validate(row) for row in synthetic_records(10)]
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # see the test above
    unwound: list[int] = []
    try:
        with stub_llm_server(delay_s=0.3) as server:
            settings = JudgeSettings.parse(
                "openai/gpt-4o-mini", api_base=server.url, concurrency=2, timeout_s=60.0, breaker_failures=0
            )
            with pytest.raises(typer.Exit) as stopped, common.interruptible(lambda: "nothing kept"):
                pending = LLMEvaluator(settings).submit(records)
                try:
                    deadline = time.monotonic() + 60
                    while server.requests < 2 and time.monotonic() < deadline:
                        time.sleep(0.01)
                    at_signal = server.requests
                    assert at_signal >= 2, "no model request was made"
                    os.kill(os.getpid(), signal.SIGINT)  # the handler raises at the next bytecode
                    time.sleep(5)
                finally:  # a slow unwinding (a crash reported to a busy API), then an error instead of Ctrl-C
                    time.sleep(0.5)  # a request already on its way when the signal came arrives by now
                    unwound.append(server.requests)
                    time.sleep(1.2)  # at 0.3 s a request and two slots, eight more would have started
                    unwound.append(server.requests)
                    with pytest.raises(ModelRequestsAbandoned):
                        pending.evaluations()
                    raise ValueError("a KeyboardInterrupt inside a serializer, as pydantic reports it")
            assert stopped.value.exit_code == 130
            assert unwound[0] == unwound[1] <= at_signal + settings.concurrency, "model requests started after Ctrl-C"
            assert not request_stop.stopped()
            server.delay_s = 0.0
            assert LLMEvaluator(settings).evaluate_many(records[:1])[0].status is EvaluationStatus.EVALUATED
            assert server.requests == unwound[1] + 1
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize(
    ("started", "on_path", "expected"),
    [
        pytest.param(".venv/bin/stef", None, ".venv/bin/stef", id="venv_not_activated"),
        pytest.param(".venv/bin/stef", ".venv/bin/stef", "stef", id="venv_activated"),
        pytest.param("/opt/my tools/bin/stef", "/usr/bin/stef", "'/opt/my tools/bin/stef'", id="another_stef_on_path"),
        pytest.param("stef", "/usr/local/bin/stef", "stef", id="started_by_name"),
        pytest.param("/x/flows/cli/__main__.py", None, "stef", id="python_dash_m"),
    ],
)
def test_follow_up_commands_call_stef_as_it_was_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: str, on_path: str | None, expected: str
) -> None:
    """The demo prints its next commands with ``.venv/bin/stef`` when ``stef`` on $PATH is not the
    running program (the README's install does not activate the venv), else with ``stef``."""
    import shutil

    from flows.cli.common import suggested_program

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [started, "demo"])
    monkeypatch.setattr(shutil, "which", lambda name: on_path if name == "stef" else None)
    assert suggested_program() == expected


@pytest.mark.parametrize(
    "command", [(), ("review",), ("catalog",), ("campaign",)], ids=["stef", "review", "catalog", "campaign"]
)
def test_a_group_without_its_command_shows_its_help_and_no_empty_error_line(command: tuple[str, ...]) -> None:
    """``stef`` alone printed its help, then ``error:  (see `stef --help`)`` on stderr."""
    result = invoke(*command)
    assert result.exit_code == 2
    assert "Usage:" in result.stdout and "Commands" in result.stdout
    assert result.stderr == ""
