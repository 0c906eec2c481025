"""Fault tolerance of ``stef nightly`` (issue 7): SIGKILL while storing, two concurrent runs on one
warehouse, a lock held past the timeout, a 50 MB log file with one bad line, the Dask task runner.

The subprocess tests run the real ``stef nightly`` command (its typer app) in a fresh Python
process. To stop a run at a known point of storing, the process is started through
:data:`_HOOKED_STEF`: it wraps a function of ``warehouse.store`` (``$STEF_TEST_HOLD_AT``, default
``_record_stored_day``: inside the day's transaction, after its rows were inserted, before the
commit; ``_evaluations_table``: while staging, after the ``agent_runs`` chunks, before the first
``evaluations`` chunk, the day being staged whatever its size: ``DIRECT_INSERT_SHARE`` 0) so that it
creates a marker file and then waits for a release file. No test hook lives in the product code. Each subprocess pays
Prefect's temporary-server startup (about 10 s), hence the ``slow`` marks.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.support.checkout import checkout_env
from tests.support.demo_records import demo_source_records

DAY = date(2026, 11, 20)
OTHER_DAY = date(2026, 11, 21)

_HOOKED_STEF = textwrap.dedent(
    """
    import os, sys, time
    import warehouse.store as store

    _point = os.environ.get("STEF_TEST_HOLD_AT", "_record_stored_day")
    _original = getattr(store, _point)

    def _hold(*args, **kwargs):
        marker, release = os.environ["STEF_TEST_MARKER"], os.environ.get("STEF_TEST_RELEASE", "")
        open(marker, "w").close()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (release and os.path.exists(release)):
            time.sleep(0.05)
        return _original(*args, **kwargs)

    setattr(store, _point, _hold)
    if _point == "_evaluations_table":  # a day this small is inserted in its transaction, not staged
        store.DIRECT_INSERT_SHARE = 0.0
    from flows.cli.main import app
    app(sys.argv[1:], prog_name="stef")
    """
)
"""``python -c`` program: ``stef`` whose store transaction pauses (see the module docstring)."""


def _write_day(logs_root: Path, day: date, count: int, prefix: str) -> set[str]:
    """Write ``count`` demo records with new run ids ``<prefix>-<i>`` as the day; return the ids."""
    source = demo_source_records()
    folder = logs_root / day.isoformat()
    folder.mkdir(parents=True, exist_ok=True)
    run_ids = {f"{prefix}-{i}" for i in range(count)}
    with (folder / "agent-logs.jsonl").open("w", encoding="utf-8") as handle:
        for i in range(count):
            handle.write(json.dumps({**source[i % len(source)], "run_id": f"{prefix}-{i}"}) + "\n")
    return run_ids


def _env(**extra: str) -> dict[str, str]:
    """Environment of one ``stef`` subprocess: Prefect's usual home, its own temporary server."""
    env = checkout_env(PREFECT_SERVER_ANALYTICS_ENABLED="false", **extra)  # the checkout's stef, also from cwd=tmp_path
    env.pop("PREFECT_API_URL", None)  # never talk to the test session's harness
    return env


def _start_stef(tmp_path: Path, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start the hooked ``stef`` with stdout/stderr in ``<tmp>/<name>.out|.err``."""
    with (tmp_path / f"{name}.out").open("wb") as out, (tmp_path / f"{name}.err").open("wb") as err:
        # Own process group: a kill takes the run's temporary Prefect server with it (no orphans).
        return subprocess.Popen(
            [sys.executable, "-c", _HOOKED_STEF, *args],
            stdout=out,
            stderr=err,
            env=env,
            cwd=tmp_path,
            start_new_session=True,
        )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the run and every process it started (a crash of the whole run), then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _wait_for(
    condition: Any, what: str, process: subprocess.Popen[bytes] | None = None, timeout: float = 150.0
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"stef exited with {process.returncode} before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _day_counts(warehouse: Path, day: date) -> tuple[int, int, int, int]:
    """(agent_runs rows, distinct run ids, evaluations rows, distinct evaluated run ids) of the day."""
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        runs = conn.execute(
            "SELECT count(*), count(DISTINCT run_id) FROM agent_runs WHERE log_date = ?", [day]
        ).fetchone()
        evals = conn.execute(
            "SELECT count(*), count(DISTINCT run_id) FROM evaluations WHERE log_date = ?", [day]
        ).fetchone()
    assert runs is not None and evals is not None
    return int(runs[0]), int(runs[1]), int(evals[0]), int(evals[1])


def _stored_run_ids(warehouse: Path, day: date) -> set[str]:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return {row[0] for row in conn.execute("SELECT run_id FROM agent_runs WHERE log_date = ?", [day]).fetchall()}


# --------------------------------------------------------------------------- kill -9 while storing


@pytest.mark.slow
@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(
    "hold_at", ["_record_stored_day", "_evaluations_table"], ids=["inside_the_transaction", "while_staging"]
)
def test_sigkill_while_storing_then_rerun_stores_every_record_exactly_once(tmp_path: Path, hold_at: str) -> None:
    from flows.nightly import nightly

    logs, warehouse = tmp_path / "logs", tmp_path / "wh.duckdb"
    earlier = _write_day(logs, OTHER_DAY, 20, "earlier")
    nightly(log_date=OTHER_DAY, logs_root=str(logs), warehouse=str(warehouse))
    expected = _write_day(logs, DAY, 2000, "run")
    marker = tmp_path / "storing"
    env = _env(STEF_TEST_MARKER=str(marker), STEF_TEST_HOLD_AT=hold_at)
    args = ["nightly", "--date", DAY.isoformat(), "--logs-root", str(logs), "--warehouse", str(warehouse)]
    process = _start_stef(tmp_path, "killed", args, env)
    try:
        _wait_for(marker.exists, "the store transaction", process)
    finally:
        _kill_group(process)
    assert process.returncode == -signal.SIGKILL

    # The killed run left nothing of the day, and the earlier day is intact.
    assert _day_counts(warehouse, DAY) == (0, 0, 0, 0)
    assert _stored_run_ids(warehouse, OTHER_DAY) == earlier

    summary = nightly(log_date=DAY, logs_root=str(logs), warehouse=str(warehouse))
    assert summary.records == 2000
    assert _day_counts(warehouse, DAY) == (2000, 2000, 2000, 2000)
    assert _stored_run_ids(warehouse, DAY) == expected
    assert _stored_run_ids(warehouse, OTHER_DAY) == earlier


# --------------------------------------------------------------------------- two writers


@pytest.mark.slow
def test_two_concurrent_nightly_runs_on_one_warehouse_wait_for_each_other(tmp_path: Path) -> None:
    logs, warehouse, release = tmp_path / "logs", tmp_path / "wh.duckdb", tmp_path / "release"
    expected = {DAY: _write_day(logs, DAY, 60, "a"), OTHER_DAY: _write_day(logs, OTHER_DAY, 60, "b")}
    processes: dict[str, subprocess.Popen[bytes]] = {}
    for name, day in (("first", DAY), ("second", OTHER_DAY)):
        env = _env(STEF_TEST_MARKER=str(tmp_path / f"{name}.storing"), STEF_TEST_RELEASE=str(release))
        args = ["nightly", "--date", day.isoformat(), "--logs-root", str(logs), "--warehouse", str(warehouse)]
        processes[name] = _start_stef(tmp_path, name, args, env)

    def one_holds_the_lock_and_the_other_waits() -> bool:
        holding = [name for name in processes if (tmp_path / f"{name}.storing").exists()]
        waiting = [
            name
            for name in processes
            if b"is locked by another process; waiting" in (tmp_path / f"{name}.err").read_bytes()
        ]
        # the other run may have waited before too (for the lock one run takes while it prepares),
        # so its log can hold the line twice and both logs can hold it: the holder is the one in
        # its store transaction, and the other must have waited
        return len(holding) == 1 and any(name not in holding for name in waiting)

    try:
        _wait_for(
            one_holds_the_lock_and_the_other_waits,
            "one run inside its store transaction and the other waiting for the lock",
        )
        release.touch()
        for process in processes.values():
            process.wait(timeout=120)
    finally:
        for process in processes.values():
            _kill_group(process)
    for name, process in processes.items():
        assert process.returncode == 0, (tmp_path / f"{name}.err").read_text(errors="replace")[-3000:]
    waiting_log = b"".join((tmp_path / f"{name}.err").read_bytes() for name in processes).decode(errors="replace")
    assert f"warehouse {warehouse} is locked by another process; waiting up to 30 s" in waiting_log
    for day, run_ids in expected.items():
        assert _day_counts(warehouse, day) == (60, 60, 60, 60)
        assert _stored_run_ids(warehouse, day) == run_ids


_HOLDER = textwrap.dedent(
    """
    import sys, time, duckdb
    conn = duckdb.connect(sys.argv[1])
    print("ready", flush=True)
    time.sleep(float(sys.argv[2]))
    """
)


@pytest.fixture
def held_warehouse(tmp_path: Path) -> Iterator[Path]:
    """A migrated warehouse file that another process holds open for writing during the test."""
    from warehouse import connect

    path = tmp_path / "held.duckdb"
    connect(path).close()
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), "120"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        yield path
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_nightly_on_a_locked_warehouse_fails_with_the_real_wait(
    held_warehouse: Path, log_day: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    import flows.nightly  # noqa: F401  (Prefect's console handler binds to the real stderr first)
    from flows.cli.main import app

    monkeypatch.setenv("STEF_LOCK_TIMEOUT_S", "1")
    started = time.monotonic()
    result = CliRunner().invoke(
        app,
        [
            "nightly",
            "--date",
            "2026-11-20",
            "--logs-root",
            str(log_day),
            "--warehouse",
            str(held_warehouse),
            "--max-bad-share",
            "0.5",
        ],
    )
    elapsed = time.monotonic() - started
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert f"error: another stef process writes to {held_warehouse}; retry later" in message
    assert "gave up after waiting 1." in message and "limit 1 s" in message
    assert elapsed < 20, "a locked warehouse must not be retried on top of the lock wait"


def _calibrators(path: Path) -> object:
    from tasks.review import warehouse_calibrators

    return warehouse_calibrators(str(path))


def _rejected(path: Path) -> object:
    from tasks.store import store_rejected

    return store_rejected.fn(str(path), date(2026, 11, 20), [])


def _backfill_plan(path: Path) -> object:
    from tasks.backfill import plan_backfill

    return plan_backfill.fn(str(path), date(2026, 11, 20), date(2026, 11, 21), "v")


class _Messages(logging.Handler):
    """Collects the messages of one logger (Prefect may reconfigure the root's handlers on first use)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("open_warehouse", [_calibrators, _rejected, _backfill_plan])
def test_every_warehouse_write_of_a_run_says_that_it_waits_for_the_lock(
    held_warehouse: Path, monkeypatch: pytest.MonkeyPatch, open_warehouse: Any
) -> None:
    """Not only the first (check-warehouse): a run can find the file locked by another run at any of
    its writes, and a silent wait there looks like a hang (seen with two concurrent nightlies)."""
    from tasks._runtime import FALLBACK_LOGGER
    from warehouse import WarehouseLockedError

    monkeypatch.setenv("STEF_LOCK_TIMEOUT_S", "1.5")
    handler = _Messages()
    logger = logging.getLogger(FALLBACK_LOGGER)
    logger.addHandler(handler)
    try:
        with pytest.raises(WarehouseLockedError):
            open_warehouse(held_warehouse)
    finally:
        logger.removeHandler(handler)
    assert handler.messages == [f"warehouse {held_warehouse} is locked by another process; waiting up to 1.5 s for it"]


# --------------------------------------------------------------------------- 50 MB log with one bad line

BIG_LINES = 1000
"""Records of the 50 MB file: about 50 KB each (a large tool-call trace kept as an extra field)."""


def _write_big_log(path: Path, bad_line: bytes) -> int:
    """Write ~50 MB: :data:`BIG_LINES` padded records with ``bad_line`` in the middle; return its line number."""
    source = demo_source_records()
    padding = "x" * 50_000
    middle = BIG_LINES // 2 + 1
    with path.open("wb") as handle:
        for number in range(1, BIG_LINES + 2):
            if number == middle:
                handle.write(bad_line + b"\n")
                continue
            row = {**source[number % len(source)], "run_id": f"big-{number}", "trace": padding}
            handle.write(json.dumps(row).encode() + b"\n")
    return middle


@pytest.mark.slow
@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_a_50mb_log_with_one_bad_line_is_evaluated_and_the_line_quarantined(tmp_path: Path) -> None:
    from flows.nightly import nightly

    folder = tmp_path / "logs" / DAY.isoformat()
    folder.mkdir(parents=True)
    bad = b'{"run_id": "bad-utf8", "question": "caf\xe9?", "sql": "SELECT 1"'  # invalid UTF-8 and cut short
    middle = _write_big_log(folder / "big.jsonl", bad)
    assert (folder / "big.jsonl").stat().st_size > 50_000_000
    warehouse = tmp_path / "wh.duckdb"

    summary = nightly(log_date=DAY, logs_root=str(tmp_path / "logs"), warehouse=str(warehouse))

    assert (summary.records, summary.quarantined) == (BIG_LINES + 1, 1)
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        quarantined = conn.execute("SELECT line_number, reason FROM quarantine WHERE log_date = ?", [DAY]).fetchall()
        statuses = conn.execute(
            "SELECT count(*), count(DISTINCT run_id) FROM evaluations WHERE log_date = ? AND run_id LIKE 'big-%'", [DAY]
        ).fetchone()
    bad_byte = bad.index(b"\xe9")
    assert quarantined == [(middle, f"invalid UTF-8 at byte {bad_byte}")]
    assert statuses == (BIG_LINES, BIG_LINES)


_PEAK_RSS = textwrap.dedent(
    """
    import resource, sys
    from stef.logs import read_log_file
    good = bad = 0
    for line in read_log_file(sys.argv[1]):
        if line.record is None:
            bad += 1
        else:
            good += 1
    print(good, bad, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """
)


@pytest.mark.parametrize(
    "bad_line",
    [
        pytest.param(b'{"run_id": "bad-json", "question": "q", "sql": ', id="invalid_json"),
        pytest.param(b'{"run_id": "bad-utf8", "question": "\xff\xfe", "sql": "SELECT 1"}', id="invalid_utf8"),
    ],
)
def test_reading_a_50mb_log_streams(tmp_path: Path, bad_line: bytes) -> None:
    big, small = tmp_path / "big.jsonl", tmp_path / "small.jsonl"
    _write_big_log(big, bad_line)
    small.write_bytes(b"".join(big.open("rb").readlines()[:3]))

    def peak(path: Path) -> tuple[int, int, int]:
        out = subprocess.run(
            [sys.executable, "-c", _PEAK_RSS, str(path)], capture_output=True, text=True, check=True
        ).stdout
        good, bad, rss_kib = (int(value) for value in out.split())
        return good, bad, rss_kib

    good, bad, big_rss = peak(big)
    _, _, small_rss = peak(small)
    assert (good, bad) == (BIG_LINES, 1)
    # Streaming: reading 50 MB costs a few lines' worth of memory, not the file (limit 15 MB).
    assert big_rss - small_rss < 15 * 1024, f"peak RSS grew by {(big_rss - small_rss) // 1024} MiB for a 50 MB file"


# --------------------------------------------------------------------------- scoring pool (default runner)


def _without_duration(evidence: str) -> dict[str, Any]:
    """An evaluation's evidence JSON without ``duration_ms``, the one field that differs between two runs."""
    document = json.loads(evidence)
    assert document.pop("duration_ms") >= 0
    return document


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_nightly_stores_the_same_rows_with_the_pool_thread_and_process_runners(tmp_path: Path) -> None:
    import os

    import tasks.scoring_pool
    from flows.nightly import run_nightly

    logs = tmp_path / "logs"
    _write_day(logs, DAY, 300, "runners")
    columns = "run_id, status, status_reason, score, band, verdict, p_correct, filter_status, flags, evidence"
    rows: dict[str, list[tuple[Any, ...]]] = {}
    for runner in ("pool", "thread", "process"):
        warehouse = tmp_path / f"{runner}.duckdb"
        summary = run_nightly(
            task_runner=runner, workers=2, log_date=DAY, logs_root=str(logs), warehouse=str(warehouse), batch_size=50
        )
        assert (summary.records, summary.evaluated) == (300, 300)
        assert list(summary.timings)[:4] == ["settings", "load", "warehouse", "validate"]
        assert summary.timings["evaluate"] > 0
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            rows[runner] = [
                (*row[:-1], _without_duration(row[-1]))
                for row in conn.execute(f"SELECT {columns} FROM evaluations ORDER BY run_id").fetchall()
            ]
        if runner == "pool":  # the batches were scored in the shared pool's worker processes
            pool = tasks.scoring_pool._POOL
            assert pool is not None and tasks.scoring_pool._POOL_WORKERS == 2
            workers = {process.pid for process in pool._processes.values()}  # type: ignore[attr-defined]
            assert len(workers) == 2 and os.getpid() not in workers
    assert len(rows["pool"]) == 300
    assert rows["pool"] == rows["thread"] == rows["process"]


def test_a_dead_scoring_process_costs_time_never_the_batch() -> None:
    import os
    import signal

    import tasks.scoring_pool
    from stef.models import AgentLogRecord
    from tasks.evaluate import rulebook

    records = [
        AgentLogRecord.model_validate({**row, "run_id": f"dead-{i}"})
        for i, row in enumerate(demo_source_records()[:20])
    ]

    def scored(rows: list[Any]) -> list[dict[str, Any]]:
        return [_without_duration(row.evidence_json()) for row in rows]

    expected = scored(tasks.scoring_pool.score_batch(records, rulebook(None), None, None, None))
    assert len(expected) == 20 and {row["status"] for row in expected} == {"evaluated"}
    pool = tasks.scoring_pool.shared_pool(2)
    assert scored(tasks.scoring_pool.score_in_pool(records, None, None, None, 2)) == expected
    victim = next(iter(pool._processes.values()))  # type: ignore[attr-defined]
    os.kill(victim.pid, signal.SIGKILL)
    victim.join()
    assert scored(tasks.scoring_pool.score_in_pool(records, None, None, None, 2)) == expected  # in this thread
    assert tasks.scoring_pool._POOL is not pool  # the broken pool was dropped
    assert scored(tasks.scoring_pool.score_in_pool(records, None, None, None, 2)) == expected  # a new pool
    assert tasks.scoring_pool._POOL is not None and tasks.scoring_pool._POOL is not pool


# --------------------------------------------------------------------------- Dask task runner


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_nightly_on_a_local_dask_cluster_stores_the_same_rows_as_threads(tmp_path: Path) -> None:
    pytest.importorskip("prefect_dask", reason="prefect-dask is not installed (pip install 'stef[dask]')")
    from distributed import LocalCluster

    from flows.nightly import run_nightly

    logs = tmp_path / "logs"
    _write_day(logs, DAY, 300, "dask")
    columns = "run_id, status, score, band, verdict, filter_status"
    rows: dict[str, list[tuple[Any, ...]]] = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        for runner in ("thread", "dask"):
            warehouse = tmp_path / f"{runner}.duckdb"
            extra = {"dask_address": cluster.scheduler_address} if runner == "dask" else {}
            summary = run_nightly(
                task_runner=runner, log_date=DAY, logs_root=str(logs), warehouse=str(warehouse), batch_size=50, **extra
            )
            assert summary.records == 300
            with duckdb.connect(str(warehouse), read_only=True) as conn:
                rows[runner] = conn.execute(f"SELECT {columns} FROM evaluations ORDER BY run_id").fetchall()
    assert len(rows["dask"]) == 300
    assert rows["dask"] == rows["thread"]
