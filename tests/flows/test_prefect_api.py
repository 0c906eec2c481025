"""The temporary Prefect API's automation services: on only when its database holds an automation."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from flows.prefect_api import TemporaryApiServer, automation_services_when_needed, stored_automations


def _database(path: Path, automations: list[bool] | None, journal: str = "WAL") -> Path:
    """A SQLite file (Prefect's WAL journal by default) with an ``automation`` table holding one row
    per ``enabled`` flag (no table for ``None``)."""
    with closing(sqlite3.connect(path)) as db:
        db.execute(f"PRAGMA journal_mode={journal}")
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


def test_stored_automations_reads_a_relative_path_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _database(tmp_path / "prefect.db", [True])
    monkeypatch.chdir(tmp_path)
    assert stored_automations("sqlite+aiosqlite:///./prefect.db") is True
    assert stored_automations("sqlite+aiosqlite:///prefect.db") is True


def test_stored_automations_cannot_tell_for_another_database_or_an_unreadable_file(tmp_path: Path) -> None:
    assert stored_automations("postgresql+asyncpg://prefect:secret@db.example:5432/prefect") is None
    garbage = tmp_path / "prefect.db"
    garbage.write_bytes(b"not a sqlite database, " * 100)
    assert stored_automations(_url(garbage)) is None
    assert stored_automations("not a url") is None


def test_stored_automations_cannot_tell_for_a_uri_filename_or_a_locked_database(tmp_path: Path) -> None:
    database = _database(tmp_path / "prefect.db", [True])
    assert stored_automations(f"sqlite+aiosqlite:///file:{database}?uri=true&mode=rwc") is None
    locked = _database(tmp_path / "locked.db", [True], journal="DELETE")
    with closing(sqlite3.connect(locked, isolation_level=None)) as writer:
        writer.execute("BEGIN EXCLUSIVE")
        assert stored_automations(_url(locked)) is None  # after its 1 s timeout
        writer.execute("ROLLBACK")
    assert stored_automations(_url(locked)) is True


@contextmanager
def _prefect_database(url: str) -> Iterator[None]:
    """Prefect's settings pointing at the database ``url``, with its automation services on (its default)."""
    from prefect.settings import (
        PREFECT_API_DATABASE_CONNECTION_URL,
        PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED,
        temporary_settings,
    )

    with temporary_settings(
        updates={PREFECT_API_DATABASE_CONNECTION_URL: url, PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED: True}
    ):
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


def _boot_log(capfd: pytest.CaptureFixture[str], then: object = None) -> str:
    """What a temporary API server (:class:`TemporaryApiServer`, as ``stef nightly`` starts it)
    logs from its start to its stop; ``then(api_url)`` runs while it answers."""
    server = TemporaryApiServer()
    capfd.readouterr()
    server.start(with_settings=False)
    try:
        server.wait_ready(90)
        if callable(then):
            then(server.api_url)
    finally:
        server.stop()
    return capfd.readouterr().err


@pytest.mark.slow
def test_the_temporary_server_starts_the_automation_services_only_once_an_automation_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))  # a new database, migrated by the first boot
    monkeypatch.setenv("PREFECT_LOGGING_SERVER_LEVEL", "INFO")
    for name in ("PREFECT_API_URL", "PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL"):
        monkeypatch.delenv(name, raising=False)

    def store_an_automation(api_url: str) -> None:
        from prefect.automations import Automation, DoNothing, EventTrigger
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            Automation(
                name="stef drift",
                trigger=EventTrigger(
                    expect={"stef.drift.detected"}, posture="Reactive", threshold=1, within=timedelta(0)
                ),
                actions=[DoNothing()],
            ).create()

    first = _boot_log(capfd, then=store_an_automation)
    assert "ReactiveTriggers starting" not in first
    database = tmp_path / "prefect-home" / "prefect.db"
    assert stored_automations(_url(database)) is True
    second = _boot_log(capfd)
    assert "ReactiveTriggers starting" in second, second[-2000:]


@pytest.mark.slow
def test_the_temporary_server_starts_with_prefects_services_when_the_check_cannot_be_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import flows.prefect_api

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    monkeypatch.setenv("PREFECT_LOGGING_SERVER_LEVEL", "INFO")
    for name in ("PREFECT_API_URL", "PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(flows.prefect_api, "__file__", str(tmp_path / "gone" / "prefect_api.py"))
    log = _boot_log(capfd)  # answers: the server does not die on the missing file
    assert "ReactiveTriggers starting" in log  # with no automation stored: Prefect's own services


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc (Linux)")
def test_a_server_whose_command_is_killed_before_the_guard_knows_it_stops_itself(tmp_path: Path) -> None:
    """kill -9 of the command in the instant between the server's start and the guard learning its
    process id (a CI run under load hit it: the server kept running) leaves the server without a
    guard; the server's own thread sees its parent change and stops it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    command = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from flows.prefect_api import TemporaryApiServer\n"
            "server = TemporaryApiServer(report=None); server.start(with_settings=False)\n"
            "print(server.process.pid, flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_HOME": str(tmp_path)},
    )
    assert command.stdout is not None
    server = int(command.stdout.readline())
    command.send_signal(signal.SIGKILL)  # no exit handler, no guard: only the server itself can notice
    command.wait()

    def running() -> bool:
        try:
            state = Path(f"/proc/{server}/stat").read_text().split(") ", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    deadline = time.monotonic() + 30
    while running():
        assert time.monotonic() < deadline, f"the orphaned temporary server {server} still runs after 30 s"
        time.sleep(0.1)
