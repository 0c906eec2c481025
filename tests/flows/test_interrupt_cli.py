"""Ctrl-C (SIGINT to the whole process group, as a terminal sends it) and SIGTERM (as a scheduler
or ``kill`` sends it) stop a real ``stef backfill`` / ``stef nightly`` / ``stef evaluate`` within
seconds: exit code 130 / 143, one ``interrupted by SIG…`` line on stderr naming what was kept, no
traceback; the warehouse holds only whole days, and running the same command again stores every
day exactly once.

The model judge is the local OpenAI-compatible stub (tests/support/llm_server.py, 127.0.0.1
only), slow enough that a day's requests are still queued when the signal comes. Before the fix,
a Ctrl-C also stopped the temporary Prefect API server (same process group): the command then
printed httpx tracebacks for minutes while its queued model requests kept starting, and exited 1.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.support.checkout import checkout_env
from tests.support.llm_server import stub_llm_server, synthetic_records
from warehouse import connect
from warehouse.errors import WarehouseError

MODEL = "openai/gpt-4o-mini"
FIRST_DAY = date(2026, 11, 23)
EXIT_BOUND_S = 30.0
"""Seconds from the signal to the exit, at most (generous for a slow two-core CI machine: it was minutes)."""
DAY_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2}): \d+ lines, ")


def _write_days(logs: Path, days: int, per_day: int) -> list[date]:
    """``days`` days of ``per_day`` records each, every record with its own question (no cache hit)."""
    out = []
    for index in range(days):
        day = FIRST_DAY + timedelta(days=index)
        folder = logs / day.isoformat()
        folder.mkdir(parents=True)
        rows = synthetic_records(per_day)
        for row in rows:
            row.update(run_id=f"{day}-{row['run_id']}", timestamp=f"{day}T09:00:00+00:00")
            row["question"] = f"{row['question']} (day {index})"
        (folder / "agent-logs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        out.append(day)
    return out


class _Command:
    """A ``stef`` command line running in its own process group, its output read as it comes."""

    def __init__(self, tmp_path: Path, *args: str, ignore_sigint: bool = False) -> None:
        env = checkout_env(
            PREFECT_HOME=str(tmp_path / "prefect-home"),
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            OPENAI_API_KEY="sk-local-placeholder",
            PYTHONUNBUFFERED="1",
            COLUMNS="200",
        )
        env.pop("PREFECT_API_URL", None)
        env.pop("STEF_LLM_API_BASE", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "flows.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=env,
            start_new_session=True,  # its own group: the test sends Ctrl-C to it as a terminal would
            # as a non-interactive shell starts a job in the background (`stef ... &`): SIGINT ignored
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None,
        )
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.process.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._read, args=(self.process.stderr, self.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: object, into: list[str]) -> None:
        into.extend(stream)  # type: ignore[call-overload]

    def wait_for(self, condition: Callable[[], bool], timeout_s: float = 180.0) -> None:
        """Wait until ``condition()`` holds (fails the test when the command ended first or it took too long)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if self.process.poll() is not None:
                pytest.fail(f"the command ended (exit {self.process.returncode}) first:\n{''.join(self.stderr)}")
            if time.monotonic() > deadline:
                self.process.kill()
                pytest.fail(f"nothing happened in {timeout_s} s:\n{''.join(self.stderr)}")
            time.sleep(0.05)

    def interrupt(self, sig: signal.Signals, group: bool) -> float:
        """Send ``sig`` (to the whole group: a terminal's Ctrl-C; else to the command only: ``kill``)
        and wait for the exit; returns the seconds it took (the group is killed after 120 s)."""
        sent = time.monotonic()
        if group:
            os.killpg(self.process.pid, sig)
        else:
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        took = time.monotonic() - sent
        for reader in self._readers:
            reader.join(timeout=10)
        return took

    def finish(self, timeout_s: float = 300.0) -> int:
        """Wait for the command to end by itself; returns its exit code."""
        code = self.process.wait(timeout=timeout_s)
        for reader in self._readers:
            reader.join(timeout=10)
        return code

    @property
    def err(self) -> str:
        return "".join(self.stderr)


def _stored(warehouse: Path) -> dict[str, object]:
    """Per day: runs and distinct runs, evaluations and distinct evaluations, days marked done."""
    if not warehouse.exists():
        return {"runs": [], "evaluations": [], "done": []}
    try:
        conn = connect(warehouse, read_only=True)
    except WarehouseError:  # interrupted while its schema was made: opened for writing, as the next command does
        conn = connect(warehouse)
    with conn:
        return {
            "runs": conn.execute(
                "SELECT log_date, count(*), count(DISTINCT run_id) FROM agent_runs GROUP BY 1 ORDER BY 1"
            ).fetchall(),
            "evaluations": conn.execute(
                "SELECT log_date, count(*), count(DISTINCT run_id) FROM evaluations GROUP BY 1 ORDER BY 1"
            ).fetchall(),
            "done": [
                row[0]
                for row in conn.execute(
                    "SELECT log_date FROM stored_days WHERE metrics_at IS NOT NULL ORDER BY log_date"
                ).fetchall()
            ],
        }


def _assert_interrupted(command: _Command, took: float, sig: signal.Signals) -> str:
    """The exit code, the one line and no traceback; returns the line."""
    err = command.err
    assert command.process.returncode == 128 + sig, err
    assert took < EXIT_BOUND_S, f"exited {took:.1f} s after the signal:\n{err}"
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"interrupted by {sig.name}: ")]
    assert len(lines) == 1, err
    return lines[0]


def _assert_complete(warehouse: Path, days: list[date], per_day: int) -> None:
    """Every day stored once: its runs and evaluations, each run once, the day marked done."""
    stored = _stored(warehouse)
    assert stored["runs"] == [(day, per_day, per_day) for day in days]
    assert stored["evaluations"] == [(day, per_day, per_day) for day in days]
    assert stored["done"] == days


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_backfill_with_a_model_judge_stops_at_once_keeps_whole_days_and_resumes(
    tmp_path: Path, sig: signal.Signals
) -> None:
    logs, warehouse = tmp_path / "logs", tmp_path / "wh.duckdb"
    per_day = 8
    days = _write_days(logs, 3, per_day)
    args = ["backfill", "--start", str(days[0]), "--end", str(days[-1]), "--logs-root", str(logs)]
    args += ["--warehouse", str(warehouse), "--judge", MODEL, "--concurrency", "2"]
    with stub_llm_server(delay_s=0.6) as server:  # a day's requests: 4 × 0.6 s at least
        command = _Command(tmp_path, *args, "--api-base", server.url)
        # interrupted while the second day's requests are queued
        command.wait_for(lambda: any(DAY_LINE.match(line) for line in command.stdout))
        command.wait_for(lambda: server.requests > per_day)
        took = command.interrupt(sig, group=sig == signal.SIGINT)
        asked = server.requests
        line = _assert_interrupted(command, took, sig)
        assert line.startswith(f"interrupted by {sig.name}: 1 of 3 days stored before it ({days[0]}), 0 already done; ")
        assert f"{days[1]} was not finished" in line and line.endswith("run the same command again to resume")
        time.sleep(1.0)
        assert server.requests == asked, "model requests started after the command ended"
        kept = _stored(warehouse)
        assert kept["done"] == [days[0]]  # the day named as stored, whole; the interrupted one not marked done
        assert kept["runs"][0] == (days[0], per_day, per_day)
        server.delay_s = 0.0
        again = _Command(tmp_path, *args, "--api-base", server.url)
        assert again.finish() == 0, again.err
    out = "".join(again.stdout)
    assert f"{days[0]}: skipped (already done" in out, out
    assert [m.group(1) for m in map(DAY_LINE.match, out.splitlines()) if m] == [str(days[1]), str(days[2])]
    _assert_complete(warehouse, days, per_day)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_nightly_with_a_model_judge_stops_at_once_and_stores_nothing_of_the_day(
    tmp_path: Path, sig: signal.Signals
) -> None:
    logs, warehouse = tmp_path / "logs", tmp_path / "wh.duckdb"
    per_day = 12
    days = _write_days(logs, 1, per_day)
    args = ["nightly", "--date", str(days[0]), "--logs-root", str(logs), "--warehouse", str(warehouse)]
    args += ["--judge", MODEL, "--concurrency", "2"]
    with stub_llm_server(delay_s=0.6) as server:
        command = _Command(tmp_path, *args, "--api-base", server.url)
        command.wait_for(lambda: server.requests >= 2)
        took = command.interrupt(sig, group=sig == signal.SIGINT)
        asked = server.requests
        line = _assert_interrupted(command, took, sig)
        assert line == (
            f"interrupted by {sig.name}: {days[0]} was not finished and is not marked done (its rows are written "
            "in one transaction, replaced when redone); run the same command again to redo it"
        )
        assert asked < per_day, "the queued model requests were not abandoned"
        time.sleep(1.0)
        assert server.requests == asked, "model requests started after the command ended"
        assert _stored(warehouse)["done"] == []
        server.delay_s = 0.0
        again = subprocess.run(
            [sys.executable, "-m", "flows.cli", *args, "--api-base", server.url, "--quiet"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={
                **checkout_env(PREFECT_HOME=str(tmp_path / "prefect-home"), OPENAI_API_KEY="sk-local-placeholder"),
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            },
            timeout=300,
            check=False,
        )
    assert again.returncode == 0, again.stderr
    _assert_complete(warehouse, days, per_day)


@pytest.mark.slow
def test_ctrl_c_stops_a_symbolic_nightly_and_a_rerun_stores_the_day_once(tmp_path: Path) -> None:
    logs, warehouse = tmp_path / "logs", tmp_path / "wh.duckdb"
    per_day = 3000
    days = _write_days(logs, 1, per_day)
    args = ["nightly", "--date", str(days[0]), "--logs-root", str(logs), "--warehouse", str(warehouse)]
    command = _Command(tmp_path, *args)
    command.wait_for(lambda: "Beginning flow run" in command.err)
    took = command.interrupt(signal.SIGINT, group=True)
    if command.process.returncode == 0:  # pragma: no cover - a machine that scored the whole day first
        pytest.skip("the nightly finished before the signal")
    _assert_interrupted(command, took, signal.SIGINT)
    assert _stored(warehouse)["done"] == []
    again = _Command(tmp_path, *args, "--quiet")
    assert again.finish() == 0, again.err
    _assert_complete(warehouse, days, per_day)


def test_sigterm_stops_stef_evaluate_with_a_model_judge_and_leaves_no_output(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(row) + "\n" for row in synthetic_records(40)), encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    with stub_llm_server(delay_s=0.5) as server:
        command = _Command(
            tmp_path, "evaluate", str(records), "--out", str(out), "--judge", MODEL, "--api-base", server.url
        )
        command.wait_for(lambda: server.requests >= 2)
        took = command.interrupt(signal.SIGTERM, group=False)
    line = _assert_interrupted(command, took, signal.SIGTERM)
    assert line == (
        f"interrupted by SIGTERM: nothing was written to {out} (rows go to scores.jsonl.partial, removed, "
        "and are renamed only at the end)"
    )
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("scores")) == []


def test_a_command_started_with_ctrl_c_ignored_is_not_stopped_by_it(tmp_path: Path) -> None:
    """A job a script starts in the background (`stef evaluate ... &`) ignores SIGINT: a Ctrl-C meant
    for the script does not stop it; it finishes and writes every row."""
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(row) + "\n" for row in synthetic_records(20)), encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    with stub_llm_server(delay_s=0.2) as server:
        command = _Command(
            tmp_path,
            "evaluate", str(records), "--out", str(out), "--judge", MODEL, "--api-base", server.url,
            ignore_sigint=True,
        )  # fmt: skip
        command.wait_for(lambda: server.requests >= 2)
        os.killpg(command.process.pid, signal.SIGINT)
        code = command.finish(timeout_s=120)
    assert code == 0, command.err
    assert "interrupted" not in command.err and "Traceback" not in command.err
    assert len(out.read_text(encoding="utf-8").splitlines()) == 20


@pytest.mark.slow
def test_ctrl_c_stops_stef_demo_with_one_line_and_the_demo_runs_again(tmp_path: Path) -> None:
    """``stef demo`` stopped at a Ctrl-C without saying what it had kept or what to do."""
    command = _Command(tmp_path, "demo", "--workdir", str(tmp_path))
    command.wait_for(lambda: command.err.count("Beginning flow run") >= 2)  # the first day is stored
    took = command.interrupt(signal.SIGINT, group=True)
    if command.process.returncode == 0:  # pragma: no cover - a machine that scored every day first
        pytest.skip("the demo finished before the signal")
    line = _assert_interrupted(command, took, signal.SIGINT)
    assert line == (
        f"interrupted by SIGINT: the demo days scored before it stay in {tmp_path / 'stef-demo.duckdb'} "
        "(each day is written in one transaction); run stef demo again to score them all"
    )
    again = _Command(tmp_path, "demo", "--workdir", str(tmp_path), "--quiet")
    assert again.finish() == 0, again.err
    assert "Daily metrics read back from" in "".join(again.stdout)
