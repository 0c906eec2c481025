"""Fixtures of the tests in tests/warehouse: an empty in-memory warehouse (the rollout warehouse is
:mod:`tests.support.rollout`'s)."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from warehouse import connect


@pytest.fixture
def conn() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = connect(":memory:")
    yield connection
    connection.close()
