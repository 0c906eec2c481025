"""One write transaction on a warehouse connection, rolled back on any failure."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from warehouse.errors import WarehouseError


@contextmanager
def transaction(conn: duckdb.DuckDBPyConnection, failure: str) -> Iterator[None]:
    """``BEGIN`` … ``COMMIT`` on ``conn``; any exception inside rolls the transaction back.

    Args:
        conn: an open warehouse connection with no transaction running.
        failure: what failed, for the error (``"storing the drift checks failed and was rolled
            back"``); the DuckDB error follows it after ``": "``.

    Raises:
        WarehouseError: a DuckDB error inside the block or at ``COMMIT`` (chained to it); any
            other exception propagates unchanged, after the rollback.

    >>> conn = duckdb.connect()
    >>> _ = conn.execute("CREATE TABLE t (x INTEGER PRIMARY KEY)")
    >>> with transaction(conn, "adding rows failed"):
    ...     _ = conn.execute("INSERT INTO t VALUES (1)")
    >>> try:
    ...     with transaction(conn, "adding rows failed and was rolled back"):
    ...         _ = conn.execute("INSERT INTO t VALUES (2)")
    ...         _ = conn.execute("INSERT INTO t VALUES (1)")
    ... except WarehouseError as exc:
    ...     print(str(exc).split(":")[0])
    adding rows failed and was rolled back
    >>> conn.execute("SELECT list(x ORDER BY x) FROM t").fetchall()
    [([1],)]
    """
    conn.begin()
    try:
        yield
        conn.commit()
    except duckdb.Error as exc:
        _rollback(conn)
        raise WarehouseError(f"{failure}: {exc}") from exc
    except BaseException:
        _rollback(conn)
        raise


def _rollback(conn: duckdb.DuckDBPyConnection) -> None:
    try:
        conn.rollback()
    except duckdb.Error:
        pass  # no transaction left open (DuckDB ended it with the failure)
