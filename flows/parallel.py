"""Process-parallel symbolic evaluation for ``stef evaluate`` (CPU-bound: one process per core).

Batches of records are sent to a pool of worker processes and come back in input order. At most
``2 × workers`` batches are in flight, so memory stays bounded on inputs of any length. Workers
evaluate in their main thread, so the per-record SIGALRM time cap of
:func:`stef.evaluate.evaluate_many` applies there too.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor

from stef.models import AgentLogRecord, Evaluation
from stef.rules import RuleBook

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


def _evaluate_batch(records: list[AgentLogRecord]) -> list[Evaluation]:
    from stef.evaluate import evaluate_many

    return evaluate_many(records, rulebook=_WORKER_RULEBOOK)


def evaluate_batches_in_processes(batches: Iterable[list[AgentLogRecord]], rulebook: RuleBook, workers: int) -> Iterator[list[Evaluation]]:
    """Evaluate batches in ``workers`` processes; yield each batch's evaluations in input order.

    Args:
        batches: lists of records (each becomes one task).
        rulebook: rules for every record (sent once to each worker).
        workers: number of processes (≥ 2; use :func:`stef.evaluate.evaluate_many` for one).

    Returns:
        An iterator of evaluation lists, one per input batch, same order.
    """
    context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker, initargs=(rulebook,)) as pool:
        pending: deque[Future[list[Evaluation]]] = deque()
        for batch in batches:
            pending.append(pool.submit(_evaluate_batch, batch))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
