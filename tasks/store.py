"""Tasks that write a day to the warehouse and compute its daily metrics."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from stef.logs import LogLine
from stef.models import EVALUATOR_VERSION, Evaluation, ObservedCatalogBook, StoredEvaluation
from stef.pipeline.evaluate import rejected_evaluation
from tasks._runtime import io_task, run_logger
from warehouse import StoreSummary, compute_daily_metrics, connect, line_identity, store_day, stored_elsewhere
from warehouse.connection import close_later


def quarantine_evaluations(
    lines: Sequence[LogLine], evaluations: Sequence[StoredEvaluation], evaluator_version: str | None = None
) -> list[Evaluation]:
    """``invalid_input`` evaluations for the quarantined lines that have a run_id of their own.

    A quarantined line gets one when it has a ``run_id`` that no valid record, no evaluation in
    ``evaluations`` and no earlier quarantined line uses (the counting rule of
    :mod:`warehouse.store`). Agent and app ids are read from the line where possible.

    Args:
        lines: the day's lines after validation.
        evaluations: the evaluations of the valid records.
        evaluator_version: version of the extra evaluations (default: that of ``evaluations``,
            else :data:`stef.models.EVALUATOR_VERSION`), so a day judged by a model stores one version.

    Returns:
        The extra evaluations, in line order.
    """
    version = evaluator_version or (evaluations[0].evaluator_version if evaluations else EVALUATOR_VERSION)
    taken = {e.run_id for e in evaluations} | {line.record.run_id for line in lines if line.record is not None}
    extra: list[Evaluation] = []
    for line in lines:
        if line.record is not None or line.run_id is None or line.run_id in taken:
            continue
        taken.add(line.run_id)
        agent_id, agent_version, app_id = line_identity(line)
        evaluation = rejected_evaluation(line.run_id, line.reason or "rejected log line")
        extra.append(
            evaluation.model_copy(
                update={
                    "agent_id": agent_id,
                    "agent_version": agent_version,
                    "app_id": app_id,
                    "evaluator_version": version,
                }
            )
        )
    return extra


@task(name="check-warehouse", cache_policy=NO_CACHE, persist_result=False)
def check_warehouse(warehouse_path: str | None) -> None:
    """Open the warehouse for writing (creating and migrating it) and read its index of stored
    days, then close it: run first, so that a locked, read-only or unreadable warehouse fails
    the run before any batch is evaluated or any model call is paid for.

    Args:
        warehouse_path: DuckDB file (``None``: ``$STEF_WAREHOUSE`` or ``./stef.duckdb``).

    Raises:
        WarehouseLockedError: another process still writes the file after the lock timeout.
        WarehouseError: the file cannot be opened for writing or migrated.
        duckdb.Error: the file is damaged (its index cannot be read).
    """
    conn = connect(warehouse_path, on_wait=run_logger().warning)
    try:
        conn.execute("SELECT count(*), max(stored_at) FROM stored_days").fetchall()
    finally:
        conn.close()


@io_task("find-run-ids-of-other-days", retries=2, retry_delay_seconds=5)
def run_ids_of_other_days(
    warehouse_path: str | None, log_date: date, lines: Sequence[LogLine], evaluator_version: str
) -> dict[str, date]:
    """run_id -> the other day it is stored for, for the day's valid records whose run_id the
    warehouse already holds for another day (:func:`warehouse.stored_elsewhere`).

    :func:`warehouse.store_day` would quarantine those records anyway; the nightly flow rejects
    them before the bad-share gate (:func:`reject_run_ids_of_other_days`), so they count there (a
    day of logs delivered again under a new date fails the gate instead of being stored with
    nothing scored and exit code 0) and are not scored.

    Args:
        warehouse_path: DuckDB file (``None``: ``$STEF_WAREHOUSE`` or ``./stef.duckdb``).
        log_date: the day being processed.
        lines: its lines after validation.
        evaluator_version: the version the day will be stored under.

    Raises:
        WarehouseLockedError: another process still writes the file after the lock timeout (retried).
    """
    run_ids = [line.record.run_id for line in lines if line.record is not None]
    if not run_ids:
        return {}
    conn = connect(warehouse_path, on_wait=run_logger().warning)
    try:
        elsewhere = stored_elsewhere(conn, run_ids, evaluator_version, log_date)
    finally:
        conn.close()
    if elsewhere:
        run_logger().warning("%d records have a run_id already stored for another day: quarantined", len(elsewhere))
    return elsewhere


def reject_run_ids_of_other_days(lines: Sequence[LogLine], elsewhere: dict[str, date]) -> list[LogLine]:
    """``lines`` with each valid record whose run_id is in ``elsewhere`` (:func:`run_ids_of_other_days`)
    rejected as ``duplicate run_id: already stored for log date D``, the reason :func:`warehouse.store_day` gives."""
    return [
        line.rejected(f"duplicate run_id: already stored for log date {elsewhere[line.record.run_id].isoformat()}")
        if line.record is not None and line.record.run_id in elsewhere
        else line
        for line in lines
    ]


@task(name="learn-observed-catalogs", cache_policy=NO_CACHE, persist_result=False)
def learn_observed_catalogs(warehouse_path: str | None, log_date: date) -> ObservedCatalogBook:
    """Learn each app's observed catalog from the stored answers of the 30 days before
    ``log_date`` and store it as a new version (:func:`warehouse.observed.store_observed_catalogs`),
    before the day is scored.

    Raises:
        WarehouseLockedError: another process still writes the file after the lock timeout.
        WarehouseError: the write failed.
    """
    from stef.pipeline.observed import learn_catalogs
    from warehouse.observed import LEARN_WINDOW_DAYS, read_answers_for_learning, store_observed_catalogs

    conn = connect(warehouse_path, on_wait=run_logger().warning)
    try:
        end = log_date - timedelta(days=1)
        records, source = read_answers_for_learning(conn, end - timedelta(days=LEARN_WINDOW_DAYS - 1), end)
        book = learn_catalogs(records, source)
        store_observed_catalogs(conn, log_date, book)
    finally:
        conn.close()
    usable = sum(1 for app in book.catalogs if book.for_app(app) is not None)
    run_logger().info(
        "observed catalogs for %s: %d apps, %d with enough answers to use (%s)",
        log_date.isoformat(),
        len(book.catalogs),
        usable,
        book.source,
    )
    return book


@io_task("store-results", retries=2, retry_delay_seconds=10)
def store_results(
    warehouse_path: str | None,
    log_date: date,
    lines: list[LogLine],
    evaluations: list[StoredEvaluation],
    evaluator_version: str | None = None,
) -> StoreSummary:
    """Replace the day in the warehouse: runs, evaluations and quarantine (one transaction).

    Adds the ``invalid_input`` evaluations of quarantined lines
    (:func:`quarantine_evaluations`) before calling :func:`warehouse.store_day`. Once the day is
    committed its connection stays open (:func:`warehouse.connection.close_later`): the caller
    has it checkpointed and closed in the background (:func:`warehouse.connection.checkpoint_in_background`)
    and waits for that (:func:`warehouse.connection.wait_for_checkpoints`) before it ends.

    Args:
        warehouse_path: DuckDB file (``None``: ``$STEF_WAREHOUSE`` or ``./stef.duckdb``).
        log_date: the day.
        lines: the day's lines after validation.
        evaluations: one evaluation (full or compact) per valid record.
        evaluator_version: the version to store (default: that of ``evaluations``); pass it when
            a judge other than the symbolic one is used, so that a day without valid records is
            stored under the same version.

    Returns:
        The :class:`warehouse.StoreSummary` of what was written.

    Raises:
        WarehouseLockedError: another process still writes the file after the lock timeout (not retried).
        WarehouseError: the write failed or the inputs break the contract.
    """
    everything: list[StoredEvaluation] = [*evaluations, *quarantine_evaluations(lines, evaluations, evaluator_version)]
    conn = connect(warehouse_path, on_wait=run_logger().warning)
    try:
        summary = store_day(conn, log_date, lines, everything, evaluator_version=evaluator_version)
    except BaseException:
        conn.close()
        raise
    close_later(conn)  # the day is committed: the flow checkpoints it in the background (checkpoint_in_background)
    run_logger().info(
        "stored %s: %d runs, %d evaluations (%d scored), %d quarantined",
        log_date.isoformat(),
        summary.runs,
        summary.evaluations,
        summary.evaluated,
        summary.quarantined,
    )
    return summary


@io_task("store-rejected-lines", retries=2, retry_delay_seconds=10)
def store_rejected(warehouse_path: str | None, log_date: date, lines: Sequence[LogLine]) -> int:
    """Store the rejected lines of a day that failed validation (:func:`warehouse.store.store_rejected_lines`).

    Returns:
        The quarantine rows written (0 when the day was stored before: its rows are kept).
    """
    from warehouse.store import store_rejected_lines

    conn = connect(warehouse_path, on_wait=run_logger().warning)
    try:
        return store_rejected_lines(conn, log_date, lines)
    finally:
        conn.close()


@io_task("compute-metrics", retries=2, retry_delay_seconds=10)
def compute_metrics(
    warehouse_path: str | None,
    log_date: date,
    evaluator_version: str = EVALUATOR_VERSION,
    mark_done: bool = True,
) -> list[dict[str, Any]]:
    """Compute and store the day's metrics per agent x version (:func:`warehouse.compute_daily_metrics`).

    Args:
        warehouse_path: DuckDB file (``None``: ``$STEF_WAREHOUSE`` or ``./stef.duckdb``).
        log_date: the day.
        evaluator_version: whose evaluations to summarise.
        mark_done: mark the day done (the nightly flow does it after the drift checks instead).

    Returns:
        One dict per agent x version with the ``daily_agent_metrics`` columns (``log_date``,
        ``agent_id``, ``agent_version``, ``evaluator_version``, ``records``, ``evaluated``,
        ``coverage``, ``mean_score``, ``p50_score``, ``p90_score``, ``n_excellent``, ``n_good``,
        ``n_marginal``, ``n_poor``, ``n_quarantined``, ``computed_at``).

    Raises:
        WarehouseLockedError: another process still writes the file after the lock timeout (not retried).
        WarehouseError: the write failed.
    """
    conn = connect(warehouse_path, on_wait=run_logger().warning)
    try:
        frame = compute_daily_metrics(conn, log_date, evaluator_version, mark_done=mark_done)
    finally:
        conn.close()
    return frame.to_dicts()


@io_task("mark-day-done", retries=2, retry_delay_seconds=10)
def mark_done(warehouse_path: str | None, log_date: date, evaluator_version: str = EVALUATOR_VERSION) -> None:
    """Mark the day done once its drift checks ran (:func:`warehouse.metrics.mark_day_done`): a run
    stopped before them leaves the day for the next run, which stores it again and checks it.

    Raises:
        WarehouseLockedError: another process still writes the file after the lock timeout (not retried).
        WarehouseError: the write failed.
    """
    from warehouse.metrics import mark_day_done

    conn = connect(warehouse_path, on_wait=run_logger().warning)
    try:
        mark_day_done(conn, log_date, evaluator_version)
    finally:
        conn.close()
