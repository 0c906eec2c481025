"""Tests of migrate (moved from test_warehouse.py)."""

from __future__ import annotations

import doctest
from pathlib import Path

import duckdb
import pytest

import warehouse
import warehouse.connection
import warehouse.migrate
import warehouse.store
from warehouse.errors import WarehouseError


def test_migration_files_are_numbered_without_gaps() -> None:
    versions = [m.version for m in warehouse.available_migrations()]
    assert versions == list(range(1, len(versions) + 1))
    assert warehouse.available_migrations()[0].name == "0001_initial.sql"


def test_warehouse_doctests() -> None:
    for module in (warehouse.connection, warehouse.migrate, warehouse.store):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__


def test_a_warehouse_of_a_newer_stef_is_refused_unchanged_and_an_up_to_date_one_is_only_read(tmp_path: Path) -> None:
    """apply_migrations on an up-to-date warehouse applies nothing; on one with a version this stef
    does not know it raises "upgrade stef" before any write (the file's rows stay as they were)."""
    latest = warehouse.available_migrations()[-1].version
    conn = duckdb.connect(str(tmp_path / "wh.duckdb"))
    try:
        assert warehouse.migrate.apply_migrations(conn) == tuple(range(1, latest + 1))
        assert warehouse.migrate.apply_migrations(conn) == ()
        conn.execute("INSERT INTO schema_version VALUES (?, now())", [latest + 1])
        before = conn.execute("SELECT * FROM schema_version ORDER BY version").fetchall()
        with pytest.raises(
            WarehouseError, match=f"schema version {latest + 1} but this stef knows only up to {latest}"
        ):
            warehouse.migrate.apply_migrations(conn)
        assert conn.execute("SELECT * FROM schema_version ORDER BY version").fetchall() == before
    finally:
        conn.close()
