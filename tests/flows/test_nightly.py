"""Smoke test of the nightly flow under the session's Prefect test harness, plus its helpers."""

from __future__ import annotations

import doctest
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

import flows.nightly
import warehouse.connection
from flows.nightly import NightlySummary, nightly, resolve_log_date
from stef.errors import InputError
from tasks.artifacts import SUMMARY_ARTIFACT_KEY
from warehouse import connect, day_is_done

DAY = date(2026, 11, 20)


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_nightly_stores_a_day_and_a_rerun_replaces_it(log_day: Path, tmp_path: Path) -> None:
    from prefect.artifacts import Artifact

    warehouse_path = tmp_path / "warehouse" / "stef.duckdb"
    settings: dict[str, Any] = {
        "logs_root": str(log_day),
        "warehouse": str(warehouse_path),
        "max_bad_share": 0.3,
        "batch_size": 2,
    }
    first = nightly(log_date="2026-11-20", **settings)
    second = nightly(log_date=DAY, **settings)  # rerun of the same day: replaces, never duplicates

    assert isinstance(first, NightlySummary)
    assert (first.log_date, first.records, first.quarantined, first.warehouse) == (DAY, 8, 2, str(warehouse_path))
    assert first.evaluated == 4  # 6 valid records: one unparseable SQL, one empty question
    assert first.coverage == pytest.approx(4 / 8)
    assert sorted((m["agent_id"], m["agent_version"], m["records"], m["evaluated"]) for m in first.metrics) == [
        ("sales-analyst", "v2.3.0", 2, 2),
        ("sales-analyst", "v2.4.0", 2, 1),
        ("support-bot", "v1.0.0", 3, 1),
    ]
    assert (second.records, second.evaluated, second.quarantined) == (first.records, first.evaluated, first.quarantined)
    # the flow ends once the background checkpoint of its store has merged the write-ahead log
    assert not Path(f"{warehouse_path}.wal").exists()
    assert (warehouse.connection._DEFERRED, warehouse.connection._CHECKPOINTS) == ([], [])
    assert list(second.timings)[-3:] == ["metrics", "drift", "checkpoint"]

    conn = connect(warehouse_path, read_only=True)
    try:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM agent_runs), (SELECT count(*) FROM evaluations), "
            "(SELECT count(*) FROM quarantine), (SELECT count(*) FROM daily_agent_metrics)"
        ).fetchall()
        assert counts == [(6, 7, 2, 3)]
        statuses = dict(conn.execute("SELECT run_id, status FROM evaluations WHERE status <> 'evaluated'").fetchall())
        assert statuses == {
            "sales-0004": "parse_error",
            "support-0002": "invalid_input",
            "support-0003": "invalid_input",
        }
        quarantined = conn.execute("SELECT line_number, run_id FROM quarantine ORDER BY source_file").fetchall()
        assert quarantined == [(5, None), (4, "support-0003")]
        assert day_is_done(conn, DAY, first.evaluator_version)
    finally:
        conn.close()

    artifact = cast(Artifact | None, Artifact.get(SUMMARY_ARTIFACT_KEY))  # sync call: not a coroutine
    assert artifact is not None and artifact.type == "table"
    assert "2026-11-20: 8 log lines, 4 scored, 2 quarantined" in (artifact.description or "")


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_a_failure_after_the_store_still_closes_the_warehouse(
    log_day: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store keeps its connection open for a background checkpoint: a failure right after it
    (here its own log line) still closes it before the flow ends, so the file is not left locked."""
    import duckdb

    import tasks.store

    class FailingLogger:
        def warning(self, *args: object) -> None: ...

        def info(self, *args: object) -> None:
            raise RuntimeError("the log handler broke")

    monkeypatch.setattr(tasks.store, "run_logger", FailingLogger)
    warehouse_path = tmp_path / "stef.duckdb"
    with pytest.raises(RuntimeError, match="the log handler broke"):
        nightly(log_date=DAY, logs_root=str(log_day), warehouse=str(warehouse_path), max_bad_share=0.3)
    assert (warehouse.connection._DEFERRED, warehouse.connection._CHECKPOINTS) == ([], [])
    reader = duckdb.connect(str(warehouse_path), read_only=True)  # refused while this process had it open for writing
    try:
        assert reader.execute("SELECT count(*) FROM agent_runs").fetchall() == [(6,)]  # the store committed
    finally:
        reader.close()


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_a_day_delivered_again_under_a_new_date_fails_the_bad_share_gate(log_day: Path, tmp_path: Path) -> None:
    """The records of 2026-11-20 again as 2026-11-21: their run ids are stored for another day, so
    they are bad lines for the gate (the run fails, nothing of the new day is stored but its
    rejected lines); with the gate opened they are quarantined with the reason, none is scored."""
    import shutil

    from tasks import LogQualityError

    shutil.copytree(log_day / "2026-11-20", log_day / "2026-11-21")
    warehouse_path = tmp_path / "stef.duckdb"
    settings: dict[str, Any] = {"logs_root": str(log_day), "warehouse": str(warehouse_path), "max_bad_share": 0.3}
    nightly(log_date=DAY, **settings)
    again = log_day / "2026-11-21" / "sales-agent.jsonl"
    with again.open("a", encoding="utf-8") as handle:  # one line twice within the day as well
        handle.write(again.read_text(encoding="utf-8").splitlines()[0] + "\n")
    with pytest.raises(
        LogQualityError, match=r"9 of 9 log lines .* duplicate run_id: already stored for log date 2026-11-20"
    ) as caught:
        nightly(log_date=DAY + timedelta(days=1), **settings)
    # one kind under one wording, with what tells its lines apart (it said "6 x duplicate run_id;
    # 1 x run_id is a duplicate")
    assert "most common reasons: 7 x duplicate run_id (6 stored for another day, 1 within the day); 1 x " in str(
        caught.value
    )
    opened = nightly(log_date=DAY + timedelta(days=1), **{**settings, "max_bad_share": 1.0})
    assert (opened.records, opened.evaluated, opened.quarantined) == (9, 0, 9)
    with connect(warehouse_path, read_only=True) as conn:
        reasons = conn.execute(
            "SELECT count(*) FROM quarantine WHERE log_date = ? AND reason LIKE 'duplicate run_id: already stored%'",
            [DAY + timedelta(days=1)],
        ).fetchall()
        stored = conn.execute(
            "SELECT count(*) FROM agent_runs WHERE log_date = ?", [DAY + timedelta(days=1)]
        ).fetchall()
    assert reasons == [(6,)] and stored == [(0,)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("2026-11-20", DAY, id="iso_string"),
        pytest.param(" 2026-11-20 ", DAY, id="padded_string"),
        pytest.param(DAY, DAY, id="date"),
        pytest.param(datetime(2026, 11, 20, 23, 59), DAY, id="datetime"),
    ],
)
def test_resolve_log_date(value: date | str, expected: date) -> None:
    assert resolve_log_date(value) == expected


def test_default_log_date_is_yesterday_utc() -> None:
    assert resolve_log_date(None) == datetime.now(UTC).date() - timedelta(days=1)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("20/11/2026", id="day_first"),
        pytest.param("2026-11-2", id="day_not_zero_padded"),
        pytest.param("20261120", id="basic_iso_form"),
        pytest.param("2026-W47-5", id="iso_week_date"),
    ],
)
def test_malformed_log_date_is_a_clear_error(value: str) -> None:
    # the deployment's log_date parameter is read as strictly as the CLI's --date
    with pytest.raises(InputError, match=rf"^log date '{value}' is not a date of the form YYYY-MM-DD$"):
        resolve_log_date(value)
    with pytest.raises(InputError, match=r"^log date '2026-11-31' is not a day of the calendar \(day is out of range"):
        resolve_log_date("2026-11-31")  # of the form, but November has 30 days


def test_make_task_runner_rejects_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match=r"task runner must be one of pool, thread, process, dask, got 'cluster'"):
        flows.nightly.make_task_runner("cluster")


def test_nightly_doctests() -> None:
    assert doctest.testmod(flows.nightly).failed == 0


class _RecordingProgress:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    def started(self, log_date: date, records: int, batches: int) -> None:
        self.calls.append(("started", (log_date, records, batches)))

    def advanced(self, records: int) -> None:
        self.calls.append(("advanced", (records,)))

    def finished(self) -> None:
        self.calls.append(("finished", ()))


class _BrokenProgress(_RecordingProgress):
    def advanced(self, records: int) -> None:
        raise RuntimeError("terminal went away")


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_nightly_reports_its_evaluation_progress_batch_by_batch(log_day: Path, tmp_path: Path) -> None:
    """Issue 17 item 3: the progress bar is fed by the flow, one step per batch; a display that
    fails is switched off and the run goes on."""
    from flows.progress import showing_progress

    recording, broken = _RecordingProgress(), _BrokenProgress()
    with showing_progress(recording), showing_progress(broken):
        summary = nightly(
            log_date=DAY, logs_root=str(log_day), warehouse=str(tmp_path / "w.duckdb"), max_bad_share=0.3, batch_size=2
        )
    records = summary.records - summary.quarantined  # 6 valid records in batches of 2
    assert recording.calls == [
        ("started", (DAY, records, 3)),
        ("advanced", (2,)),
        ("advanced", (2,)),
        ("advanced", (2,)),
        ("finished", ()),
    ]
    assert broken.calls == [("started", (DAY, records, 3))]  # dropped at its first failure


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_the_pool_runner_cuts_the_day_into_one_task_share_per_process(
    log_day: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``batch_size`` the pool runner cuts the day with ``pool_task_count`` (here with its
    limits scaled down: at most 4 records per task, 2 processes: 6 records in 2 tasks of 3), the
    thread runner keeps ``BATCH_SIZE`` (scaled down to 1: 6 tasks), and so does a model judge on
    the pool runner (its batches stay in threads, they share the run's budget); the symbolic rows
    are the same on both runners."""
    import tasks.evaluate
    from flows.progress import showing_progress
    from tests.support.llm_server import stub_llm_server

    monkeypatch.setattr(tasks.evaluate, "BATCH_SIZE", 1)
    monkeypatch.setattr(tasks.evaluate, "POOL_BATCH_MAX", 4)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-placeholder")
    monkeypatch.delenv("STEF_LLM_API_BASE", raising=False)
    calls: dict[str, list[tuple[str, tuple[object, ...]]]] = {}
    scores: dict[str, list[tuple[Any, ...]]] = {}
    with stub_llm_server(delay_s=0.0) as server:
        runs: list[tuple[str, str, dict[str, str]]] = [
            ("pool", "pool", {}),
            ("thread", "thread", {}),
            ("model", "pool", {"judge": "openai/gpt-4o-mini", "api_base": server.url}),
        ]
        for name, runner, judge in runs:
            recording = _RecordingProgress()
            warehouse_path = tmp_path / f"{name}.duckdb"
            with showing_progress(recording):
                flows.nightly.run_nightly(
                    task_runner=runner,
                    workers=2,
                    log_date=DAY,
                    logs_root=str(log_day),
                    warehouse=str(warehouse_path),
                    max_bad_share=0.3,
                    **judge,
                )
            calls[name] = recording.calls
            conn = connect(warehouse_path, read_only=True)
            try:
                query = "SELECT run_id, status, score, verdict FROM evaluations ORDER BY run_id"
                scores[name] = conn.execute(query).fetchall()
            finally:
                conn.close()
    assert calls["pool"] == [("started", (DAY, 6, 2)), ("advanced", (3,)), ("advanced", (3,)), ("finished", ())]
    assert calls["thread"] == [("started", (DAY, 6, 6)), *[("advanced", (1,))] * 6, ("finished", ())]
    assert calls["model"] == calls["thread"]
    valid_and_quarantined_with_run_id = 7  # 6 valid records + the quarantined line that has a run_id
    assert scores["pool"] == scores["thread"] and len(scores["pool"]) == valid_and_quarantined_with_run_id


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_a_small_day_keeps_its_evidence_as_text_and_a_large_one_compresses_it_with_the_same_rows(
    log_day: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scoring workers return a small day's evidence JSON as text (no zlib on either side) and
    a day over ``PLAIN_EVIDENCE_MAX_BYTES`` (here set to 0) compressed; the stored rows are the
    same (the evidence compared without its timing)."""
    import json

    import stef.models
    import warehouse.store

    forms: list[set[str]] = []
    size_of = warehouse.store._evaluation_size

    def recording_size(row: Any) -> int:
        if isinstance(row[0], stef.models.CompactEvaluation):  # not a rejected line's invalid_input row
            forms[-1].add(type(row[0].evidence).__name__)
        return size_of(row)

    monkeypatch.setattr(warehouse.store, "_evaluation_size", recording_size)
    stored: list[list[tuple[Any, ...]]] = []
    for budget in (stef.models.PLAIN_EVIDENCE_MAX_BYTES, 0):
        monkeypatch.setattr(stef.models, "PLAIN_EVIDENCE_MAX_BYTES", budget)
        forms.append(set())
        warehouse_path = tmp_path / f"budget-{budget}.duckdb"
        flows.nightly.run_nightly(
            task_runner="pool",
            workers=2,
            log_date=DAY,
            logs_root=str(log_day),
            warehouse=str(warehouse_path),
            max_bad_share=0.3,
        )
        conn = connect(warehouse_path, read_only=True)
        try:
            rows = conn.execute("SELECT run_id, status, score, verdict, evidence FROM evaluations ORDER BY run_id")
            stored.append(
                [
                    (*row[:4], {k: v for k, v in json.loads(row[4]).items() if k != "duration_ms"})
                    for row in rows.fetchall()
                ]
            )
        finally:
            conn.close()
    assert forms == [{"str"}, {"bytes"}]
    assert stored[0] == stored[1] and len(stored[0]) == 7


def test_an_interrupt_in_the_batch_wait_stops_the_model_requests_only_with_a_runner_that_lifts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """interruptible_result: Ctrl-C reaching the wait stops this process's model requests at once
    with this package's thread-pool runners (their shutdown lifts it); with another runner (its
    batches run elsewhere) nothing would lift it, so it is not set; an error of the task is no interrupt."""
    import flows.nightly as nightly
    from stef.llm import request_stop

    def interrupted(futures: object, timeout: float) -> object:
        raise KeyboardInterrupt

    def failed(futures: object, timeout: float) -> object:
        raise RuntimeError("the task failed")

    monkeypatch.setattr(nightly, "wait_for_futures", interrupted)
    monkeypatch.setattr(nightly, "runner_lifts_request_stop", lambda: False)
    with pytest.raises(KeyboardInterrupt):
        nightly.interruptible_result(object())  # type: ignore[arg-type]
    assert not request_stop.stopped()
    monkeypatch.setattr(nightly, "runner_lifts_request_stop", lambda: True)
    monkeypatch.setattr(nightly, "wait_for_futures", failed)
    with pytest.raises(RuntimeError):
        nightly.interruptible_result(object())  # type: ignore[arg-type]
    assert not request_stop.stopped()
    monkeypatch.setattr(nightly, "wait_for_futures", interrupted)
    with pytest.raises(KeyboardInterrupt):
        nightly.interruptible_result(object())  # type: ignore[arg-type]
    try:
        assert request_stop.stopped()
    finally:
        with request_stop.stopped_block():  # as the runner's shutdown: its end lifts the stop
            pass
    assert not request_stop.stopped()
