"""Tests of flows/cli/evaluate.py: `stef evaluate` (rows, summary, options, errors, worker processes, time cap); moved from tests/test_cli.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.flows.cli.cli_support import CONTRACT_KEYS, FIXTURE, FIXTURE_RUN_IDS, invoke, read_jsonl
from tests.support.checkout import checkout_env


def test_evaluate_writes_one_row_per_input_line_in_order(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "scores.jsonl"
    result = invoke("evaluate", str(FIXTURE), "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = read_jsonl(out)
    assert [row["run_id"] for row in rows] == FIXTURE_RUN_IDS
    for row in rows:
        assert tuple(row)[:2] == ("run_id", "status")
        assert set(CONTRACT_KEYS) <= row.keys()
    rejected = rows[2]
    assert rejected["status"] == "invalid_input"
    assert rejected["score"] is None
    assert "line 3" in rejected["status_reason"] and "not valid JSON" in rejected["status_reason"]
    assert rows[3]["status"] == "invalid_input"  # empty SQL
    assert rows[5]["status"] == "invalid_input" and "question" in rows[5]["status_reason"]
    assert rows[0]["status"] == "evaluated" and rows[0]["score"] is not None
    assert not (tmp_path / "nested" / "scores.jsonl.partial").exists()


def test_evaluate_summary_matches_the_written_rows(tmp_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    result = invoke("evaluate", str(FIXTURE), "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = read_jsonl(out)
    evaluated = sum(row["status"] == "evaluated" for row in rows)
    statuses = Counter(row["status"] for row in rows)
    lines = result.stdout.splitlines()
    assert any("records" in line and f" {len(rows)} " in line for line in lines)
    assert f"{evaluated / len(rows):.1%}" in result.stdout
    for status, count in statuses.items():
        assert any(f" {status} " in line and f" {count} " in line for line in lines), status
    for heading in ("mean Φ", "P90 Φ", "band", "filter_status", "verdict"):
        assert heading in result.stdout


def test_evaluate_directory_reads_every_jsonl_file_in_name_order(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    (logs / "b.jsonl").write_text(lines[0] + "\n", encoding="utf-8")
    (logs / "a.jsonl").write_text(lines[1] + "\n", encoding="utf-8")
    (logs / "notes.txt").write_text("not a log", encoding="utf-8")
    out = logs / "scores.jsonl"
    for _ in range(2):  # the second run must not read its own earlier output as input
        result = invoke("evaluate", str(logs), "--out", str(out))
        assert result.exit_code == 0, result.output
        assert [row["run_id"] for row in read_jsonl(out)] == ["cli-2", "cli-1"]


def test_dialect_option_is_the_default_for_records_without_one(tmp_path: Path) -> None:
    logs = tmp_path / "in.jsonl"
    records = [
        {"run_id": "own", "question": "How many users?", "sql": "SELECT COUNT(*) FROM users", "dialect": "sqlite"},
        {"run_id": "none", "question": "How many users?", "sql": "SELECT COUNT(*) FROM users"},
    ]
    logs.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = invoke("evaluate", str(logs), "--out", str(out), "--dialect", "postgres")
    assert result.exit_code == 0, result.output
    assert [row["dialect"] for row in read_jsonl(out)] == ["sqlite", "postgres"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["--dialect", "sqllite"], ["--dialect", "'sqllite'", "sqlite"], id="unknown_dialect"),
        pytest.param(["--judge", "hybrid:"], ["hybrid:", "needs a model"], id="hybrid_without_model"),
        pytest.param(
            ["--judge", "nosuchprovider-model"],
            ["nosuchprovider-model", "does not know this provider"],
            id="unknown_llm_provider",
        ),
    ],
)
def test_bad_option_is_a_clean_error_before_any_work(tmp_path: Path, args: list[str], expected: list[str]) -> None:
    out = tmp_path / "out.jsonl"
    result = invoke("evaluate", str(FIXTURE), "--out", str(out), *args)
    assert result.exit_code == 2
    for text in expected:
        assert text in result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(
            '{"app_id": "shop", "benign_filters": [{"operator": "="}]}',
            "field `benign_filters[0].column` is missing",
            id="missing_field",
        ),
        pytest.param('{"app_id": "shop", "default_dialect": 3}', "field `default_dialect` is invalid", id="wrong_type"),
        pytest.param('{"app_id": "shop",', "not valid JSON", id="not_json"),
    ],
)
def test_invalid_rules_file_names_the_file_and_field(tmp_path: Path, content: str, expected: str) -> None:
    rules = tmp_path / "shop.json"
    rules.write_text(content, encoding="utf-8")
    result = invoke("evaluate", str(FIXTURE), "--out", str(tmp_path / "out.jsonl"), "--rules", str(rules))
    assert result.exit_code == 2
    assert str(rules) in result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("make_input", "expected"),
    [
        pytest.param(lambda tmp: tmp / "missing.jsonl", "no such file or directory", id="missing_file"),
        pytest.param(lambda tmp: tmp, "holds no *.jsonl files", id="empty_directory"),
    ],
)
def test_unusable_input_is_a_clean_error(tmp_path: Path, make_input: Any, expected: str) -> None:
    source = make_input(tmp_path)
    result = invoke("evaluate", str(source), "--out", str(tmp_path / "sub" / "out.jsonl"))
    assert result.exit_code == 2
    assert str(source) in result.stderr and expected in result.stderr


def test_input_that_is_the_output_file_is_named_as_such(tmp_path: Path) -> None:
    same = tmp_path / "same.jsonl"
    same.write_bytes(FIXTURE.read_bytes())
    result = invoke("evaluate", str(same), "--out", str(same))
    assert result.exit_code == 2
    assert "the input and --out are the same file" in result.stderr
    assert same.read_bytes() == FIXTURE.read_bytes()  # untouched


def test_control_characters_of_a_path_are_escaped_in_the_error(tmp_path: Path) -> None:
    """A file name is user data: its ESC reaches the terminal as the text ``\\x1b``, never as a colour change."""
    source = tmp_path / "missing\x1b[31m.jsonl"
    result = invoke("evaluate", str(source), "--out", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2
    assert "\x1b" not in result.stderr
    assert "missing\\x1b[31m.jsonl: no such file or directory" in result.stderr


def test_more_workers_than_the_machine_can_hold_is_a_clean_error(tmp_path: Path) -> None:
    result = invoke("evaluate", str(FIXTURE), "--out", str(tmp_path / "out.jsonl"), "--workers", "100000")
    assert result.exit_code == 2
    assert "--workers 100000 is more than" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_out_symlink_is_written_through_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "target.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    result = invoke("evaluate", str(FIXTURE), "--out", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert len(read_jsonl(target)) == len(
        [line for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    )


def test_out_directory_is_a_clean_error(tmp_path: Path) -> None:
    result = invoke("evaluate", str(FIXTURE), "--out", str(tmp_path))
    assert result.exit_code == 2
    assert "is a directory; give --out a file name" in result.output


def test_worker_processes_give_the_same_rows_in_the_same_order(tmp_path: Path) -> None:
    """--workers 2 (process pool, small batches, the workers read raw lines) writes exactly what
    one process writes, over two files with blank lines, invalid UTF-8 and lines that are not JSON."""
    import flows.cli.evaluate

    logs = tmp_path / "logs"
    logs.mkdir()
    lines = [line.encode() for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    odd = [b"", b'{"run_id": "bad-utf8", "question": "caf\xe9?", "sql": "SELECT 1"}', b"   "]
    (logs / "a.jsonl").write_bytes(b"\n".join(lines * 20 + odd + lines * 20) + b"\n")
    (logs / "b.jsonl").write_bytes(b"\r\n".join(lines * 3) + b"\r\n")
    outputs = []
    for workers in ("1", "2"):
        out = tmp_path / f"out-{workers}.jsonl"
        original = flows.cli.evaluate.BATCH_SIZE
        flows.cli.evaluate.BATCH_SIZE = 7  # many batches, so ordering across processes is exercised
        try:
            result = invoke("evaluate", str(logs), "--out", str(out), "--workers", workers)
        finally:
            flows.cli.evaluate.BATCH_SIZE = original
        assert result.exit_code == 0, result.output
        outputs.append([{k: v for k, v in row.items() if k != "duration_ms"} for row in read_jsonl(out)])
    assert len(outputs[0]) == len(lines) * 43 + 1  # blank lines give no row; the invalid UTF-8 line gives one
    assert outputs[0] == outputs[1]
    rejected = [row for row in outputs[1] if row["status_reason"] and "invalid UTF-8" in row["status_reason"]]
    assert [(row["run_id"], row["status_reason"]) for row in rejected] == [
        ("bad-utf8", "a.jsonl line 122: invalid UTF-8 at byte 39")
    ]


@pytest.mark.parametrize(("raw", "cap"), [("", 2.0), ("0", None), ("0.5", 0.5), (" 3 ", 3.0)])
def test_time_cap_comes_from_the_environment(raw: str, cap: float | None, monkeypatch: pytest.MonkeyPatch) -> None:
    from stef.time_cap import configured_time_cap_s

    monkeypatch.setenv("STEF_TIME_CAP_S", raw)
    assert configured_time_cap_s() == cap


@pytest.mark.parametrize("raw", ["-1", "nan", "inf", "two", "0.0005"])
def test_an_invalid_time_cap_stops_evaluate_before_any_work(
    raw: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEF_TIME_CAP_S", raw)
    out = tmp_path / "scores.jsonl"
    result = invoke("evaluate", str(FIXTURE), "--out", str(out))
    assert result.exit_code == 2
    assert (
        f"STEF_TIME_CAP_S={raw!r} is not a number of seconds >= 0.001 (0 switches the per-record cap off)"
        in result.output
    )
    assert not out.exists()


def test_worker_processes_apply_the_configured_time_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap set in the environment reaches the worker processes: a record past it gets
    ``timeout``, the others are evaluated."""
    slow_sql = "SELECT a FROM t WHERE " + " OR ".join(f"b = {i}" for i in range(12000))
    logs = tmp_path / "logs.jsonl"
    rows = [{"run_id": f"r{i}", "question": "How many users?", "sql": "SELECT COUNT(*) FROM users"} for i in range(6)]
    rows.insert(3, {"run_id": "slow", "question": "How many rows?", "sql": slow_sql})
    logs.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    monkeypatch.setenv("STEF_TIME_CAP_S", "0.2")  # the slow record takes about 1 s, the others a few ms
    out = tmp_path / "scores.jsonl"
    result = invoke("evaluate", str(logs), "--out", str(out), "--workers", "2")
    assert result.exit_code == 0, result.output
    statuses = {row["run_id"]: (row["status"], row["status_reason"]) for row in read_jsonl(out)}
    assert statuses.pop("slow") == ("timeout", "evaluation exceeded the 0.2 s per-record cap")
    assert set(statuses.values()) == {("evaluated", None)}


def test_a_log_file_whose_first_record_is_bad_is_still_read_from_a_directory(tmp_path: Path) -> None:
    """A bad first record (no question, no sql) does not make a log file look like a labels file:
    the bad line gets its invalid_input row and every valid record after it is scored."""
    bad = '{"run_id": "first-bad", "prompt": "How many?", "query": "SELECT 1"}\n'
    (tmp_path / "day.jsonl").write_text(bad + FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    result = invoke("evaluate", str(tmp_path), "--out", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.output
    assert "skipped" not in result.stderr
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert [row["run_id"] for row in rows] == ["first-bad", *FIXTURE_RUN_IDS]
    assert rows[0]["status"] == "invalid_input"


def test_a_pulled_log_file_that_starts_with_unreadable_spans_is_read_from_a_directory(tmp_path: Path) -> None:
    """`stef pull` writes a span it cannot map as a ``source_error`` line: a file with more of them
    than the sniff reads before its records is a log file, not a labels or scores file."""
    unreadable = "".join(
        json.dumps({"run_id": f"span-{i}", "source_error": "no SQL attribute on the span"}) + "\n" for i in range(60)
    )
    (tmp_path / "pulled.jsonl").write_text(unreadable + FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "scores.jsonl").write_text(
        "".join(json.dumps({"run_id": f"s{i}", "status": "evaluated", "score": 80.0}) + "\n" for i in range(3)),
        encoding="utf-8",
    )
    result = invoke("evaluate", str(tmp_path), "--out", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0].startswith(f"skipped {tmp_path / 'scores.jsonl'}: not agent logs but labels")
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert [row["run_id"] for row in rows] == [f"span-{i}" for i in range(60)] + FIXTURE_RUN_IDS
    assert {row["status"] for row in rows[:60]} == {"invalid_input"}
    assert "unreadable trace span: no SQL attribute on the span" in rows[0]["status_reason"]


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_an_input_without_log_lines_is_scored_with_a_warning(tmp_path: Path, text: str) -> None:
    """An empty file gave "records 0" and exit code 0 without a word; the output is empty as the
    input, and stderr says so in one line."""
    source = tmp_path / "empty.jsonl"
    source.write_text(text, encoding="utf-8")
    result = invoke("evaluate", str(source), "--out", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"warning: {source} holds no log lines: nothing was scored ({tmp_path / 'out.jsonl'} is empty)"
    ]
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == ""


def test_a_directory_skips_files_that_are_not_agent_logs(tmp_path: Path) -> None:
    """The demo folder holds labels.jsonl beside logs/<day>/: scoring the folder scores no labels as logs."""
    (tmp_path / "labels.jsonl").write_text('{"run_id": "r1", "label": true}\n', encoding="utf-8")
    day = tmp_path / "logs" / "2026-11-24"
    day.mkdir(parents=True)
    (day / "agent.jsonl").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    result = invoke("evaluate", str(tmp_path), "--out", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"skipped {tmp_path / 'labels.jsonl'}: not agent logs but labels or scores (its first records have "
        "a label or status field and no question or sql; give the file itself to score it)",
        f"error: {tmp_path}: no agent log files among its *.jsonl files; folders of *.jsonl below it: {day}",
    ]
    (tmp_path / "agent.jsonl").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    both = invoke("evaluate", str(tmp_path), "--out", str(tmp_path / "out.jsonl"))
    assert both.exit_code == 0, both.output
    assert [row["run_id"] for row in read_jsonl(tmp_path / "out.jsonl")] == FIXTURE_RUN_IDS  # the labels are not scored
    named = invoke("evaluate", str(tmp_path / "labels.jsonl"), "--out", str(tmp_path / "l.jsonl"))
    assert named.exit_code == 0  # a file named explicitly is read: its lines are rejected with their reasons
    assert read_jsonl(tmp_path / "l.jsonl")[0]["status"] == "invalid_input"


def test_a_utf16_log_file_is_named_as_utf16(tmp_path: Path) -> None:
    """PowerShell's ``>`` writes UTF-16 with a byte-order mark: each line was rejected with only
    "invalid UTF-8 at byte 0" or "not valid JSON", which does not say what is wrong with the file."""
    line = json.dumps({"run_id": "r1", "question": "How many users?", "sql": "SELECT COUNT(*) FROM users"})
    source = tmp_path / "day.jsonl"
    source.write_text(line + "\r\n" + line.replace("r1", "r2") + "\r\n", encoding="utf-16")
    out = tmp_path / "out.jsonl"
    result = invoke("evaluate", str(source), "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = read_jsonl(out)
    assert rows[0]["status"] == "invalid_input"
    assert rows[0]["status_reason"] == (
        "day.jsonl line 1: invalid UTF-8 at byte 0 (the file is UTF-16 text, not UTF-8: save it as UTF-8)"
    )
    assert all(row["status"] == "invalid_input" for row in rows)


def test_a_workbook_log_file_is_named_as_a_workbook(tmp_path: Path) -> None:
    """An Excel workbook passed as a log file: its first line was "invalid UTF-8 at byte 10"."""
    import zipfile

    source = tmp_path / "day.xlsx"
    with zipfile.ZipFile(source, "w", compression=zipfile.ZIP_DEFLATED) as book:
        book.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="x"/>' * 20)
    out = tmp_path / "out.jsonl"
    result = invoke("evaluate", str(source), "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = read_jsonl(out)
    assert rows[0]["status"] == "invalid_input"
    assert rows[0]["status_reason"] == (
        "day.xlsx line 1: the file is a workbook or other zip archive (.xlsx, .ods, .zip), not JSON Lines text "
        "(one JSON object per line)"
    )
    assert all(row["status"] == "invalid_input" for row in rows)


def test_files_of_a_folder_that_look_like_logs_but_are_not_jsonl_are_named(tmp_path: Path) -> None:
    """``B.JSONL`` and ``c.json`` were left out without a word; a folder of only such files was
    "directory holds no *.jsonl files"."""
    line = json.dumps({"run_id": "r1", "question": "How many users?", "sql": "SELECT COUNT(*) FROM users"})
    folder = tmp_path / "day"
    folder.mkdir()
    for name in ("B.JSONL", "c.json"):
        (folder / name).write_text(line + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    none = invoke("evaluate", str(folder), "--out", str(out))
    assert none.exit_code == 2
    assert (
        none.stderr == f"error: {folder}: directory holds no *.jsonl files; not *.jsonl, so not read: B.JSONL, c.json\n"
    )
    (folder / "a.jsonl").write_text(line + "\n", encoding="utf-8")
    some = invoke("evaluate", str(folder), "--out", str(out))
    assert some.exit_code == 0, some.output
    assert some.stderr.splitlines() == [
        f"skipped {folder / 'B.JSONL'}: not a *.jsonl file",
        f"skipped {folder / 'c.json'}: not a *.jsonl file",
    ]
    assert [row["run_id"] for row in read_jsonl(out)] == ["r1"]


@pytest.mark.parametrize(
    ("command", "example"),
    [
        (("evaluate", "{source}"), "scores.jsonl"),
        (("review", "sample", "--warehouse", "{tmp}/wh.duckdb"), "review.csv"),
        (("review", "calibrate", "--warehouse", "{tmp}/wh.duckdb"), "calibrator.json"),
        (("catalog", "learn", "{source}"), "observed-catalog.json"),
    ],
    ids=["evaluate", "review_sample", "review_calibrate", "catalog_learn"],
)
def test_an_out_ending_in_a_slash_is_refused_not_written_as_a_file_of_that_name(
    tmp_path: Path, command: tuple[str, ...], example: str
) -> None:
    """``--out scores/`` (a folder that does not exist yet) wrote a file named ``scores``."""
    source = tmp_path / "day.jsonl"
    source.write_text(
        json.dumps({"run_id": "r1", "question": "How many users?", "sql": "SELECT COUNT(*) FROM users"}) + "\n",
        encoding="utf-8",
    )
    out = f"{tmp_path}/scores/"
    args = [a.replace("{source}", str(source)).replace("{tmp}", str(tmp_path)) for a in command]
    result = invoke(*args, "--out", out)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {out}: is a folder; give --out a file name (e.g. {out}{example})\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["day.jsonl"]


@pytest.mark.parametrize(
    ("command", "example"),
    [
        (("review", "sample", "--warehouse", "{tmp}/wh.duckdb"), "review.csv"),
        (("review", "calibrate", "--warehouse", "{tmp}/wh.duckdb"), "calibrator.json"),
        (("catalog", "learn", "{source}"), "observed-catalog.json"),
    ],
    ids=["review_sample", "review_calibrate", "catalog_learn"],
)
def test_out_dash_of_a_command_that_writes_files_is_refused_not_written_as_a_file_named_dash(
    tmp_path: Path, command: tuple[str, ...], example: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--out -`` wrote a file named ``-`` in the working folder, where standard output was meant."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "day.jsonl"
    source.write_text(json.dumps({"run_id": "r1", "question": "How many users?", "sql": "SELECT 1"}) + "\n")
    args = [a.replace("{source}", str(source)).replace("{tmp}", str(tmp_path)) for a in command]
    result = invoke(*args, "--out", "-")
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: --out -: this command writes a file, not standard output; give a file name, e.g. {example}\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["day.jsonl"]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            ("export", "--start", "2026-11-23", "--end", "2026-11-29", "--warehouse", "{tmp}/wh.duckdb"),
            "export output - (standard output) is not supported: DuckDB writes the export to a file; "
            "pass a file name, e.g. evaluations.csv",
        ),
        (
            ("report", "--week", "2026-W48", "--warehouse", "{tmp}/wh.duckdb"),
            "--out -: stef report writes two files (an HTML page and its Markdown twin), not standard output; "
            "pass a file path or a folder, e.g. stef-report-2026-W48.html",
        ),
    ],
    ids=["export", "report"],
)
def test_out_dash_of_export_and_report_is_refused_before_the_warehouse_is_read(
    tmp_path: Path, command: tuple[str, ...], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export or a report to ``-`` wrote files named ``-`` (and ``-.md``)."""
    monkeypatch.chdir(tmp_path)
    result = invoke(*[a.replace("{tmp}", str(tmp_path)) for a in command], "--out", "-")
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {message}\n"
    assert list(tmp_path.iterdir()) == []


def _stef(tmp_path: Path, *args: str, stdout: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    """``stef ARGS`` as a real process in ``tmp_path`` (its stdout a pipe unless given)."""
    return subprocess.Popen(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=tmp_path,
        env=checkout_env(COLUMNS="200"),
        stdout=stdout,
        stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize("out", ["-", "/dev/stdout"])
def test_rows_on_standard_output_leave_the_summary_to_stderr(tmp_path: Path, out: str) -> None:
    """``--out -`` (and ``--out /dev/stdout``) gives standard output the rows alone, the same rows
    as a file gets, so that ``stef evaluate … --out - | jq`` reads JSON lines only; the summary
    table goes to stderr. ``-`` wrote a file named ``-``, /dev/stdout got the table after the rows."""
    assert invoke("evaluate", str(FIXTURE), "--out", str(tmp_path / "file.jsonl")).exit_code == 0
    expected = read_jsonl(tmp_path / "file.jsonl")
    process = _stef(tmp_path, "evaluate", str(FIXTURE), "--out", out, "--workers", "1")
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr.decode()
    rows = [json.loads(line) for line in stdout.decode().splitlines()]
    assert [{k: row[k] for k in CONTRACT_KEYS} for row in rows] == [
        {k: row[k] for k in CONTRACT_KEYS} for row in expected
    ]
    assert "stef evaluate" in stderr.decode() and "records" in stderr.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.jsonl"]


def test_a_reader_that_closes_standard_output_stops_evaluate_quietly_with_141(tmp_path: Path) -> None:
    """``stef evaluate … --out - | head -1``: once ``head`` has its line the command stops as a Unix
    filter stops (exit 141, as for SIGPIPE) without a message; it was exit 2 with "cannot write output"."""
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()[:2]]  # cli-1, cli-2
    source = tmp_path / "big.jsonl"
    with source.open("w", encoding="utf-8") as handle:
        for index in range(3000):  # far more than a pipe's buffer holds
            handle.write(json.dumps({**rows[index % 2], "run_id": f"r{index}"}) + "\n")
    process = _stef(tmp_path, "evaluate", str(source), "--out", "-")
    assert process.stdout is not None and process.stderr is not None
    first = json.loads(process.stdout.readline())
    process.stdout.close()  # as head does after its line
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141, stderr
    assert first["run_id"] == "r0"
    assert stderr == ""


def test_a_schema_error_in_the_worker_processes_exits_2_with_its_one_line_every_time(tmp_path: Path) -> None:
    """An unusable schema file stops ``stef evaluate`` with exit code 2 and one line. With worker
    processes, most runs then printed a traceback of Python's exit hook racing the pool's manager
    thread (``OSError: [Errno 9] Bad file descriptor``) and exited 1."""
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "app.sql").write_text("-- no table here\n", encoding="utf-8")
    source = tmp_path / "day.jsonl"
    rows = [
        {"run_id": f"r{i}", "question": "How many schools?", "sql": "SELECT COUNT(*) FROM schools"} for i in range(4)
    ]
    source.write_text("".join(json.dumps({**row, "app_id": "app"}) + "\n" for row in rows), encoding="utf-8")
    outcomes = []
    for _ in range(6):
        process = _stef(
            tmp_path, "evaluate", str(source), "--out", "out.jsonl", "--schema-dir", str(schemas), "--workers", "2"
        )
        _, stderr = process.communicate(timeout=120)
        outcomes.append((process.returncode, stderr.decode()))
    expected = f"error: {schemas / 'app.sql'}: declares no table (expected CREATE TABLE statements)\n"
    assert outcomes == [(2, expected)] * 6


@pytest.mark.parametrize("kind", ["schema_file", "observed_catalog", "rules_file", "judge_cache", "calibrator"])
def test_evaluate_refuses_an_out_that_names_a_file_it_reads(tmp_path: Path, kind: str) -> None:
    """``--out`` naming the schema file, the observed catalog, the rules, the judge cache or the
    calibrator replaced it with score rows (exit 0)."""
    source = tmp_path / "day.jsonl"
    source.write_text(json.dumps({"run_id": "r1", "question": "How many users?", "sql": "SELECT 1"}) + "\n")
    (tmp_path / "schemas").mkdir()
    read = {
        "schema_file": (tmp_path / "schemas" / "app.sql", "--schema-dir", str(tmp_path / "schemas")),
        "observed_catalog": (tmp_path / "catalog.json", "--observed-catalog", None),
        "rules_file": (tmp_path / "rules.json", "--rules", None),
        "judge_cache": (tmp_path / "cache.duckdb", "--cache", None),
        "calibrator": (tmp_path / "calibrator.json", "--calibrator", None),
    }
    target, option, value = read[kind]
    target.write_text("CREATE TABLE users (id INT);\n" if kind == "schema_file" else "{}\n", encoding="utf-8")
    before = target.read_bytes()
    result = invoke("evaluate", str(source), option, value or str(target), "--out", str(target))
    assert result.exit_code == 2, result.output
    what = kind.replace("_", " ")
    assert result.stderr.startswith(f"error: --out {target} is the {what} this command reads")
    assert target.read_bytes() == before
