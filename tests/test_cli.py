"""Tests of the ``stef`` command line (flows/cli.py): ``evaluate``, errors, lazy imports, ``demo``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli import app
from tests.support.checkout import REPO_ROOT, checkout_env

FIXTURE = Path(__file__).parent / "fixtures" / "cli" / "agent-logs.jsonl"
"""Six records: two plain, one line that is not JSON, one empty SQL, one fenced SQL, one without question."""
FIXTURE_RUN_IDS = ["cli-1", "cli-2", None, "cli-4", "cli-5", "cli-6"]
CONTRACT_KEYS = ("run_id", "status", "score", "band", "filter_status", "verdict", "confidence")
HEAVY_MODULES = ("prefect", "litellm", "great_expectations", "duckdb")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_evaluate_writes_one_row_per_input_line_in_order(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "scores.jsonl"
    result = _invoke("evaluate", str(FIXTURE), "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = _read_jsonl(out)
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
    result = _invoke("evaluate", str(FIXTURE), "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = _read_jsonl(out)
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
        result = _invoke("evaluate", str(logs), "--out", str(out))
        assert result.exit_code == 0, result.output
        assert [row["run_id"] for row in _read_jsonl(out)] == ["cli-2", "cli-1"]


def test_dialect_option_is_the_default_for_records_without_one(tmp_path: Path) -> None:
    logs = tmp_path / "in.jsonl"
    records = [
        {"run_id": "own", "question": "How many users?", "sql": "SELECT COUNT(*) FROM users", "dialect": "sqlite"},
        {"run_id": "none", "question": "How many users?", "sql": "SELECT COUNT(*) FROM users"},
    ]
    logs.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = _invoke("evaluate", str(logs), "--out", str(out), "--dialect", "postgres")
    assert result.exit_code == 0, result.output
    assert [row["dialect"] for row in _read_jsonl(out)] == ["sqlite", "postgres"]


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
    result = _invoke("evaluate", str(FIXTURE), "--out", str(out), *args)
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
    result = _invoke("evaluate", str(FIXTURE), "--out", str(tmp_path / "out.jsonl"), "--rules", str(rules))
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
    result = _invoke("evaluate", str(source), "--out", str(tmp_path / "sub" / "out.jsonl"))
    assert result.exit_code == 2
    assert str(source) in result.stderr and expected in result.stderr


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


def test_evaluate_imports_no_heavy_library(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    code = textwrap.dedent(
        f"""
        import json, sys
        from typer.testing import CliRunner
        import flows.cli
        from flows.cli import app
        result = CliRunner().invoke(app, ["evaluate", {str(FIXTURE)!r}, "--out", {str(out)!r}])
        loaded = sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules)
        print(json.dumps({{"exit_code": result.exit_code, "loaded": loaded, "cli": flows.cli.__file__}}))
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
    assert len(_read_jsonl(out)) == len(FIXTURE_RUN_IDS)


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

    result = _invoke("demo", "--workdir", str(tmp_path))
    assert result.exit_code == 0, result.output
    days = sorted({day for day, _ in _bundled_day_counts()})
    assert sorted(p.name for p in (tmp_path / "stef-demo" / "logs").iterdir()) == days
    assert (tmp_path / "stef-demo" / "labels.jsonl").is_file()
    for day in days:
        assert day in result.stdout
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
    result = _invoke("nightly", "--date", "2026-13-01")
    assert result.exit_code == 2
    assert "--date" in result.output and "2026-13-01" in result.output


@pytest.mark.flow
@pytest.mark.usefixtures("flow_cli")
def test_nightly_without_logs_for_the_day_is_a_clean_error(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    result = _invoke(
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


def test_out_symlink_is_written_through_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "target.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    result = _invoke("evaluate", str(FIXTURE), "--out", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert len(_read_jsonl(target)) == len(
        [line for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    )


def test_out_directory_is_a_clean_error(tmp_path: Path) -> None:
    result = _invoke("evaluate", str(FIXTURE), "--out", str(tmp_path))
    assert result.exit_code == 2
    assert "is a directory; give --out a file name" in result.output


def test_worker_processes_give_the_same_rows_in_the_same_order(tmp_path: Path) -> None:
    """--workers 2 (process pool, small batches, the workers read raw lines) writes exactly what
    one process writes, over two files with blank lines, invalid UTF-8 and lines that are not JSON."""
    import flows.cli

    logs = tmp_path / "logs"
    logs.mkdir()
    lines = [line.encode() for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    odd = [b"", b'{"run_id": "bad-utf8", "question": "caf\xe9?", "sql": "SELECT 1"}', b"   "]
    (logs / "a.jsonl").write_bytes(b"\n".join(lines * 20 + odd + lines * 20) + b"\n")
    (logs / "b.jsonl").write_bytes(b"\r\n".join(lines * 3) + b"\r\n")
    outputs = []
    for workers in ("1", "2"):
        out = tmp_path / f"out-{workers}.jsonl"
        original = flows.cli.BATCH_SIZE
        flows.cli.BATCH_SIZE = 7  # many batches, so ordering across processes is exercised
        try:
            result = _invoke("evaluate", str(logs), "--out", str(out), "--workers", workers)
        finally:
            flows.cli.BATCH_SIZE = original
        assert result.exit_code == 0, result.output
        outputs.append([{k: v for k, v in row.items() if k != "duration_ms"} for row in _read_jsonl(out)])
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
    result = _invoke("evaluate", str(FIXTURE), "--out", str(out))
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
    result = _invoke("evaluate", str(logs), "--out", str(out), "--workers", "2")
    assert result.exit_code == 0, result.output
    statuses = {row["run_id"]: (row["status"], row["status_reason"]) for row in _read_jsonl(out)}
    assert statuses.pop("slow") == ("timeout", "evaluation exceeded the 0.2 s per-record cap")
    assert set(statuses.values()) == {("evaluated", None)}
