"""Deployments of the STEF flows with their schedules, for ``stef serve`` (DESIGN.md §5).

* ``stef-nightly``: :func:`flows.nightly.nightly` every day at 02:00 (scores yesterday);
* ``stef-weekly-report``: :func:`flows.weekly_report.weekly_report` every Monday at 06:00
  (reports the week that just ended);
* ``stef-backfill``: :func:`flows.backfill.backfill`, no schedule (run it from the UI or
  ``prefect deployment run 'stef-backfill/stef-backfill' -p start=… -p end=…``).

The cron times are read in a configurable time zone (default UTC). Schedules only fire when a
Prefect server runs (``prefect server start``, with ``PREFECT_API_URL`` pointing at it): the
server's scheduler creates the runs and ``stef serve`` executes them. ``prefect.yaml`` at the
repository root describes the same deployments for ``prefect deploy`` with a work pool.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from stef.errors import InputError

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment

NIGHTLY_CRON = "0 2 * * *"
"""Nightly scoring: every day at 02:00."""
WEEKLY_CRON = "0 6 * * 1"
"""Weekly report: every Monday at 06:00."""
DEFAULT_TIMEZONE = "UTC"
"""Time zone of the cron times unless ``--timezone`` says otherwise."""
NIGHTLY_DEPLOYMENT = "stef-nightly"
WEEKLY_DEPLOYMENT = "stef-weekly-report"
BACKFILL_DEPLOYMENT = "stef-backfill"
DEFAULT_REPORTS_DIR = "./reports/"
"""Folder the scheduled weekly reports go to (``stef-report-<week>.html`` and ``.md``)."""


def validate_timezone(name: str) -> str:
    """Check an IANA time zone name (``Europe/Zurich``); return it.

    Raises:
        InputError: the name is not a time zone this system knows.

    >>> validate_timezone("Europe/Zurich")
    'Europe/Zurich'
    """
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(
            f"--timezone {name!r} is not an IANA time zone (e.g. UTC, Europe/Zurich, America/New_York)"
        ) from None
    return name


def validate_cron(expression: str, option: str) -> str:
    """Check a five-field cron expression with Prefect's own validator; return it.

    Raises:
        InputError: not a valid cron expression.
    """
    from prefect._internal.schemas.validators import validate_cron_string

    try:
        validate_cron_string(expression)
    except ValueError as exc:
        raise InputError(f"{option} {expression!r} is not a valid cron expression ({exc})") from None
    return expression


def build_deployments(
    timezone: str = DEFAULT_TIMEZONE,
    logs_root: str = "./logs",
    warehouse: str | None = None,
    reports_dir: str = DEFAULT_REPORTS_DIR,
    nightly_cron: str = NIGHTLY_CRON,
    weekly_cron: str = WEEKLY_CRON,
) -> list[RunnerDeployment]:
    """The three deployments with their schedules and default parameters (nothing is sent to Prefect).

    Args:
        timezone: IANA time zone of the cron times.
        logs_root: logs folder (or fsspec URL) of the nightly and backfill runs.
        warehouse: DuckDB file of every run (``None``: ``$STEF_WAREHOUSE`` of the serving
            process, else ``./stef.duckdb``).
        reports_dir: folder of the weekly reports (a ``/`` is added when it has none: the report
            writes into a folder only when its path ends in ``/`` or exists already, else it
            writes a file of that name, every week over the last).
        nightly_cron: cron expression of the nightly run.
        weekly_cron: cron expression of the weekly report.

    Returns:
        ``[stef-nightly, stef-weekly-report, stef-backfill]`` as Prefect ``RunnerDeployment`` objects
        (entrypoints given as module paths, so they work from an installed package).

    Raises:
        InputError: an unknown time zone or an invalid cron expression.
    """
    from prefect.schedules import Cron
    from prefect.types.entrypoint import EntrypointType

    from flows.backfill import backfill
    from flows.nightly import nightly
    from flows.weekly_report import weekly_report

    zone = validate_timezone(timezone)
    if reports_dir and not reports_dir.endswith(("/", os.sep)):
        reports_dir += "/"
    validate_cron(nightly_cron, "--nightly-cron")
    validate_cron(weekly_cron, "--weekly-cron")
    common: dict[str, Any] = {"tags": ["stef"], "entrypoint_type": EntrypointType.MODULE_PATH}
    where: dict[str, Any] = {"warehouse": warehouse} if warehouse else {}
    deployments = [
        nightly.to_deployment(
            name=NIGHTLY_DEPLOYMENT,
            schedules=[Cron(nightly_cron, timezone=zone)],
            parameters={"logs_root": logs_root, **where},
            description=f"Score yesterday's agent logs into the warehouse ({nightly_cron}, {zone}).",
            **common,
        ),
        weekly_report.to_deployment(
            name=WEEKLY_DEPLOYMENT,
            schedules=[Cron(weekly_cron, timezone=zone)],
            parameters={"out": reports_dir, **where},
            description=f"Weekly report of the last complete ISO week into {reports_dir} ({weekly_cron}, {zone}).",
            **common,
        ),
        backfill.to_deployment(
            name=BACKFILL_DEPLOYMENT,
            parameters={"logs_root": logs_root, **where},
            description="Nightly work for a range of days (parameters start, end); skips days already done.",
            **common,
        ),
    ]
    # to_deployment is sync when called outside an event loop (Prefect's async_dispatch).
    return cast("list[RunnerDeployment]", deployments)


def server_url() -> str | None:
    """The configured Prefect API URL (``PREFECT_API_URL``), or ``None`` in ephemeral mode."""
    from prefect.settings import PREFECT_API_URL

    value = PREFECT_API_URL.value()
    return str(value) if value else None


def serve_deployments(deployments: list[RunnerDeployment]) -> None:
    """Register the deployments with the Prefect server and run their scheduled runs (blocks)."""
    from prefect import serve

    serve(*deployments)
