"""The nightly flow: load -> validate -> evaluate in batches -> store -> daily metrics -> artifact.

Runs with no Prefect server: Prefect starts a temporary local API in the first flow call of a
process and reuses it for the next calls (ephemeral mode). After the metrics, the drift checks
of DESIGN.md §6 run (:func:`tasks.drift.nightly_drift_step`); a failing check is reported in the
summary and never loses the day's stored data.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, cast

from prefect import flow, get_run_logger, task
from prefect.context import FlowRunContext
from prefect.futures import PrefectFuture
from prefect.futures import wait as wait_for_futures
from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner, ThreadPoolTaskRunner
from prefect.utilities.annotations import quote

from flows.progress import batch_evaluated, evaluation_finished, evaluation_started
from stef.days import parse_day
from stef.display import one_line, visible_lines
from stef.errors import InputError, StefError
from stef.llm import request_stop
from stef.llm.breaker import DEFAULT_BREAKER_FAILURES, release_breaker
from stef.llm.budget import release_budget, usd
from stef.llm.settings import DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT_S, SYMBOLIC, JudgeSettings, preflight
from stef.models import EVALUATOR_VERSION, CompactEvaluation, evidence_compressed
from tasks import (
    bad_share_error,
    check_warehouse,
    compute_metrics,
    evaluate_batch,
    learn_observed_catalogs,
    load_logs,
    mark_done,
    publish_summary_artifact,
    quarantine_command,
    reject_run_ids_of_other_days,
    run_ids_of_other_days,
    store_rejected,
    store_results,
    validate_logs,
)
from tasks.drift import nightly_drift_step
from tasks.evaluate import RecordBatch, evaluation_batches, rulebook
from tasks.scoring_pool import InterruptibleThreadPoolTaskRunner, ScoringPoolTaskRunner, pool_processes_of
from tasks.traces import TraceSource, is_transient, pull_source, push_day, push_target
from warehouse import resolve_path
from warehouse.connection import wait_for_checkpoints

DEFAULT_WORKERS = min(4, os.cpu_count() or 1)
"""Workers of the thread-pool task runner (``--task-runner thread``)."""


@dataclass(frozen=True, slots=True)
class NightlySummary:
    """What one nightly run did.

    Attributes:
        log_date: the day processed.
        records: non-blank log lines of the day (valid + quarantined).
        evaluated: evaluations with status ``evaluated`` (they carry a score Φ).
        quarantined: lines stored in ``quarantine`` (with their reason).
        coverage: ``evaluated / records`` (0.0 for a day without lines).
        metrics: one dict per agent x version with the ``daily_agent_metrics`` columns
            (``agent_id``, ``agent_version``, ``records``, ``coverage``, ``mean_score``,
            ``p50_score``, ``p90_score``, ``n_excellent`` ... ``n_quarantined``).
        evaluator_version: the evaluator version of the stored evaluations.
        warehouse: the DuckDB file written.
        judge: the judge setting (``symbolic``, a model, or ``hybrid:MODEL``).
        drift_checks: one summary per drift check of the night (:meth:`stef.monitor.models.DriftCheck.summary`).
        drift_error: why the drift step failed, or ``None`` (the day is stored either way).
        judge_breaker: what the run's circuit breaker did when it opened (after how many
            records, why, how many records then got the symbolic verdict without a request);
            ``None`` while it stayed closed (or with the process / Dask task runner, whose
            workers each log their own breaker).
        pulled: what ``--source phoenix|otlp`` wrote before the run (``None`` for log files).
        pushed: what ``--push`` sent after it; ``push_error``: why it failed (the day is stored
            either way).
        timings: seconds per phase of the flow run, in order (``load``, ``validate``,
            ``evaluate``, ``store``, ``metrics``, ``drift`` ...; ``stef nightly --timings``).
        judge_spent_usd: what the run's model requests cost (USD), as the run's shared budget
            counted them (charges, and estimates where a response's usage could not be trusted);
            ``None`` for the symbolic judge, or when the batches ran in other processes with
            budgets of their own (process / Dask task runner).
    """

    log_date: date
    records: int
    evaluated: int
    quarantined: int
    coverage: float
    metrics: list[dict[str, Any]] = field(default_factory=list)
    evaluator_version: str = EVALUATOR_VERSION
    warehouse: str = ""
    judge: str = SYMBOLIC
    drift_checks: list[dict[str, Any]] = field(default_factory=list)
    drift_error: str | None = None
    judge_breaker: str | None = None
    pulled: str | None = None
    pushed: str | None = None
    push_error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    judge_spent_usd: float | None = None


class PhaseTimer:
    """Wall seconds of consecutive phases: :meth:`lap` closes the phase running since the last lap.

    >>> timer = PhaseTimer()
    >>> timer.lap("load"); timer.lap("load"); sorted(timer.seconds)
    ['load']
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._since = time.perf_counter()

    def lap(self, phase: str) -> None:
        """Add the time since the previous lap (or the start) to ``phase``."""
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._since
        self._since = now


TaskRunnerKind = Literal["pool", "thread", "process", "dask"]
"""Task runners the nightly flow can evaluate its batches on (``--task-runner``)."""
TASK_RUNNERS: tuple[str, ...] = ("pool", "thread", "process", "dask")


WAIT_SLICE_S = 0.2
"""Seconds the flow waits on a batch's future at a time (:func:`interruptible_result`)."""


def interruptible_result(future: PrefectFuture[Any]) -> Any:
    """The result of a task's ``future`` (as ``future.result()``), waited for in slices of
    :data:`WAIT_SLICE_S` seconds.

    A wait without a timeout blocks the flow's (main) thread in a lock that Ctrl-C did not
    interrupt (the process has many threads: the model judge's loop, Prefect's workers), so its
    :class:`KeyboardInterrupt` was raised only once the batch, with all its queued model requests,
    had finished: minutes later. Between two slices Python runs a pending signal's handler here.

    An interrupt that arrives here stops the process's model requests at once
    (:func:`stef.llm.request_stop.stop_for_interrupt`; the run's task-runner shutdown lifts that),
    with this package's thread-pool runners (:func:`runner_lifts_request_stop`): the run's
    unwinding (its task runner's threads joined, the crash reported to the API) then starts none
    of the queued ones. For SIGTERM this is where it shows: while a flow runs, Prefect's own
    handler takes the signal first and raises its ``TerminationSignal`` in the flow.

    Raises:
        Whatever ``future.result()`` raises (the task's error), and :class:`KeyboardInterrupt`
        (or Prefect's ``TerminationSignal``) on a signal.
    """
    try:
        while not wait_for_futures([future], timeout=WAIT_SLICE_S).done:
            pass
    except BaseException as exc:
        if not isinstance(exc, Exception) and runner_lifts_request_stop():
            request_stop.stop_for_interrupt()
        raise
    return future.result()


def runner_lifts_request_stop() -> bool:
    """Whether the current flow run's task runner lifts :func:`stef.llm.request_stop.stop_for_interrupt`
    when it shuts down (:class:`tasks.scoring_pool.InterruptibleThreadPoolTaskRunner`: its batches,
    and so their model requests, run in this process). Another runner's requests run elsewhere,
    and nothing here would lift the stop."""
    context = FlowRunContext.get()
    return isinstance(context.task_runner if context is not None else None, InterruptibleThreadPoolTaskRunner)


def make_task_runner(
    kind: TaskRunnerKind = "pool", max_workers: int | None = None, address: str | None = None
) -> TaskRunner[Any]:
    """A task runner for the evaluation batches.

    Args:
        kind: ``"pool"`` (default: the batch tasks run in threads of the flow's process and
            score in one process pool per process, one worker per core:
            :class:`tasks.scoring_pool.ScoringPoolTaskRunner`; with a model judge the batches
            stay in the threads, their requests are I/O), ``"thread"`` (scoring in threads: one
            core), ``"process"`` (Prefect's process runner; with no Prefect server configured
            each worker process starts its own temporary API, so use it with a server) or
            ``"dask"`` (prefect-dask, the ``dask`` extra: a Dask cluster at ``address``, else a
            temporary local cluster).
        max_workers: pool size (default one scoring process per core / :data:`DEFAULT_WORKERS`
            threads / one process per core / Dask's default number of local workers).
        address: scheduler address of a running Dask cluster (``tcp://host:8786``); only with
            ``kind="dask"``.

    Raises:
        ValueError: an unknown ``kind``, or ``address`` without ``kind="dask"``.
        InputError: ``kind="dask"`` but prefect-dask is not installed.
    """
    if address is not None and kind != "dask":
        raise ValueError(f"a Dask scheduler address only applies to the dask task runner, not {kind!r}")
    if kind == "pool":
        return ScoringPoolTaskRunner(processes=max_workers)
    if kind == "thread":
        return InterruptibleThreadPoolTaskRunner(max_workers=max_workers or DEFAULT_WORKERS)
    if kind == "process":
        return ProcessPoolTaskRunner(max_workers=max_workers)
    if kind == "dask":
        try:
            from prefect_dask.task_runners import DaskTaskRunner
        except ImportError as exc:
            raise InputError(
                f"the dask task runner needs prefect-dask ({exc}): pip install '.[dask]' in the STEF checkout"
            ) from exc
        if address is not None:
            return DaskTaskRunner(address=address)
        return DaskTaskRunner(cluster_kwargs={} if max_workers is None else {"n_workers": max_workers})
    raise ValueError(f"task runner must be one of {', '.join(TASK_RUNNERS)}, got {kind!r}")


def resolve_log_date(value: date | str | None) -> date:
    """The day to process: ``value`` as a date, or yesterday (UTC) when ``None``.

    Raises:
        InputError: ``value`` is a string that is not ``YYYY-MM-DD`` (:func:`stef.days.parse_day`:
            not ``2026-11-2``, ``20261120`` or ``2026-W47-5`` either, as the CLI's ``--date``).

    >>> resolve_log_date("2026-11-20")
    datetime.date(2026, 11, 20)
    """
    if value is None:
        return datetime.now(UTC).date() - timedelta(days=1)
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        return parse_day(value.strip())
    except InputError as exc:
        raise InputError(f"log date {exc}") from exc


def with_deployment_calibrators(settings: JudgeSettings, warehouse_path: str) -> JudgeSettings:
    """``settings`` with the warehouse's active deployment calibrators (``stef review calibrate``):
    the run scores with them and its evaluator version names them (``+calib=<digest>``).

    Raises:
        JudgeConfigError: a stored calibrator cannot be read.
    """
    from tasks.review import warehouse_calibrators

    calibrators = warehouse_calibrators(warehouse_path)
    if not calibrators:
        return settings
    settings = replace(settings, calibrators=calibrators)
    judge = settings.symbolic_judge()
    get_run_logger().info(
        "deployment calibrators from the reviews: %s",
        ", ".join(f"{app or 'every app'}: {cal.version}" for app, cal in judge.deployment.items()),
    )
    return settings


@flow(name="stef-nightly", task_runner=make_task_runner("pool"))
def nightly(
    log_date: date | str | None = None,
    logs_root: str = "./logs",
    warehouse: str | None = None,
    rules_dir: str | None = None,
    max_bad_share: float = 0.05,
    batch_size: int | None = None,
    judge: str = SYMBOLIC,
    api_base: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    max_cost_usd: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    breaker_failures: int = DEFAULT_BREAKER_FAILURES,
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
    backfill_max_cost_usd: float | None = None,
    backfill_spent_usd: float = 0.0,
) -> NightlySummary:
    """Score one day of agent logs into the warehouse.

    Rerunning a day replaces its rows (idempotent). To evaluate batches in processes or on a
    Dask cluster instead of threads: :func:`run_nightly` (``task_runner="process"`` / ``"dask"``).

    Args:
        log_date: the day (``date`` or ``YYYY-MM-DD``); default yesterday (UTC).
        logs_root: folder (or fsspec URL) with ``<YYYY-MM-DD>/*.jsonl``.
        warehouse: DuckDB file; default ``$STEF_WAREHOUSE``, else ``./stef.duckdb``.
        rules_dir: folder of ``<app_id>.json`` rule files searched before the bundled rules.
        max_bad_share: fail (before storing) when a larger share of lines is bad.
        batch_size: records per evaluation task (default: with the ``pool`` runner and the
            symbolic judge, few even tasks of at most 1,000 records, a multiple of the scoring
            processes on days of at least 1,000 records per process, :func:`tasks.evaluate.evaluation_batches`;
            otherwise :data:`stef.models.BATCH_SIZE`).
        judge: ``symbolic`` (default), a litellm model string, or ``hybrid:MODEL`` (STEF paper
            §2.D); model verdicts are cached in the warehouse's ``judge_cache`` table, and the
            evaluations are stored under the judge's evaluator version.
        api_base: OpenAI-compatible endpoint for the model (default ``$STEF_LLM_API_BASE``).
        concurrency: model requests in flight for the whole run (the batches share one pool: :mod:`stef.llm.pool`).
        max_cost_usd: budget in USD for the model calls of the whole run. With the ``pool``
            (default) and ``thread`` runners the batches run in threads of this process and
            share one budget (:func:`stef.llm.budget.shared_budget`): a request is made only
            while the run's spend plus the reserves of the requests in flight plus its own
            reserve (its prompt's price plus :data:`stef.llm.usage.ANSWER_RESERVE_TOKENS` answer
            tokens) stays within it, so the run spends more than ``max_cost_usd`` only by what
            requests cost beyond their reserves (nothing while every answer stays within its
            reserve). With the ``process`` and ``dask`` runners the batches run in other
            processes and cannot share a budget: each batch gets an even share
            (``max_cost_usd / batches``), with the same rule per batch. Past it, records get the
            symbolic verdict and say so (naming ``--max-cost-usd`` for the run).
        backfill_max_cost_usd, backfill_spent_usd: set by :func:`flows.backfill.backfill` for each
            of its days: the user's ``--max-cost-usd`` for the whole backfill and what its earlier
            days spent (``max_cost_usd`` is then what is left of it); the records past the budget
            and the run's log name that cap and that spend, not the day's remainder.
        timeout_s: seconds per model request (then retried).
        breaker_failures: after this many consecutive timeouts / connection failures the rest of
            the run gets the symbolic verdict without calling the model (0: never); the batches
            of the run share the breaker (:func:`stef.llm.breaker.shared_breaker`).
        schema_dir: folder of ``<app_id>.sql`` (DDL) or ``<app_id>.json`` (catalog) schemas; apps
            with one are also checked against it. The day is stored under the evaluator version
            with ``+schema``.
        observed_catalog: an observed catalog file (``stef catalog learn``) for the apps without
            a schema; the day is stored under the evaluator version with ``+observed``.
        learn_catalog: learn the observed catalogs from the warehouse's answers of the 30 days
            before the day, store them (``observed_catalogs``) and use them (``+observed`` too).
        source: ``files`` (the day folder as it is), ``phoenix`` or ``otlp``: pull the day's spans
            into ``<logs_root>/<day>/`` first (:func:`tasks.traces.pull_source`), then score.
        source_endpoint, source_project: the Phoenix URL and project (``phoenix``); the project
            filter for ``otlp``.
        source_input: OTLP JSON files or folders (``otlp``).
        source_mapping: a span mapping JSON file (``stef pull json-schema``).
        push: ``phoenix`` or ``otlp``: send the day's scores there at the end
            (:func:`tasks.traces.push_day`); a failure is logged and returned in the summary.
        push_endpoint: the receiver (default: ``source_endpoint`` when pushing to Phoenix).

    Returns:
        A :class:`NightlySummary`.

    Raises:
        InputError: no log folder / files for the day, or a malformed ``log_date``.
        LogQualityError: too many bad lines (nothing is stored but, for a day not stored before, its
            rejected lines in ``quarantine``: the error names the ``stef quarantine`` command that lists them).
        RulesError: ``rules_dir`` or a rule file in it is invalid.
        SchemaError: ``schema_dir`` is not a folder, or an app's schema file cannot be read.
        JudgeConfigError: an unusable judge setting (unknown provider, key not in the environment ...).
        WarehouseLockedError: another process still writes the warehouse after the lock timeout
            (``$STEF_LOCK_TIMEOUT_S``, default 30 s).
        ValueError: ``batch_size`` < 1 or ``max_bad_share`` outside [0, 1].
    """
    settings = JudgeSettings.parse(
        judge,
        api_base=api_base,
        concurrency=concurrency,
        max_cost_usd=max_cost_usd,
        timeout_s=timeout_s,
        breaker_failures=breaker_failures,
        run_key=f"nightly-{uuid.uuid4().hex}",
        schema_dir=schema_dir,
        observed_catalog=observed_catalog,
        learn_catalog=learn_catalog,
    )
    if backfill_max_cost_usd is not None:
        settings = replace(
            settings, backfill_max_cost_usd=backfill_max_cost_usd, backfill_spent_usd=max(0.0, backfill_spent_usd)
        )
    timer = PhaseTimer()
    settings.schemas()  # a missing schema folder or catalog file fails here, before any work
    settings.observed()
    rulebook(rules_dir).validate_all()  # so does a broken rule file, not when a record first names its app
    for warning in preflight(settings):
        get_run_logger().warning("%s", visible_lines(warning))
    timer.lap("settings")
    day = resolve_log_date(log_date)
    warehouse_path = str(resolve_path(warehouse))
    trace_source = None
    if source != "files":
        trace_source = TraceSource(source, source_endpoint, source_project, tuple(source_input or ()), source_mapping)
        trace_source.check()
    push_to = push_target(push, push_endpoint or (source_endpoint if push == "phoenix" else None))
    pulled = None
    if trace_source is not None:
        result = pull_traces(trace_source, day, logs_root)
        if result.written:
            pulled = (
                f"{result.path}: {result.records} records from {result.spans} spans ({result.unreadable} unreadable)"
            )
        else:  # the store's answer: a day without answers (stored as such below, so a backfill counts it done)
            pulled = f"no SQL span of {day} in {result.spans} spans: no day file" + (
                f" ({result.path} of an earlier pull removed)" if result.removed else ""
            )
        get_run_logger().info("pulled %s", pulled)
        timer.lap("pull")
    lines = load_logs(logs_root, day, allow_empty=trace_source is not None)  # a store's day without spans is a day
    timer.lap("load")
    check_warehouse(warehouse_path)  # a locked or unwritable warehouse fails here, before any evaluation
    settings = with_deployment_calibrators(settings, warehouse_path)
    observed = learn_observed_catalogs(warehouse_path, day) if settings.learn_catalog else None
    timer.lap("warehouse")
    # quote(): skip Prefect's walk over every line (Prefect's stubs do not know quote, hence the ignores).
    lines = validate_logs(quote(lines), max_bad_share, raise_on_bad_share=False)  # type: ignore[call-overload]
    # records stored for another day are bad lines too (the store would quarantine them): the gate counts them
    elsewhere = run_ids_of_other_days(warehouse_path, day, quote(lines), settings.evaluator_version)
    lines = reject_run_ids_of_other_days(lines, elsewhere)
    timer.lap("validate")
    too_bad = bad_share_error(lines, max_bad_share)
    if too_bad is not None:  # keep the rejected lines to inspect, then stop
        stored_rejected = store_rejected(warehouse_path, day, quote(lines))
        listing = quarantine_command(day, warehouse_path)
        raise bad_share_error(lines, max_bad_share, stored_rejected, listing) or too_bad
    records = [line.record for line in lines if line.record is not None]
    run_context = FlowRunContext.get()
    processes = pool_processes_of(run_context.task_runner if run_context else None) if settings.is_symbolic else 0
    parts = evaluation_batches(records, batch_size, processes)
    runner = run_context.task_runner if run_context else None
    cap = settings.max_cost_usd
    if cap is not None and len(parts) > 1 and not isinstance(runner, ThreadPoolTaskRunner):
        # batches in other processes (process, dask) cannot share the run's budget: an even share each
        settings = replace(settings, budget_shares=len(parts))
        get_run_logger().info(
            "%s split evenly over %d batches ($%s each): the %s task runner runs them in other processes",
            f"--max-cost-usd ${usd(cap)}"
            if settings.backfill_max_cost_usd is None
            else f"${usd(cap)} left of --max-cost-usd ${usd(settings.backfill_max_cost_usd)} for the backfill",
            len(parts),
            usd(cap / len(parts)),
            type(runner).__name__,
        )
    evaluations: list[CompactEvaluation] = []
    catalogs = (
        {} if observed is None else {"observed": observed}
    )  # not quoted: a Dask worker would get the quote itself
    compress = evidence_compressed(len(records))  # a small day's evidence stays text (faster; the store reads it as is)
    started = time.perf_counter()
    evaluation_started(day, len(records), len(parts))
    try:
        futures = [
            evaluate_batch.submit(
                RecordBatch(batch),
                rules_dir,
                settings,
                warehouse_path,
                compact=True,
                processes=processes,
                compress=compress,
                **catalogs,
            )
            for batch in parts
        ]
        while futures:  # in order; each finished future is dropped so its task state is freed early
            batch_rows = cast("list[CompactEvaluation]", interruptible_result(futures.pop(0)))  # compact=True
            evaluations.extend(batch_rows)
            batch_evaluated(len(batch_rows))
    finally:
        evaluation_finished()
        breaker = release_breaker(settings.run_key or "")
        budget = release_budget(settings.run_key or "")
    elapsed = time.perf_counter() - started
    get_run_logger().info(
        "evaluated %d records in %d batch%s in %.1f s (%.0f records/s)",
        len(records),
        len(parts),
        "" if len(parts) == 1 else "es",
        elapsed,
        len(records) / elapsed if elapsed > 0 else 0.0,
    )
    timer.lap("evaluate")
    breaker_summary = breaker.summary() if breaker is not None else None
    if breaker_summary is not None:
        get_run_logger().warning(
            "judge %s: %s", one_line(settings.name), one_line(breaker_summary)
        )  # server text, shown visibly
    if budget is not None and budget.backfill_max_usd is not None:
        get_run_logger().info(
            "judge %s: spent $%s this day; $%s of --max-cost-usd $%s for the backfill",
            one_line(settings.name),
            usd(budget.spent_usd),
            usd(budget.backfill_spent_usd + budget.spent_usd),
            usd(budget.backfill_max_usd),
        )
    elif budget is not None and budget.max_usd is not None:
        get_run_logger().info(
            "judge %s: spent $%s of --max-cost-usd $%s for the run",
            one_line(settings.name),
            usd(budget.spent_usd),
            usd(budget.max_usd),
        )
    # The store's connection stays open (warehouse.connection.close_later): the metrics share the
    # open database and write at once, and the drift checks start DuckDB's merge of the day's
    # write-ahead log into the file (0.6 s for 20k records) once they have read their samples.
    try:
        stored = store_results(warehouse_path, day, quote(lines), quote(evaluations), settings.evaluator_version)
        timer.lap("store")
        metrics = compute_metrics(warehouse_path, day, stored.evaluator_version, mark_done=False)
        publish_summary_artifact(day, metrics, stored.lines, stored.evaluated, stored.quarantined)
        timer.lap("metrics")
        drift = nightly_drift_step(warehouse_path, day, stored.evaluator_version)  # never raises
        mark_done(warehouse_path, day, stored.evaluator_version)  # only now: a run stopped before leaves it to redo
        timer.lap("drift")
        pushed = push_error = None
        if push_to is not None:
            try:
                sent = push_scores(
                    push_to[0],
                    push_to[1],
                    warehouse_path,
                    day,
                    stored.evaluator_version,
                    source_project if source != "files" else None,
                    source if source != "files" else "phoenix",
                )
                pushed = f"{sent.results} results sent to {push_to[0]} {push_to[1]} ({sent.unscored} unscored)"
            except StefError as exc:  # the day is stored: say why the push failed, do not fail the run
                push_error = str(exc)
                get_run_logger().error("push to %s failed: %s", push_to[0], exc)
            timer.lap("push")
    finally:
        wait_for_checkpoints()
    timer.lap("checkpoint")
    return NightlySummary(
        log_date=day,
        records=stored.lines,
        evaluated=stored.evaluated,
        quarantined=stored.quarantined,
        coverage=stored.evaluated / stored.lines if stored.lines else 0.0,
        metrics=metrics,
        evaluator_version=stored.evaluator_version,
        warehouse=warehouse_path,
        judge=settings.name,
        drift_checks=drift.checks,
        drift_error=drift.error,
        judge_breaker=breaker_summary,
        pulled=pulled,
        pushed=pushed,
        push_error=push_error,
        timings=timer.seconds,
        judge_spent_usd=None if budget is None else budget.spent_usd,
    )


pull_traces = task(name="pull-traces", retries=2, retry_delay_seconds=5, retry_condition_fn=is_transient)(pull_source)
"""The pull as a Prefect task: retried twice on an unreachable or failing (5xx) store."""

push_scores = task(name="push-scores", retries=2, retry_delay_seconds=5, retry_condition_fn=is_transient)(push_day)
"""The push as a Prefect task, retried the same way."""


def prepare_process(task_runner: TaskRunnerKind = "pool", workers: int | None = None, symbolic: bool = True) -> None:
    """The start-up work of a process that runs nightly flows, done once (``stef nightly``,
    ``stef demo`` and ``stef backfill`` do it while Prefect's temporary API starts): the scoring
    pool of the ``pool`` runner forked (:func:`tasks.scoring_pool.shared_pool`, symbolic judge
    only), then SciPy's statistics and the other modules of :data:`FLOW_RUN_IMPORTS` imported. A
    flow run without it does the same work when it first needs it. Great Expectations is not imported here: a day whose records
    no expectation can fail does not need it (:func:`tasks.log_checks.validate_logs`).

    Args:
        task_runner: the runner the flows will use.
        workers: its ``max_workers`` (:func:`make_task_runner`).
        symbolic: whether the judge is the symbolic one (a model judge scores in threads).
    """
    from stef.module_import import import_uncollected
    from tasks.scoring_pool import shared_pool, usable_cores

    processes = workers or usable_cores()
    if task_runner == "pool" and symbolic and processes > 1:
        shared_pool(processes)
    # After the fork (the workers need none of them): the drift checks' statistics, and what the
    # first flow run would import on its critical path once the API answers (Prefect's engines,
    # the parameter encoder and its FastAPI import, the drift step's review reader, the Arrow scan
    # of DuckDB's inserts): about 0.25 s more of the time the API boots on the other core.
    import_uncollected("scipy.stats")
    for module in FLOW_RUN_IMPORTS:
        try:
            import_uncollected(module)
        except ImportError:  # another Prefect release may not use it: the flow run imports what it needs
            continue


FLOW_RUN_IMPORTS = (
    "prefect.flow_engine",
    "prefect.task_engine",
    "prefect.utilities.visualization",
    "fastapi.encoders",
    "tasks.review",
    "pyarrow",
)
"""Modules a nightly flow run imports on first use, imported ahead by :func:`prepare_process`
(measured with ``python -X importtime -m flows.cli nightly``: those imported after the temporary
API answered)."""


def run_nightly(
    task_runner: TaskRunnerKind = "pool",
    workers: int | None = None,
    dask_address: str | None = None,
    **params: Any,
) -> NightlySummary:
    """Run :func:`nightly` with its evaluation batches on the chosen task runner.

    Only the evaluation batches use the runner; storing stays one task in the flow's process
    (DuckDB allows one writer process), so the rows are the same with every runner.

    Args:
        task_runner: ``pool`` (default), ``thread``, ``process`` or ``dask`` (see :func:`make_task_runner`).
        workers: pool size / number of local Dask workers (default: the runner's own).
        dask_address: scheduler address of a running Dask cluster (``dask`` only).
        **params: the parameters of :func:`nightly`.

    Returns:
        The run's :class:`NightlySummary`.

    Raises:
        InputError: ``dask`` without prefect-dask installed; and everything :func:`nightly` raises.
    """
    runner = make_task_runner(task_runner, max_workers=workers, address=dask_address)
    summary: NightlySummary = nightly.with_options(task_runner=runner)(**params)
    return summary


def nightly_days(days: Iterable[date | str], **settings: Any) -> list[NightlySummary]:
    """Run :func:`nightly` for each day in order (one flow run per day, stops at the first failure).

    Args:
        days: the days.
        **settings: the other :func:`nightly` parameters (``logs_root``, ``warehouse`` ...).

    Returns:
        One summary per day.
    """
    return [nightly(log_date=day, **settings) for day in days]
