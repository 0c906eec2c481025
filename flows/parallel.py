"""Process-parallel symbolic evaluation for ``stef evaluate`` (CPU-bound: one process per core).

Batches of records are sent to a pool of worker processes and come back in input order, as
finished output lines (:class:`OutputRow`: the JSON text and the few fields the run summary
counts), so the parent only writes text. At most ``2 × workers`` batches are in flight, so
memory stays bounded on inputs of any length. Workers evaluate in their main thread, so the
per-record SIGALRM time cap of :func:`stef.evaluate.evaluate_many` applies there too.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

from stef.models import AgentLogRecord, Band, Evaluation, EvaluationStatus, FilterStatus, Verdict
from stef.rules import RuleBook


@dataclass(frozen=True, slots=True)
class OutputRow:
    """One ``stef evaluate`` output line: the evaluation as JSON text, plus the fields the run's
    summary counts (so nothing has to be parsed again).

    >>> row = OutputRow.of(Evaluation(run_id="r1", status=EvaluationStatus.EVALUATED, score=90.0, band=Band.EXCELLENT))
    >>> row.status.value, row.score, row.json[:15]
    ('evaluated', 90.0, '{"run_id":"r1",')
    """

    json: str
    """``Evaluation.model_dump_json()`` (one line, UTF-8 text, no ASCII escaping)."""
    run_id: str | None
    status: EvaluationStatus
    status_reason: str | None
    score: float | None
    band: Band | None
    filter_status: FilterStatus | None
    verdict: Verdict | None

    @classmethod
    def of(cls, evaluation: Evaluation) -> OutputRow:
        """The output row of one evaluation."""
        return cls(
            json=evaluation.model_dump_json(),
            run_id=evaluation.run_id,
            status=evaluation.status,
            status_reason=evaluation.status_reason,
            score=evaluation.score,
            band=evaluation.band,
            filter_status=evaluation.filter_status,
            verdict=evaluation.verdict,
        )

_WORKER_RULEBOOK: RuleBook | None = None


def default_workers() -> int:
    """Usable cores (CPU affinity aware), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _init_worker(rulebook: RuleBook) -> None:
    global _WORKER_RULEBOOK
    _WORKER_RULEBOOK = rulebook
    gc.freeze()  # the modules and rules inherited from the parent are never garbage: stop rescanning them


def _evaluate_batch(records: list[AgentLogRecord]) -> list[OutputRow]:
    from stef.evaluate import evaluate_many

    return evaluate_many(records, rulebook=_WORKER_RULEBOOK, convert=OutputRow.of)


def evaluate_batches_in_processes(batches: Iterable[list[AgentLogRecord]], rulebook: RuleBook, workers: int) -> Iterator[list[OutputRow]]:
    """Evaluate batches in ``workers`` processes; yield each batch's output rows in input order.

    Args:
        batches: lists of records (each becomes one task).
        rulebook: rules for every record (sent once to each worker).
        workers: number of processes (≥ 2; use :func:`stef.evaluate.evaluate_many` for one).

    Returns:
        An iterator of :class:`OutputRow` lists, one per input batch, same order.
    """
    context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker, initargs=(rulebook,)) as pool:
        pending: deque[Future[list[OutputRow]]] = deque()
        for batch in batches:
            pending.append(pool.submit(_evaluate_batch, batch))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
