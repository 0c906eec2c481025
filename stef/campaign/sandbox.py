"""Sandboxed, read-only execution of campaign statements on a test database (DESIGN.md §7).

Source: the campaign protocol of ``seeds/003`` ("Executar SQLs aprovados no banco de testes"),
issues 6 and 13. Statements come from agents (and gold files) and are hostile input, so the
database is opened in a **worker process** (a fresh interpreter started with :mod:`subprocess`
that runs :mod:`stef.campaign.worker`; requests and replies are pickled over its stdin/stdout pipes; the
caller's ``__main__`` is never re-imported) that the caller can kill, under these bounds:

* **No writes.** SQLite: read-only URI (``file:...?mode=ro``; plus ``immutable=1`` for a database
  in WAL mode with no ``-wal`` file, which read-only SQLite would otherwise create with a ``-shm``
  file next to it and leave behind), ``PRAGMA query_only``, an
  authorizer that denies every action but reading (and the functions that reach past SQL:
  ``load_extension``, ``fts3_tokenizer``), ``SQLITE_LIMIT_ATTACHED`` 0. DuckDB:
  ``read_only=True``, and only a string DuckDB's parser reads as exactly one ``SELECT``
  statement runs (no ``BEGIN`` that would leave the connection in an aborted transaction, no
  ``CREATE TEMP`` object seen by later statements, no second statement).
* **No host files.** DuckDB is opened with ``enable_external_access=false`` (``read_text``,
  ``read_blob``, ``read_csv``, ``glob``, ``COPY``, ``ATTACH``, ``INSTALL``/``LOAD``, replacement
  scans such as ``FROM 'file.csv'`` fail with a ``PermissionException``), no extension
  auto-install/auto-load, no community extensions, no Python replacement scans, and
  ``lock_configuration=true`` so no ``SET`` or ``RESET`` turns any of it back on; the settings
  are read back after opening and a database where they did not take is refused. SQLite has no
  file functions (extension loading is off in :mod:`sqlite3`).
* **Bytes.** SQLite's length limit (``SQLITE_LIMIT_LENGTH`` = ``max_value_bytes``) makes any
  string, blob or row longer than that an error at once (``zeroblob(9e8)``, ``randomblob(1e9)``,
  ``printf('%.*c', 1e9, 'x')``, ``group_concat`` bombs); SQLite keeps temporary tables in memory
  (``temp_store=MEMORY``) and DuckDB gets ``memory_limit`` = half the budget, one thread, and no
  temporary directory, so neither spills to disk. The whole worker runs under an address-space
  limit (``RLIMIT_AS``: its size after opening + ``memory_bytes``), so an allocation past the
  budget is a ``MemoryError`` / ``OutOfMemoryException`` in the worker, reported as that
  statement's error. Fetched rows are counted (:func:`sys.getsizeof`, nested values summed)
  against ``max_result_bytes``.
* **Time.** Each statement has a deadline: SQLite's progress handler and DuckDB's
  ``interrupt()`` stop it cooperatively; one C call that never yields to either (``instr`` or
  ``LIKE`` on long strings, DuckDB's ``repeat('x', 1e9)``) is stopped by killing the worker
  ``kill_grace_s`` after the deadline; the next statement gets a fresh worker. On Linux the worker
  asks to be killed when its caller ends (``PR_SET_PDEATHSIG``), so a caller ended by a signal
  leaves no worker running.

Nothing here raises for bad SQL: every failure is an :class:`ExecutionResult` with a typed
``status`` and the reason in ``message``; one statement's failure never stops a campaign.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from stef.campaign.worker import (
    ExecutionResult,
    ExecutionStatus,
    ResourceLimits,
    read_message,
    timeout_result,
    write_message,
)
from stef.errors import InputError

_STARTUP_TIMEOUT_S = 60.0
"""Seconds a new worker may take to import, open the database and report ready."""

_CATALOG_TIMEOUT_S = 60.0
"""Seconds the catalog query (STEF's own) may take."""

_WORKER_BOOT = "from stef.campaign.worker import main; main()"
"""What the worker interpreter runs (``python -P -c``: no re-import of the caller's ``__main__``, no
current directory on ``sys.path``)."""


class TestDatabase(Protocol):
    """What the campaign needs from a test database."""

    __test__: bool = False  # not a pytest test class

    def execute(self, sql: str, timeout_s: float, row_cap: int) -> ExecutionResult:
        """Run one read-only query under a deadline and a row cap."""
        ...  # pragma: no cover

    def catalog(self) -> dict[str, list[str]]:
        """``{table: [columns]}`` of every table (names lower-case)."""
        ...  # pragma: no cover

    def close(self) -> None:
        """Release the database."""
        ...  # pragma: no cover


class _WorkerLost(Exception):
    """The worker missed its deadline (and was killed) or ended on its own."""

    def __init__(self, message: str, *, deadline: bool) -> None:
        super().__init__(message)
        self.deadline = deadline


def _worker_environment() -> dict[str, str]:
    """The caller's environment, with this ``stef`` first on ``PYTHONPATH`` (the worker runs the same code)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the folder holding this stef package
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


class _SandboxedDatabase:
    """A test database served by a worker process (see the module docstring)."""

    __test__ = False
    _engine = ""

    def __init__(self, path: str | Path, limits: ResourceLimits | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"{self.path}: no such test database")
        self.limits = limits or ResourceLimits()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._closed = False
        self._start()

    def _start(self) -> None:
        process = subprocess.Popen(  # our own interpreter running our own module
            [sys.executable, "-P", "-c", _WORKER_BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            env=_worker_environment(),
        )
        self._process = process
        try:
            self._send(process, (self._engine, str(self.path.resolve()), self.limits))
            kind, payload = self._receive(process, _STARTUP_TIMEOUT_S)
        except _WorkerLost as lost:
            self._stop(kill=True)
            raise InputError(f"{self.path}: the test database worker could not start ({lost})") from None
        if kind != "ready":
            self._stop(kill=True)
            raise InputError(str(payload))

    @staticmethod
    def _send(process: subprocess.Popen[bytes], message: Any) -> None:
        if process.stdin is None:  # pragma: no cover - always a pipe
            raise _WorkerLost("no pipe to the worker", deadline=False)
        try:
            write_message(process.stdin.fileno(), message)
        except OSError as exc:
            raise _WorkerLost(
                f"the database worker process ended (exit code {process.poll()}; {exc})", deadline=False
            ) from None

    @staticmethod
    def _receive(process: subprocess.Popen[bytes], wait_s: float) -> tuple[str, Any]:
        if process.stdout is None:  # pragma: no cover - always a pipe
            raise _WorkerLost("no pipe from the worker", deadline=False)
        fd = process.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            ready = selector.select(wait_s)
        if not ready:
            raise _WorkerLost("the engine did not yield; its worker process was killed", deadline=True)
        try:
            kind, payload = read_message(fd)
        except (EOFError, OSError):
            try:
                code = process.wait(1.0)
            except subprocess.TimeoutExpired:
                code = None
            raise _WorkerLost(f"the database worker process ended (exit code {code})", deadline=False) from None
        return kind, payload

    def _stop(self, *, kill: bool) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if not kill:
            try:
                self._send(process, ("close",))
            except _WorkerLost:
                pass
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()
        if kill:
            process.kill()
        try:
            process.wait(5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _call(self, request: tuple[Any, ...], wait_s: float) -> Any:
        """Send one request and wait ``wait_s`` seconds for the reply; start a new worker if needed.

        Raises:
            _WorkerLost: no reply in time (the worker is killed) or the worker ended.
            InputError: the database is closed or a new worker cannot open it.
            RuntimeError: the worker replied with a failure.
        """
        with self._lock:
            if self._closed:
                raise InputError(f"{self.path}: the test database is closed")
            if self._process is not None and self._process.poll() is not None:
                self._stop(kill=True)  # it ended after a memory bomb (or died): a fresh one runs the next statement
            if self._process is None:
                self._start()
            process = self._process
            if process is None:  # pragma: no cover - _start sets it or raises
                raise InputError(f"{self.path}: the test database worker is not running")
            try:
                self._send(process, request)
                kind, payload = self._receive(process, wait_s)
            except _WorkerLost:
                self._stop(kill=True)
                raise
            if kind.endswith("_exiting"):  # a memory bomb ran: the worker ends, the next call starts a fresh one
                self._stop(kill=True)
                kind = kind.removesuffix("_exiting")
        if kind != "ok":
            raise RuntimeError(payload)
        return payload

    def execute(self, sql: str, timeout_s: float, row_cap: int) -> ExecutionResult:
        """Run ``sql`` read-only in the worker; see :class:`ExecutionResult` for the statuses.

        Args:
            sql: one statement in the engine's dialect.
            timeout_s: seconds before the statement is stopped (status ``timeout``).
            row_cap: more rows than this gives status ``row_cap``.

        Returns:
            The :class:`ExecutionResult`; never raises for the statement's sake.
        """
        started = time.perf_counter()
        try:
            result: ExecutionResult = self._call(
                ("execute", sql, timeout_s, row_cap), timeout_s + self.limits.kill_grace_s
            )
            return result
        except _WorkerLost as lost:
            if lost.deadline:
                return timeout_result(timeout_s, started, f" ({lost})")
            return ExecutionResult(
                "error",
                message=f"{lost} while running the statement",
                duration_ms=(time.perf_counter() - started) * 1000,
            )
        except (InputError, RuntimeError) as exc:
            return ExecutionResult("error", message=str(exc), duration_ms=(time.perf_counter() - started) * 1000)

    def catalog(self) -> dict[str, list[str]]:
        """``{table: [columns]}`` of every table and view (names lower-case, in name order).

        Raises:
            InputError: the catalog cannot be read.
        """
        try:
            catalog: dict[str, list[str]] = self._call(("catalog",), _CATALOG_TIMEOUT_S)
            return catalog
        except (_WorkerLost, RuntimeError) as exc:
            raise InputError(f"{self.path}: cannot read the catalog ({exc})") from exc

    def close(self) -> None:
        """Stop the worker (idempotent)."""
        with self._lock:
            self._closed = True
            self._stop(kill=False)

    def __del__(self) -> None:
        if getattr(self, "_process", None) is not None:  # never closed: do not leave the worker running
            self._stop(kill=True)


class SQLiteTestDatabase(_SandboxedDatabase):
    """A SQLite file opened read-only in a worker (URI ``mode=ro``, ``query_only``, read-only authorizer, length limit).

    Args:
        path: the SQLite file; it must exist.
        limits: the bounds (default :class:`ResourceLimits`).

    Raises:
        InputError: the file does not exist or is not a SQLite database.

    >>> import sqlite3, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.sqlite")
    >>> with sqlite3.connect(path) as setup: _ = setup.execute("CREATE TABLE t (x INT)")
    >>> db = SQLiteTestDatabase(path)
    >>> db.execute("DROP TABLE t", 1.0, 10).status, db.catalog()
    ('error', {'t': ['x']})
    >>> db.execute("SELECT length(zeroblob(900000000))", 1.0, 10).message
    'DataError: string or blob too big (values and rows are limited to 16777216 bytes)'
    >>> db.close()
    """

    __test__ = False
    _engine = "sqlite"


class DuckDBTestDatabase(_SandboxedDatabase):
    """A DuckDB file opened ``read_only=True`` in a worker, with no access outside the file.

    Args:
        path: the DuckDB file; it must exist.
        limits: the bounds (default :class:`ResourceLimits`).

    Raises:
        InputError: the file does not exist or cannot be opened read-only in the sandbox.
    """

    __test__ = False
    _engine = "duckdb"


def open_test_database(path: str | Path, limits: ResourceLimits | None = None) -> TestDatabase:
    """Open a SQLite or DuckDB test database read-only, chosen by the file's magic bytes.

    Args:
        path: the database file.
        limits: the sandbox bounds (default :class:`ResourceLimits`).

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
        return SQLiteTestDatabase(path, limits)
    if len(head) >= 12 and head[8:12] == b"DUCK":
        return DuckDBTestDatabase(path, limits)
    raise InputError(f"{path}: neither a SQLite nor a DuckDB file")


__all__ = [
    "DuckDBTestDatabase",
    "ExecutionResult",
    "ExecutionStatus",
    "ResourceLimits",
    "SQLiteTestDatabase",
    "TestDatabase",
    "open_test_database",
]
