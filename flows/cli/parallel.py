"""Process-parallel symbolic evaluation for ``stef evaluate`` (CPU-bound: one process per core).

Batches of raw log lines are sent to a pool of worker processes, which decode, validate and
evaluate them; they come back in input order as finished output lines (:class:`OutputRow`: the
JSON text and the few fields the run summary counts), so the parent only reads bytes and writes
text. At most ``2 × workers`` batches are in flight, so memory stays bounded on inputs of any
length. Workers evaluate in their main thread, so the per-record SIGALRM time cap of
:func:`stef.pipeline.evaluate.evaluate_many` applies there too.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from stef.errors import InputError
from stef.models import BATCH_SIZE, AgentLogRecord, Band, Evaluation, EvaluationStatus, FilterStatus, Verdict
from stef.pool_workers import exit_with_parent, leave_interrupts_to_parent, settle_scoring_worker

if TYPE_CHECKING:
    from stef.logs import LogLine
    from stef.models import ObservedCatalogBook
    from stef.pipeline.judge.symbolic import SymbolicJudge
    from stef.pipeline.rules import RuleBook
    from stef.pipeline.schema_book import SchemaBook


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
    p_correct: float | None
    band: Band | None
    filter_status: FilterStatus | None
    verdict: Verdict | None
    rejection: str | None = None
    """Why the line was rejected (reader or log contract), ``None`` for a record that was evaluated."""
    origin: tuple[str, int] | None = None
    """``(file, line number)`` of a record that met the per-record expectations of the log
    contract, set by the workers: the parent checks that its ``run_id`` is unique
    (:func:`unique_run_ids`); ``None`` for rows already checked or rejected."""

    @classmethod
    def of(
        cls, evaluation: Evaluation, origin: tuple[str, int] | None = None, rejection: str | None = None
    ) -> OutputRow:
        """The output row of one evaluation (``origin``, ``rejection``: see the attributes)."""
        return cls(
            json=evaluation.model_dump_json(),
            run_id=evaluation.run_id,
            status=evaluation.status,
            status_reason=evaluation.status_reason,
            score=evaluation.score,
            p_correct=evaluation.p_correct,
            band=evaluation.band,
            filter_status=evaluation.filter_status,
            verdict=evaluation.verdict,
            rejection=rejection,
            origin=origin,
        )


_WORKER_RULEBOOK: RuleBook | None = None
_WORKER_SCHEMAS: SchemaBook | None = None
_WORKER_OBSERVED: ObservedCatalogBook | None = None
_WORKER_JUDGE: SymbolicJudge | None = None


def default_workers() -> int:
    """Usable cores (CPU affinity aware), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def with_dialect(record: AgentLogRecord, dialect: str | None) -> AgentLogRecord:
    """The record, with ``dialect`` filled in when it names none (``None``: unchanged)."""
    if dialect is None or record.dialect:
        return record
    return record.model_copy(update={"dialect": dialect})


def rejected_row(line: LogLine) -> OutputRow:
    """The ``invalid_input`` output row of a log line that is not a valid record, naming the
    file, the line number and the reason."""
    from stef.pipeline.evaluate import rejected_evaluation

    return OutputRow.of(
        rejected_evaluation(line.run_id, f"{Path(line.source).name} line {line.line_number}: {line.reason}"),
        rejection=line.reason or "rejected",
    )


def _init_worker(
    parent_pid: int,
    rulebook: RuleBook,
    schemas: SchemaBook | None,
    observed: ObservedCatalogBook | None,
    judge: SymbolicJudge | None = None,
) -> None:
    global _WORKER_RULEBOOK, _WORKER_SCHEMAS, _WORKER_OBSERVED, _WORKER_JUDGE
    leave_interrupts_to_parent()  # Ctrl-C and SIGTERM are the command's to handle (one line, no traceback)
    exit_with_parent(parent_pid)  # a killed `stef evaluate` leaves no worker behind
    _WORKER_RULEBOOK = rulebook
    _WORKER_SCHEMAS = schemas
    _WORKER_OBSERVED = observed
    _WORKER_JUDGE = judge
    settle_scoring_worker()  # the inherited modules and rules frozen, fewer young collections


def evaluate_raw_lines(
    source: str,
    numbered_lines: list[tuple[int, bytes]],
    rulebook: RuleBook,
    dialect: str | None = None,
    schemas: SchemaBook | None = None,
    observed: ObservedCatalogBook | None = None,
    judge: SymbolicJudge | None = None,
) -> list[OutputRow]:
    """Read and evaluate raw log lines: one output row per non-blank line, in order.

    Args:
        source: the file the lines come from (named in rejection reasons).
        numbered_lines: ``(line number, bytes)`` pairs (:func:`stef.logs.read_raw_lines`).
        rulebook: resolves each record's ``app_id`` to its rules.
        dialect: dialect for records that name none.
        schemas: the apps' schemas (``--schema-dir``), or ``None``.
        observed: the apps' observed catalogs (``--observed-catalog``), or ``None``.

    Returns:
        :class:`OutputRow` items; a line that is not a valid record, or breaks a per-record
        expectation of the log contract (:func:`stef.log_contract.record_problem`), gets
        :func:`rejected_row`; the others carry their ``origin`` for :func:`unique_run_ids`.
    """
    from stef.log_contract import record_problem
    from stef.logs import parse_line
    from stef.pipeline.evaluate import evaluate_many

    rows: list[OutputRow | int] = []  # a finished row, or the line number of a record to evaluate
    records: list[AgentLogRecord] = []
    for number, raw in numbered_lines:
        line = parse_line(raw, source, number)
        if line is None:
            continue  # blank line
        problem = record_problem(line)
        if problem is not None:
            line = replace(line, record=None, reason=problem)
        if line.record is None:
            rows.append(rejected_row(line))
        else:
            rows.append(number)
            records.append(with_dialect(line.record, dialect))
    evaluated = iter(
        evaluate_many(
            records,
            rulebook=rulebook,
            judge=judge,
            default_dialect=dialect,  # also the app's dialect its schema file is read in (record_schema)
            convert=OutputRow.of,
            schemas=schemas,
            observed=observed,
        )
    )
    return [row if isinstance(row, OutputRow) else replace(next(evaluated), origin=(source, row)) for row in rows]


def unique_run_ids(rows: Iterable[OutputRow]) -> Iterator[OutputRow]:
    """``rows`` in order, with every row whose ``run_id`` an earlier row holds turned into the
    ``invalid_input`` row of a duplicate (log contract: ``run_id`` is unique within the input;
    :class:`stef.log_contract.LogContractCheck`, the first line keeps it).

    Only rows with an ``origin`` are checked (records that met the other expectations); the
    returned rows carry none.
    """
    from stef.log_contract import LogContractCheck
    from stef.logs import LogLine

    check = LogContractCheck()
    for row in rows:
        if row.origin is None or row.run_id is None:
            yield row
            continue
        source, number = row.origin
        reason = check.admit_run_id(row.run_id, source, number)
        if reason is None:
            yield replace(row, origin=None)
        else:
            yield rejected_row(LogLine(source, number, None, reason, "", row.run_id))


def _evaluate_raw_batch(source: str, numbered_lines: list[tuple[int, bytes]], dialect: str | None) -> list[OutputRow]:
    assert _WORKER_RULEBOOK is not None, "worker not initialised"
    return evaluate_raw_lines(
        source, numbered_lines, _WORKER_RULEBOOK, dialect, _WORKER_SCHEMAS, _WORKER_OBSERVED, _WORKER_JUDGE
    )


def _raw_batches(files: Sequence[Path], batch_size: int) -> Iterator[tuple[str, list[tuple[int, bytes]]]]:
    from stef.logs import read_raw_lines

    for path in files:
        try:
            lines = read_raw_lines(path)
            while batch := list(islice(lines, batch_size)):
                yield str(path), batch
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def evaluate_files_in_processes(
    files: Sequence[Path],
    rulebook: RuleBook,
    workers: int,
    dialect: str | None = None,
    batch_size: int = BATCH_SIZE,
    schemas: SchemaBook | None = None,
    observed: ObservedCatalogBook | None = None,
    judge: SymbolicJudge | None = None,
) -> Iterator[OutputRow]:
    """Evaluate log files in ``workers`` processes; yield one output row per non-blank line, in order.

    The parent only reads raw lines and writes rows: decoding, validation and evaluation all
    happen in the workers, so the parent takes almost no CPU from them.

    Args:
        files: JSONL log files, read in this order.
        rulebook: rules for every record (sent once to each worker).
        workers: number of processes (≥ 2; use :func:`stef.pipeline.evaluate.evaluate_many` for one).
        dialect: dialect for records that name none.
        batch_size: lines per task.
        schemas: the apps' schemas (``--schema-dir``), sent once to each worker.
        observed: the apps' observed catalogs (``--observed-catalog``), likewise.
        judge: the symbolic judge (``None``: the default one), likewise (``--calibrator``).

    Returns:
        An iterator of :class:`OutputRow`, one per non-blank input line, same order; the log
        contract applied (:func:`unique_run_ids` runs here, in the parent).

    Raises:
        InputError: a file cannot be read.
    """
    import stef.logs
    import stef.pipeline.evaluate  # noqa: F401 - imported once here, inherited by the forked workers (and frozen there)
    from stef.pipeline.judge.calibrate import (
        DEFAULT_CALIBRATOR,
        OBSERVED_CALIBRATOR,
        SCHEMA_CALIBRATOR,
        load_calibrator,
    )

    rulebook.for_app(None)  # the default rules and the calibrator are loaded once, before the fork
    load_calibrator(DEFAULT_CALIBRATOR)  # the same cache key as the default judge's call
    if schemas is not None:
        load_calibrator(SCHEMA_CALIBRATOR)
    if observed is not None:
        load_calibrator(OBSERVED_CALIBRATOR)
    return unique_run_ids(_rows_of_pool(files, rulebook, workers, dialect, batch_size, schemas, observed, judge))


def _rows_of_pool(
    files: Sequence[Path],
    rulebook: RuleBook,
    workers: int,
    dialect: str | None,
    batch_size: int,
    schemas: SchemaBook | None,
    observed: ObservedCatalogBook | None,
    judge: SymbolicJudge | None = None,
) -> Iterator[OutputRow]:
    """The rows of :func:`evaluate_files_in_processes` as the workers return them (uniqueness unchecked)."""
    context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_init_worker,
        initargs=(os.getpid(), rulebook, schemas, observed, judge),
    ) as pool:
        pending: deque[Future[list[OutputRow]]] = deque()
        try:
            for source, batch in _raw_batches(files, batch_size):
                pending.append(pool.submit(_evaluate_raw_batch, source, batch, dialect))
                if len(pending) >= 2 * workers:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        except BaseException:  # an unreadable file, Ctrl-C, or the consumer stopped: drop the queued batches
            # and wait for the pool's manager thread here (the process would wait for it at exit
            # anyway, until the batches the workers hold are done). Leaving it running raced with
            # Python's exit hook on 3.11 (concurrent.futures.process._python_exit woke it through
            # a pipe the thread had just closed): "OSError: [Errno 9] Bad file descriptor", a
            # traceback and exit code 1 after the command's own error line, in most runs.
            pool.shutdown(wait=True, cancel_futures=True)
            raise
