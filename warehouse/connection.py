"""Opening the warehouse: path resolution, the one-writer lock, migrations."""

from __future__ import annotations

import errno
import logging
import os
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from stef.display import one_line, quoted
from warehouse.errors import WarehouseError, WarehouseLockedError, WarehouseReadOnlyError
from warehouse.migrate import apply_migrations, available_migrations, check_is_warehouse, current_version

DEFAULT_PATH = Path("stef.duckdb")
"""Warehouse file used when neither an explicit path nor ``STEF_WAREHOUSE`` is given (relative
to the working directory)."""

ENV_VAR = "STEF_WAREHOUSE"
"""Environment variable that overrides :data:`DEFAULT_PATH`."""

IN_MEMORY = ":memory:"
"""Path that opens a private in-memory warehouse (tests, ``stef evaluate`` previews)."""

DEFAULT_LOCK_TIMEOUT_S = 30.0
"""How long :func:`connect` waits for another process to release the file before failing
(``$STEF_LOCK_TIMEOUT_S`` overrides it). The flows' tasks do not retry a locked warehouse, so this
one wait is the whole wait a run does for the lock and its error message states it exactly."""

LOCK_TIMEOUT_ENV_VAR = "STEF_LOCK_TIMEOUT_S"
"""Environment variable that overrides :data:`DEFAULT_LOCK_TIMEOUT_S` (seconds, ``0``: fail at once)."""

_LOCK_POLL_S = 0.2

DEFAULT_MEMORY_LIMIT = "256MB"
"""DuckDB's memory limit for a warehouse connection. DuckDB's own default is 80 % of RAM, and a
day's uncommitted inserts stay in that memory; with a limit DuckDB spills to
``<warehouse>.tmp/`` instead, so storing 100k records adds a bounded amount to the nightly's
peak memory. ``$STEF_DUCKDB_MEMORY_LIMIT`` overrides it (any DuckDB size: ``2GB``, ``75%``)."""
MEMORY_LIMIT_ENV_VAR = "STEF_DUCKDB_MEMORY_LIMIT"


def resolve_path(path: str | Path | None = None) -> Path:
    """The warehouse file to use: ``path``, else ``$STEF_WAREHOUSE``, else ``./stef.duckdb``.

    Args:
        path: explicit path (wins over everything); ``None`` or ``""`` means "not given".

    Returns:
        The path with ``~`` expanded (not resolved against the working directory).

    >>> str(resolve_path("/data/wh.duckdb"))
    '/data/wh.duckdb'
    """
    if path is not None and str(path):
        return Path(path).expanduser()
    from_env = os.environ.get(ENV_VAR, "").strip()
    if from_env:
        return Path(from_env).expanduser()
    return DEFAULT_PATH


def existing_warehouse(path: str | Path | None = None, first: str = "`stef nightly` or `stef backfill`") -> Path:
    """The warehouse file to read (:func:`resolve_path`), which must exist already.

    Args:
        path: as for :func:`resolve_path`.
        first: the commands that create it, for the message.

    Returns:
        The path.

    Raises:
        WarehouseError: the path is a folder (a DuckDB warehouse is one file), or no file.

    >>> existing_warehouse("/")
    Traceback (most recent call last):
    ...
    warehouse.errors.WarehouseError: warehouse / is a folder, not a DuckDB file; pass the file, e.g. --warehouse /stef.duckdb
    """
    target = resolve_path(path)
    if target.is_dir():
        raise WarehouseError(_folder_message(target))
    if not target.is_file():
        raise WarehouseError(f"warehouse {target} does not exist; run {first} first, or pass --warehouse")
    return target


def warehouse_file(path: str | Path | None = None) -> Path:
    """The warehouse file a command writes (:func:`resolve_path`), checked before any work: it may
    not exist yet, but it may not be a folder.

    Raises:
        WarehouseError: the path is a folder (the message names a file to pass instead).
    """
    target = resolve_path(path)
    if target.is_dir():
        raise WarehouseError(_folder_message(target))
    return target


def _folder_message(target: Path) -> str:
    """Why a folder is no warehouse, with the file name to pass instead."""
    inside = target / DEFAULT_PATH.name
    return f"warehouse {one_line(target)} is a folder, not a DuckDB file; pass the file, e.g. --warehouse {one_line(inside)}"


def default_lock_timeout() -> float:
    """Seconds to wait for another writer: ``$STEF_LOCK_TIMEOUT_S``, else :data:`DEFAULT_LOCK_TIMEOUT_S`.

    Raises:
        WarehouseError: the variable is set but is not a number >= 0.
    """
    raw = os.environ.get(LOCK_TIMEOUT_ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_LOCK_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0.0:  # also rejects nan
        raise WarehouseError(f"{LOCK_TIMEOUT_ENV_VAR}={raw!r} is not a number of seconds >= 0")
    return value


def default_memory_limit() -> str:
    """DuckDB memory limit: ``$STEF_DUCKDB_MEMORY_LIMIT``, else :data:`DEFAULT_MEMORY_LIMIT`.

    Raises:
        WarehouseError: the variable is not a size DuckDB accepts.
    """
    raw = os.environ.get(MEMORY_LIMIT_ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_MEMORY_LIMIT
    try:
        duckdb.connect(IN_MEMORY, config={"memory_limit": raw}).close()
    except duckdb.Error as exc:
        raise WarehouseError(
            f"{MEMORY_LIMIT_ENV_VAR}={raw!r} is not a DuckDB memory size (e.g. 512MB, 2GB): {exc}"
        ) from exc
    return raw


def _is_lock_conflict(exc: duckdb.IOException) -> bool:
    # DuckDB has no dedicated exception type for a conflicting file lock; the IOException
    # message ("Could not set lock on file ...") is the only signal it gives.
    return "Could not set lock" in str(exc)


_WRITE_DENIED_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_WRITE_DENIED_TEXTS = tuple(os.strerror(code).lower() for code in sorted(_WRITE_DENIED_ERRNOS))


def _is_write_denied(exc: duckdb.IOException) -> bool:
    """Whether DuckDB could not open a file because the user may not write it (permission, read-only
    file system). DuckDB's IOException carries no errno, only the system's message
    (``Cannot open file "…": Permission denied``)."""
    message = str(exc).lower()
    return any(text in message for text in _WRITE_DENIED_TEXTS)


DUCKDB_MAGIC = b"DUCK"
"""The magic bytes of a DuckDB database file, after the 8-byte checksum of its main header."""
_OTHER_FILE_KINDS = ((b"SQLite format 3\x00", "a SQLite database"), (b"PAR1", "a Parquet file"))


def check_duckdb_file(target: Path) -> None:
    """Refuse an existing, non-empty file that is not a DuckDB database, naming what it is.

    Called only once DuckDB failed to open ``target`` or opened it as something else than a
    DuckDB database file (:func:`_is_duckdb_file`): DuckDB 2 opens a CSV, JSON or JSON Lines file
    given as a database as an in-memory database with a view of it (the warehouse was then
    described as "a DuckDB database but not a STEF warehouse"), and a SQLite file through its
    ``sqlite_scanner`` extension. Never before DuckDB opens a file: DuckDB's lock on it is a POSIX
    record lock, which a process loses when it closes any descriptor of the file, so reading the
    header while this process had the warehouse open let another process write it too. A missing
    or empty file passes (DuckDB's own error then stands).

    Raises:
        WarehouseError: the file's header lacks :data:`DUCKDB_MAGIC` (the message names a SQLite
            database or a Parquet file, else quotes its first bytes).
    """
    try:
        with target.open("rb") as handle:
            head = handle.read(64)
    except (FileNotFoundError, IsADirectoryError):
        return
    except OSError:
        return  # unreadable: DuckDB's own error names the cause (permission denied ...)
    if not head or head[8:12] == DUCKDB_MAGIC:
        return
    kind = next((name for magic, name in _OTHER_FILE_KINDS if head.startswith(magic)), None)
    if kind is None:
        kind = f"it begins {quoted(head[:24].decode('utf-8', errors='replace'))}"
    raise WarehouseError(
        f"warehouse {target} is not a DuckDB database file ({kind}); nothing was changed in it: "
        "pass a new file or a STEF warehouse"
    )


def _name_a_foreign_file(target: Path, error: duckdb.Error) -> None:
    """After DuckDB refused ``target`` as no DuckDB database file (``not a valid DuckDB database
    file``), needed an extension to open it (a SQLite file) or read it as an in-memory database
    (a CSV, JSON or Parquet file, which read-only mode refuses), :func:`check_duckdb_file` names
    what it is. Not after another failure: "a different configuration than existing connections"
    means this process has the file open, and reading it would drop that connection's lock."""
    text = str(error).lower()
    if any(sign in text for sign in ("not a valid duckdb database file", "extension", "in-memory database")):
        check_duckdb_file(target)


def _is_duckdb_file(conn: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``conn``'s database is a DuckDB database file (not the in-memory database DuckDB
    makes of a CSV or JSON file, nor a database of another engine attached through an extension)."""
    row = conn.execute("SELECT path, type FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return row is not None and row[0] is not None and str(row[1]).lower() == "duckdb"


def connect(
    path: str | Path | None = None,
    *,
    read_only: bool = False,
    lock_timeout: float | None = None,
    on_wait: Callable[[str], object] | None = None,
    existing_tables: bool = False,
) -> duckdb.DuckDBPyConnection:
    """Open the warehouse, creating the file (and missing parent folders) and migrating it.

    DuckDB allows one writer process per file: when another process holds it, this waits up to
    ``lock_timeout`` seconds for the lock, then raises :class:`WarehouseLockedError`. Close the
    connection when done (``with connect(...) as conn:``) so other processes can write.

    Args:
        path: the DuckDB file; ``None`` resolves as in :func:`resolve_path`; ``":memory:"``
            opens a private in-memory warehouse.
        read_only: open without write access (several reader processes may share a file that
            no process writes); the file must exist and be fully migrated.
        lock_timeout: seconds to wait for another process's lock (0: fail at once; ``None``:
            :func:`default_lock_timeout`).
        on_wait: called once with a message when the file is found locked and waiting starts
            (e.g. a run logger's ``warning``), so a waiting run says why it stalls.
        existing_tables: opening for writing, require the STEF tables already (a command that
            adds to stored evaluations, ``stef drift``): an empty DuckDB file gets the
            read-only error instead of the tables (it names the command that makes them).

    Returns:
        An open connection with the schema at the latest migration.

    Raises:
        WarehouseLockedError: another process still holds the file after ``lock_timeout``.
        WarehouseReadOnlyError: opening for writing, the file or its folder may not be written by
            this user (permission denied, read-only file system).
        WarehouseError: the path is a folder, or the file cannot be opened otherwise (not a DuckDB
            file, missing in read-only mode), cannot be migrated, or ``$STEF_DUCKDB_MEMORY_LIMIT``
            is not a size.
    """
    if str(path) == IN_MEMORY:
        conn = duckdb.connect(IN_MEMORY)
        apply_migrations(conn)
        return conn
    target = resolve_path(path)
    if target.is_dir():
        raise WarehouseError(_folder_message(target))
    if not read_only:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            error = WarehouseReadOnlyError if exc.errno in _WRITE_DENIED_ERRNOS else WarehouseError
            raise error(f"cannot create the folder of warehouse {target}: {exc.strerror or exc}") from exc
    if read_only:  # DuckDB refuses a read-only connection to a file this process has open for writing
        wait_for_checkpoints()
    timeout = default_lock_timeout() if lock_timeout is None else max(lock_timeout, 0.0)
    memory_limit = default_memory_limit()
    started = time.monotonic()
    deadline = started + timeout
    waiting = False
    while True:
        try:
            conn = duckdb.connect(str(target), read_only=read_only, config={"memory_limit": memory_limit})
            break
        except duckdb.IOException as exc:
            if not _is_lock_conflict(exc):
                _name_a_foreign_file(target, exc)
                error = WarehouseReadOnlyError if not read_only and _is_write_denied(exc) else WarehouseError
                raise error(f"cannot open warehouse {target}: {exc}") from exc
            now = time.monotonic()
            if now >= deadline:
                raise WarehouseLockedError(
                    f"another stef process writes to {target}; retry later when it has finished "
                    f"(gave up after waiting {now - started:.1f} s for its lock, limit {timeout:g} s, "
                    f"set ${LOCK_TIMEOUT_ENV_VAR} to wait longer; DuckDB allows one writer process per file)"
                ) from exc
            if not waiting and on_wait is not None:
                on_wait(f"warehouse {target} is locked by another process; waiting up to {timeout:g} s for it")
            waiting = True
            time.sleep(_LOCK_POLL_S)
        except duckdb.Error as exc:
            _name_a_foreign_file(target, exc)
            raise WarehouseError(f"cannot open warehouse {target}: {exc}") from exc
    try:
        if not _is_duckdb_file(conn):  # DuckDB 2 opens a CSV or JSON file as an in-memory database with a view of it
            conn.close()
            check_duckdb_file(target)
            raise WarehouseError(f"warehouse {target} is not a DuckDB database file; nothing was changed in it")
        check_is_warehouse(conn, f"warehouse {target}")
        if (read_only or existing_tables) and current_version(conn) == 0:
            # an empty DuckDB database: a first run stopped before it made the tables
            raise WarehouseError(
                f"warehouse {target} holds no STEF tables yet (no migration applied: an empty DuckDB file, "
                "or one whose first run stopped before it made them); a run that writes to it makes them: "
                f"stef nightly --warehouse {shlex.quote(str(target))}"
            )
        if read_only:
            latest = available_migrations()[-1].version
            version = current_version(conn)
            if version < latest:
                raise WarehouseError(
                    f"warehouse {target} has an older schema than this stef (version "
                    f"{version} < {latest}); open it once for writing to migrate it"
                )
        else:
            apply_migrations(conn)
    except BaseException:
        conn.close()
        raise
    return conn


_DEFERRED: list[duckdb.DuckDBPyConnection] = []
_CHECKPOINTS: list[threading.Thread] = []
_CHECKPOINTS_LOCK = threading.Lock()
_LOGGER = logging.getLogger(__name__)


def close_later(conn: duckdb.DuckDBPyConnection) -> None:
    """Keep ``conn`` open until :func:`checkpoint_in_background` (or :func:`wait_for_checkpoints`)
    closes it after a ``CHECKPOINT`` in a background thread.

    A connection that just committed a day holds it in DuckDB's write-ahead log (about 94 MB for a
    20k-record day); closing the last connection to the file merges the log into it, 0.6–0.7 s on
    2 cores, during which the caller would wait. Kept open, the database stays open for the next
    connections of this process (they share it: a short write such as the day's metrics commits at
    once), and the merge runs in DuckDB's own threads while the caller goes on reading: a write
    made during the checkpoint waits for it. The data is durable from the commit on.

    Until then no commit of this process checkpoints on its own (DuckDB's ``checkpoint_threshold``
    of the open database is raised; :func:`checkpoint_in_background` restores it): the commit of
    the next short write would otherwise merge the whole log itself, and wait for it.

    Args:
        conn: an open read-write connection, no longer used by the caller (closed at once, with its
            checkpoint, when the setting cannot be changed).
    """
    try:
        conn.execute(f"SET checkpoint_threshold = '{_NO_AUTOMATIC_CHECKPOINT}'")
    except duckdb.Error:
        conn.close()
        return
    with _CHECKPOINTS_LOCK:
        _DEFERRED.append(conn)


_NO_AUTOMATIC_CHECKPOINT = "1TB"
"""The ``checkpoint_threshold`` (WAL size that makes a commit checkpoint) while :func:`close_later` holds a connection."""


def checkpoint_in_background() -> None:
    """Start, for every connection given to :func:`close_later`, a thread (not a daemon: the
    interpreter waits for it at exit) that checkpoints it and closes it. A failed checkpoint is
    logged; the committed data stays in the log, which the next close merges."""

    def checkpoint_then_close(conn: duckdb.DuckDBPyConnection) -> None:
        try:
            conn.execute("CHECKPOINT")
            conn.execute("RESET checkpoint_threshold")
        except duckdb.Error as exc:
            _LOGGER.warning("warehouse checkpoint skipped, the next close does it: %s", one_line(str(exc)))
        finally:
            conn.close()

    with _CHECKPOINTS_LOCK:
        deferred = list(_DEFERRED)
        _DEFERRED.clear()
        for conn in deferred:
            thread = threading.Thread(target=checkpoint_then_close, args=(conn,), name="stef-warehouse-checkpoint")
            _CHECKPOINTS.append(thread)
            thread.start()


def wait_for_checkpoints() -> None:
    """Checkpoint and close every connection given to :func:`close_later` (starting those not
    started yet) and wait until all are closed: before the process hands the file to another
    process, or opens it read-only (DuckDB refuses that while it is open for writing)."""
    checkpoint_in_background()
    with _CHECKPOINTS_LOCK:
        running = list(_CHECKPOINTS)
    for thread in running:  # every caller joins every thread: none returns while one still runs
        thread.join()
    with _CHECKPOINTS_LOCK:
        _CHECKPOINTS[:] = [thread for thread in _CHECKPOINTS if thread.is_alive() or thread not in running]
