"""Task that scores one batch of records with the STEF pipeline."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import overload

from prefect import task
from prefect.cache_policies import NO_CACHE

from stef.errors import RulesError
from stef.llm.settings import JudgeSettings
from stef.models import BATCH_SIZE, AgentLogRecord, CompactEvaluation, Evaluation, ObservedCatalogBook
from stef.pipeline.evaluate import evaluate_many
from stef.pipeline.rules import RuleBook


def batches(records: list[AgentLogRecord], size: int = BATCH_SIZE) -> list[list[AgentLogRecord]]:
    """Split ``records`` into consecutive batches of at most ``size``.

    Raises:
        ValueError: ``size`` < 1.

    >>> [len(b) for b in batches([AgentLogRecord(run_id=str(i), question="q", sql="SELECT 1") for i in range(5)], 2)]
    [2, 2, 1]
    """
    if size < 1:
        raise ValueError(f"batch size must be at least 1, got {size}")
    return [records[start : start + size] for start in range(0, len(records), size)]


POOL_BATCH_MAX = 1_000
"""Most records per evaluation task when a nightly scores in the process pool (see :func:`pool_task_count`):
larger tasks raised the peak memory of a 100k-record nightly's command (1,551 MiB with 2,500
records per task against 1,385–1,408 MiB with 500 or 1,000; issue 20 bounds it at 1.5 GB)."""


def pool_task_count(records: int, processes: int) -> int:
    """Evaluation tasks for a day scored by ``processes`` pool processes (:func:`split_evenly` cuts it).

    Each task run costs Prefect's temporary API about 0.1 s of CPU (its states and logs, recorded
    by the API's services; measured on 2 cores: a 20k-record nightly in 40 tasks of 500 kept the
    API busy 9.4–9.6 s of CPU, in 8 tasks of 2,500 6.3–7.2 s), time the scoring processes lose on
    a small machine. So the day gets as few tasks as keep each at most :data:`POOL_BATCH_MAX`
    records, rounded up to a multiple of ``processes`` (every process gets the same share to the
    end), but never more than batches of :data:`stef.models.BATCH_SIZE` would make: a day of up
    to 500 records is one task, and a small day may get fewer tasks than processes (1,000 records
    on 4 processes: 2 tasks of 500).

    Args:
        records: valid records of the day (≥ 0).
        processes: scoring processes of the pool (≥ 1).

    Returns:
        The number of tasks (≥ 1).

    Raises:
        ValueError: ``processes`` < 1 or ``records`` < 0.

    >>> [pool_task_count(n, 2) for n in (0, 120, 600, 1_000, 20_000, 21_000, 100_000)]
    [1, 1, 2, 2, 20, 22, 100]
    >>> pool_task_count(5_000, 4), pool_task_count(1_000, 4), pool_task_count(20_000, 1)
    (8, 2, 20)
    """
    if processes < 1:
        raise ValueError(f"a scoring pool needs at least one process, got {processes}")
    if records < 0:
        raise ValueError(f"records must be at least 0, got {records}")
    tasks = -(-records // POOL_BATCH_MAX)
    tasks = -(-tasks // processes) * processes
    return max(1, min(tasks, -(-records // BATCH_SIZE)))


def split_evenly(records: list[AgentLogRecord], parts: int) -> list[list[AgentLogRecord]]:
    """Split ``records`` into ``parts`` consecutive batches whose sizes differ by at most one (the
    first ones larger); fewer records than ``parts`` give one batch per record, none give none.

    Raises:
        ValueError: ``parts`` < 1.

    >>> [len(b) for b in split_evenly([AgentLogRecord(run_id=str(i), question="q", sql="SELECT 1") for i in range(10)], 4)]
    [3, 3, 2, 2]
    """
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    size, extra = divmod(len(records), parts)
    out: list[list[AgentLogRecord]] = []
    start = 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        if end > start:
            out.append(records[start:end])
        start = end
    return out


def evaluation_batches(
    records: list[AgentLogRecord], batch_size: int | None, processes: int
) -> list[list[AgentLogRecord]]:
    """The evaluation batches of a nightly (one task each).

    Args:
        records: the day's valid records.
        batch_size: records per batch chosen by the user, or ``None``.
        processes: scoring processes of the pool that scores the day (symbolic judge, ``pool``
            runner), 0 when the batches are scored in the task runner's threads, on Dask or by a
            model judge.

    Returns:
        Batches of ``batch_size`` when given; else, with ``processes`` > 0,
        :func:`pool_task_count` batches of even size (:func:`split_evenly`); else batches of
        :data:`stef.models.BATCH_SIZE` (on a cluster small tasks spread the day).

    Raises:
        ValueError: ``batch_size`` < 1 or ``processes`` < 0.
    """
    if processes < 0:
        raise ValueError(f"processes must be at least 0, got {processes}")
    if batch_size is not None:
        return batches(records, batch_size)
    if processes > 0:
        return split_evenly(records, pool_task_count(len(records), processes))
    return batches(records, BATCH_SIZE)


class RecordBatch(Sequence[AgentLogRecord]):
    """One evaluation batch, passed to a task run as a single opaque value.

    Prefect walks list / tuple / pydantic parameters looking for futures, and Dask rewrites
    tuple subclasses such as ``prefect.utilities.annotations.quote`` into plain tuples; this
    class is neither, so every task runner (thread, process, dask) hands the batch over as is.

    >>> len(RecordBatch([AgentLogRecord(run_id="r1", question="q", sql="SELECT 1")]))
    1
    """

    __slots__ = ("_records",)

    def __init__(self, records: Iterable[AgentLogRecord]) -> None:
        self._records = tuple(records)

    @overload
    def __getitem__(self, index: int) -> AgentLogRecord: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[AgentLogRecord]: ...
    def __getitem__(self, index: int | slice) -> AgentLogRecord | Sequence[AgentLogRecord]:
        return self._records[index]

    def __len__(self) -> int:
        return len(self._records)

    def __getstate__(self) -> tuple[AgentLogRecord, ...]:
        return self._records

    def __setstate__(self, state: tuple[AgentLogRecord, ...]) -> None:
        self._records = state


def rulebook(rules_dir: str | None) -> RuleBook:
    """The rule book for ``rules_dir`` (searched before the bundled rules), or the bundled rules.

    Raises:
        RulesError: ``rules_dir`` is given but is not a folder.
    """
    if rules_dir is None:
        return RuleBook()
    if not Path(rules_dir).is_dir():
        raise RulesError(f"{rules_dir}: rules folder does not exist (expected a folder of <app_id>.json files)")
    return RuleBook(rules_dirs=(rules_dir,))


@task(name="evaluate-batch", cache_policy=NO_CACHE, persist_result=False)
def evaluate_batch(
    records: Sequence[AgentLogRecord],
    rules_dir: str | None = None,
    judge: JudgeSettings | None = None,
    warehouse_path: str | None = None,
    compact: bool = False,
    observed: ObservedCatalogBook | None = None,
    processes: int = 0,
    compress: bool = True,
) -> list[Evaluation] | list[CompactEvaluation]:
    """Evaluate one batch with :func:`stef.pipeline.evaluate.evaluate_many` (symbolic judge), or with the
    LLM judge of ``judge`` (:class:`stef.llm.evaluate.LLMEvaluator`, STEF paper §2.D).

    With a model, the batch's requests run concurrently (``judge.concurrency``) and verdicts are
    cached in the warehouse's ``judge_cache`` table, so a rerun or backfill of the same records
    makes no model call; ``judge.max_cost_usd`` is the run's budget, shared by the batches of the
    run in this process (``judge.run_key``) or split evenly over them (``judge.budget_shares``).

    Args:
        records: the batch (:func:`evaluation_batches` cuts a nightly's day; a :class:`RecordBatch`
            from a flow).
        rules_dir: folder of ``<app_id>.json`` rule files, or ``None`` for the bundled rules.
        judge: judge settings (``None``: symbolic), with the schema folder (``schema_dir``) if any.
        warehouse_path: the warehouse holding the judge cache (only used with a model).
        compact: return :class:`stef.models.CompactEvaluation` rows (keys + evidence JSON,
            about 3.3 KB of text or 1.3 KB compressed instead of 20 KB per record; serialised in
            the worker). The nightly flow does.
        observed: observed catalogs learned by the flow for this day (``None``: those of
            ``judge.observed_catalog``, if any).
        processes: with the symbolic judge and ``compact``, score in the process-wide pool of
            this many worker processes (:func:`tasks.scoring_pool.score_in_pool`; the nightly
            flow's default runner); 0 or 1: in this task's own thread or process. The rows are
            the same either way.
        compress: with ``compact``, zlib-compress the evidence JSON (the nightly flow keeps a
            small day's as text: :func:`stef.models.evidence_compressed`).

    Returns:
        One :class:`stef.models.Evaluation` (or its compact form) per record, in order; a bad record gets a typed
        status and a failed model call the symbolic verdict with its reason: it never fails the
        batch.

    Raises:
        RulesError: ``rules_dir`` is missing, or a rule file in it is invalid.
        SchemaError: ``judge.schema_dir`` is missing, or an app's schema file in it is unreadable.
        WarehouseError: the judge cache cannot be read or written.
    """
    records = list(records)
    if observed is None and judge is not None:
        observed = judge.observed()
    if (judge is None or judge.is_symbolic) and compact and processes > 1:
        from tasks.scoring_pool import score_in_pool

        return score_in_pool(records, rules_dir, judge, observed, processes, compress)
    if judge is None or judge.is_symbolic:
        schemas = judge.schemas() if judge is not None else None
        symbolic = judge.symbolic_judge() if judge is not None else None
        if compact:
            return evaluate_many(
                records,
                rulebook=rulebook(rules_dir),
                judge=symbolic,
                convert=Evaluation.compact if compress else Evaluation.compact_plain,
                schemas=schemas,
                observed=observed,
            )
        return evaluate_many(records, rulebook=rulebook(rules_dir), judge=symbolic, schemas=schemas, observed=observed)
    from stef.llm.evaluate import LLMEvaluator
    from tasks._runtime import run_logger
    from warehouse.judge_cache import DuckDBJudgeCache

    evaluator = LLMEvaluator(judge, cache=DuckDBJudgeCache(warehouse_path), observed=observed)
    evaluations = evaluator.evaluate_many(records, rulebook(rules_dir))
    run_logger().info("%s", evaluator.stats.summary())
    return [e.compact(compress) for e in evaluations] if compact else evaluations
