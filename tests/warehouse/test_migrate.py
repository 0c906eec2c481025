"""Tests of migrate (moved from test_warehouse.py)."""

from __future__ import annotations

import doctest

import warehouse
import warehouse.connection
import warehouse.migrate
import warehouse.store


def test_migration_files_are_numbered_without_gaps() -> None:
    versions = [m.version for m in warehouse.available_migrations()]
    assert versions == list(range(1, len(versions) + 1))
    assert warehouse.available_migrations()[0].name == "0001_initial.sql"


def test_warehouse_doctests() -> None:
    for module in (warehouse.connection, warehouse.migrate, warehouse.store):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
