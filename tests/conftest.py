"""Shared test fixtures: one Prefect test harness per session, the agent-log fixtures."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

# Before anything imports Prefect: no telemetry from the temporary test server.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

FIXTURES = Path(__file__).parent / "fixtures"
AGENT_LOGS = FIXTURES / "agent_logs"
"""Two small JSONL files that together form one day of logs (see its README.md)."""
pytest_plugins = ["tests.support.rollout"]
"""Fixtures shared across test packages (the rollout warehouse of the monitoring tests)."""
collect_ignore_glob = ["benchmarks/*"]
"""Benchmarks are scripts run by hand (``python tests/benchmarks/bench_llm_judge.py``), not tests."""


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """A temporary Prefect API (own database) for every flow test of the session.

    Starting it costs several seconds, so it is shared; only tests that run flows use it
    (mark them ``@pytest.mark.flow``).
    """
    from prefect.testing.utilities import prefect_test_harness

    _prefect_console_on_an_open_stream()
    with prefect_test_harness(server_startup_timeout=60):
        yield


def _prefect_console_on_an_open_stream() -> None:
    """Set up Prefect's logging, and point its console handlers that hold a closed stream at this
    moment's ``sys.stderr``.

    Prefect binds its console handlers, when ``prefect.main`` is first imported, to the
    ``sys.stderr`` of that moment. When an earlier test's ``CliRunner.invoke`` did that import, it
    is the runner's stream, closed when that call returned, and every later Prefect log line (a
    flow's error) printed a "Logging error" traceback into the next command's captured output.
    """
    import logging
    import sys

    from prefect.logging.handlers import PrefectConsoleHandler

    import flows.nightly  # noqa: F401  (imports prefect.main, which sets up Prefect's logging)

    loggers = [logging.getLogger()]
    loggers += [logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger)]
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, PrefectConsoleHandler) and getattr(handler.stream, "closed", False):
                handler.stream = sys.stderr  # not setStream(): it flushes the closed stream first
                handler.console.file = sys.stderr


@pytest.fixture(autouse=True)
def model_requests_not_stopped() -> Iterator[None]:
    """A test that stopped this process's model requests (stef.llm.request_stop) and failed
    before lifting the stop leaves them stopped for no later test: the stop is lifted after each."""
    yield
    from stef.llm import request_stop

    request_stop.clear_signal()


@pytest.fixture
def log_day(tmp_path: Path) -> Path:
    """``<tmp>/logs`` holding the fixture files as the day ``2026-11-20``; returns the logs root."""
    day = tmp_path / "logs" / "2026-11-20"
    day.mkdir(parents=True)
    for source in sorted(AGENT_LOGS.glob("*.jsonl")):
        shutil.copyfile(source, day / source.name)
    return tmp_path / "logs"
