"""Read-only execution of campaign statements on a test database (DESIGN.md §7).

Source: the campaign protocol of ``seeds/003`` ("Executar SQLs aprovados no banco de testes"),
issue 6. A test database is a SQLite file opened with Python's :mod:`sqlite3` in read-only URI
mode (``file:...?mode=ro``) with ``PRAGMA query_only=ON`` and an authorizer that denies every
action but reading, or a DuckDB file opened ``read_only=True`` (DuckDB imported lazily). Each
statement runs under a deadline (SQLite: a progress handler that aborts the statement; DuckDB:
``interrupt()`` from a timer) and a row cap (``fetchmany(cap + 1)``). Nothing here raises for
bad SQL: every failure is an :class:`ExecutionResult` with a typed ``status``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from stef.errors import InputError

ExecutionStatus = Literal["ok", "error", "timeout", "row_cap"]
"""``ok``; ``error`` (the engine refused or failed); ``timeout`` (ran past the deadline);
``row_cap`` (returned more rows than the cap)."""

_PROGRESS_STEPS = 1000
"""SQLite virtual-machine instructions between two deadline checks."""

_SQLITE_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
"""Authorizer action codes a campaign statement may use; everything else is denied."""


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """The outcome of running one statement.

    Attributes:
        status: see :data:`ExecutionStatus`.
        columns: result column names (empty unless ``ok``).
        rows: result rows as tuples (empty unless ``ok``).
        message: the engine's message for ``error``, or why the statement was stopped.
        duration_ms: wall time spent.
    """

    status: ExecutionStatus
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    message: str | None = None
    duration_ms: float = 0.0


class TestDatabase(Protocol):
    """What the campaign needs from a test database."""

    __test__ = False  # not a pytest test class

    def execute(self, sql: str, timeout_s: float, row_cap: int) -> ExecutionResult:
        """Run one read-only query under a deadline and a row cap."""
        ...  # pragma: no cover

    def catalog(self) -> dict[str, list[str]]:
        """``{table: [columns]}`` of every table (names lower-case)."""
        ...  # pragma: no cover

    def close(self) -> None:
        """Release the database."""
        ...  # pragma: no cover


def _deny_writes(action: int, *_: object) -> int:
    return sqlite3.SQLITE_OK if action in _SQLITE_READ_ACTIONS else sqlite3.SQLITE_DENY


class SQLiteTestDatabase:
    """A SQLite file opened read-only (URI ``mode=ro``, ``query_only``, read-only authorizer).

    Args:
        path: the SQLite file; it must exist.

    Raises:
        InputError: the file does not exist or is not a SQLite database.

    >>> import sqlite3, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.sqlite")
    >>> with sqlite3.connect(path) as setup: _ = setup.execute("CREATE TABLE t (x INT)")
    >>> db = SQLiteTestDatabase(path)
    >>> db.execute("DROP TABLE t", 1.0, 10).status, db.catalog()
    ('error', {'t': ['x']})
    >>> db.close()
    """

    __test__ = False

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"{self.path}: no such test database")
        try:
            self._conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
            self._conn.execute("PRAGMA query_only = ON")
            self._conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{self.path}: not a SQLite database ({exc})") from exc
        self._conn.set_authorizer(_deny_writes)

    def execute(self, sql: str, timeout_s: float, row_cap: int) -> ExecutionResult:
        """Run ``sql`` read-only; see :class:`ExecutionResult` for the statuses.

        Args:
            sql: one SQLite statement.
            timeout_s: seconds before the statement is aborted (status ``timeout``).
            row_cap: more rows than this gives status ``row_cap``.

        Returns:
            The :class:`ExecutionResult`.
        """
        started = time.perf_counter()
        deadline = started + timeout_s
        timed_out = False

        def _progress() -> int:
            nonlocal timed_out
            if time.perf_counter() > deadline:
                timed_out = True
                return 1
            return 0

        self._conn.set_progress_handler(_progress, _PROGRESS_STEPS)
        try:
            cursor = self._conn.execute(sql)
            rows = cursor.fetchmany(row_cap + 1)
            columns = tuple(d[0] for d in cursor.description or ())
            cursor.close()
        except sqlite3.Error as exc:
            elapsed = (time.perf_counter() - started) * 1000
            if timed_out:
                return ExecutionResult("timeout", message=f"stopped after the {timeout_s:g} s statement timeout", duration_ms=elapsed)
            return ExecutionResult("error", message=f"{type(exc).__name__}: {exc}", duration_ms=elapsed)
        except (ValueError, OverflowError) as exc:  # sqlite3 raises these for e.g. several statements or huge ints
            return ExecutionResult("error", message=f"{type(exc).__name__}: {exc}", duration_ms=(time.perf_counter() - started) * 1000)
        finally:
            self._conn.set_progress_handler(None, 0)
        elapsed = (time.perf_counter() - started) * 1000
        if len(rows) > row_cap:
            return ExecutionResult("row_cap", columns, message=f"returned more than the {row_cap}-row cap", duration_ms=elapsed)
        return ExecutionResult("ok", columns, tuple(tuple(r) for r in rows), duration_ms=elapsed)

    def catalog(self) -> dict[str, list[str]]:
        """``{table: [columns]}`` from ``sqlite_master`` (names lower-case, in table order)."""
        self._conn.set_authorizer(None)
        try:
            tables = [r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name")]
            return {t.lower(): [r[1].lower() for r in self._conn.execute("SELECT * FROM pragma_table_info(?)", (t,))] for t in tables}
        finally:
            self._conn.set_authorizer(_deny_writes)

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


class DuckDBTestDatabase:
    """A DuckDB file opened ``read_only=True``; timeout through ``interrupt()``.

    Args:
        path: the DuckDB file; it must exist.

    Raises:
        InputError: the file does not exist or cannot be opened read-only.
    """

    __test__ = False

    def __init__(self, path: str | Path) -> None:
        import duckdb

        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"{self.path}: no such test database")
        try:
            self._conn = duckdb.connect(str(self.path), read_only=True)
        except duckdb.Error as exc:
            raise InputError(f"{self.path}: cannot open as DuckDB read-only ({exc})") from exc
        self._error = duckdb.Error

    def execute(self, sql: str, timeout_s: float, row_cap: int) -> ExecutionResult:
        """Run ``sql`` on the read-only connection (same contract as the SQLite version)."""
        started = time.perf_counter()
        timer = threading.Timer(timeout_s, self._conn.interrupt)
        timer.start()
        try:
            self._conn.execute(sql)
            rows = self._conn.fetchmany(row_cap + 1)
            columns = tuple(d[0] for d in self._conn.description or ())
        except self._error as exc:
            elapsed = (time.perf_counter() - started) * 1000
            if elapsed >= timeout_s * 1000:
                return ExecutionResult("timeout", message=f"stopped after the {timeout_s:g} s statement timeout", duration_ms=elapsed)
            return ExecutionResult("error", message=f"{type(exc).__name__}: {exc}", duration_ms=elapsed)
        finally:
            timer.cancel()
        elapsed = (time.perf_counter() - started) * 1000
        if len(rows) > row_cap:
            return ExecutionResult("row_cap", columns, message=f"returned more than the {row_cap}-row cap", duration_ms=elapsed)
        return ExecutionResult("ok", columns, tuple(tuple(r) for r in rows), duration_ms=elapsed)

    def catalog(self) -> dict[str, list[str]]:
        """``{table: [columns]}`` from ``information_schema`` (names lower-case)."""
        rows = self._conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns ORDER BY table_name, ordinal_position"
        ).fetchall()
        out: dict[str, list[str]] = {}
        for table, column in rows:
            out.setdefault(str(table).lower(), []).append(str(column).lower())
        return out

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


def open_test_database(path: str | Path) -> TestDatabase:
    """Open a SQLite or DuckDB test database read-only, chosen by the file's magic bytes.

    Args:
        path: the database file.

    Returns:
        A :class:`SQLiteTestDatabase` or :class:`DuckDBTestDatabase`.

    Raises:
        InputError: missing file or neither format.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such test database")
    with path.open("rb") as handle:
        head = handle.read(16)
    if head.startswith(b"SQLite format 3"):
        return SQLiteTestDatabase(path)
    if len(head) >= 12 and head[8:12] == b"DUCK":
        return DuckDBTestDatabase(path)
    raise InputError(f"{path}: neither a SQLite nor a DuckDB file")


__all__ = ["DuckDBTestDatabase", "ExecutionResult", "SQLiteTestDatabase", "TestDatabase", "open_test_database"]
