"""The worker process of a sandboxed test database (see :mod:`stef.campaign.sandbox`).

Runs in its own interpreter (``python -c "from stef.campaign.worker import main; main()"``): reads
``(engine, path, limits)`` and then requests from stdin, answers on stdout, one framed pickle
each (an 8-byte big-endian length, then the body). It opens the database with the sandbox
settings (SQLite: read-only URI — ``immutable`` for a WAL database with no log, so no
``-wal``/``-shm`` file is created —, ``query_only``, read-only authorizer, length limit,
in-memory temporary store; DuckDB: read-only, no external access, no extensions, one thread, no
temporary directory, configuration locked, one ``SELECT`` statement per request), then limits
its own address space, so a statement that allocates past the budget fails with a
``MemoryError`` here instead of taking the host's memory. The caller kills it when a statement
does not yield by its deadline.
"""

from __future__ import annotations

import os
import pickle
import signal
import sqlite3
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from stef.errors import InputError

ExecutionStatus = Literal["ok", "error", "timeout", "row_cap", "byte_cap"]
"""``ok``; ``error`` (the engine refused or failed, a value or the memory budget was exceeded);
``timeout`` (ran past the deadline); ``row_cap`` (more rows than the cap); ``byte_cap`` (the
fetched rows passed the result byte budget)."""

_PROGRESS_STEPS = 1000
"""SQLite virtual-machine instructions between two deadline checks."""

_FETCH_BATCH = 512
"""Most rows fetched at a time while counting rows and bytes."""

_SQLITE_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
"""Authorizer action codes a campaign statement may use; everything else is denied."""

_SQLITE_DENIED_FUNCTIONS = frozenset({"fts3_tokenizer", "load_extension"})
"""SQL functions a campaign statement may not call although calling functions is allowed:
``fts3_tokenizer(name)`` returns a tokenizer's C pointer and ``fts3_tokenizer(name, blob)`` (on
builds with ``SQLITE_ENABLE_FTS3_TOKENIZER``, e.g. Debian's) installs any address as one, which an
FTS3 table then calls; ``load_extension`` loads native code (also off in :mod:`sqlite3`)."""

_MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class ResourceLimits:
    """Bounds of one sandboxed test database (see the module docstring).

    Attributes:
        memory_bytes: address space the worker may add after opening the database (bytes);
            DuckDB's ``memory_limit`` is half of it.
        max_value_bytes: longest string, blob or row a SQLite statement may build or read (bytes).
        max_result_bytes: fetched rows of one statement, as Python objects (bytes).
        kill_grace_s: seconds past a statement's deadline before its worker is killed.

    Raises:
        ValueError: a bound is not positive.

    >>> ResourceLimits().max_value_bytes == 16 * 2**20
    True
    >>> ResourceLimits(memory_bytes=0)
    Traceback (most recent call last):
    ...
    ValueError: ResourceLimits.memory_bytes must be positive, got 0
    """

    memory_bytes: int = 1024 * _MIB
    max_value_bytes: int = 16 * _MIB
    max_result_bytes: int = 64 * _MIB
    kill_grace_s: float = 1.0

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "max_value_bytes", "max_result_bytes", "kill_grace_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ResourceLimits.{name} must be positive, got {getattr(self, name)!r}")


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


def _object_bytes(value: Any) -> int:
    """Python object size of a fetched value, nested lists/tuples/dicts summed (bytes)."""
    size = sys.getsizeof(value)
    if isinstance(value, list | tuple | set | frozenset):
        size += sum(_object_bytes(v) for v in value)
    elif isinstance(value, dict):
        size += sum(_object_bytes(k) + _object_bytes(v) for k, v in value.items())
    return size


def _fetch(
    fetchmany: Callable[[int], Sequence[Any]], row_cap: int, byte_cap: int
) -> tuple[list[tuple[Any, ...]], ExecutionStatus]:
    """Up to ``row_cap + 1`` rows, stopping as soon as they pass ``byte_cap`` (status ``byte_cap``).

    Batches start at one row and grow only while the largest row seen so far fits the remaining
    budget that many times, so the rows held never exceed the budget by more than one row.
    """
    rows: list[tuple[Any, ...]] = []
    size = largest = 0
    batch_size = 1
    while len(rows) <= row_cap:
        batch = fetchmany(min(batch_size, row_cap + 1 - len(rows)))
        if not batch:
            break
        for row in batch:
            row_bytes = _object_bytes(row)
            size += row_bytes
            largest = max(largest, row_bytes)
            if size > byte_cap:
                return rows, "byte_cap"
            rows.append(tuple(row))
        batch_size = max(1, min(_FETCH_BATCH, (byte_cap - size) // max(largest, 1)))
    return rows, ("row_cap" if len(rows) > row_cap else "ok")


def _finish(
    status: ExecutionStatus,
    columns: tuple[str, ...],
    rows: list[tuple[Any, ...]],
    started: float,
    limits: ResourceLimits,
    row_cap: int,
) -> ExecutionResult:
    elapsed = (time.perf_counter() - started) * 1000
    if status == "row_cap":
        return ExecutionResult(
            "row_cap", columns, message=f"returned more than the {row_cap}-row cap", duration_ms=elapsed
        )
    if status == "byte_cap":
        return ExecutionResult(
            "byte_cap",
            columns,
            message=f"returned more than the {limits.max_result_bytes}-byte result budget",
            duration_ms=elapsed,
        )
    return ExecutionResult("ok", columns, tuple(rows), duration_ms=elapsed)


def _memory_result(started: float, limits: ResourceLimits) -> ExecutionResult:
    return ExecutionResult(
        "error",
        message=f"MemoryError: the statement needs more than the {limits.memory_bytes // _MIB} MiB memory budget",
        duration_ms=(time.perf_counter() - started) * 1000,
    )


def timeout_result(timeout_s: float, started: float, detail: str = "") -> ExecutionResult:
    return ExecutionResult(
        "timeout",
        message=f"stopped after the {timeout_s:g} s statement timeout{detail}",
        duration_ms=(time.perf_counter() - started) * 1000,
    )


def _deny_writes(action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
    """SQLite authorizer: reading only, and no function of :data:`_SQLITE_DENIED_FUNCTIONS`.

    For ``SQLITE_FUNCTION`` SQLite passes the function's name as ``arg2`` (``arg1`` is ``None``).
    """
    if action not in _SQLITE_READ_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _SQLITE_DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _wal_without_log(path: Path) -> bool:
    """Whether ``path`` is a SQLite database in WAL mode with no ``-wal`` file beside it.

    SQLite opens such a database read-only by creating ``-wal`` and ``-shm`` files next to it
    (left behind: a read-only connection cannot remove them). With no ``-wal`` file there is no
    log to read, so the database is opened ``immutable=1`` instead, which creates no file; one
    with a ``-wal`` file (a writer is active or did not checkpoint) is opened as usual so its
    log is read.

    >>> import sqlite3, tempfile, os
    >>> path = Path(tempfile.mkdtemp()) / "w.sqlite"
    >>> setup = sqlite3.connect(path, isolation_level=None)
    >>> setup.execute("PRAGMA journal_mode = WAL").fetchone()
    ('wal',)
    >>> _ = setup.execute("CREATE TABLE t (x INT)")
    >>> _wal_without_log(path)  # the writer is open: its -wal file is there
    False
    >>> setup.close()
    >>> _wal_without_log(path), _wal_without_log(Path(os.devnull))
    (True, False)
    """
    try:
        with path.open("rb") as handle:
            header = handle.read(20)
    except OSError:
        return False
    return header[18:20] == b"\x02\x02" and not path.with_name(path.name + "-wal").exists()


class _SQLiteEngine:
    """The SQLite connection inside the worker."""

    def __init__(self, path: Path, limits: ResourceLimits) -> None:
        self.limits = limits
        immutable = "&immutable=1" if _wal_without_log(path) else ""
        try:
            self.conn = sqlite3.connect(f"{path.as_uri()}?mode=ro{immutable}", uri=True)
            self.conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
            self.conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            self.conn.execute("PRAGMA query_only = ON")
            self.conn.execute("PRAGMA temp_store = MEMORY")
            self.conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{path}: not a SQLite database ({exc})") from exc
        self.conn.set_authorizer(_deny_writes)

    def execute(self, sql: str, timeout_s: float, row_cap: int) -> ExecutionResult:
        started = time.perf_counter()
        deadline = started + timeout_s
        timed_out = False

        def _progress() -> int:
            nonlocal timed_out
            if time.perf_counter() > deadline:
                timed_out = True
                return 1
            return 0

        self.conn.set_progress_handler(_progress, _PROGRESS_STEPS)
        try:
            cursor = self.conn.execute(sql)
            rows, status = _fetch(cursor.fetchmany, row_cap, self.limits.max_result_bytes)
            columns = tuple(d[0] for d in cursor.description or ())
            cursor.close()
        except sqlite3.Error as exc:
            if timed_out:
                return timeout_result(timeout_s, started)
            message = f"{type(exc).__name__}: {exc}"
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_TOOBIG:
                message += f" (values and rows are limited to {self.limits.max_value_bytes} bytes)"
            return ExecutionResult("error", message=message, duration_ms=(time.perf_counter() - started) * 1000)
        except MemoryError:
            self.memory_exhausted = True
            return _memory_result(started, self.limits)
        except (ValueError, OverflowError) as exc:  # sqlite3 raises these for e.g. several statements or huge ints
            return ExecutionResult(
                "error", message=f"{type(exc).__name__}: {exc}", duration_ms=(time.perf_counter() - started) * 1000
            )
        finally:
            self.conn.set_progress_handler(None, 0)
        return _finish(status, columns, rows, started, self.limits, row_cap)

    def catalog(self) -> dict[str, list[str]]:
        self.conn.set_authorizer(None)
        try:
            tables = [
                r[0]
                for r in self.conn.execute(
                    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name"
                )
            ]
            return {
                t.lower(): [r[1].lower() for r in self.conn.execute("SELECT * FROM pragma_table_info(?)", (t,))]
                for t in tables
            }
        finally:
            self.conn.set_authorizer(_deny_writes)

    def close(self) -> None:
        self.conn.close()


def _duckdb_config(limits: ResourceLimits) -> dict[str, Any]:
    """DuckDB settings of a test database, in an order DuckDB accepts at connect time.

    ``enable_external_access`` must come before ``temp_directory`` (DuckDB 2.0 refuses the
    other order) and ``lock_configuration`` last.
    """
    return {
        "enable_external_access": False,
        "autoload_known_extensions": False,
        "autoinstall_known_extensions": False,
        "allow_community_extensions": False,
        "allow_unsigned_extensions": False,
        "python_enable_replacements": False,
        "threads": 1,
        "memory_limit": f"{max(limits.memory_bytes // 2 // _MIB, 1)}MiB",
        "temp_directory": "",
        "max_temp_directory_size": "0B",
        "lock_configuration": True,
    }


_DUCKDB_EXPECTED = {
    "enable_external_access": "false",
    "autoload_known_extensions": "false",
    "autoinstall_known_extensions": "false",
    "allow_community_extensions": "false",
    "allow_unsigned_extensions": "false",
    "python_enable_replacements": "false",
    "threads": "1",
    "temp_directory": "",
    "max_temp_directory_size": "0 bytes",
    "lock_configuration": "true",
}
"""Settings read back from ``duckdb_settings()`` after opening; any other value refuses the database."""


class _DuckDBEngine:
    """The DuckDB connection inside the worker."""

    def __init__(self, path: Path, limits: ResourceLimits) -> None:
        import duckdb

        self.limits = limits
        self.error = duckdb.Error
        self.interrupted = duckdb.InterruptException
        self.select_type = duckdb.StatementType.SELECT
        try:
            self.conn = duckdb.connect(str(path), read_only=True, config=_duckdb_config(limits))
        except duckdb.Error as exc:
            raise InputError(f"{path}: cannot open as DuckDB read-only ({exc})") from exc
        names = list(_DUCKDB_EXPECTED)
        actual = dict(
            self.conn.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN (SELECT unnest($names))", {"names": names}
            ).fetchall()
        )
        wrong = {k: actual.get(k) for k, v in _DUCKDB_EXPECTED.items() if str(actual.get(k)).lower() != v}
        if wrong:
            self.conn.close()
            raise InputError(
                f"{path}: DuckDB did not accept the sandbox settings ({wrong}); the database is not opened"
            )

    def execute(self, sql: str, timeout_s: float, row_cap: int) -> ExecutionResult:
        started = time.perf_counter()
        fired = threading.Event()

        def _interrupt() -> None:
            fired.set()
            self.conn.interrupt()

        refusal = self._refusal(sql)
        if refusal is not None:
            return ExecutionResult("error", message=refusal, duration_ms=(time.perf_counter() - started) * 1000)
        timer = threading.Timer(timeout_s, _interrupt)
        timer.start()
        try:
            self.conn.execute(sql)
            rows, status = _fetch(self.conn.fetchmany, row_cap, self.limits.max_result_bytes)
            columns = tuple(d[0] for d in self.conn.description or ())
        except self.error as exc:
            if fired.is_set() and isinstance(exc, self.interrupted):
                return timeout_result(timeout_s, started)
            if "OutOfMemory" in type(exc).__name__:  # DuckDB's own budget: its buffers may stay fragmented
                self.memory_exhausted = True
            return ExecutionResult(
                "error", message=f"{type(exc).__name__}: {exc}", duration_ms=(time.perf_counter() - started) * 1000
            )
        except MemoryError:
            self.memory_exhausted = True
            return _memory_result(started, self.limits)
        finally:
            timer.cancel()
        return _finish(status, columns, rows, started, self.limits, row_cap)

    def _refusal(self, sql: str) -> str | None:
        """Why ``sql`` may not run (``None`` when it is exactly one ``SELECT`` statement), by DuckDB's own parser.

        A read-only DuckDB connection still runs ``BEGIN`` (after which one failing statement
        aborts the transaction and every later statement of the campaign fails), ``CREATE TEMP``
        objects that later statements would see, and several statements in one string; only
        statements DuckDB types as ``SELECT`` (also ``FROM t``, ``VALUES``, ``DESCRIBE``, ``PIVOT``
        with an ``IN`` list) run.
        """
        try:
            statements = self.conn.extract_statements(sql)
        except self.error as exc:
            return f"{type(exc).__name__}: {exc}"
        if len(statements) != 1:
            return f"refused: {len(statements)} statements; the test database runs one SELECT statement at a time"
        kind = statements[0].type
        if kind != self.select_type:
            return f"refused: {kind.name} statement; the test database runs SELECT statements only"
        return None

    def catalog(self) -> dict[str, list[str]]:
        rows = self.conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns ORDER BY table_name, ordinal_position"
        ).fetchall()
        out: dict[str, list[str]] = {}
        for table, column in rows:
            out.setdefault(str(table).lower(), []).append(str(column).lower())
        return out

    def close(self) -> None:
        self.conn.close()


_ENGINES: dict[str, type[_SQLiteEngine | _DuckDBEngine]] = {"sqlite": _SQLiteEngine, "duckdb": _DuckDBEngine}


def _cap_address_space(budget: int) -> None:
    """Limit this process's address space to its current size + ``budget`` bytes (Linux ``/proc``; else no-op)."""
    try:
        import resource

        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (ImportError, OSError, ValueError, IndexError):
        return  # no /proc or no resource module: the engines' own limits still apply
    limit = pages * os.sysconf("SC_PAGE_SIZE") + budget
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


_HEADER = struct.Struct("!Q")
"""Frame header of a worker message: the length of the pickled body (bytes, big-endian)."""


def write_message(fd: int, message: Any) -> None:
    """Write one framed, pickled message to ``fd``."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    for chunk in (_HEADER.pack(len(body)), body):
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]


def _read_exact(fd: int, size: int) -> bytes:
    parts: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the pipe")
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def read_message(fd: int) -> Any:
    """Read one framed message from ``fd``.

    Raises:
        EOFError: the pipe closed before a whole message arrived.
    """
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    return pickle.loads(_read_exact(fd, size))  # only ever written by this module, in the caller or the worker


_PR_SET_PDEATHSIG = 1
"""Linux ``prctl`` option: the signal this process gets when the thread that started it ends."""


def _die_with_parent() -> None:
    """Have Linux SIGKILL this worker when its caller ends (``prctl(PR_SET_PDEATHSIG)``; elsewhere a no-op).

    The worker notices a closed request pipe only between statements, so without this a worker
    busy in one C call that never yields (a quadratic ``instr``, which the caller would kill at the
    deadline) outlived a caller ended by SIGTERM or SIGKILL, at full CPU, until the call returned.
    Linux sends the signal when the *thread* that started the worker ends; the sandbox starts and
    uses a worker from one thread, and a worker lost anyway is replaced before the next statement.
    """
    parent = os.getppid()
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):  # no libc or no prctl
        return
    if os.getppid() != parent:  # the caller ended before the request took effect
        os._exit(1)


def main() -> None:
    """Entry point of the worker interpreter: requests on stdin, replies on (the original) stdout.

    The first message is ``(engine, path, limits)``; then :func:`_serve` answers requests. Anything
    else the engines print to stdout goes to stderr, so it cannot corrupt the replies.
    """
    _die_with_parent()
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        engine, path, limits = read_message(0)
    except EOFError:
        return
    _serve(0, reply_fd, engine, path, limits)


def _serve(request_fd: int, reply_fd: int, engine: str, path: str, limits: ResourceLimits) -> None:
    """Open the database, then answer ``("execute", sql, timeout_s, row_cap)`` and ``("catalog",)``
    requests with ``(kind, payload)`` replies until ``("close",)`` or the end of input."""
    try:
        db = _ENGINES[engine](Path(path), limits)
    except InputError as exc:
        write_message(reply_fd, ("refused", str(exc)))
        return
    except Exception as exc:
        write_message(reply_fd, ("refused", f"{path}: cannot open the test database ({type(exc).__name__}: {exc})"))
        return
    _cap_address_space(limits.memory_bytes)
    write_message(reply_fd, ("ready", None))
    try:
        while True:
            try:
                request = read_message(request_fd)
            except EOFError:
                break
            if request[0] == "close":
                break
            try:
                payload: Any = db.execute(*request[1:]) if request[0] == "execute" else db.catalog()
                exhausted = getattr(db, "memory_exhausted", False)
                reply: tuple[str, Any] = ("ok_exiting" if exhausted else "ok", payload)
                write_message(reply_fd, reply)
                if exhausted:
                    break  # the parent starts a fresh worker: no later statement runs in what the bomb left behind
            except MemoryError:
                write_message(
                    reply_fd,
                    (
                        "failed_exiting",
                        f"MemoryError: the answer needs more than the {limits.memory_bytes // _MIB} MiB memory budget",
                    ),
                )
                break
            except Exception as exc:
                write_message(reply_fd, ("failed", f"{type(exc).__name__}: {exc}"))
    finally:
        db.close()


__all__ = [
    "ExecutionResult",
    "ExecutionStatus",
    "ResourceLimits",
    "main",
    "read_message",
    "timeout_result",
    "write_message",
]
