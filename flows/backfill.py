"""The backfill flow: the nightly work for every day of a range, resumable (DESIGN.md §5).

Each day runs as a :func:`flows.nightly.nightly` subflow, which stores the day and its metrics in
transactions and marks it done in ``stored_days``. Days already done with the same evaluator
version are skipped unless ``force``, so a backfill that was interrupted (a crash, Ctrl-C, a bad
day) is resumed by running it again: the days done before the interruption are skipped, the day
that was running is redone from scratch (its writes are replaced, never duplicated), the rest run.

With a model judge, a stored day with records that fell back to the symbolic verdict is not
done: every backfill reruns it (the judge cache answers the records the model judged, only the
fallbacks are asked again), and a day whose fallbacks are permanent is rerun each time and said so.
``max_cost_usd`` caps the whole backfill: each day gets what is left of it, and the records a day
keeps from the model say so naming that cap and what the backfill spent (not the day's remainder).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import Literal

from prefect import flow

from flows.nightly import NightlySummary, nightly, resolve_log_date
from stef.llm.breaker import DEFAULT_BREAKER_FAILURES
from stef.llm.settings import DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT_S, SYMBOLIC, JudgeSettings
from tasks._runtime import run_logger
from tasks.backfill import (
    BackfillPlan,
    day_folder_problem,
    day_has_logs,
    day_spend,
    days_in_range,
    plan_backfill,
    unread_files_note,
)
from warehouse import resolve_path

DayStatus = Literal["done", "skipped", "no_logs"]
"""``done``: the nightly work ran; ``skipped``: already done with this evaluator version;
``no_logs``: no ``<logs-root>/<day>/*.jsonl`` (nothing to store, reported). A day that was stored
but had records fall back to the symbolic verdict is rerun: ``done`` with ``rerun_fallbacks`` > 0."""


@dataclass(frozen=True, slots=True)
class BackfillDay:
    """What the backfill did with one day.

    Attributes:
        log_date: the day.
        status: see :data:`DayStatus`.
        summary: the nightly summary when ``status`` is ``done``.
        detail: why a ``no_logs`` day has none when it is not simply missing (``… is a file, not
            a folder``), else ``None``.
        rerun_fallbacks: for a day stored before and rerun, how many of its records had fallen
            back to the symbolic verdict (why it was rerun); 0 for a day run for the first time.
        fallbacks: records of this run that fell back to the symbolic verdict (model judge only;
            a later backfill reruns the day for them).
        budget_usd: what was left of the backfill's ``max_cost_usd`` when the day started
            (``None``: no cap).
        evaluator_version: the version the day was checked with (for ``skipped``: it is done with
            it), with the warehouse's deployment calibrators (``…+calib=<digest>``); ``""`` when not set.
    """

    log_date: date
    status: DayStatus
    summary: NightlySummary | None = None
    detail: str | None = None
    rerun_fallbacks: int = 0
    fallbacks: int = 0
    budget_usd: float | None = None
    evaluator_version: str = ""


@dataclass(frozen=True, slots=True)
class BackfillSummary:
    """What one backfill run did.

    Attributes:
        start, end: the range (both included).
        evaluator_version: the version the days were checked and stored with.
        warehouse: the DuckDB file.
        days: one entry per day of the range, in order.
        max_cost_usd: the budget of the whole backfill (``None``: none).
        spent_usd: what its model calls cost: each day's :attr:`NightlySummary.judge_spent_usd`
            (read back from the warehouse, :func:`tasks.backfill.day_spend`, when the day's
            batches ran in other processes); 0.0 for the symbolic judge.
    """

    start: date
    end: date
    evaluator_version: str
    warehouse: str
    days: list[BackfillDay] = field(default_factory=list)
    max_cost_usd: float | None = None
    spent_usd: float = 0.0

    def with_status(self, status: DayStatus) -> list[date]:
        """The days with ``status``."""
        return [day.log_date for day in self.days if day.status == status]

    def reruns(self) -> list[date]:
        """The days rerun because records of theirs had fallen back to the symbolic verdict."""
        return [day.log_date for day in self.days if day.rerun_fallbacks > 0]

    def with_fallbacks(self) -> list[date]:
        """The days this backfill ran that still have records with the symbolic fallback (the
        next backfill reruns them)."""
        return [day.log_date for day in self.days if day.fallbacks > 0]


def fallbacks_of(summary: NightlySummary) -> int:
    """Records of a nightly run that fell back to the symbolic verdict (its metrics' ``n_judge_fallback``).

    >>> fallbacks_of(NightlySummary(date(2026, 11, 24), 3, 3, 0, 1.0, metrics=[{"n_judge_fallback": 2}, {}]))
    2
    """
    return sum(int(row.get("n_judge_fallback") or 0) for row in summary.metrics)


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
    api_base: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    max_cost_usd: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    breaker_failures: int = DEFAULT_BREAKER_FAILURES,
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
            decides the evaluator version that marks a day done. With a model, a stored day whose
            records include fallbacks to the symbolic verdict is rerun (not skipped).
        api_base, concurrency, timeout_s, breaker_failures: the model's endpoint, requests in
            flight, seconds per request and circuit breaker, for each day's run as for
            :func:`flows.nightly.nightly`.
        max_cost_usd: budget for the model calls of the whole backfill (``None``: none): each
            day runs with what is left of it (0 once it is used up: its records then get the
            symbolic verdict, and a later backfill reruns the day).
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
        judge,
        api_base=api_base,
        concurrency=concurrency,
        max_cost_usd=max_cost_usd,
        timeout_s=timeout_s,
        breaker_failures=breaker_failures,
        schema_dir=schema_dir,
        observed_catalog=observed_catalog,
        learn_catalog=learn_catalog,
    )
    from tasks.review import warehouse_calibrators

    settings = replace(settings, calibrators=warehouse_calibrators(warehouse_path))
    plan = BackfillPlan() if force else plan_backfill(warehouse_path, first, last, settings.evaluator_version)
    # A model judge's day with fallbacks is not done: rerun, the cache answers the rest.
    rerun = {} if settings.is_symbolic else dict(plan.fallbacks)
    done = set(plan.done) - set(rerun)
    logger = run_logger()
    logger.info(
        "backfill %s … %s: %d days, %d already done%s%s",
        first,
        last,
        len(days),
        len(done),
        " (forced: redone)" if force else "",
        f", {len(rerun)} rerun for records that fell back to the symbolic verdict" if rerun else "",
    )
    results: list[BackfillDay] = []
    spent = 0.0
    for day in days:
        if day in done:
            result = BackfillDay(day, "skipped", evaluator_version=settings.evaluator_version)
        elif source == "files" and not day_has_logs(logs_root, day):
            detail = day_folder_problem(logs_root, day) or unread_files_note(logs_root, day)
            logger.warning(
                "backfill: no logs for %s in %s%s, nothing stored for that day",
                day,
                logs_root,
                f" ({detail})" if detail else "",
            )
            result = BackfillDay(day, "no_logs", detail=detail)
        else:
            budget = None if max_cost_usd is None else max(0.0, max_cost_usd - spent)
            if day in rerun:
                logger.info("backfill: %s rerun: %d records fell back to the symbolic verdict", day, rerun[day])
            started = datetime.now(UTC).replace(tzinfo=None)
            summary = nightly(
                log_date=day,
                logs_root=logs_root,
                warehouse=warehouse_path,
                rules_dir=rules_dir,
                max_bad_share=max_bad_share,
                batch_size=batch_size,
                judge=judge,
                api_base=api_base,
                concurrency=concurrency,
                max_cost_usd=budget,
                timeout_s=timeout_s,
                breaker_failures=breaker_failures,
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
                backfill_max_cost_usd=max_cost_usd,
                backfill_spent_usd=spent,
            )
            if not settings.is_symbolic:
                # the run's budget counted what the day's requests cost, estimates included; with
                # batches in other processes, read it back from the warehouse instead
                spent += (
                    summary.judge_spent_usd
                    if summary.judge_spent_usd is not None
                    else day_spend(warehouse_path, started, day, summary.evaluator_version)
                )
            fallbacks = 0 if settings.is_symbolic else fallbacks_of(summary)
            if fallbacks:
                logger.warning(
                    "backfill: %d records of %s fell back to the symbolic verdict; the next backfill reruns the day",
                    fallbacks,
                    day,
                )
            result = BackfillDay(day, "done", summary, None, rerun.get(day, 0), fallbacks, budget)
        results.append(result)
        if on_day is not None:
            on_day(result)
    return BackfillSummary(
        first, last, settings.evaluator_version, warehouse_path, results, max_cost_usd=max_cost_usd, spent_usd=spent
    )
