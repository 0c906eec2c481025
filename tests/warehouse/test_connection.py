"""Tests of connection (moved from test_warehouse.py)."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

import warehouse
import warehouse.connection
import warehouse.migrate
import warehouse.store
from tests.warehouse.helpers import (
    TABLES,
    _hold,
)
from warehouse import (
    WarehouseError,
    WarehouseLockedError,
    WarehouseReadOnlyError,
    apply_migrations,
    connect,
    current_version,
    resolve_path,
)


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


def test_a_file_the_user_may_not_write_is_a_read_only_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "stef.duckdb"
    connect(path).close()
    real_connect = duckdb.connect

    def refuse_writing(database: str, read_only: bool = False, **kwargs: object) -> duckdb.DuckDBPyConnection:
        if not read_only:  # what DuckDB says for a file mode or a file system that forbids writing
            raise duckdb.IOException(f'IO Error: Cannot open file "{database}": Read-only file system')
        return real_connect(database, read_only=read_only, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(duckdb, "connect", refuse_writing)
    with pytest.raises(WarehouseReadOnlyError, match=r"cannot open warehouse .*stef\.duckdb: .*Read-only file system"):
        connect(path)
    connect(path, read_only=True).close()  # reading still works


def test_a_folder_that_cannot_be_created_is_a_read_only_error_only_when_writing_is_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    with pytest.raises(WarehouseError, match="cannot create the folder of warehouse") as not_a_folder:
        connect(blocker / "sub" / "stef.duckdb")
    assert not isinstance(not_a_folder.value, WarehouseReadOnlyError)

    def read_only_file_system(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "mkdir", read_only_file_system)
    with pytest.raises(WarehouseReadOnlyError, match="Read-only file system"):
        connect(tmp_path / "new" / "stef.duckdb")


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


@pytest.mark.parametrize("read_only", [False, True], ids=["write", "read"])
def test_another_applications_duckdb_file_is_refused_and_left_unchanged(tmp_path: Path, read_only: bool) -> None:
    """A DuckDB file without ``schema_version`` that holds tables is not migrated into a warehouse (STEF's
    tables were added to it, or its own ``evaluations`` table broke migration 0001 after ``schema_version``
    was left in it); opening it to read does not advise migrating it."""
    path = tmp_path / "sales.duckdb"
    with duckdb.connect(str(path)) as other:
        other.execute("CREATE TABLE evaluations (x INTEGER); INSERT INTO evaluations VALUES (7)")
        other.execute("CREATE SCHEMA crm; CREATE TABLE crm.customers (id INTEGER); CREATE VIEW totals AS SELECT 1 AS n")
    with pytest.raises(WarehouseError) as raised:
        connect(path, read_only=read_only)
    assert str(raised.value) == (
        f"warehouse {path} is a DuckDB database but not a STEF warehouse (no schema_version table; it holds "
        "customers, evaluations, totals); nothing was changed in it: pass a new file or a STEF warehouse"
    )
    with duckdb.connect(str(path), read_only=True) as other:
        assert other.execute("SELECT schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall() == [
            ("crm", "customers"),
            ("main", "evaluations"),
        ]
        assert other.execute("SELECT x FROM evaluations").fetchall() == [(7,)]


def _sqlite_file(path: Path) -> None:
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x INTEGER)")
    db.close()


def _parquet_file(path: Path) -> None:
    duckdb.sql(f"COPY (SELECT 1 AS x) TO '{path}' (FORMAT parquet)")


@pytest.mark.parametrize("read_only", [False, True], ids=["write", "read"])
@pytest.mark.parametrize(
    ("name", "write", "kind"),
    [
        pytest.param("export.csv", lambda path: path.write_text("a,b\n1,2\n"), "it begins 'a,b\\n1,2\\n'", id="csv"),
        pytest.param(
            "day.jsonl",
            lambda path: path.write_text('{"run_id": "r\x1b[2J"}\n'),
            'it begins \'{"run_id": "r\\x1b[2J"}\\n\'',
            id="jsonl",
        ),
        pytest.param("geo.sqlite", _sqlite_file, "a SQLite database", id="sqlite"),
        pytest.param("week.parquet", _parquet_file, "a Parquet file", id="parquet"),
    ],
)
def test_a_file_that_is_not_a_duckdb_database_is_refused_unopened(
    tmp_path: Path, read_only: bool, name: str, write: Callable[[Path], object], kind: str
) -> None:
    """DuckDB 2 opened a CSV or JSON Lines file as an in-memory database with a view of it (described as
    "a DuckDB database but not a STEF warehouse (… it holds file, export)") and a SQLite file through
    an extension it tried to download; the header is checked first, the file left byte for byte."""
    path = tmp_path / name
    write(path)
    before = path.read_bytes()
    with pytest.raises(WarehouseError) as raised:
        connect(path, read_only=read_only)
    assert str(raised.value) == (
        f"warehouse {path} is not a DuckDB database file ({kind}); nothing was changed in it: "
        "pass a new file or a STEF warehouse"
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no WAL or other file beside it


def test_an_empty_duckdb_file_becomes_a_warehouse(tmp_path: Path) -> None:
    """Read-only, an empty file (a first nightly stopped before making the tables) is named as
    such, not as an older schema; opened for writing, it becomes a warehouse."""
    path = tmp_path / "an empty.duckdb"
    duckdb.connect(str(path)).close()
    with pytest.raises(
        WarehouseError, match=r"empty\.duckdb holds no STEF tables yet \(no migration applied"
    ) as raised:
        connect(path, read_only=True)
    assert "older schema" not in str(raised.value)
    assert str(raised.value).endswith(f"stef nightly --warehouse '{path}'")  # quoted for the shell
    with connect(path) as conn:
        assert current_version(conn) == warehouse.migrate.available_migrations()[-1].version


class _HookedCheckpoint:
    """A connection for :func:`warehouse.connection.close_later` whose ``CHECKPOINT`` first runs
    ``before_checkpoint`` (a delay, a failure), then goes to ``conn``."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, before_checkpoint: Callable[[], None]) -> None:
        self.conn = conn
        self.before_checkpoint = before_checkpoint

    def execute(self, query: str) -> object:
        if query == "CHECKPOINT":
            self.before_checkpoint()
        return self.conn.execute(query)

    def close(self) -> None:
        self.conn.close()


def test_a_connection_closed_later_is_checkpointed_in_the_background_and_a_reader_waits_for_it(tmp_path: Path) -> None:
    """A committed day sits in DuckDB's write-ahead log until a checkpoint: the background close
    merges it (no ``.wal`` file is left), a read-only connection of the same process waits for it
    (DuckDB refuses one while the file is open for writing), and the rows are there."""
    path = tmp_path / "w.duckdb"
    writer = connect(path)
    writer.execute("CREATE TABLE facts AS SELECT range AS n, repeat('x', 200) AS text FROM range(20000)")
    assert Path(f"{path}.wal").exists()

    # the writer's checkpoint starts 0.3 s late: the reader below comes while it is open
    warehouse.connection.close_later(_HookedCheckpoint(writer, lambda: time.sleep(0.3)))  # type: ignore[arg-type]
    warehouse.connection.checkpoint_in_background()
    sharing = connect(path)  # a writer of the same process shares the open database meanwhile
    assert sharing.execute("SELECT count(*) FROM facts").fetchone() == (20_000,)
    sharing.close()
    reader = connect(path, read_only=True)
    try:
        assert reader.execute("SELECT count(*), sum(n) FROM facts").fetchone() == (20_000, sum(range(20_000)))
    finally:
        reader.close()
    warehouse.connection.wait_for_checkpoints()
    assert not Path(f"{path}.wal").exists()
    assert warehouse.connection._CHECKPOINTS == []


def test_a_failed_background_checkpoint_is_logged_and_the_connection_closed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "w.duckdb"
    conn = connect(path)
    conn.execute("CREATE TABLE facts AS SELECT range AS n FROM range(10)")

    def disk_full() -> None:
        raise duckdb.IOException("No space left on device")

    with caplog.at_level("WARNING", logger="warehouse.connection"):
        warehouse.connection.close_later(_HookedCheckpoint(conn, disk_full))  # type: ignore[arg-type]
        warehouse.connection.wait_for_checkpoints()
    assert [record.getMessage() for record in caplog.records] == [
        "warehouse checkpoint skipped, the next close does it: No space left on device"
    ]
    with pytest.raises(duckdb.ConnectionException):
        conn.execute("SELECT 1")
    reader = connect(path, read_only=True)  # the committed rows were kept
    try:
        assert reader.execute("SELECT count(*) FROM facts").fetchone() == (10,)
    finally:
        reader.close()


def test_a_connection_that_cannot_be_kept_open_is_closed_at_once(tmp_path: Path) -> None:
    conn = connect(tmp_path / "w.duckdb")
    conn.close()
    warehouse.connection.close_later(conn)  # its setting cannot be changed: nothing is deferred
    assert warehouse.connection._DEFERRED == []


def test_every_waiter_waits_for_a_running_checkpoint(tmp_path: Path) -> None:
    """Two threads wait for the same background checkpoint: neither returns before it is done (a
    read-only connection after either wait finds the file closed for writing)."""
    import threading

    path = tmp_path / "w.duckdb"
    writer = connect(path)
    writer.execute("CREATE TABLE facts AS SELECT range AS n FROM range(10)")

    warehouse.connection.close_later(_HookedCheckpoint(writer, lambda: time.sleep(0.5)))  # type: ignore[arg-type]
    warehouse.connection.checkpoint_in_background()
    other = threading.Thread(target=warehouse.connection.wait_for_checkpoints)
    other.start()
    time.sleep(0.1)  # the other thread waits first
    warehouse.connection.wait_for_checkpoints()
    reader = duckdb.connect(str(path), read_only=True)  # no waiting here: DuckDB refuses it while the writer is open
    try:
        assert reader.execute("SELECT count(*) FROM facts").fetchall() == [(10,)]
    finally:
        reader.close()
    other.join()
    assert warehouse.connection._CHECKPOINTS == []


def test_a_folder_is_no_warehouse_to_open_or_write(tmp_path: Path) -> None:
    """``--warehouse wh/`` (a folder) said "IO Error: Could not read from file ...: Is a directory"."""
    from warehouse.connection import warehouse_file

    message = f"warehouse {tmp_path} is a folder, not a DuckDB file; pass the file, e.g. --warehouse {tmp_path / 'stef.duckdb'}"
    for read_only in (False, True):
        with pytest.raises(WarehouseError) as raised:
            connect(tmp_path, read_only=read_only)
        assert str(raised.value) == message
    with pytest.raises(WarehouseError, match="is a folder, not a DuckDB file"):
        warehouse_file(tmp_path)
    assert warehouse_file(tmp_path / "new.duckdb") == tmp_path / "new.duckdb"  # not created yet: fine
    assert list(tmp_path.iterdir()) == []


def test_a_second_connection_of_this_process_keeps_its_lock_on_the_file(tmp_path: Path) -> None:
    """DuckDB's lock on the file is a POSIX record lock, which the process loses when it closes any
    descriptor of the file: reading the file's header before each open (to refuse a CSV) released
    the lock the store's open connection held, and a second ``stef nightly`` waiting for it wrote
    the file at the same time ("Corrupted DICT_FSST segment"). Nothing but DuckDB opens the file."""
    import subprocess
    import sys

    path = tmp_path / "w.duckdb"
    probe = f"import duckdb; duckdb.connect({str(path)!r}).close()"
    with connect(path):
        connect(path).close()  # another STEF connection of this process (the drift step after the store)
        connect(path, read_only=False, existing_tables=True).close()
        with pytest.raises(WarehouseError, match="different configuration"):
            connect(path, read_only=True)  # DuckDB refuses a second configuration of an open file: no header read
        other = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
        assert other.returncode != 0 and "lock" in other.stderr.lower(), other.stderr
