"""Schema migrations: ordered ``warehouse/migrations/NNNN_<name>.sql`` files.

Each file is applied once, in its own transaction, and recorded in ``schema_version``
(``version INTEGER``, ``applied_at TIMESTAMP`` in UTC). Applying again is a no-op. Versions must
run 1, 2, 3 ... without gaps so that every warehouse reaches the same schema by the same steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources

import duckdb

from warehouse.errors import WarehouseError
from warehouse.transaction import transaction

MIGRATION_FILE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
"""File name of a migration: four-digit version, underscore, snake_case name, ``.sql``."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file.

    Attributes:
        version: the file's number (1 for ``0001_initial.sql``).
        name: the file name.
        sql: the SQL script (several statements separated by ``;``).
    """

    version: int
    name: str
    sql: str


@lru_cache(maxsize=1)
def available_migrations() -> tuple[Migration, ...]:
    """The bundled migrations in version order.

    Returns:
        ``(Migration(1, "0001_initial.sql", ...), ...)``.

    Raises:
        WarehouseError: two files share a version or a version is missing.

    >>> available_migrations()[0].name
    '0001_initial.sql'
    """
    folder = resources.files("warehouse.migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = MIGRATION_FILE.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise WarehouseError(
                f"warehouse/migrations/{migration.name}: expected version {expected:04d} next; "
                "migration files must be numbered 0001, 0002, ... without gaps or duplicates"
            )
    return tuple(found)


def current_version(conn: duckdb.DuckDBPyConnection) -> int:
    """The highest applied migration version (0 for an empty database)."""
    # fetchall, not fetchone: DuckDB 2 refuses further relation work while a result is unread.
    exists = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version' AND table_schema = 'main'"
    ).fetchall()
    if not exists[0][0]:
        return 0
    return int(conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchall()[0][0])


def foreign_tables(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables and views of a database that is not a STEF warehouse: it has no ``schema_version``
    table but holds others (another application's database); ``[]`` for a warehouse or an empty file.

    >>> conn = duckdb.connect()
    >>> foreign_tables(conn)
    []
    >>> _ = conn.execute("CREATE TABLE sales (id INTEGER)")
    >>> foreign_tables(conn)
    ['sales']
    """
    if conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version' AND table_schema = 'main'"
    ).fetchall()[0][0]:
        return []
    rows = conn.execute(
        """
        SELECT name FROM (
            SELECT schema_name, table_name AS name FROM duckdb_tables()
            WHERE NOT internal AND database_name = current_database()
            UNION ALL
            SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal AND database_name = current_database()
        ) ORDER BY schema_name, name
        """
    ).fetchall()
    return [str(row[0]) for row in rows]


def check_is_warehouse(conn: duckdb.DuckDBPyConnection, where: str) -> None:
    """Raise :class:`WarehouseError` when ``conn`` is another application's DuckDB database
    (:func:`foreign_tables`): STEF neither migrates nor reads it.

    Args:
        conn: an open connection.
        where: the file, for the message.
    """
    foreign = foreign_tables(conn)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise WarehouseError(
            f"{where} is a DuckDB database but not a STEF warehouse (no schema_version table; it holds {shown}); "
            "nothing was changed in it: pass a new file or a STEF warehouse"
        )


def _applied_versions(conn: duckdb.DuckDBPyConnection) -> set[int]:
    """The versions recorded in ``schema_version`` (none without the table), read without writing."""
    if current_version(conn) == 0:
        return set()
    return {int(row[0]) for row in conn.execute("SELECT version FROM schema_version").fetchall()}


def apply_migrations(conn: duckdb.DuckDBPyConnection) -> tuple[int, ...]:
    """Apply every migration not yet recorded in ``schema_version``.

    Args:
        conn: a read-write connection.

    Returns:
        The versions applied now, in order (``()`` when the schema was up to date).

    Raises:
        WarehouseError: a migration failed (it is rolled back; the message names the file), the
            database has a newer schema than this version of stef knows, or it is another
            application's database (:func:`check_is_warehouse`; nothing is written to it).
    """
    check_is_warehouse(conn, "the database")
    migrations = available_migrations()
    latest = migrations[-1].version if migrations else 0
    applied = _applied_versions(conn)
    if applied == {migration.version for migration in migrations}:
        return ()  # up to date: read only (a write would wait for a running checkpoint)
    if applied and max(applied) > latest:
        raise WarehouseError(
            f"the warehouse has schema version {max(applied)} but this stef knows only up to {latest}; upgrade stef"
        )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP NOT NULL)"
    )
    done: list[int] = []
    for migration in migrations:
        if migration.version in applied:
            continue
        with transaction(conn, f"warehouse/migrations/{migration.name} failed"):
            conn.execute(migration.sql)
            conn.execute(
                "INSERT INTO schema_version VALUES ($version, $applied_at)",
                {"version": migration.version, "applied_at": datetime.now(UTC).replace(tzinfo=None)},
            )
        done.append(migration.version)
    return tuple(done)
