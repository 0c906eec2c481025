"""The temporary Prefect API's automation services: on only when its database holds an automation."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from flows.prefect_api import automation_services_when_needed, stored_automations


def _database(path: Path, automations: list[bool] | None) -> Path:
    """A SQLite file with an ``automation`` table holding one row per ``enabled`` flag (no table for ``None``)."""
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE flow (id TEXT)")
        if automations is not None:
            db.execute("CREATE TABLE automation (name VARCHAR NOT NULL, enabled BOOLEAN DEFAULT '1' NOT NULL)")
            db.executemany(
                "INSERT INTO automation VALUES (?, ?)", [(f"a{i}", enabled) for i, enabled in enumerate(automations)]
            )
        db.commit()
    return path


def _url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


@pytest.mark.parametrize(
    ("automations", "expected"),
    [(None, False), ([], False), ([False, False], False), ([False, True], True), ([True], True)],
)
def test_stored_automations_reads_the_enabled_rows_of_a_sqlite_database(
    tmp_path: Path, automations: list[bool] | None, expected: bool
) -> None:
    assert stored_automations(_url(_database(tmp_path / "prefect.db", automations))) is expected


def test_stored_automations_of_a_database_not_created_yet_or_in_memory_is_false(tmp_path: Path) -> None:
    assert stored_automations(_url(tmp_path / "missing" / "prefect.db")) is False
    assert stored_automations("sqlite+aiosqlite:///:memory:") is False
    assert stored_automations("sqlite+aiosqlite://") is False


def test_stored_automations_cannot_tell_for_another_database_or_an_unreadable_file(tmp_path: Path) -> None:
    assert stored_automations("postgresql+asyncpg://prefect:secret@db.example:5432/prefect") is None
    garbage = tmp_path / "prefect.db"
    garbage.write_bytes(b"not a sqlite database, " * 100)
    assert stored_automations(_url(garbage)) is None
    assert stored_automations("not a url") is None


@contextmanager
def _prefect_database(url: str) -> Iterator[None]:
    from prefect.settings import PREFECT_API_DATABASE_CONNECTION_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_DATABASE_CONNECTION_URL: url}):
        yield


def _enabled_automation_services() -> set[str]:
    from prefect.server.events.services.actions import Actions
    from prefect.server.events.services.triggers import ReactiveTriggers
    from prefect.server.services.base import RunInEphemeralServers

    enabled = {service.__name__ for service in RunInEphemeralServers.enabled_services()}
    return enabled & {ReactiveTriggers.__name__, Actions.__name__}


def test_the_automation_services_are_off_while_the_database_holds_no_automation(tmp_path: Path) -> None:
    with _prefect_database(_url(_database(tmp_path / "prefect.db", [False]))):
        assert _enabled_automation_services() == {"ReactiveTriggers", "Actions"}  # Prefect's default
        with automation_services_when_needed() as turned_off:
            assert turned_off is True
            assert _enabled_automation_services() == set()
        assert _enabled_automation_services() == {"ReactiveTriggers", "Actions"}


@pytest.mark.parametrize("url", ["with_automation", "postgresql+asyncpg://prefect@db.example/prefect"])
def test_the_automation_services_stay_on_with_an_automation_or_a_database_it_cannot_read(
    tmp_path: Path, url: str
) -> None:
    if url == "with_automation":
        url = _url(_database(tmp_path / "prefect.db", [True]))
    with _prefect_database(url), automation_services_when_needed() as turned_off:
        assert turned_off is False
        assert _enabled_automation_services() == {"ReactiveTriggers", "Actions"}
