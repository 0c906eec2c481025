"""The temporary Prefect API's new database, created from the bundled schema snapshot instead of
Prefect's migrations (:func:`flows.prefect_api.seed_missing_database`)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import flows.prefect_api
from flows.prefect_api import SCHEMA_SNAPSHOTS, migration_head, seed_missing_database

CHECKOUT = Path(__file__).resolve().parents[2]


def _url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def _schema(path: Path) -> dict[str, Any]:
    """What a SQLite database holds, in a form that does not depend on the order of a table's
    constraints in its ``CREATE TABLE`` (Prefect's migrations rebuild tables from reflected
    constraints, in an order that changes from run to run): per table its columns in order, the
    lines of its definition as a sorted list, its foreign keys and its rows; every index's SQL;
    the database's ``user_version``."""
    with closing(sqlite3.connect(path)) as db:
        tables: dict[str, Any] = {}
        for name, sql in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            definition = sorted(line.strip().rstrip(",").strip() for line in sql.splitlines() if line.strip())
            tables[name] = {
                "columns": db.execute(f'PRAGMA table_xinfo("{name}")').fetchall(),
                "definition": definition,
                "foreign_keys": sorted(row[2:] for row in db.execute(f'PRAGMA foreign_key_list("{name}")')),
                "rows": sorted(db.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr),
            }
        indexes = sorted(db.execute("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index'"), key=repr)
        other = db.execute("SELECT type, name FROM sqlite_master WHERE type NOT IN ('table', 'index')").fetchall()
        return {
            "tables": tables,
            "indexes": indexes,
            "other": other,
            "user_version": db.execute("PRAGMA user_version").fetchone(),
        }


def _bundled_snapshot() -> Path:
    head = migration_head()
    assert head is not None, "the installed Prefect has no single migration head"
    snapshot = SCHEMA_SNAPSHOTS / f"prefect-sqlite-{head}.sql"
    if not snapshot.is_file():
        pytest.skip(
            f"no bundled snapshot for the installed Prefect's migration head {head}: "
            "write one with python scripts/make_prefect_snapshot.py (Prefect migrates new databases meanwhile)"
        )
    return snapshot


def _loaded(snapshot: Path, path: Path) -> Path:
    with closing(sqlite3.connect(path)) as db:
        db.executescript(snapshot.read_text(encoding="utf-8"))
    return path


def test_the_bundled_snapshot_is_the_database_prefects_own_migrations_create(tmp_path: Path) -> None:
    snapshot = _bundled_snapshot()
    done = subprocess.run(
        [
            sys.executable,
            str(CHECKOUT / "scripts" / "make_prefect_snapshot.py"),
            "--out-dir",
            str(tmp_path / "new"),
            "--keep-database",
            str(tmp_path / "migrated.db"),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(CHECKOUT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    written = Path(done.stdout.strip())
    assert written.name == snapshot.name  # the same migration head
    assert written.read_text(encoding="utf-8").startswith("-- Prefect's SQLite schema at migration head")
    migrated = _schema(tmp_path / "migrated.db")  # the database Prefect's migrations made, itself
    bundled = _schema(_loaded(snapshot, tmp_path / "bundled.db"))
    assert bundled == migrated
    assert _schema(_loaded(written, tmp_path / "rewritten.db")) == migrated  # the script's dump of it
    assert not _created_from_a_snapshot(tmp_path / "migrated.db") and _created_from_a_snapshot(tmp_path / "bundled.db")
    assert bundled["tables"]["alembic_version"]["rows"] == [(snapshot.stem.removeprefix("prefect-sqlite-"),)]
    assert len(bundled["tables"]) > 30 and len(bundled["indexes"]) > 100  # the whole schema, not a stub


def _created_from_a_snapshot(database: Path) -> bool:
    """Whether ``database`` was built from a snapshot rather than by Prefect's migrations: a dump
    creates the tables in name order, while the migrations create ``alembic_version`` first and
    the others in the order of Prefect's history."""
    with closing(sqlite3.connect(database)) as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")]
    return tables == sorted(tables)


def test_a_database_not_created_yet_is_created_from_the_snapshot(tmp_path: Path) -> None:
    snapshot = _bundled_snapshot()
    home = tmp_path / "home"  # Prefect's home, not made yet: made as Prefect makes it
    database = home / "prefect.db"
    assert seed_missing_database(_url(database), home) == database
    assert _schema(database) == _schema(_loaded(snapshot, tmp_path / "reference.db"))
    assert _created_from_a_snapshot(database)
    assert sorted(path.name for path in home.iterdir()) == ["prefect.db"]  # no temporary file left
    assert home.stat().st_mode & 0o777 == 0o700


def test_a_database_in_a_folder_that_does_not_exist_is_left_to_prefect(tmp_path: Path) -> None:
    _bundled_snapshot()
    database = tmp_path / "elsewhere" / "prefect.db"
    assert seed_missing_database(_url(database), tmp_path / "home") is None
    assert not database.parent.exists()


@pytest.mark.parametrize("side_file", ["-wal", "-shm", "-journal"])
def test_a_database_whose_side_files_are_left_is_left_to_prefect(tmp_path: Path, side_file: str) -> None:
    """A killed server's write-ahead log, with its database removed by hand, would be replayed onto
    a new file: SQLite then reports the database malformed. Prefect's own migrations cope."""
    _bundled_snapshot()
    database = tmp_path / "prefect.db"
    left = tmp_path / f"prefect.db{side_file}"
    left.write_bytes(b"left by a killed server")
    assert seed_missing_database(_url(database), tmp_path) is None
    assert not database.exists() and left.read_bytes() == b"left by a killed server"


def test_an_existing_database_is_never_touched(tmp_path: Path) -> None:
    _bundled_snapshot()
    database = tmp_path / "prefect.db"
    with closing(sqlite3.connect(database)) as db:
        db.execute("CREATE TABLE flow (id TEXT)")
        db.execute("INSERT INTO flow VALUES ('mine')")
        db.commit()
    before = database.read_bytes()
    assert seed_missing_database(_url(database), tmp_path) is None
    assert database.read_bytes() == before


@pytest.mark.parametrize(
    "url",
    [
        "sqlite+aiosqlite:///:memory:",
        "sqlite+aiosqlite://",
        "postgresql+asyncpg://prefect@127.0.0.1:5432/prefect",
        "not a url",
    ],
)
def test_nothing_is_created_for_another_database_than_a_sqlite_file(url: str, tmp_path: Path) -> None:
    assert seed_missing_database(url, tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_a_uri_filename_is_left_to_prefect(tmp_path: Path) -> None:
    database = tmp_path / "prefect.db"
    assert seed_missing_database(f"sqlite+aiosqlite:///file:{database}?mode=rwc&uri=true", tmp_path) is None
    assert not database.exists()


def test_without_a_snapshot_for_the_installed_head_prefect_migrates_as_it_always_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flows.prefect_api, "SCHEMA_SNAPSHOTS", tmp_path / "no-snapshots")
    database = tmp_path / "prefect.db"
    assert seed_missing_database(_url(database), tmp_path) is None
    assert not database.exists()


def test_a_database_another_command_created_meanwhile_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two commands start on a fresh PREFECT_HOME: the one that links its database second keeps
    the first one's, and leaves no file of its own behind."""
    _bundled_snapshot()
    database = tmp_path / "prefect.db"
    head = migration_head()

    def another_command_first() -> str | None:
        database.write_text("the other command's database", encoding="utf-8")
        return head

    monkeypatch.setattr(flows.prefect_api, "migration_head", another_command_first)
    assert seed_missing_database(_url(database), tmp_path) is None
    assert database.read_text(encoding="utf-8") == "the other command's database"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["prefect.db"]


def test_a_damaged_snapshot_leaves_no_database_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    head = migration_head()
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    (snapshots / f"prefect-sqlite-{head}.sql").write_text("CREATE TABLE flow (id TEXT);\nCREATE TABL", encoding="utf-8")
    monkeypatch.setattr(flows.prefect_api, "SCHEMA_SNAPSHOTS", snapshots)
    home = tmp_path / "home"
    home.mkdir()
    assert seed_missing_database(_url(home / "prefect.db"), home) is None
    assert list(home.iterdir()) == []  # Prefect then creates it with its migrations


@pytest.mark.slow
def test_the_temporary_server_of_a_fresh_prefect_home_starts_from_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server program (``_SERVER_CODE``) seeds the database before Prefect would migrate it,
    and the server then answers and records a flow run on it."""
    _bundled_snapshot()
    home = tmp_path / "prefect-home"
    monkeypatch.setenv("PREFECT_HOME", str(home))
    for name in ("PREFECT_API_URL", "PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL"):
        monkeypatch.delenv(name, raising=False)
    server = flows.prefect_api.TemporaryApiServer()
    server.start(with_settings=False)
    try:
        server.wait_ready(90)
        import httpx

        flow = httpx.post(f"{server.api_url}/flows/", json={"name": "stef-seeded"}, timeout=30)
        assert flow.status_code in (200, 201), flow.text
        run = httpx.post(f"{server.api_url}/flow_runs/", json={"flow_id": flow.json()["id"]}, timeout=30)
        assert run.status_code in (200, 201), run.text
    finally:
        server.stop()
    database = home / "prefect.db"
    assert _created_from_a_snapshot(database)
    with closing(sqlite3.connect(database)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM flow_run").fetchone() == (1,)
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(migration_head(),)]
