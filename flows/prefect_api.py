"""The temporary Prefect API of one ``stef`` command, which never outlives the command.

With no Prefect server configured (``PREFECT_API_URL`` unset), Prefect starts a temporary API
server in a child process on the first flow call (ephemeral mode) and stops it at exit. A
command that is killed (``kill -9``, the OOM killer, a CI timeout) runs no exit handler, and the
server, about 220 MB and listening on a local port, is left running. :func:`temporary_prefect_api`
starts that same server up front, points the process at it, and starts a small guard process
that stops the server as soon as the command's process is gone, however it ended.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

MIN_STARTUP_TIMEOUT_S = 90
"""Seconds the temporary server is given to answer, at least (Prefect's own default is 20 s,
which a busy two-core machine can exceed: the command then failed before any work)."""
GUARD_POLL_S = 0.5
"""How often the guard checks whether the command's process still runs (seconds)."""

SERVER_MARKER = "prefect.server.api.server:create_app"
"""Text of the temporary server's command line (``uvicorn --factory <this>``): the guard stops a
process only when its command line still holds it, so a reused process id is never signalled."""

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


def _report_server_processes(server: object, guard: subprocess.Popen[bytes], done: threading.Event) -> None:
    """Send the guard the id of every process the server object starts (Prefect starts a new one
    when the port was taken), from the moment it exists: the server can take seconds to answer,
    and a kill in that time must not leave it behind."""
    sent: set[int] = set()
    while True:
        process = getattr(server, "server_process", None)
        if process is not None and process.pid not in sent and guard.stdin is not None:
            sent.add(process.pid)
            try:
                guard.stdin.write(f"{process.pid}\n".encode())
                guard.stdin.flush()
            except OSError:
                return  # the guard is gone
        if done.wait(0.01):
            return


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
def temporary_prefect_api() -> Iterator[str | None]:
    """Run the block against a temporary Prefect API that dies with this process.

    When ``PREFECT_API_URL`` is configured (a real server, or a test harness), nothing is
    started and the block runs against it. Otherwise Prefect's own temporary server
    (``SubprocessASGIServer``, what ephemeral mode starts) is started now, ``PREFECT_API_URL``
    points at it for the block, and a guard process (:func:`_start_guard`) stops it should this
    process be killed; at the end of the block the server is stopped as Prefect would stop it.
    Every flow of the block shares the one server.

    Yields:
        The API URL of the temporary server, or ``None`` when a configured one is used.

    Raises:
        RuntimeError: the server did not start (Prefect's message).
    """
    from prefect.context import _temporary_global_settings_context, get_settings_context
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings

    if PREFECT_API_URL.value():
        yield None
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    guard = _start_guard()
    started = threading.Event()
    reporter = threading.Thread(
        target=_report_server_processes, args=(server, guard, started), name="stef-prefect-api-guard", daemon=True
    )
    reporter.start()
    try:
        try:
            server.start(timeout=max(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value(), MIN_STARTUP_TIMEOUT_S))
        finally:
            started.set()
            reporter.join()
        _report_server_processes(server, guard, started)  # the process that answered, if Prefect restarted it
        with (
            temporary_settings(updates={PREFECT_API_URL: server.api_url}),
            _temporary_global_settings_context(get_settings_context()),
        ):
            try:
                yield server.api_url
            finally:
                _drain_workers()
    finally:
        server.stop()
        if guard.stdin is not None:
            try:
                guard.stdin.write(b"stop\n")
                guard.stdin.close()
            except OSError:
                pass  # the guard is gone already
        guard.wait()
