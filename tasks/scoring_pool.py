"""Symbolic scoring of the nightly batches on every core, without a Prefect API per worker.

The symbolic judge is CPU-bound pure Python, so threads score on one core (the GIL). The
nightly flow's default task runner (:class:`ScoringPoolTaskRunner`) runs its ``evaluate-batch``
tasks in threads of the flow's process, as Prefect's thread runner does (every batch is a task
run with its state and logs), and each task hands its batch to one process pool shared by the
whole process (:func:`shared_pool`, one worker per core). The workers run only
:func:`stef.pipeline.evaluate.evaluate_many`: they never talk to Prefect, so none starts a
temporary API (Prefect's process runner starts one per worker) and the pool is started once per
process, however many flows (days of a backfill) use it.

Workers are forked from the flow's process after the pipeline, the default rules and the
calibrators are loaded, as ``stef evaluate`` does (:mod:`flows.cli.parallel`). A pool whose
worker died (the OOM killer) is replaced, and the batch is scored in the task's own thread:
a lost worker costs time, never a batch.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from prefect.task_runners import ThreadPoolTaskRunner

from stef.llm import request_stop
from stef.pool_workers import exit_with_parent, leave_interrupts_to_parent, settle_scoring_worker
from tasks._runtime import run_logger

if TYPE_CHECKING:
    from stef.llm.settings import JudgeSettings
    from stef.models import AgentLogRecord, CompactEvaluation, ObservedCatalogBook
    from stef.pipeline.rules import RuleBook
    from stef.pipeline.schema_book import SchemaBook

_LOCK = threading.Lock()
_POOL: ProcessPoolExecutor | None = None
_POOL_WORKERS = 0


def usable_cores() -> int:
    """Cores this process may run on (CPU affinity aware, as ``stef evaluate --workers``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def abandoning_on_interrupt(exc_type: type[BaseException] | None) -> AbstractContextManager[None]:
    """Around the shutdown of a task runner whose flow ends with ``exc_type``: for an interrupt
    (Ctrl-C's :class:`KeyboardInterrupt`, Prefect's ``TerminationSignal`` for SIGTERM: a
    :class:`BaseException` that is not an :class:`Exception`), or while the model requests are
    stopped already (:func:`stef.llm.request_stop.stopped`: an interrupt that a library turned
    into another error on its way, e.g. pydantic's serialization error for a Ctrl-C inside a
    serializer), the process's model requests are stopped for the shutdown
    (:func:`stef.llm.request_stop.stopped_block`, whose end lifts the flow's stop): the shutdown
    waits for the task threads, and those would otherwise wait for every queued request (minutes)
    whose answers nobody stores. Otherwise (a normal end, an error) nothing changes.
    """
    if (exc_type is None or issubclass(exc_type, Exception)) and not request_stop.stopped():
        return nullcontext()
    return request_stop.stopped_block()


class InterruptibleThreadPoolTaskRunner(ThreadPoolTaskRunner):  # type: ignore[type-arg]
    """Prefect's thread-pool task runner, ended promptly on an interrupt: its tasks' model requests
    are abandoned before it waits for its threads (:func:`abandoning_on_interrupt`)."""

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        with abandoning_on_interrupt(exc_type):
            super().__exit__(exc_type, exc_value, traceback)


class ScoringPoolTaskRunner(InterruptibleThreadPoolTaskRunner):
    """Prefect's thread-pool task runner whose symbolic ``evaluate-batch`` tasks score in
    :func:`shared_pool` (``processes`` workers) instead of their own thread.

    Args:
        processes: scoring processes (default: one per usable core; 1: score in the task's
            thread, as :class:`prefect.task_runners.ThreadPoolTaskRunner` does).
        max_workers: task threads (default: two per scoring process, so the pool always has
            the next batch queued while a thread reports the previous one to Prefect).
    """

    def __init__(self, processes: int | None = None, max_workers: int | None = None) -> None:
        self.processes = max(1, processes or usable_cores())
        super().__init__(max_workers=max_workers or 2 * self.processes)

    def duplicate(self) -> ScoringPoolTaskRunner:
        """A runner with the same configuration (Prefect duplicates the runner of each flow run)."""
        return type(self)(processes=self.processes, max_workers=self._max_workers)


def _init_worker(parent_pid: int) -> None:
    # A Ctrl-C on the terminal reaches every process of its group: the workers leave it to the
    # flow's process, which stops the run and shuts the pool down (a worker that took it died
    # with a traceback and broke the pool while the run was still being reported).
    leave_interrupts_to_parent()
    exit_with_parent(parent_pid)  # a killed flow process leaves no scoring worker behind
    settle_scoring_worker()  # the inherited modules and rules frozen, fewer young collections


def shared_pool(workers: int) -> ProcessPoolExecutor:
    """The process-wide scoring pool of ``workers`` processes, started on first use.

    A later call asking for more workers replaces it (after its running batches finish). The
    pipeline, the default rules and the shipped calibrators are loaded first, so the forked
    workers inherit them instead of loading them each.

    Raises:
        ValueError: ``workers`` < 1.
    """
    global _POOL, _POOL_WORKERS
    if workers < 1:
        raise ValueError(f"a scoring pool needs at least one worker, got {workers}")
    with _LOCK:
        if _POOL is not None and workers <= _POOL_WORKERS:
            return _POOL
        _preload()
        previous, _POOL = _POOL, None
        if previous is not None:
            previous.shutdown(wait=True)
        context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
        _POOL = ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_init_worker, initargs=(os.getpid(),)
        )
        _POOL_WORKERS = workers
        _POOL.submit(int).result()  # fork the workers now, from this thread, not in a batch's task
        return _POOL


def _discard_pool(broken: ProcessPoolExecutor) -> None:
    global _POOL, _POOL_WORKERS
    with _LOCK:
        if _POOL is broken:
            _POOL, _POOL_WORKERS = None, 0
    broken.shutdown(wait=False, cancel_futures=True)


def shutdown_pool() -> None:
    """Stop the shared pool, if any (its workers exit; the next :func:`shared_pool` starts a new one)."""
    global _POOL, _POOL_WORKERS
    with _LOCK:
        pool, _POOL, _POOL_WORKERS = _POOL, None, 0
    if pool is not None:
        pool.shutdown(wait=True)


def _preload() -> None:
    """Load, before the fork, what every worker needs: the pipeline modules, the default rules, the shipped calibrators."""
    import stef.pipeline.evaluate  # noqa: F401 - inherited by the forked workers
    from stef.pipeline.judge.calibrate import (
        DEFAULT_CALIBRATOR,
        OBSERVED_CALIBRATOR,
        SCHEMA_CALIBRATOR,
        load_calibrator,
    )
    from stef.pipeline.rules import RuleBook

    RuleBook().for_app(None)
    for name in (DEFAULT_CALIBRATOR, SCHEMA_CALIBRATOR, OBSERVED_CALIBRATOR):
        load_calibrator(name)


def _rules(rules_dir: str | None) -> RuleBook:
    """The rule book of ``rules_dir`` (the flow checked the folder: :func:`tasks.evaluate.rulebook`)."""
    from stef.pipeline.rules import RuleBook

    return RuleBook() if rules_dir is None else RuleBook(rules_dirs=(rules_dir,))


_WORKER_RULEBOOKS: dict[str | None, RuleBook] = {}
_WORKER_SCHEMAS: dict[str, SchemaBook] = {}


def _score_in_worker(
    records: Sequence[AgentLogRecord],
    rules_dir: str | None,
    judge: JudgeSettings | None,
    observed: ObservedCatalogBook | None,
    compress: bool = True,
) -> list[CompactEvaluation]:
    """One batch in a pool worker: :func:`score_batch` with the rule book and schemas kept per worker."""
    if rules_dir not in _WORKER_RULEBOOKS:
        _WORKER_RULEBOOKS[rules_dir] = _rules(rules_dir)
    schemas = None
    if judge is not None and judge.schema_dir:
        if judge.schema_dir not in _WORKER_SCHEMAS:
            _WORKER_SCHEMAS[judge.schema_dir] = judge.schemas()  # type: ignore[assignment]
        schemas = _WORKER_SCHEMAS[judge.schema_dir]
    return score_batch(records, _WORKER_RULEBOOKS[rules_dir], judge, schemas, observed, compress)


def score_batch(
    records: Sequence[AgentLogRecord],
    rules: RuleBook,
    judge: JudgeSettings | None,
    schemas: SchemaBook | None,
    observed: ObservedCatalogBook | None,
    compress: bool = True,
) -> list[CompactEvaluation]:
    """Score one batch with the symbolic judge: one compact evaluation per record, in order.

    Args:
        records: the batch.
        rules: the rule book of the run.
        judge: the run's judge settings (their symbolic judge and calibrators), or ``None``.
        schemas: the apps' schemas, or ``None``.
        observed: the apps' observed catalogs, or ``None``.
        compress: zlib-compress each evidence JSON (:meth:`stef.models.Evaluation.compact`).
    """
    from stef.models import Evaluation
    from stef.pipeline.evaluate import evaluate_many

    return evaluate_many(
        list(records),
        rulebook=rules,
        judge=judge.symbolic_judge() if judge is not None else None,
        convert=Evaluation.compact if compress else Evaluation.compact_plain,
        schemas=schemas,
        observed=observed,
    )


def score_in_pool(
    records: Sequence[AgentLogRecord],
    rules_dir: str | None,
    judge: JudgeSettings | None,
    observed: ObservedCatalogBook | None,
    workers: int,
    compress: bool = True,
) -> list[CompactEvaluation]:
    """Score one batch in :func:`shared_pool` and wait for it (the calling thread holds no GIL meanwhile).

    Args:
        records: the batch (pickled to the worker).
        rules_dir: folder of ``<app_id>.json`` rule files, or ``None`` for the bundled rules.
        judge: the run's judge settings (symbolic), or ``None``.
        observed: the observed catalogs of the day, or ``None``.
        workers: size of the shared pool.
        compress: zlib-compress each evidence JSON (:meth:`stef.models.Evaluation.compact`).

    Returns:
        One :class:`stef.models.CompactEvaluation` per record, in order, the same as
        :func:`score_batch` in this process.

    Raises:
        RulesError, SchemaError: as :func:`tasks.evaluate.evaluate_batch`.
    """
    pool = shared_pool(workers)
    try:
        return pool.submit(_score_in_worker, tuple(records), rules_dir, judge, observed, compress).result()
    except BrokenProcessPool as exc:
        _discard_pool(pool)
        run_logger().warning("a scoring process died (%s); this batch is scored in the task's thread", exc)
        return score_batch(records, _rules(rules_dir), judge, judge.schemas() if judge else None, observed, compress)


def pool_processes_of(task_runner: Any) -> int:
    """Scoring processes of a flow run's task runner: :attr:`ScoringPoolTaskRunner.processes`, else 0 (score in the task)."""
    return task_runner.processes if isinstance(task_runner, ScoringPoolTaskRunner) else 0
