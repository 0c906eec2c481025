"""Write the snapshot of Prefect's SQLite schema that a fresh temporary API starts from.

``flows/prefect_api.seed_missing_database`` creates a ``PREFECT_HOME`` database that does not exist
yet from ``flows/prefect_db/prefect-sqlite-<head>.sql`` instead of letting Prefect run all its
migrations (6-9 s of the first boot). This script makes that file for the installed Prefect: it
runs Prefect's own migrations (``PrefectDBInterface.create_db``) on an empty SQLite file and
dumps the result (``sqlite3.Connection.iterdump``: tables, indexes and the ``alembic_version``
row). The same Prefect release always writes the same schema; the order of a table's constraints
in its ``CREATE TABLE`` may differ from run to run (the migrations rebuild tables from reflected
constraints), which changes nothing in the database.

Run it after upgrading Prefect to a release with a new migration head; a release without a
snapshot of its own head still works (Prefect migrates the new database itself).

Usage (from the repository root)::

    python scripts/make_prefect_snapshot.py [--out-dir flows/prefect_db] [--keep-database FILE]

Prints the file written.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import closing
from pathlib import Path

HEADER = (
    "-- Prefect's SQLite schema at migration head {head}, as its migrations leave a new database.\n"
    "-- Written by scripts/make_prefect_snapshot.py; do not edit. Read by flows/prefect_api.seed_missing_database.\n"
)
_MIGRATE = """
import asyncio
from prefect.server.database import provide_database_interface
asyncio.run(provide_database_interface().create_db())
"""


def migrated_database(path: Path) -> None:
    """Create the SQLite database ``path`` with Prefect's own migrations, in a child process whose
    settings name only that database (nothing else of the caller's ``PREFECT_HOME`` is touched).

    Raises:
        subprocess.CalledProcessError: the migrations failed.
    """
    environment = {
        **os.environ,
        "PREFECT_HOME": str(path.parent),
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{path}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    environment.pop("PREFECT_API_URL", None)
    subprocess.run([sys.executable, "-c", _MIGRATE], env=environment, check=True)


def snapshot_text(database: Path) -> tuple[str, str]:
    """The migration head and the snapshot text (header + dump) of a migrated SQLite database.

    Raises:
        ValueError: the database has not exactly one ``alembic_version`` row.
    """
    with closing(sqlite3.connect(database)) as db:
        versions = [row[0] for row in db.execute("SELECT version_num FROM alembic_version")]
        if len(versions) != 1:
            raise ValueError(f"{database}: expected one alembic_version row, found {versions}")
        dump = "\n".join(db.iterdump())
    return versions[0], HEADER.format(head=versions[0]) + dump + "\n"


def main(argv: list[str] | None = None) -> int:
    """Migrate an empty database, dump it into ``--out-dir``; return 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parents[1] / "flows" / "prefect_db")
    parser.add_argument(
        "--keep-database", type=Path, help="also keep the migrated database at this path (a new file, for checks)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="stef-prefect-snapshot-") as tmp:
        database = Path(tmp) / "prefect.db"
        migrated_database(database)
        head, text = snapshot_text(database)
        if args.keep_database is not None:
            with closing(sqlite3.connect(database)) as source, closing(sqlite3.connect(args.keep_database)) as kept:
                source.backup(kept)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"prefect-sqlite-{head}.sql"
    out.write_text(text, encoding="utf-8")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
