"""The nightly drift tasks: run and store the night's checks, alert (DESIGN.md §6, issue 5).

The plain functions of :mod:`tasks.drift_checks` do the work without a Prefect run (``stef drift``
starts no Prefect API). The tasks wrap them for the nightly flow: :func:`check_drift` runs every check of a night and stores it,
:func:`publish_drift` writes the markdown artifact and emits the ``stef.drift.detected`` event for every
check that drifted for the worse (texts from :mod:`stef.monitor.alerts`), and :func:`nightly_drift_step`
runs both so that a failing check never fails the night (its data is stored before the check runs)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from stef import stop_signals
from stef.display import shorten
from stef.monitor.alerts import NOTIFY_WEBHOOK_ENV, drift_event, drift_markdown, is_new_worse_drift, webhook_payload
from stef.monitor.drift import thresholds_from_env
from stef.monitor.models import DEFAULT_WINDOW_DAYS, DriftThresholds
from tasks._runtime import io_task, run_logger
from tasks.drift_checks import compare_check, nightly_plans, read_check, refresh_checks
from warehouse import connect
from warehouse.connection import checkpoint_in_background
from warehouse.monitoring import store_drift_checks

DRIFT_ARTIFACT_KEY = "stef-drift"
"""Key of the markdown artifact with a night's drift checks (Prefect keeps its history)."""


@io_task("check-drift", retries=2, retry_delay_seconds=10)
def check_drift(
    warehouse_path: str | None,
    log_date: date,
    evaluator_version: str,
    thresholds: DriftThresholds | None = None,
    window_days: int = DEFAULT_WINDOW_DAYS,
) -> list[dict[str, Any]]:
    """Run and store the night's checks (:func:`tasks.drift_checks.nightly_plans`) and recompute the
    stored checks the day made stale (:func:`tasks.drift_checks.refresh_checks`), in one transaction.

    Args:
        warehouse_path: DuckDB file (``None``: ``$STEF_WAREHOUSE`` or ``./stef.duckdb``).
        log_date: the night's day; windows end there.
        evaluator_version: the evaluator version of the night's evaluations.
        thresholds: decision thresholds (default: :func:`stef.monitor.drift.thresholds_from_env`).
        window_days: window length.

    Returns:
        One :meth:`stef.monitor.models.DriftCheck.summary` per check: the night's, then the
        recomputed ones (with ``recomputed: True``, ``source`` and ``previous_verdict`` /
        ``previous_direction``, ``None`` for a check planned for the first time).

    Raises:
        DriftError: invalid thresholds in the environment.
        WarehouseLockedError: another process writes the file (retried twice).
        WarehouseError: the write failed.
    """
    limits = thresholds or thresholds_from_env()
    conn = connect(warehouse_path, on_wait=run_logger().warning)
    try:
        checks = []
        for plan in nightly_plans(conn, log_date, evaluator_version, window_days):
            inputs = read_check(conn, plan)  # one check's samples in memory at a time
            # The first check's samples are read: DuckDB may merge the stored day's write-ahead log
            # into the file now (warehouse.connection.close_later; a query with parameters waits for
            # that merge), while the check computes its bootstrap intervals.
            checkpoint_in_background()
            checks.append(compare_check(inputs, limits))
        checkpoint_in_background()  # a night without checks (no-op once started)
        refreshed, later, failures = refresh_checks(conn, log_date, evaluator_version, limits, window_days)
        store_drift_checks(
            conn,
            [check.row("nightly") for check in checks] + [check.row(source) for check, source, _, _ in refreshed],
            replace_nightly=[log_date, *later],
            evaluator_version=evaluator_version,
        )
    finally:
        conn.close()
    logger = run_logger()
    for failure in failures:  # the check keeps its stored row; the night's checks are stored
        logger.warning(
            "recomputing a stored drift check failed, it keeps its earlier result: %s", shorten(failure, 400)
        )
    summaries = [check.summary() for check in checks]
    for check, source, verdict, direction in refreshed:
        summary = check.summary()
        summary.update(recomputed=True, source=source, previous_verdict=verdict, previous_direction=direction)
        summaries.append(summary)
    for summary in summaries:
        logger.info(  # names shortened on one line: a log line shows data, it never forges another line
            "drift %s %s %s -> %s: %s%s (n %d / %d)",
            shorten(summary["agent_id"]),
            summary["kind"],
            shorten(summary["baseline_version"]),
            shorten(summary["candidate_version"]),
            summary["verdict"],
            f" ({summary['direction']})" if summary["direction"] else "",
            summary["n_baseline"],
            summary["n_candidate"],
        )
    return summaries


@task(name="publish-drift", cache_policy=NO_CACHE, persist_result=False)
def publish_drift(checks: list[dict[str, Any]], log_date: date) -> list[str]:
    """Markdown artifact of the night's checks (and of those recomputed); one ``stef.drift.detected``
    event per worse drift (a recomputed check only when it was not worse before: :func:`stef.monitor.alerts.is_new_worse_drift`).

    Attach a Prefect automation (trigger: event ``stef.drift.detected``) to notify people, or set
    ``$STEF_NOTIFY_WEBHOOK`` (:data:`stef.monitor.alerts.NOTIFY_WEBHOOK_ENV`): each new worse drift is then
    posted there as its sentence (:func:`notify_webhook`).

    Args:
        checks: summaries from :func:`check_drift`.
        log_date: the night's day (artifact title).

    Returns:
        The ids of the events emitted (empty when Prefect does not emit events, e.g. with no API).
    """
    from prefect.artifacts import create_markdown_artifact
    from prefect.events import emit_event

    title = f"STEF drift checks {log_date.isoformat()}"
    create_markdown_artifact(markdown=drift_markdown(checks, title), key=DRIFT_ARTIFACT_KEY, description=title)
    emitted: list[str] = []
    webhook = os.environ.get(NOTIFY_WEBHOOK_ENV, "").strip()
    for check in checks:
        if is_new_worse_drift(check):
            event = emit_event(**drift_event(check))
            run_logger().warning("drift for the worse: %s", shorten(check["sentence"], 400))
            if webhook:
                notify_webhook(webhook, check)
            if event is not None:
                emitted.append(str(event.id))
    return emitted


def notify_webhook(url: str, check: dict[str, Any], timeout_s: float = 10.0) -> bool:
    """POST the check's sentence to a Slack-compatible webhook (:func:`stef.monitor.alerts.webhook_payload`).

    A failed post is logged and never fails the night (the event and the artifact carry the drift too).

    Returns:
        Whether the webhook answered with a 2xx status.
    """
    import httpx

    try:
        response = httpx.post(url, json=webhook_payload(check), timeout=timeout_s)
    except httpx.HTTPError as exc:
        run_logger().error("posting the drift to the webhook failed: %s", shorten(str(exc), 300))
        return False
    if not response.is_success:
        run_logger().error("the webhook answered %d to the drift post", response.status_code)
        return False
    return True


@dataclass(frozen=True, slots=True)
class DriftStep:
    """What the drift step of a night did.

    Attributes:
        checks: one summary per check (empty when the step failed).
        events: ids of the ``stef.drift.detected`` events emitted.
        error: why the step failed (``None`` when it did not); the day's data is stored anyway.
    """

    checks: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    error: str | None = None


def _failure(state: Any) -> str:
    """Why a failed task run failed, as one line; raises the run's error instead when the process
    received SIGINT or SIGTERM meanwhile (:mod:`stef.stop_signals`): the failure is the interrupt's
    (DuckDB turns a signal's exception in a running query into ``RuntimeError('Query
    interrupted')``), and the night must stop unfinished, its day not marked done, not go on as if
    the drift check had merely failed."""
    exc = state.result(raise_on_failure=False)
    if stop_signals.received() is not None:
        if isinstance(exc, BaseException):
            raise exc
        raise RuntimeError(str(state.message))  # an error: the command names the signal it received
    return f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else str(state.message)


def nightly_drift_step(warehouse_path: str | None, log_date: date, evaluator_version: str) -> DriftStep:
    """Run :func:`check_drift` then :func:`publish_drift` inside a flow; never raise.

    Called at the end of the nightly flow, after the day is stored and its metrics computed: a
    failed check is logged and reported in the result (and shows as a failed task run in the
    Prefect UI) while the night still completes with its data. A check that failed because the
    process was interrupted (SIGINT, SIGTERM) raises its error instead (:func:`_failure`).

    Args:
        warehouse_path: DuckDB file.
        log_date: the night's day.
        evaluator_version: the evaluator version of the night's evaluations.

    Returns:
        A :class:`DriftStep`.

    Raises:
        Exception: the failed check's error when the process received SIGINT or SIGTERM meanwhile.
    """
    logger = run_logger()
    state = check_drift(warehouse_path, log_date, evaluator_version, return_state=True)
    if not state.is_completed():
        error = _failure(state)
        logger.error("drift check of %s failed, the day's data is stored: %s", log_date.isoformat(), error)
        return DriftStep(error=error)
    checks: list[dict[str, Any]] = state.result()
    published = publish_drift(checks, log_date, return_state=True)
    if not published.is_completed():
        error = _failure(published)
        logger.error("publishing the drift checks of %s failed: %s", log_date.isoformat(), error)
        return DriftStep(checks=checks, error=error)
    return DriftStep(checks=checks, events=published.result())
