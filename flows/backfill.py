"""The backfill flow: the nightly work for every day of a range, resumable (DESIGN.md §5).

Each day runs as a :func:`flows.nightly.nightly` subflow, which stores the day and its metrics in
transactions and marks it done in ``stored_days``. Days already done with the same evaluator
version are skipped unless ``force``, so a backfill that was interrupted (a crash, Ctrl-C, a bad
day) is resumed by running it again: the days done before the interruption are skipped, the day
that was running is redone from scratch (its writes are replaced, never duplicated), the rest run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Literal

from prefect import flow

from flows.nightly import NightlySummary, nightly, resolve_log_date
from stef.llm.settings import SYMBOLIC, JudgeSettings
from tasks._runtime import run_logger
from tasks.backfill import day_has_logs, days_in_range, plan_backfill
from warehouse import resolve_path

DayStatus = Literal["done", "skipped", "no_logs"]
"""``done``: the nightly work ran; ``skipped``: already done with this evaluator version;
``no_logs``: no ``<logs-root>/<day>/*.jsonl`` (nothing to store, reported)."""


@dataclass(frozen=True, slots=True)
class BackfillDay:
    """What the backfill did with one day.

    Attributes:
        log_date: the day.
        status: see :data:`DayStatus`.
        summary: the nightly summary when ``status`` is ``done``.
    """

    log_date: date
    status: DayStatus
    summary: NightlySummary | None = None


@dataclass(frozen=True, slots=True)
class BackfillSummary:
    """What one backfill run did.

    Attributes:
        start, end: the range (both included).
        evaluator_version: the version the days were checked and stored with.
        warehouse: the DuckDB file.
        days: one entry per day of the range, in order.
    """

    start: date
    end: date
    evaluator_version: str
    warehouse: str
    days: list[BackfillDay] = field(default_factory=list)

    def with_status(self, status: DayStatus) -> list[date]:
        """The days with ``status``."""
        return [day.log_date for day in self.days if day.status == status]


@flow(name="stef-backfill")
def backfill(
    start: date | str,
    end: date | str,
    logs_root: str = "./logs",
    warehouse: str | None = None,
    force: bool = False,
    rules_dir: str | None = None,
    max_bad_share: float = 0.05,
    batch_size: int | None = None,
    judge: str = SYMBOLIC,
    on_day: Callable[[BackfillDay], None] | None = None,
    schema_dir: str | None = None,
    observed_catalog: str | None = None,
    learn_catalog: bool = False,
    source: str = "files",
    source_endpoint: str | None = None,
    source_project: str | None = None,
    source_input: list[str] | None = None,
    source_mapping: str | None = None,
    push: str | None = None,
    push_endpoint: str | None = None,
) -> BackfillSummary:
    """Run the nightly work for every day from ``start`` to ``end``, skipping days already done.

    Args:
        start: first day (``date`` or ``YYYY-MM-DD``).
        end: last day, included.
        logs_root: folder (or fsspec URL) with ``<YYYY-MM-DD>/*.jsonl``.
        warehouse: DuckDB file; default ``$STEF_WAREHOUSE``, else ``./stef.duckdb``.
        force: redo days already done with the same evaluator version (their rows are replaced).
        rules_dir: folder of ``<app_id>.json`` rule files searched before the bundled rules.
        max_bad_share: per day, fail when a larger share of lines is bad (see ``nightly``).
        batch_size: records per evaluation task (default: as :func:`flows.nightly.nightly` chooses).
        judge: the judge setting (``symbolic`` or a model, as ``stef nightly --judge``); it
            decides the evaluator version that marks a day done.
        on_day: called after each day with its :class:`BackfillDay` (the CLI's progress bar);
            not stored with the flow run.
        schema_dir: folder of the apps' schemas (as ``stef nightly --schema-dir``); part of the
            evaluator version that marks a day done.
        observed_catalog, learn_catalog: observed catalogs, as for ``stef nightly`` (each day
            learns from the days before it, the ones this backfill stored included).
        source, source_endpoint, source_project, source_input, source_mapping, push,
            push_endpoint: pull each day from a trace store first and push its scores after, as
            for :func:`flows.nightly.nightly` (with a source, a day without a log folder is pulled,
            not skipped).

    Returns:
        A :class:`BackfillSummary`.

    Raises:
        InputError: a malformed date, ``end`` before ``start``, or a range that is too long.
        LogQualityError, RulesError, WarehouseError ...: from the first day that fails (the days
            before it are stored; run the backfill again to resume).
    """
    first, last = resolve_log_date(start), resolve_log_date(end)
    days = days_in_range(first, last)
    warehouse_path = str(resolve_path(warehouse))
    settings = JudgeSettings.parse(
        judge, schema_dir=schema_dir, observed_catalog=observed_catalog, learn_catalog=learn_catalog
    )
    from tasks.review import warehouse_calibrators

    settings = replace(settings, calibrators=warehouse_calibrators(warehouse_path))
    done = set() if force else set(plan_backfill(warehouse_path, first, last, settings.evaluator_version))
    logger = run_logger()
    logger.info(
        "backfill %s … %s: %d days, %d already done%s",
        first,
        last,
        len(days),
        len(done),
        " (forced: redone)" if force else "",
    )
    results: list[BackfillDay] = []
    for day in days:
        if day in done:
            result = BackfillDay(day, "skipped")
        elif source == "files" and not day_has_logs(logs_root, day):
            logger.warning("backfill: no logs for %s in %s, nothing stored for that day", day, logs_root)
            result = BackfillDay(day, "no_logs")
        else:
            summary = nightly(
                log_date=day,
                logs_root=logs_root,
                warehouse=warehouse_path,
                rules_dir=rules_dir,
                max_bad_share=max_bad_share,
                batch_size=batch_size,
                judge=judge,
                schema_dir=schema_dir,
                observed_catalog=observed_catalog,
                learn_catalog=learn_catalog,
                source=source,
                source_endpoint=source_endpoint,
                source_project=source_project,
                source_input=source_input,
                source_mapping=source_mapping,
                push=push,
                push_endpoint=push_endpoint,
            )
            result = BackfillDay(day, "done", summary)
        results.append(result)
        if on_day is not None:
            on_day(result)
    return BackfillSummary(first, last, settings.evaluator_version, warehouse_path, results)
