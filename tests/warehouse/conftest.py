"""Fixtures of the tests in tests/warehouse."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from warehouse import (
    connect,
)


@pytest.fixture
def conn() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = connect(":memory:")
    yield connection
    connection.close()
