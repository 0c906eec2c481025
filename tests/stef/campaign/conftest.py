"""Fixtures of the campaign tests: the bundled GeoQuery database with its gold audit and catalog, a
DuckDB test database, a host folder no statement may read (module scope: one per test module).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stef.campaign.gold_audit import audit_gold
from stef.campaign.models import CanonicalCatalog
from stef.campaign.sandbox import DuckDBTestDatabase, SQLiteTestDatabase, open_test_database
from tests.stef.campaign.support import DB, DUCKDB_SETTINGS, GOLD, SECRET, SETTINGS, SQLITE_SETTINGS


@pytest.fixture(scope="module")
def db() -> Any:
    database = SQLiteTestDatabase(DB)
    yield database
    database.close()


@pytest.fixture(scope="module")
def audit(db: SQLiteTestDatabase) -> Any:
    return audit_gold(GOLD, db, SETTINGS)


@pytest.fixture(scope="module")
def catalog(db: SQLiteTestDatabase) -> CanonicalCatalog:
    return CanonicalCatalog(db.catalog())


@pytest.fixture(scope="module")
def host_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a secret text file and a CSV next to it."""
    folder = tmp_path_factory.mktemp("host")
    (folder / "secret.txt").write_text(SECRET + "\n", encoding="utf-8")
    (folder / "secret.csv").write_text(f"a,b\n{SECRET},2\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def duck_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import duckdb

    path = tmp_path_factory.mktemp("duck") / "geo.duckdb"
    with duckdb.connect(str(path)) as setup:
        setup.execute(
            "CREATE TABLE state AS SELECT * FROM (VALUES ('texas', 'austin'), ('ohio', 'columbus')) AS t(state_name, capital)"
        )
    return path


@pytest.fixture(scope="module")
def duck(duck_path: Path) -> Any:
    database = open_test_database(duck_path, DUCKDB_SETTINGS.resource_limits())
    assert isinstance(database, DuckDBTestDatabase)
    yield database
    database.close()


@pytest.fixture(scope="module")
def lite() -> Any:
    database = SQLiteTestDatabase(DB, SQLITE_SETTINGS.resource_limits())
    yield database
    database.close()
