"""The temporary Prefect API of one ``stef`` command, which never outlives the command.

With no Prefect server configured (``PREFECT_API_URL`` unset), Prefect starts a temporary API
server in a child process on the first flow call (ephemeral mode) and stops it at exit. A
command that is killed (``kill -9``, the OOM killer, a CI timeout) runs no exit handler, and the
server, about 220 MB and listening on a local port, is left running. :func:`temporary_prefect_api`
starts that same server up front, points the process at it, and starts a small guard process
that stops the server as soon as the command's process is gone, however it ended.

The server takes seconds to start (its own imports, the app, the database). It is started
first, with the command Prefect's ephemeral mode runs (:class:`TemporaryApiServer`, without
importing Prefect's server package here: that alone costs this process 1.5 s), and the command
prepares its own work (imports, warm caches) while it boots, on the other core.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path

MIN_STARTUP_TIMEOUT_S = 90
"""Seconds the temporary server is given to answer, at least (Prefect's own default is 20 s,
which a busy two-core machine can exceed: the command then failed before any work)."""
GUARD_POLL_S = 0.5
"""How often the guard checks whether the command's process still runs (seconds)."""

SERVER_MARKER = "prefect.server.api.server:create_app"
"""Text of the temporary server's command line (its app factory): the guard stops a process only
when its command line still holds it, so a reused process id is never signalled."""

TEMPORARY_SERVER_SETTINGS: dict[str, str] = {
    "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false",
    "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION": "false",
}
"""Prefect settings of the temporary server beyond ephemeral mode's own: no block-type registration
at start. Registering (or checking the memo of) the block types imports every installed Prefect
collection (prefect-dask, and with it Dask) and hashes the block registry: 0.3-0.7 s of the
server's boot on two cores, for block types that no STEF flow reads or writes (the UI's block
catalogue is the only user, and a temporary server has no UI). A server the user runs
(``PREFECT_API_URL``) keeps its own settings."""

_SERVER_CODE = """
import contextlib, gc, importlib.util, os, signal, sys, threading, time
app_dir, factory, host, port, helpers = sys.argv[1:6]
command = int(sys.argv[6]) if len(sys.argv) > 6 else None

def stop_without_the_command():  # the command's pid as the parent, else it was killed
    while os.getppid() == command:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn stops; before it runs, the default handler ends the process
    time.sleep(10)
    os._exit(1)

if command is not None:
    threading.Thread(target=stop_without_the_command, daemon=True).start()
sys.path.insert(0, app_dir)
gc.disable()
import uvicorn
from uvicorn.importer import import_from_string
try:  # this very file, by its path: never another copy of STEF, nor a "flows" package of the working directory
    spec = importlib.util.spec_from_file_location("_stef_temporary_api", helpers)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.seed_missing_database()
    services = module.automation_services_when_needed()
except Exception:  # the services as Prefect starts them
    services = contextlib.nullcontext()
with services:
    app = import_from_string(factory)()
    gc.enable()
    gc.freeze()
    uvicorn.run(app, host=host, port=int(port), log_level="error", lifespan="on")
"""
"""The temporary server's program: ``uvicorn --app-dir DIR --factory FACTORY --host H --port P
--log-level error --lifespan on`` (what Prefect's ephemeral mode runs), except that the app's
import and creation run with the cyclic garbage collector paused, then frozen
(:mod:`stef.module_import` explains why): they build objects that live as long as the server,
and the collector's passes over them cost the boot about 0.6 s of its 4.5-5 s on two cores; and
that a SQLite database that does not exist yet is created from the bundled schema snapshot
(:func:`seed_missing_database`), and that the automation services run only when its database
holds an automation (:func:`automation_services_when_needed`); both are loaded from this file's
path, the fifth argument, and should that fail, Prefect creates the database and starts the
services as it always does. uvicorn exits with code 3 when the port
cannot be bound, as its command line does. The last argument, the command's process id, is watched
by a thread of the server: once its parent is no longer the command (killed, even in the instant
between the server's start and the guard learning its id), the server stops itself; the guard
(:func:`_start_guard`) does the same from outside."""


IN_MEMORY = Path(":memory:")
"""What :func:`sqlite_database_path` returns for a SQLite database in memory."""


def sqlite_database_path(connection_url: str) -> Path | None:
    """The file of the SQLite database at ``connection_url`` (a SQLAlchemy URL).

    Returns:
        The path as the URL gives it; :data:`IN_MEMORY` for a database in memory; ``None`` for
        another database than SQLite, a URL it cannot parse, or a SQLite URI filename
        (``sqlite:///file:...?uri=true``: its own mode, cache or VFS, not worth second-guessing).

    >>> sqlite_database_path("sqlite+aiosqlite:////home/me/.prefect/prefect.db")
    PosixPath('/home/me/.prefect/prefect.db')
    >>> sqlite_database_path("sqlite+aiosqlite://") == IN_MEMORY, sqlite_database_path("postgresql+asyncpg://u@db/prefect")
    (True, None)
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(connection_url)
    except (ArgumentError, ValueError):  # not a URL, or a bad port
        return None
    if url.get_backend_name() != "sqlite":
        return None
    if not url.database or url.database == ":memory:":
        return IN_MEMORY
    if url.query.get("uri") or url.database.startswith("file:"):
        return None
    return Path(url.database)


def stored_automations(connection_url: str) -> bool | None:
    """Whether the Prefect database at ``connection_url`` holds an enabled automation.

    Reads a SQLite database (Prefect's default, ``$PREFECT_HOME/prefect.db``) read-only, without
    Prefect: one query on its ``automation`` table.

    Args:
        connection_url: a SQLAlchemy URL (``sqlite+aiosqlite:////home/me/.prefect/prefect.db``).

    Returns:
        ``True`` / ``False``; ``False`` too for a database not created yet (no file, no
        ``automation`` table: its migrations run when the server starts) or in memory; ``None``
        when it cannot tell: another database than SQLite, a SQLite URI filename
        (``sqlite:///file:...?uri=true``), a file that cannot be read or is locked for more than 1 s.
    """
    import sqlite3

    path = sqlite_database_path(connection_url)
    if path is None:
        return None
    if path == IN_MEMORY:
        return False
    try:
        if not path.is_file():
            return False
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)) as db:
            table = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'automation'")
            if table.fetchone() is None:
                return False
            return db.execute("SELECT 1 FROM automation WHERE enabled LIMIT 1").fetchone() is not None
    except (sqlite3.Error, OSError, RuntimeError):  # unreadable, locked, a path it cannot resolve
        return None


@contextmanager
def automation_services_when_needed() -> Iterator[bool]:
    """In the temporary server's process, around its app: Prefect's automation services
    (``ReactiveTriggers`` and ``Actions``, ``PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED``) are
    turned off when the server's database holds no enabled automation (:func:`stored_automations`).

    The same setting governs the periodic evaluation of proactive triggers. With no automation
    they have nothing to evaluate or run, and starting them costs the server's boot 0.5-0.7 s of
    its 4.5-5 s on two cores (the median of six alternating boots: 4.44 s vs 5.13 s). A database
    with an automation, or one it cannot read, keeps them (a ``stef.drift.detected`` automation
    fires as it would with Prefect's own temporary server). The database is read once, when the
    server starts: an automation created while the command runs (a ``backfill`` of many days) is
    acted on from the next command.

    Yields:
        Whether the services were turned off (``False`` too when the check itself fails: another
        Prefect release, an unexpected error).
    """
    try:
        from prefect.settings import (
            PREFECT_API_DATABASE_CONNECTION_URL,
            PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED,
            temporary_settings,
        )

        url = PREFECT_API_DATABASE_CONNECTION_URL.value()
        turn_off = bool(PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED.value()) and url is not None
        turn_off = turn_off and stored_automations(str(url)) is False
    except Exception:  # cannot tell: the services as Prefect starts them
        turn_off = False
    if not turn_off:
        yield False
        return
    with temporary_settings(updates={PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED: False}):
        yield True


SCHEMA_SNAPSHOTS = Path(__file__).resolve().parent / "prefect_db"
"""Folder of the bundled snapshots of Prefect's SQLite schema, ``prefect-sqlite-<head>.sql``: one per
migration head of Prefect (``scripts/make_prefect_snapshot.py`` writes them from Prefect's own
migrations)."""


def migration_head() -> str | None:
    """The head revision of the installed Prefect's SQLite migrations (alembic), or ``None`` when
    Prefect is not installed or its migrations have no single head."""
    from alembic.script import ScriptDirectory

    spec = find_spec("prefect")
    if spec is None or spec.origin is None:
        return None
    migrations = Path(spec.origin).parent / "server" / "database" / "_migrations"
    heads = ScriptDirectory(str(migrations), version_locations=[str(migrations / "versions" / "sqlite")]).get_heads()
    return heads[0] if len(heads) == 1 else None


SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
"""Suffixes of the files SQLite keeps beside a database (write-ahead log, its index, rollback journal)."""


def seed_missing_database(connection_url: str | None = None, home: str | Path | None = None) -> Path | None:
    """In the temporary server's process, before its app is built: create a SQLite database that
    does not exist yet from the bundled snapshot of Prefect's schema, when there is one for the
    installed Prefect's migration head (:data:`SCHEMA_SNAPSHOTS`).

    Prefect creates a new database by running every one of its migrations (115 for SQLite in
    Prefect 3.9): 6-9 s on two cores, paid by every run on a fresh ``PREFECT_HOME`` (a new
    machine, a container, CI), where a 120-record nightly took 13 s instead of 7 s. The snapshot
    is what those migrations leave, dumped (tables, indexes, the ``alembic_version`` row); building
    it takes 0.1 s, and the server's own migration step then finds the database at its head.

    Everything else is left to Prefect, untouched: a database that exists, or any file SQLite
    keeps beside one (:data:`SQLITE_SIDE_FILES`: a write-ahead log left by a killed server would
    be replayed onto the new file); another database than a SQLite file; a database whose folder
    does not exist, unless that folder is ``PREFECT_HOME`` itself (made as Prefect makes it, mode
    700); no snapshot for the installed head (another Prefect release); an error on the way.

    The database is built in memory, written to a temporary file beside it in one write and
    linked into place: a concurrent command that created it first keeps its own, and the
    database's path never holds a half-written file (a kill during that one write can leave the
    temporary ``.<name>.<pid>.seeding`` file, never the database).

    Args:
        connection_url: the database URL (default: ``PREFECT_API_DATABASE_CONNECTION_URL``).
        home: Prefect's home folder (default: ``PREFECT_HOME``).

    Returns:
        The database file created, or ``None`` when nothing was done.
    """
    import sqlite3

    try:
        if connection_url is None or home is None:
            from prefect.settings import PREFECT_API_DATABASE_CONNECTION_URL, PREFECT_HOME

            connection_url = PREFECT_API_DATABASE_CONNECTION_URL.value() if connection_url is None else connection_url
            home = PREFECT_HOME.value() if home is None else home
        path = sqlite_database_path(str(connection_url)) if connection_url else None
        if path is None or path == IN_MEMORY:
            return None
        if any(os.path.lexists(f"{path}{suffix}") for suffix in ("", *SQLITE_SIDE_FILES)):
            return None
        head = migration_head()
        snapshot = SCHEMA_SNAPSHOTS / f"prefect-sqlite-{head}.sql"
        if head is None or not snapshot.is_file():
            return None
        with contextlib.closing(sqlite3.connect(":memory:")) as db:
            db.executescript(snapshot.read_text(encoding="utf-8"))
            image = db.serialize()
        if not path.parent.is_dir():
            if home is None or path.parent.absolute() != Path(home).absolute():
                return None
            path.parent.mkdir(mode=0o700, exist_ok=True)  # as Prefect makes its home
        building = path.with_name(f".{path.name}.{os.getpid()}.seeding")
        try:
            with open(building, "xb") as handle:
                handle.write(image)
            os.link(building, path)  # fails when the file appeared meanwhile: that one is kept
        finally:
            building.unlink(missing_ok=True)
        return path
    except Exception:  # Prefect creates the database with its migrations, as it always does
        return None


_GUARD_CODE = """
import os, select, signal, sys, time
parent, marker, poll = int(sys.argv[1]), sys.argv[2].encode(), float(sys.argv[3])
servers, pending, channel = set(), b"", sys.stdin.fileno()

def is_server(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return marker in handle.read()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (not Linux): the process id is all there is
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True

while os.getppid() == parent:
    ready, _, _ = select.select([channel], [], [], poll)
    if not ready:
        continue
    chunk = os.read(channel, 4096)
    if not chunk:  # the channel closed without "stop": the command died (its descriptors close first)
        break
    pending += chunk
    *lines, pending = pending.split(b"\\n")
    if b"stop" in lines:  # the command stopped its server itself
        sys.exit(0)
    servers.update(int(line) for line in lines if line.strip())
alive = [pid for pid in servers if is_server(pid)]
for pid in alive:
    os.kill(pid, signal.SIGTERM)
for _ in range(50):
    if not any(is_server(pid) for pid in alive):
        break
    time.sleep(0.1)
else:
    for pid in alive:
        if is_server(pid):
            os.kill(pid, signal.SIGKILL)
"""


def _start_guard() -> subprocess.Popen[bytes]:
    """A process that stops the server processes whose ids it is sent (one per line on its
    stdin) once this process is gone: its stdin closes without a ``stop`` line, or its parent
    process changes.

    It runs in a session of its own, so a Ctrl-C on the terminal reaches the command (which then
    stops the server itself) but not the guard. A ``stop`` line ends it.
    """
    return subprocess.Popen(
        [sys.executable, "-c", _GUARD_CODE, str(os.getpid()), SERVER_MARKER, str(GUARD_POLL_S)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


class TemporaryApiServer:
    """Prefect's temporary API server, as ephemeral mode runs it, started without waiting.

    The program and environment are those of Prefect's ``SubprocessASGIServer`` (Prefect 3.x,
    ``prefect.server.api.server``): ``uvicorn --factory prefect.server.api.server:create_app``
    on 127.0.0.1 with the UI off and no block-type registration (:data:`TEMPORARY_SERVER_SETTINGS`), on a
    free port in 8000-8999, with the garbage collector paused
    while the app is built and the automation services only with an automation to run
    (:data:`_SERVER_CODE`); a server that exits with code 3 (the port was
    taken meanwhile) is started again on another port. Unlike Prefect's class it
    does not import Prefect's server package into this process, and :meth:`start` returns at
    once, so the caller works while the server boots.

    Args:
        report: called with the process id of every server process started (the guard's feed).
    """

    PORTS = range(8000, 9000)
    """Ports tried, as Prefect's ``SubprocessASGIServer._port_range``."""
    PORT_TAKEN_EXIT_CODE = 3
    """uvicorn's exit code when the port cannot be bound."""

    def __init__(self, report: Callable[[int], None] | None = None) -> None:
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._report = report
        self._with_settings = True
        self._announced = False

    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:<port>/api``.

        Raises:
            RuntimeError: the server was not started.
        """
        if self.port is None:
            raise RuntimeError("the temporary Prefect API server was not started")
        return f"http://127.0.0.1:{self.port}/api"

    @staticmethod
    def _free_port() -> int:
        for _ in range(10):
            port = random.choice(TemporaryApiServer.PORTS)
            with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    time.sleep(random.uniform(0.1, 0.5))
                    continue
                return port
        raise RuntimeError("no free port for the temporary Prefect API server in 8000-8999")

    def start(self, with_settings: bool = True) -> None:
        """Start the server process and return at once (:meth:`wait_ready` waits for it).

        Args:
            with_settings: pass this process's Prefect settings to the server in its
                environment, as Prefect does (imports Prefect, 0.8 s); ``False``: the server
                reads them itself from the same environment and profile, which differs only
                for settings changed inside this process (``temporary_settings``).

        Raises:
            RuntimeError: no free port, or Prefect is not installed.
        """
        spec = find_spec("prefect")
        if spec is None or spec.origin is None:
            raise RuntimeError("Prefect is not installed: the temporary API server cannot start")
        self.port = self._free_port()
        environment = {
            **os.environ,
            "PREFECT_UI_ENABLED": "0",
            "PREFECT__SERVER_EPHEMERAL": "1",
            "PREFECT__SERVER_FINAL": "1",
            **TEMPORARY_SERVER_SETTINGS,
        }
        if with_settings:
            from prefect.settings import get_current_settings

            environment.update(get_current_settings().to_environment_variables(exclude_unset=True))
        self._with_settings = with_settings
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _SERVER_CODE,
                str(Path(spec.origin).parent.parent),
                SERVER_MARKER,
                "127.0.0.1",
                str(self.port),
                str(Path(__file__).resolve()),
                str(os.getpid()),
            ],
            env=environment,
            # A session of its own, as the guard's: a Ctrl-C on the terminal (SIGINT to the whole
            # foreground process group) reaches the command, which reports the interrupted runs to
            # this server and then stops it (:meth:`stop`); a server that got the signal too was
            # gone before those reports, which Prefect's client then retried for minutes.
            start_new_session=True,
        )
        if self._report is not None:
            self._report(self.process.pid)

    def wait_ready(self, timeout_s: float) -> None:
        """Wait until the API answers ``GET /health`` with 200.

        Raises:
            RuntimeError: the server exited, or did not answer within ``timeout_s`` seconds.
        """
        import httpx

        logging.getLogger("prefect").info("Starting temporary server on http://127.0.0.1:%d", self.port)
        self._announced = True
        deadline = time.monotonic() + timeout_s
        with httpx.Client() as client:
            while True:
                process = self.process
                if process is None:
                    raise RuntimeError("the temporary Prefect API server was not started")
                code = process.poll()
                if code == self.PORT_TAKEN_EXIT_CODE:
                    self.start(self._with_settings)  # the port was taken meanwhile: another one
                    continue
                if code is not None:
                    raise RuntimeError(f"the temporary Prefect API server exited with code {code} before it answered")
                try:
                    if client.get(f"{self.api_url}/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"Timed out after {timeout_s:.0f} s while attempting to connect to the temporary Prefect API server"
                    )
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server as Prefect stops it: terminate, then kill after 5 s. Its start and stop
        are logged only once it was waited for: a command that fails before (an error a person
        fixes) prints just its error."""
        process, self.process = self.process, None
        if process is None:
            return
        if self._announced:
            logging.getLogger("prefect").info("Stopping temporary server on http://127.0.0.1:%d", self.port)
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _drain_workers() -> None:
    """Send the logs and events Prefect still holds to the API before it stops (as Prefect's
    own test harness does), so none is lost and no "Error logging to API" is printed."""
    import inspect

    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def drain() -> None:
        try:
            result = APILogWorker.instance().drain()
            if inspect.isawaitable(result):
                await result
        except RuntimeError:  # no log was sent: the worker never started
            pass
        drained = EventsWorker.drain_all()
        if inspect.isawaitable(drained):
            await drained

    run_coro_as_sync(drain())


@contextmanager
def temporary_prefect_api(prepare: Callable[[], object] | None = None) -> Iterator[str | None]:
    """Run the block against a temporary Prefect API that dies with this process.

    When ``PREFECT_API_URL`` is configured (a real server, or a test harness), nothing is
    started and the block runs against it. Otherwise Prefect's own temporary server (what
    ephemeral mode starts; :class:`TemporaryApiServer`) is started now, ``prepare`` runs while
    it boots, ``PREFECT_API_URL`` points at it for the block, and a guard process
    (:func:`_start_guard`) stops it should this process be killed; at the end of the block the
    server is stopped as Prefect would stop it. Every flow of the block shares the one server,
    and sends it no flow-run heartbeats (they serve a server that outlives the run).

    With ``PREFECT_API_URL`` not in the environment the server is started before Prefect is
    imported here (0.8 s sooner), and stopped at once if Prefect's settings (a profile) name an
    API after all.

    Args:
        prepare: work to do while the server starts (imports, warm caches); run in any case,
            before the block.

    Yields:
        The API URL of the temporary server, or ``None`` when a configured one is used.

    Raises:
        RuntimeError: the server did not start.
    """
    guard: subprocess.Popen[bytes] | None = None
    server: TemporaryApiServer | None = None

    def report(pid: int) -> None:
        if guard is not None and guard.stdin is not None:
            try:
                guard.stdin.write(f"{pid}\n".encode())
                guard.stdin.flush()
            except OSError:
                pass  # the guard is gone

    try:
        if not os.environ.get("PREFECT_API_URL"):
            guard = _start_guard()
            server = TemporaryApiServer(report=report)
            server.start(with_settings=False)
        from prefect.context import _temporary_global_settings_context, get_settings_context
        from prefect.settings import (
            PREFECT_API_URL,
            PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
            PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
            temporary_settings,
        )

        if PREFECT_API_URL.value():
            if server is not None:  # a profile names the API: the server started for nothing
                server.stop()
            if prepare is not None:
                prepare()
            yield None
            return
        if server is None:  # PREFECT_API_URL set but empty
            guard = _start_guard()
            server = TemporaryApiServer(report=report)
            server.start()
        if prepare is not None:
            prepare()
        server.wait_ready(max(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value(), MIN_STARTUP_TIMEOUT_S))
        with (
            # No flow-run heartbeats: they tell a server that a run still lives, and this server
            # dies with the command; stopping the heartbeat thread cost every flow run up to 1 s.
            temporary_settings(updates={PREFECT_API_URL: server.api_url, PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}),
            _temporary_global_settings_context(get_settings_context()),
        ):
            try:
                yield server.api_url
            finally:
                _drain_workers()
    finally:
        if server is not None:
            server.stop()
        if guard is not None:
            if guard.stdin is not None:
                try:
                    guard.stdin.write(b"stop\n")
                    guard.stdin.close()
                except OSError:
                    pass  # the guard is gone already
            guard.wait()
