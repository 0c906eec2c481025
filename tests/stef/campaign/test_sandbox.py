"""The sandboxed test database (issues 6 and 13): read-only, timeout, row cap, and hostile statements.

Item 5 of issue 13: a DuckDB test database reads no host file and no statement re-opens access;
byte and memory bombs (SQLite and DuckDB) are one statement's error and the campaign goes on; a
lost worker is replaced. References: Python's ``sqlite3`` on the bundled GeoQuery SQLite database,
a DuckDB database and a host file made here.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from stef.campaign.classify import classify_run
from stef.campaign.gold_audit import audit_gold
from stef.campaign.models import CanonicalCatalog, GoldQuestion
from stef.campaign.run import run_campaign
from stef.campaign.sandbox import DuckDBTestDatabase, ResourceLimits, SQLiteTestDatabase, open_test_database
from stef.errors import InputError
from tests.stef.campaign.support import (
    CAPITAL,
    DB,
    DUCKDB_SETTINGS,
    GOLD,
    RIGHT,
    RIGHT_CAPITAL,
    SECRET,
    SETTINGS,
    SLOW_CTE,
    SQLITE_SETTINGS,
    files_under,
    reference_rows,
    run_log,
    sha256_of,
    statement_run,
)
from tests.support.checkout import checkout_env


@pytest.mark.parametrize(
    ("statement", "outcome"),
    [
        pytest.param("DROP TABLE state", "execution_error", id="drop"),
        pytest.param("DELETE FROM city", "execution_error", id="delete"),
        pytest.param("INSERT INTO state (state_name) VALUES ('atlantis')", "execution_error", id="insert"),
        pytest.param("UPDATE city SET population = 0", "execution_error", id="update"),
        pytest.param("PRAGMA query_only = OFF", "execution_error", id="pragma"),
        pytest.param("CREATE TABLE t AS SELECT * FROM city", "structural_error", id="create_as_select_unknown_table"),
    ],
)
def test_write_statements_never_modify_the_database(tmp_path: Path, statement: str, outcome: str) -> None:
    copy = tmp_path / "geo.sqlite"
    shutil.copyfile(DB, copy)
    before, cities = sha256_of(copy), reference_rows("SELECT COUNT(*) FROM city", copy)
    database = SQLiteTestDatabase(copy)
    try:
        raw = database.execute(statement, 1.0, 10)  # even straight to the engine, bypassing the SELECT-only check
        result = run_campaign([run_log([statement, RIGHT_CAPITAL])], GOLD[:1], database, SETTINGS).results[0]
    finally:
        database.close()
    assert raw.status == "error"
    assert result.outcome == outcome and result.statements[0].execution_status in {"refused", None}
    assert result.statements[1].outcome == "match"
    assert sha256_of(copy) == before and reference_rows("SELECT COUNT(*) FROM city", copy) == cities == [(386,)]


def test_slow_statement_is_stopped_by_the_timeout(
    db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog
) -> None:
    quick = SETTINGS.model_copy(update={"timeout_s": 0.2})
    started = time.perf_counter()
    result = classify_run(run_log([SLOW_CTE]), audit, db, catalog, quick)
    assert time.perf_counter() - started < 2.0
    assert result.outcome == "execution_error" and result.statements[0].execution_status == "timeout"
    assert "0.2 s statement timeout" in result.reason


def test_row_cap(db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog) -> None:
    capped = SETTINGS.model_copy(update={"row_cap": 10})
    result = classify_run(run_log(["SELECT city_name FROM city"]), audit, db, catalog, capped)
    assert result.outcome == "execution_error" and result.statements[0].execution_status == "row_cap"
    raw = db.execute("SELECT city_name FROM city", 1.0, 386)
    assert raw.status == "ok" and len(raw.rows) == len(reference_rows("SELECT city_name FROM city")) == 386


def test_duckdb_test_database_is_read_only(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "t.duckdb"
    with duckdb.connect(str(path)) as setup:
        setup.execute("CREATE TABLE state AS SELECT 'texas' AS state_name, 'austin' AS capital")
    database = open_test_database(path)
    try:
        assert isinstance(database, DuckDBTestDatabase)
        assert database.catalog() == {"state": ["state_name", "capital"]}
        assert database.execute("SELECT capital FROM state", 1.0, 10).rows == (("austin",),)
        assert database.execute("DROP TABLE state", 1.0, 10).status == "error"
        result = run_campaign([run_log([RIGHT_CAPITAL])], GOLD[:1], database, SETTINGS).results[0]
        assert result.outcome == "success"
    finally:
        database.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "no such test database", id="missing"),
        pytest.param(b"hello world, not a db", "neither a SQLite nor a DuckDB file", id="not_a_database"),
    ],
)
def test_open_test_database_rejects(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "x.db"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        open_test_database(path)


@pytest.mark.parametrize(
    ("template", "refused_as"),
    [
        pytest.param("SELECT content FROM read_text('{dir}/secret.txt')", "READ_TEXT()", id="read_text"),
        pytest.param("SELECT content FROM read_blob('{dir}/secret.txt')", "READ_BLOB()", id="read_blob"),
        pytest.param("SELECT * FROM read_csv('{dir}/secret.csv')", None, id="read_csv"),
        pytest.param("SELECT * FROM read_csv_auto('{dir}/secret.csv')", None, id="read_csv_auto"),
        pytest.param("SELECT * FROM read_json_auto('{dir}/secret.txt')", None, id="read_json"),
        pytest.param("SELECT * FROM read_parquet('{dir}/secret.txt')", None, id="read_parquet"),
        pytest.param("SELECT * FROM parquet_scan('{dir}/secret.txt')", None, id="parquet_scan"),
        pytest.param("SELECT * FROM query_table('{dir}/secret.csv')", None, id="query_table"),
        pytest.param(
            "SELECT * FROM query('SELECT content FROM read_text(''{dir}/secret.txt'')')", None, id="query_wrapper"
        ),
        pytest.param(
            "SELECT (SELECT count(*) FROM read_text('{dir}/secret.txt')) AS n FROM state",
            "READ_TEXT()",
            id="existence_oracle",
        ),
        pytest.param(
            "SELECT capital FROM state WHERE EXISTS (SELECT 1 FROM read_blob('{dir}/secret.txt'))",
            "READ_BLOB()",
            id="exists_oracle",
        ),
    ],
)
def test_duckdb_host_file_read_is_the_runs_execution_error(
    duck: DuckDBTestDatabase, host_dir: Path, template: str, refused_as: str | None
) -> None:
    """A host file read is the run's execution error: DuckDB's configuration refuses it (external
    access disabled), and before that STEF refuses a call it knows reads host files (``read_text``,
    ``read_blob``: :data:`stef.pipeline.statement_safety.DIALECT_SIDE_EFFECT_FUNCTIONS`)."""
    statement = template.format(dir=host_dir)
    result = run_campaign([statement_run(statement), statement_run(RIGHT, "next")], [CAPITAL], duck, DUCKDB_SETTINGS)
    hostile, following = result.results
    assert hostile.outcome == "execution_error"
    if refused_as is not None:
        assert hostile.statements[0].execution_status == "refused"
        assert (hostile.statements[0].message or "").startswith(f"{refused_as} (inside the query) refused")
        return
    assert hostile.statements[0].execution_status == "error"
    assert (
        "PermissionException" in (hostile.statements[0].message or "") and "disabled by configuration" in hostile.reason
    )
    assert SECRET not in hostile.model_dump_json()
    assert following.outcome == "success"


@pytest.mark.parametrize(
    ("template", "created"),
    [
        pytest.param("SELECT * FROM read_text('{dir}/secret.txt')", None, id="read_text"),
        pytest.param("SELECT * FROM read_blob('{dir}/secret.txt')", None, id="read_blob"),
        pytest.param("SELECT * FROM read_csv('{dir}/secret.csv')", None, id="read_csv"),
        pytest.param("SELECT * FROM glob('{dir}/*')", None, id="glob"),
        pytest.param("SELECT * FROM '{dir}/secret.csv'", None, id="replacement_scan"),
        pytest.param("COPY state TO '{dir}/copied.csv'", "copied.csv", id="copy_to"),
        pytest.param(
            "COPY (SELECT 1) TO '{dir}/copied.parquet' (FORMAT parquet)", "copied.parquet", id="copy_query_to"
        ),
        pytest.param("EXPORT DATABASE '{dir}/exported'", "exported", id="export_database"),
        pytest.param("ATTACH '{dir}/attached.duckdb' AS other", "attached.duckdb", id="attach_new"),
        pytest.param("ATTACH '{dir}/secret.csv' AS other", None, id="attach_host_file"),
        pytest.param("INSTALL httpfs", None, id="install"),
        pytest.param("LOAD httpfs", None, id="load"),
        pytest.param("SET enable_external_access = true", None, id="set_external_access"),
        pytest.param("RESET enable_external_access", None, id="reset_external_access"),
        pytest.param("SET lock_configuration = false", None, id="unlock_configuration"),
        pytest.param("SET memory_limit = '64GB'", None, id="set_memory_limit"),
        pytest.param("SET temp_directory = '{dir}/spill'", None, id="set_temp_directory"),
        pytest.param("SET autoload_known_extensions = true", None, id="set_autoload"),
        pytest.param("PRAGMA threads = 8", None, id="pragma_threads"),
    ],
)
def test_duckdb_engine_refuses_host_access_and_setting_changes(
    duck: DuckDBTestDatabase, host_dir: Path, template: str, created: str | None
) -> None:
    before = files_under(host_dir)
    result = duck.execute(
        template.format(dir=host_dir), 1.0, 10
    )  # straight to the engine, bypassing the SELECT-only check
    assert result.status == "error" and result.rows == ()
    assert SECRET not in (result.message or "")
    assert files_under(host_dir) == before
    if created is not None:
        assert not (host_dir / created).exists()
    settings = duck.execute(
        "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', 'lock_configuration', 'threads') ORDER BY name",
        1.0,
        10,
    )
    assert settings.rows == (("enable_external_access", "false"), ("lock_configuration", "true"), ("threads", "1"))


def test_duckdb_gold_reading_a_host_file_is_excluded_with_the_reason(duck: DuckDBTestDatabase, host_dir: Path) -> None:
    gold = GoldQuestion(
        question_id="q-leak", question="?", gold_sql=[f"SELECT content FROM read_text('{host_dir}/secret.txt')"]
    )
    audit = audit_gold([gold, CAPITAL], duck, DUCKDB_SETTINGS)
    leak, capital = audit.items
    assert (
        not leak.ok
        and "gold statement 1 error: PermissionException" in (leak.reason or "")
        and SECRET not in (leak.reason or "")
    )
    assert capital.ok


@pytest.mark.parametrize(
    ("statement", "status", "message"),
    [
        pytest.param(
            "SELECT length(repeat('x', 1000000000)) AS n FROM state", "error", "OutOfMemoryException", id="repeat_1e9"
        ),
        pytest.param(
            "SELECT repeat('x', 10000000) AS s FROM range(100)", "error", "OutOfMemoryException", id="many_10mb_strings"
        ),
        pytest.param(
            "SELECT string_agg(repeat('x', 1000000), ',') AS s FROM range(2000)",
            "error",
            "OutOfMemoryException",
            id="string_agg",
        ),
        pytest.param(
            "SELECT list(range) AS l FROM range(1000000000)", "error", "OutOfMemoryException", id="list_of_1e9"
        ),
        pytest.param(
            "SELECT count(*) AS n FROM range(1000000000000)",
            "timeout",
            "0.5 s statement timeout",
            id="count_range_1e12",
        ),
        pytest.param("SELECT * FROM range(1000000000000)", "row_cap", "10000-row cap", id="rows_range_1e12"),
    ],
)
def test_duckdb_bomb_is_one_statements_error(
    duck: DuckDBTestDatabase, statement: str, status: str, message: str
) -> None:
    result = run_campaign([statement_run(statement), statement_run(RIGHT, "next")], [CAPITAL], duck, DUCKDB_SETTINGS)
    bomb, following = result.results
    assert bomb.outcome == "execution_error"
    statuses, messages = status.split("|"), message.split("|")
    got = bomb.statements[0].execution_status
    assert got in statuses and messages[statuses.index(got)] in (bomb.statements[0].message or "")
    assert following.outcome == "success"


@pytest.mark.parametrize(
    ("template", "created"),
    [
        pytest.param("ATTACH '{dir}/attached.sqlite' AS other", "attached.sqlite", id="attach"),
        pytest.param("VACUUM INTO '{dir}/copy.sqlite'", "copy.sqlite", id="vacuum_into"),
        pytest.param("SELECT load_extension('{dir}/secret.txt')", None, id="load_extension"),
        pytest.param("SELECT readfile('{dir}/secret.txt')", None, id="readfile"),
        pytest.param("PRAGMA temp_store_directory = '{dir}'", None, id="pragma_temp_directory"),
    ],
)
def test_sqlite_engine_refuses_host_access(
    lite: SQLiteTestDatabase, host_dir: Path, template: str, created: str | None
) -> None:
    before = files_under(host_dir)
    result = lite.execute(
        template.format(dir=host_dir), 1.0, 10
    )  # straight to the engine, bypassing the SELECT-only check
    assert result.status == "error" and result.rows == () and SECRET not in (result.message or "")
    assert files_under(host_dir) == before
    if created is not None:
        assert not (host_dir / created).exists()


@pytest.mark.parametrize(
    ("statement", "status", "message"),
    [
        pytest.param("SELECT zeroblob(900000000) FROM city", "error", "string or blob too big", id="zeroblob_9e8"),
        pytest.param("SELECT randomblob(1e9)", "error", "string or blob too big", id="randomblob_1e9"),
        pytest.param(
            "SELECT length(replace(hex(zeroblob(8000000)), '0', 'xx'))",
            "error",
            "string or blob too big",
            id="replace_hex_zeroblob",
        ),
        pytest.param(
            "SELECT length(group_concat(hex(zeroblob(100000)))) FROM city",
            "error",
            "string or blob too big",
            id="group_concat",
        ),
        pytest.param(
            "WITH RECURSIVE r(n, s) AS (SELECT 1, 'x' UNION ALL SELECT n + 1, s || s FROM r WHERE n < 40) SELECT max(length(s)) FROM r",
            "error",
            "string or blob too big",
            id="recursive_cte_doubling",
        ),
        pytest.param(
            "SELECT printf('%.*c', 1e9, 'x')",
            "timeout|ok",  # killed at the deadline, or SQLite's allocation is refused under RLIMIT_AS and printf returns NULL at once
            "worker process was killed|",
            id="printf_width_1e9",
        ),
        pytest.param(
            "SELECT instr(replace(hex(zeroblob(4000000)), '0', 'a'), replace(hex(zeroblob(2000000)), '0', 'a') || 'b')",
            "timeout",
            "worker process was killed",
            id="quadratic_instr",
        ),
        pytest.param(
            "SELECT hex(zeroblob(4000000)) FROM city", "byte_cap", "67108864-byte result budget", id="386_rows_of_8mb"
        ),
        pytest.param(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
            "timeout",
            "0.5 s statement timeout",
            id="endless_cte",
        ),
    ],
)
def test_sqlite_bomb_is_one_statements_error(
    lite: SQLiteTestDatabase, statement: str, status: str, message: str
) -> None:
    result = run_campaign([statement_run(statement), statement_run(RIGHT, "next")], [CAPITAL], lite, SQLITE_SETTINGS)
    bomb, following = result.results
    assert bomb.outcome == "execution_error"
    statuses, messages = status.split("|"), message.split("|")
    got = bomb.statements[0].execution_status
    assert got in statuses and messages[statuses.index(got)] in (bomb.statements[0].message or "")
    assert following.outcome == "success"


def test_sqlite_memory_budget_is_the_statements_error() -> None:
    database = SQLiteTestDatabase(DB, ResourceLimits(memory_bytes=64 * 2**20, max_result_bytes=2**31))
    try:
        bomb = database.execute("SELECT hex(zeroblob(4000000)) FROM city", 5.0, 1000)  # 386 rows of 8 MB each
        after = database.execute("SELECT count(*) FROM city", 5.0, 10)
    finally:
        database.close()
    assert (bomb.status, bomb.message) == (
        "error",
        "MemoryError: the statement needs more than the 64 MiB memory budget",
    )
    assert (after.status, after.rows) == ("ok", ((386,),))


def test_a_worker_that_died_between_statements_is_replaced_before_the_next_one() -> None:
    database = SQLiteTestDatabase(DB)
    try:
        process = database._process  # the worker (private): killed from outside, as the kernel's OOM killer would
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        after = database.execute("SELECT count(*) FROM city", 5.0, 10)
        replaced = database._process
    finally:
        database.close()
    assert (after.status, after.rows) == ("ok", ((386,),))  # the statement did not cause the death: it is not its error
    assert replaced is not None and replaced.pid != process.pid


def test_a_worker_that_dies_during_a_statement_is_that_statements_error() -> None:
    database = SQLiteTestDatabase(DB)
    try:
        process = database._process
        assert process is not None
        killer = threading.Timer(0.3, lambda: os.kill(process.pid, signal.SIGKILL))
        killer.start()
        lost = database.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n", 30.0, 10
        )
        killer.join()
        after = database.execute("SELECT count(*) FROM city", 5.0, 10)
    finally:
        database.close()
    assert lost.status == "error" and f"exit code {-signal.SIGKILL}" in (lost.message or "")
    assert (after.status, after.rows) == ("ok", ((386,),))


def test_worker_does_not_rerun_the_callers_script(tmp_path: Path) -> None:
    """A script without ``if __name__ == "__main__"`` opens a database once (the worker never imports ``__main__``)."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from stef.campaign.sandbox import open_test_database\n"
        f"print('script body ran', flush=True)\ndb = open_test_database({str(DB)!r})\n"
        "print(db.execute('SELECT count(*) FROM state', 5.0, 10).rows)\ndb.close()\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False, env=checkout_env()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["script body ran", "((51,),)"]


def test_the_worker_runs_the_same_stef_as_its_caller() -> None:
    """The worker's PYTHONPATH starts with the folder holding this ``stef`` package (the checkout, or
    site-packages when installed), so the worker never imports another copy."""
    import stef.campaign.sandbox as sandbox

    first = sandbox._worker_environment()["PYTHONPATH"].split(os.pathsep)[0]
    assert Path(first, "stef", "campaign", "sandbox.py") == Path(sandbox.__file__).resolve()


def test_after_memory_bombs_a_fresh_worker_runs_the_next_statements(duck: DuckDBTestDatabase) -> None:
    """A statement that ran before the bombs runs after them too: no later outcome depends on
    what an earlier statement left in the worker."""
    honest = "SELECT repeat('x', 20000) FROM range(1000)"
    assert duck.execute(honest, 10.0, 5000).status == "ok"
    for bomb in (
        "SELECT list(range) FROM range(300000000)",
        "SELECT string_agg(repeat('x', 100000), ',') FROM range(200000)",
    ):
        assert duck.execute(bomb, 10.0, 5000).status != "ok"
    again = duck.execute(honest, 10.0, 5000)
    assert again.status == "ok", again.message


def test_sqlite_fts3_tokenizer_is_not_authorized(tmp_path: Path) -> None:
    """``fts3_tokenizer`` leaks a C pointer, and with a blob installs any address as the tokenizer
    that an FTS3 table then calls: the worker died of a segmentation fault on the next statement
    reading such a table (an agent's statement choosing the address the worker jumps to)."""
    path = tmp_path / "fts.sqlite"
    with closing(sqlite3.connect(path)) as setup, setup:
        setup.execute("CREATE VIRTUAL TABLE docs USING fts3(body)")
        setup.execute("INSERT INTO docs VALUES ('hello world')")
    digest = sha256_of(path)
    database = SQLiteTestDatabase(path)
    try:
        assert database._process is not None
        pid = database._process.pid
        leak = database.execute("SELECT hex(fts3_tokenizer('simple'))", 1.0, 10)
        planted = database.execute("SELECT FTS3_TOKENIZER('simple', X'4141414141414141')", 1.0, 10)
        search = database.execute("SELECT body FROM docs WHERE docs MATCH 'hello'", 1.0, 10)
        after = database.execute("SELECT 1", 1.0, 10)
        assert database._process is not None and database._process.pid == pid  # the same worker: it never crashed
    finally:
        database.close()
    for refused in (leak, planted):
        assert refused.status == "error" and refused.rows == ()
        assert "not authorized to use function" in (refused.message or "")
    assert "process ended" not in (search.message or "")
    assert after.status == "ok" and after.rows == ((1,),)
    assert sha256_of(path) == digest


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("BEGIN", id="begin"),
        pytest.param("BEGIN TRANSACTION; SELECT 1", id="begin_then_select"),
        pytest.param("CREATE TEMP VIEW state AS SELECT 'x' AS state_name, 'y' AS capital", id="temp_view"),
        pytest.param("CREATE TEMP TABLE state AS SELECT 'texas' AS state_name, 'nope' AS capital", id="temp_table"),
        pytest.param("SELECT 1; SELECT 2", id="two_selects"),
        pytest.param("PIVOT state ON state_name USING count(*)", id="dynamic_pivot"),
        pytest.param("ANALYZE", id="analyze"),
    ],
)
def test_duckdb_runs_one_select_statement_and_later_statements_are_unaffected(duck_path: Path, statement: str) -> None:
    """A gold (executed as written) that opened a transaction or a temporary object used to change
    every later statement: after ``BEGIN`` one failing statement aborted the transaction and each
    later gold and run failed with "Current transaction is aborted"; a temporary ``state`` hid the real one."""
    digest = sha256_of(duck_path)
    database = open_test_database(duck_path, DUCKDB_SETTINGS.resource_limits())
    try:
        first = database.execute(statement, 1.0, 10)
        failing = database.execute("SELECT * FROM no_such_table", 1.0, 10)
        audit = audit_gold([CAPITAL], database, DUCKDB_SETTINGS)
        capital = database.execute(RIGHT, 1.0, 10)
    finally:
        database.close()
    assert first.status == "error" and (first.message or "").startswith("refused: ")
    assert failing.status == "error" and "no_such_table" in (failing.message or "")
    assert audit.items[0].ok, audit.items[0].reason
    assert capital.status == "ok" and capital.rows == (("austin",),)
    assert sha256_of(duck_path) == digest


def test_a_wal_mode_database_is_read_without_creating_files(tmp_path: Path) -> None:
    """Read-only SQLite created ``-wal`` and ``-shm`` files next to a WAL-mode test database and left them there."""
    folder = tmp_path / "db"
    folder.mkdir()
    path = folder / "geography.sqlite"
    shutil.copyfile(DB, path)
    with closing(sqlite3.connect(path)) as setup:
        assert setup.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
    assert sorted(os.listdir(folder)) == ["geography.sqlite"]
    digest, mtime = sha256_of(path), path.stat().st_mtime_ns
    database = open_test_database(path)
    try:
        counted = database.execute("SELECT count(*) FROM state", 1.0, 10)
        assert sorted(os.listdir(folder)) == ["geography.sqlite"]
    finally:
        database.close()
    assert counted.status == "ok" and counted.rows == tuple(reference_rows("SELECT count(*) FROM state"))
    assert sorted(os.listdir(folder)) == ["geography.sqlite"]
    assert (sha256_of(path), path.stat().st_mtime_ns) == (digest, mtime)


def test_a_wal_mode_database_with_a_log_is_read_with_the_log(tmp_path: Path) -> None:
    """A ``-wal`` file holds committed rows not yet in the main file: they are read (no ``immutable``)."""
    path = tmp_path / "live.sqlite"
    writer = sqlite3.connect(path)
    try:
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("CREATE TABLE t (x INT)")
        writer.execute("INSERT INTO t VALUES (1), (2)")
        writer.commit()
        assert path.with_name("live.sqlite-wal").stat().st_size > 0
        database = open_test_database(path)
        try:
            counted = database.execute("SELECT count(*) FROM t", 1.0, 10)
        finally:
            database.close()
    finally:
        writer.close()
    assert counted.status == "ok" and counted.rows == ((2,),)


@pytest.mark.parametrize("signal_number", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_a_killed_caller_leaves_no_worker_running(tmp_path: Path, signal_number: int) -> None:
    """A worker in a C call that never yields (quadratic ``instr``, 60 s timeout) outlived its killed
    caller as an orphan at full CPU (it reads the closed pipe only between statements)."""
    script = tmp_path / "caller.py"
    script.write_text(
        "from stef.campaign.sandbox import open_test_database\n"
        f"db = open_test_database({str(DB)!r})\n"
        "print(db._process.pid, flush=True)\n"
        "db.execute(\"SELECT instr(replace(hex(zeroblob(7000000)), '0', 'a'), "
        "replace(hex(zeroblob(3500000)), '0', 'a') || 'b')\", 60.0, 10)\n",
        encoding="utf-8",
    )
    caller = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=checkout_env())
    try:
        assert caller.stdout is not None
        worker = int(caller.stdout.readline())
        time.sleep(1.0)  # the worker is inside instr now
        caller.send_signal(signal_number)
        caller.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _running(worker):
            time.sleep(0.1)
        alive = _running(worker)
        if alive:
            os.kill(worker, signal.SIGKILL)  # do not leave it behind for the next tests
        assert not alive, f"worker {worker} still runs after its caller was killed"
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (Linux ``/proc``)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False
