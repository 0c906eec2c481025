"""Tests of warehouse/: migrations, connection and lock handling, day writes, daily metrics."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pytest

import warehouse
import warehouse.connection
import warehouse.migrate
import warehouse.store
from stef.logs import LogLine, parse_line, read_log_file
from stef.models import EVALUATOR_VERSION, Band, Evaluation, EvaluationStatus
from warehouse import (
    StoreSummary,
    WarehouseError,
    WarehouseLockedError,
    apply_migrations,
    compute_daily_metrics,
    connect,
    current_version,
    day_is_done,
    read_daily_metrics,
    resolve_path,
    store_day,
)

AGENT_LOGS = Path(__file__).parent / "fixtures" / "agent_logs"
DAY = date(2026, 11, 20)
NEXT_DAY = date(2026, 11, 21)
TABLES = {
    "agent_runs",
    "evaluations",
    "quarantine",
    "judge_cache",
    "daily_agent_metrics",
    "drift_checks",
    "stored_days",
    "schema_version",
}


def line(number: int, source: str = "agent.jsonl", **fields: Any) -> LogLine:
    """A LogLine parsed from a JSON object with ``fields`` (question/sql default to valid text)."""
    payload = {"question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders", **fields}
    parsed = parse_line(json.dumps(payload).encode(), source, number)
    assert parsed is not None
    return parsed


def bad_line(number: int, raw: bytes, source: str = "agent.jsonl") -> LogLine:
    parsed = parse_line(raw, source, number)
    assert parsed is not None and parsed.record is None
    return parsed


def scored(run_id: str, score: float, band: Band, **extra: Any) -> Evaluation:
    return Evaluation(run_id=run_id, status=EvaluationStatus.EVALUATED, score=score, band=band, confidence=0.9, **extra)


def failed(
    run_id: str, status: EvaluationStatus = EvaluationStatus.PARSE_ERROR, reason: str = "cannot parse"
) -> Evaluation:
    return Evaluation(run_id=run_id, status=status, status_reason=reason)


def count(conn: duckdb.DuckDBPyConnection, sql: str, *params: Any) -> int:
    return int(conn.execute(sql, list(params)).fetchall()[0][0])


@pytest.fixture
def conn() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = connect(":memory:")
    yield connection
    connection.close()


# --------------------------------------------------------------------------- paths, migrations


@pytest.mark.parametrize(
    ("explicit", "env", "expected"),
    [
        pytest.param("/data/explicit.duckdb", "/data/env.duckdb", "/data/explicit.duckdb", id="explicit_beats_env"),
        pytest.param(None, "/data/env.duckdb", "/data/env.duckdb", id="env_beats_default"),
        pytest.param(None, None, "stef.duckdb", id="default_in_working_dir"),
        pytest.param("", "/data/env.duckdb", "/data/env.duckdb", id="empty_string_means_not_given"),
    ],
)
def test_resolve_path_precedence(
    monkeypatch: pytest.MonkeyPatch, explicit: str | None, env: str | None, expected: str
) -> None:
    if env is None:
        monkeypatch.delenv(warehouse.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(warehouse.ENV_VAR, env)
    assert resolve_path(explicit) == Path(expected)


def test_connect_creates_folders_and_schema_then_migrating_again_is_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "folders" / "stef.duckdb"
    first = connect(path)
    try:
        tables = {row[0] for row in first.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert tables >= TABLES
        assert current_version(first) == warehouse.available_migrations()[-1].version
        assert apply_migrations(first) == ()
    finally:
        first.close()
    second = connect(path)  # a later process: migrations already applied
    try:
        rows = second.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        assert [r[0] for r in rows] == [m.version for m in warehouse.available_migrations()]
    finally:
        second.close()
    assert path.is_file()


def test_connect_uses_env_var_when_no_path_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "from-env" / "wh.duckdb"
    monkeypatch.setenv(warehouse.ENV_VAR, str(target))
    connect(None).close()
    assert target.is_file()


def test_read_only_connection_of_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match=r"cannot open warehouse .*missing\.duckdb"):
        connect(tmp_path / "missing.duckdb", read_only=True)


def test_migration_files_are_numbered_without_gaps() -> None:
    versions = [m.version for m in warehouse.available_migrations()]
    assert versions == list(range(1, len(versions) + 1))
    assert warehouse.available_migrations()[0].name == "0001_initial.sql"


# --------------------------------------------------------------------------- one writer process

_HOLDER = textwrap.dedent(
    """
    import sys, time
    import duckdb
    conn = duckdb.connect(sys.argv[1])
    print("ready", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.close()
    """
)


def _hold(path: Path, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    return holder


def test_locked_file_raises_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "stef.duckdb"
    connect(path).close()
    holder = _hold(path, 30)
    try:
        with pytest.raises(WarehouseLockedError, match=r"another stef process writes to .*stef\.duckdb; retry later"):
            connect(path, lock_timeout=0)
    finally:
        holder.kill()
        holder.wait()


def test_connect_waits_for_the_lock_to_be_released(tmp_path: Path) -> None:
    path = tmp_path / "stef.duckdb"
    holder = _hold(path, 0.5)
    try:
        conn = connect(path, lock_timeout=20)
        conn.close()
    finally:
        holder.wait()


def test_locked_error_is_a_stef_error() -> None:
    from stef.errors import StefError

    assert issubclass(WarehouseLockedError, StefError)


# --------------------------------------------------------------------------- store_day


def _fixture_day() -> tuple[list[LogLine], list[Evaluation]]:
    """The fixture day: 8 lines, 2 rejected by the reader (one with a run_id), 6 valid records."""
    lines = [entry for path in sorted(AGENT_LOGS.glob("*.jsonl")) for entry in read_log_file(path)]
    evaluations = [scored(entry.record.run_id, 80.0, Band.GOOD) for entry in lines if entry.record is not None]
    rejected = [entry for entry in lines if entry.record is None and entry.run_id is not None]
    evaluations += [
        failed(entry.run_id or "", EvaluationStatus.INVALID_INPUT, entry.reason or "") for entry in rejected
    ]
    return lines, evaluations


def test_store_day_twice_replaces_and_never_duplicates(conn: duckdb.DuckDBPyConnection) -> None:
    lines, evaluations = _fixture_day()
    first = store_day(conn, DAY, lines, evaluations)
    second = store_day(conn, DAY, lines, evaluations)
    assert (
        first
        == second
        == StoreSummary(
            log_date=DAY,
            evaluator_version=EVALUATOR_VERSION,
            lines=8,
            runs=6,
            evaluations=7,
            evaluated=6,
            quarantined=2,
            quarantined_without_evaluation=1,
        )
    )
    assert count(conn, "SELECT count(*) FROM agent_runs") == 6
    assert count(conn, "SELECT count(*) FROM evaluations") == 7
    assert count(conn, "SELECT count(*) FROM quarantine") == 2
    assert count(conn, "SELECT count(*) FROM stored_days") == 1


def test_rerun_with_fewer_lines_removes_the_old_rows(conn: duckdb.DuckDBPyConnection) -> None:
    lines, evaluations = _fixture_day()
    store_day(conn, DAY, lines, evaluations)
    kept = lines[:2]
    store_day(conn, DAY, kept, [e for e in evaluations if e.run_id in {"sales-0001", "sales-0002"}])
    assert sorted(r[0] for r in conn.execute("SELECT run_id FROM agent_runs").fetchall()) == [
        "sales-0001",
        "sales-0002",
    ]
    assert count(conn, "SELECT count(*) FROM evaluations") == 2
    assert count(conn, "SELECT count(*) FROM quarantine") == 0


def test_counting_rule_nothing_is_dropped(conn: duckdb.DuckDBPyConnection) -> None:
    """lines == evaluations rows + quarantined lines without an evaluation row."""
    lines, evaluations = _fixture_day()
    summary = store_day(conn, DAY, lines, evaluations)
    without_evaluation = count(
        conn,
        "SELECT count(*) FROM quarantine q WHERE q.run_id IS NULL "
        "OR NOT EXISTS (SELECT 1 FROM evaluations e WHERE e.run_id = q.run_id AND e.log_date = q.log_date)",
    )
    assert summary.lines == count(conn, "SELECT count(*) FROM evaluations") + without_evaluation
    assert summary.lines == count(conn, "SELECT count(*) FROM agent_runs") + count(
        conn, "SELECT count(*) FROM quarantine"
    )
    rows = conn.execute(
        "SELECT source_file, line_number, run_id, agent_id, reason FROM quarantine ORDER BY source_file"
    ).fetchall()
    assert [(Path(r[0]).name, r[1], r[2], r[3]) for r in rows] == [
        ("sales-agent.jsonl", 5, None, None),
        ("support-agent.jsonl", 4, "support-0003", "support-bot"),
    ]
    assert rows[0][4].startswith("not valid JSON")
    assert rows[1][4] == "invalid record: field `sql`: Field required"
    status = conn.execute(
        "SELECT status, agent_id, agent_version FROM evaluations WHERE run_id = 'support-0003'"
    ).fetchall()
    assert status == [("invalid_input", "support-bot", "v1.0.0")]


def test_stored_columns_come_from_the_record_and_the_evaluation(conn: duckdb.DuckDBPyConnection) -> None:
    lines, evaluations = _fixture_day()
    store_day(conn, DAY, lines, evaluations)
    run = conn.execute(
        "SELECT log_date, agent_id, agent_version, app_id, tokens->>'prompt', latency_ms, line_number, raw->>'run_id' "
        "FROM agent_runs WHERE run_id = 'sales-0001'"
    ).fetchall()
    assert run == [(DAY, "sales-analyst", "v2.3.0", "example_sales", "812", 1834.5, 1, "sales-0001")]
    evaluation = conn.execute(
        "SELECT status, score, band, confidence, evidence->>'run_id', json_array_length(flags), evaluator_version "
        "FROM evaluations WHERE run_id = 'sales-0001'"
    ).fetchall()
    assert evaluation == [("evaluated", 80.0, "good", 0.9, "sales-0001", 0, EVALUATOR_VERSION)]


def test_a_run_id_stored_for_another_day_is_quarantined(conn: duckdb.DuckDBPyConnection) -> None:
    store_day(conn, DAY, [line(1, run_id="r1")], [scored("r1", 50.0, Band.MARGINAL)])
    summary = store_day(
        conn,
        NEXT_DAY,
        [line(1, run_id="r1"), line(2, run_id="r2")],
        [scored("r1", 60.0, Band.MARGINAL), scored("r2", 70.0, Band.MARGINAL)],
    )
    assert (summary.runs, summary.evaluations, summary.quarantined) == (1, 1, 1)
    reason = conn.execute("SELECT reason FROM quarantine WHERE log_date = ?", [NEXT_DAY]).fetchall()
    assert reason == [("duplicate run_id: already stored for log date 2026-11-20",)]
    assert conn.execute("SELECT log_date, score FROM evaluations WHERE run_id = 'r1'").fetchall() == [(DAY, 50.0)]


def test_other_evaluator_versions_are_kept(conn: duckdb.DuckDBPyConnection) -> None:
    lines = [line(1, run_id="r1")]
    store_day(conn, DAY, lines, [scored("r1", 50.0, Band.MARGINAL, evaluator_version="old-1")])
    store_day(conn, DAY, lines, [scored("r1", 90.0, Band.EXCELLENT)])
    rows = conn.execute("SELECT evaluator_version, score FROM evaluations ORDER BY score").fetchall()
    assert rows == [("old-1", 50.0), (EVALUATOR_VERSION, 90.0)]


@pytest.mark.parametrize(
    ("lines", "evaluations", "match"),
    [
        pytest.param(
            [line(1, run_id="r1")],
            [],
            r"1 valid record\(s\) have no evaluation, first run_id 'r1'",
            id="missing_evaluation",
        ),
        pytest.param(
            [line(1, run_id="r1")],
            [scored("r1", 1.0, Band.POOR), scored("zz", 1.0, Band.POOR)],
            r"'zz' matches no log line",
            id="evaluation_without_line",
        ),
        pytest.param(
            [line(1, run_id="r1"), line(2, run_id="r1")],
            [scored("r1", 1.0, Band.POOR)],
            r"'r1' is a valid record twice",
            id="duplicate_valid_run_id",
        ),
        pytest.param(
            [line(1, run_id="r1")],
            [scored("r1", 1.0, Band.POOR), scored("r1", 2.0, Band.POOR)],
            r"two evaluations for run_id 'r1'",
            id="two_evaluations",
        ),
        pytest.param(
            [line(1, run_id="r1"), line(2, run_id="r2")],
            [scored("r1", 1.0, Band.POOR), scored("r2", 1.0, Band.POOR, evaluator_version="other")],
            r"share one evaluator version",
            id="mixed_evaluator_versions",
        ),
        pytest.param(
            [line(1, run_id="r1")],
            [Evaluation(run_id=None, status=EvaluationStatus.INVALID_INPUT)],
            r"without run_id",
            id="evaluation_without_run_id",
        ),
    ],
)
def test_store_day_rejects_broken_contracts(
    conn: duckdb.DuckDBPyConnection, lines: list[LogLine], evaluations: list[Evaluation], match: str
) -> None:
    with pytest.raises(WarehouseError, match=match):
        store_day(conn, DAY, lines, evaluations)
    assert count(conn, "SELECT count(*) FROM agent_runs") == 0


def test_a_failed_write_rolls_back_and_keeps_the_previous_day(conn: duckdb.DuckDBPyConnection) -> None:
    good = line(1, run_id="r1")
    store_day(conn, DAY, [good], [scored("r1", 80.0, Band.GOOD)])
    corrupt = LogLine(good.source, 1, good.record, None, "this raw text is not JSON", "r1")
    with pytest.raises(
        WarehouseError, match=r"storing 2026-11-20 failed while staging its rows; nothing of the day changed"
    ):
        store_day(conn, DAY, [corrupt], [scored("r1", 10.0, Band.POOR)])
    assert conn.execute("SELECT run_id, score FROM evaluations").fetchall() == [("r1", 80.0)]
    assert count(conn, "SELECT count(*) FROM agent_runs") == 1


def test_bulk_store_of_20k_rows(conn: duckdb.DuckDBPyConnection) -> None:
    # Speed is measured by the benchmark (tests/benchmarks), not here; this checks the bulk path's output.
    lines = [line(i, run_id=f"r{i}", agent_id="a", agent_version="v1") for i in range(1, 20_001)]
    evaluations = [scored(f"r{i}", float(i % 100), Band.POOR) for i in range(1, 20_001)]
    summary = store_day(conn, DAY, lines, evaluations)
    assert summary.runs == summary.evaluations == 20_000
    assert count(conn, "SELECT count(*) FROM evaluations") == 20_000
    assert count(conn, "SELECT count(DISTINCT run_id) FROM agent_runs") == 20_000
    assert conn.execute("SELECT sum(score) FROM evaluations").fetchone()[0] == sum(
        float(i % 100) for i in range(1, 20_001)
    )


# --------------------------------------------------------------------------- metrics


def _metrics_day(conn: duckdb.DuckDBPyConnection) -> None:
    """Agent a/v1: scores 10, 20, 30, 40 + one parse error; agent a/v2: 95 + a non-JSON line."""
    lines = [line(i, run_id=f"v1-{i}", agent_id="a", agent_version="v1") for i in range(1, 6)]
    lines.append(line(6, run_id="v2-1", agent_id="a", agent_version="v2"))
    lines.append(bad_line(7, b'{"run_id": "cut-off'))
    lines.append(bad_line(8, b'{"run_id": "v2-2", "agent_id": "a", "agent_version": "v2"}'))
    evaluations = [scored(f"v1-{i}", 10.0 * i, Band.POOR) for i in range(1, 5)]
    evaluations += [failed("v1-5"), scored("v2-1", 95.0, Band.EXCELLENT)]
    evaluations.append(failed("v2-2", EvaluationStatus.INVALID_INPUT, "no sql"))
    store_day(conn, DAY, lines, evaluations)


def test_daily_metrics_against_hand_computed_values(conn: duckdb.DuckDBPyConnection) -> None:
    _metrics_day(conn)
    frame = compute_daily_metrics(conn, DAY)
    rows = {row["agent_version"]: row for row in frame.iter_rows(named=True)}
    assert set(rows) == {"v1", "v2"}  # the non-JSON line names no agent: no row of its own
    v1 = rows["v1"]
    assert (v1["records"], v1["evaluated"], v1["n_quarantined"]) == (5, 4, 0)
    assert v1["coverage"] == pytest.approx(0.8)
    assert v1["mean_score"] == pytest.approx(25.0)
    assert v1["p50_score"] == pytest.approx(25.0)
    assert v1["p90_score"] == pytest.approx(37.0)
    assert (v1["n_excellent"], v1["n_good"], v1["n_marginal"], v1["n_poor"]) == (0, 0, 0, 4)
    v2 = rows["v2"]
    assert (v2["records"], v2["evaluated"], v2["n_quarantined"], v2["n_excellent"]) == (2, 1, 1, 1)
    assert v2["coverage"] == pytest.approx(0.5)
    assert v2["mean_score"] == v2["p50_score"] == v2["p90_score"] == pytest.approx(95.0)
    stored = conn.execute("SELECT lines, quarantined FROM stored_days").fetchall()
    assert stored == [(8, 2)]


def test_metrics_recomputed_replace_the_day(conn: duckdb.DuckDBPyConnection) -> None:
    _metrics_day(conn)
    compute_daily_metrics(conn, DAY)
    compute_daily_metrics(conn, DAY)
    assert count(conn, "SELECT count(*) FROM daily_agent_metrics") == 2


def test_day_is_done_only_after_store_and_metrics(conn: duckdb.DuckDBPyConnection) -> None:
    assert not day_is_done(conn, DAY)
    _metrics_day(conn)
    assert not day_is_done(conn, DAY)
    compute_daily_metrics(conn, DAY)
    assert day_is_done(conn, DAY)
    assert not day_is_done(conn, DAY, "another-evaluator")
    assert not day_is_done(conn, NEXT_DAY)


@pytest.mark.parametrize(
    ("start", "end", "expected_days"),
    [
        pytest.param(None, None, [DAY, NEXT_DAY], id="all_days"),
        pytest.param(NEXT_DAY, None, [NEXT_DAY], id="from_start"),
        pytest.param(None, DAY, [DAY], id="up_to_end"),
        pytest.param(date(2027, 1, 1), None, [], id="nothing_in_range"),
    ],
)
def test_read_daily_metrics_filters_by_day(
    conn: duckdb.DuckDBPyConnection, start: date | None, end: date | None, expected_days: list[date]
) -> None:
    for day, run_id in ((DAY, "r1"), (NEXT_DAY, "r2")):
        store_day(conn, day, [line(1, run_id=run_id)], [scored(run_id, 50.0, Band.MARGINAL)])
        compute_daily_metrics(conn, day)
    frame = read_daily_metrics(conn, start, end)
    assert frame["log_date"].to_list() == expected_days
    assert "p90_score" in frame.columns


def test_warehouse_doctests() -> None:
    for module in (warehouse.connection, warehouse.migrate, warehouse.store):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__


def test_compact_evaluations_store_the_same_rows_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The nightly flow stores CompactEvaluation rows, inserted in chunks: same table as full models."""
    lines, evaluations = _fixture_day()
    full = warehouse.connect(tmp_path / "full.duckdb")
    store_day(full, DAY, lines, evaluations)
    monkeypatch.setattr(warehouse.store, "INSERT_CHUNK_ROWS", 2)
    compact = warehouse.connect(tmp_path / "compact.duckdb")
    summary = store_day(compact, DAY, lines, [e.compact() for e in evaluations])
    query = "SELECT * EXCLUDE (evaluated_at) FROM evaluations ORDER BY run_id"
    assert summary.evaluations == 7
    assert compact.execute(query).fetchall() == full.execute(query).fetchall()
    runs = "SELECT * EXCLUDE (ingested_at) FROM agent_runs ORDER BY run_id"
    assert compact.execute(runs).fetchall() == full.execute(runs).fetchall()
    full.close()
    compact.close()


def test_duckdb_memory_limit_is_bounded_and_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEF_DUCKDB_MEMORY_LIMIT", raising=False)
    with warehouse.connect(tmp_path / "a.duckdb") as conn:
        assert conn.execute("SELECT current_setting('memory_limit')").fetchone() == ("244.1 MiB",)  # 256 MB
    monkeypatch.setenv("STEF_DUCKDB_MEMORY_LIMIT", "1GB")
    with warehouse.connect(tmp_path / "b.duckdb") as conn:
        assert conn.execute("SELECT current_setting('memory_limit')").fetchone() == ("953.6 MiB",)
    monkeypatch.setenv("STEF_DUCKDB_MEMORY_LIMIT", "lots")
    with pytest.raises(WarehouseError, match="STEF_DUCKDB_MEMORY_LIMIT='lots' is not a DuckDB memory size"):
        warehouse.connect(tmp_path / "c.duckdb")
