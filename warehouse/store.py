"""Writing one day: agent runs, evaluations and quarantine rows, made visible in one transaction.

One transaction replaces the day's rows: a run killed at any point leaves the day as it was
before, and a rerun stores every record exactly once. A day whose texts fit in half of DuckDB's
memory limit is inserted inside that transaction; a larger one is first written to temporary
staging tables in committed chunks (bounded memory), which the transaction then moves over.

Counting rule (nothing is dropped silently). Every non-blank log line of the day ends up as
exactly one of:

* a valid record: one ``agent_runs`` row and one ``evaluations`` row;
* a quarantined line (``LogLine.record is None``, or a valid record whose ``run_id`` is already
  stored for another day): one ``quarantine`` row with the reason and line number, plus an
  ``evaluations`` row (status ``invalid_input``, made by the caller with
  :func:`stef.pipeline.evaluate.rejected_evaluation`) only when the line has a ``run_id`` that no other
  line of the day and no other day already uses.

Hence, per day: ``lines == agent_runs rows + quarantine rows`` and
``lines == evaluations rows + quarantined lines without an evaluation``
(:class:`StoreSummary` reports both sides).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb
import polars as pl

from stef.logs import LogLine, decode_json_object, encodable_text
from stef.models import EVALUATOR_VERSION, AgentLogRecord, CompactEvaluation, EvaluationStatus, StoredEvaluation
from warehouse.connection import MEMORY_LIMIT_ENV_VAR, default_memory_limit
from warehouse.errors import WarehouseError

if TYPE_CHECKING:
    import pyarrow as pa

UNKNOWN = "unknown"
"""Agent id / version of a quarantined JSON line that names none (AgentLogRecord's default)."""

_RUNS_SCHEMA = pl.Schema(
    {
        "run_id": pl.String,
        "timestamp": pl.String,
        "agent_id": pl.String,
        "agent_version": pl.String,
        "question": pl.String,
        "enriched_question": pl.String,
        "sql": pl.String,
        "dialect": pl.String,
        "app_id": pl.String,
        "tool_calls": pl.String,
        "tokens": pl.String,
        "latency_ms": pl.Float64,
        "cost_usd": pl.Float64,
        "model_version": pl.String,
        "prompt_version": pl.String,
        "source_file": pl.String,
        "line_number": pl.Int32,
        "raw": pl.String,
    }
)
"""Columns of an ``agent_runs`` chunk as the store builds it. The chunks are polars frames (Arrow
memory, scanned by DuckDB without a copy): pyarrow's conversion of Python lists imports pandas
to test each input for a pandas type, 0.25-0.5 s of every run that stores a day."""

_EVALUATIONS_SCHEMA = pl.Schema(
    {
        "run_id": pl.String,
        "evaluator_version": pl.String,
        "agent_id": pl.String,
        "agent_version": pl.String,
        "app_id": pl.String,
        "evidence": pl.String,
    }
)

_EVIDENCE_FIELDS = {
    "status": "VARCHAR",
    "status_reason": "VARCHAR",
    "score": "DOUBLE",
    "band": "VARCHAR",
    "filter_status": "VARCHAR",
    "verdict": "VARCHAR",
    "confidence": "DOUBLE",
    "p_correct": "DOUBLE",
    "judge": "VARCHAR",
    "judge_fallback_reason": "VARCHAR",
    "dialect": "VARCHAR",
    "suspected_errors": "JSON",
    "flags": "JSON",
    "cost_usd": "DOUBLE",
    "tokens": "BIGINT",
}
"""The flat ``evaluations`` columns read from the evidence (``Evaluation.model_dump_json``), with
their DuckDB types: the JSON is the one source of every stored field, parsed once per row."""


def _insert_evaluations(target: str) -> str:
    """The insert of one Arrow chunk of evaluations (``_stef_evaluations``) into ``target``, the
    staging table or ``evaluations`` (see :func:`_insert_rows`)."""
    return f"""
INSERT INTO {target} BY NAME
SELECT
    run_id,
    evaluator_version,
    $log_date::DATE AS log_date,
    agent_id,
    agent_version,
    app_id,
    {", ".join(f"e.{name} AS {name}" for name in _EVIDENCE_FIELDS)},
    evidence,
    $now::TIMESTAMP AS evaluated_at
FROM (SELECT *, from_json(evidence, '{json.dumps(_EVIDENCE_FIELDS)}') AS e FROM _stef_evaluations)
"""


_QUARANTINE_SCHEMA = pl.Schema(
    {
        "source_file": pl.String,
        "line_number": pl.Int32,
        "run_id": pl.String,
        "agent_id": pl.String,
        "agent_version": pl.String,
        "reason": pl.String,
        "raw": pl.String,
    }
)


@dataclass(frozen=True, slots=True)
class StoreSummary:
    """What :func:`store_day` wrote for one day.

    Attributes:
        log_date: the day.
        evaluator_version: the evaluator version whose evaluations were replaced.
        lines: non-blank log lines received.
        runs: ``agent_runs`` rows written (valid records).
        evaluations: ``evaluations`` rows written.
        evaluated: of those, rows with status ``evaluated`` (they carry a score).
        quarantined: ``quarantine`` rows written.
        quarantined_without_evaluation: quarantined lines with no ``evaluations`` row (no
            ``run_id``, or a ``run_id`` already used by another line or day).

    Invariants: ``lines == runs + quarantined == evaluations + quarantined_without_evaluation``.
    """

    log_date: date
    evaluator_version: str
    lines: int
    runs: int
    evaluations: int
    evaluated: int
    quarantined: int
    quarantined_without_evaluation: int


def _text(value: Any) -> str | None:
    return (
        encodable_text(str(value))
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value)
        else None
    )


Identity = tuple[str | None, str | None, str | None]
"""``(agent_id, agent_version, app_id)`` of a log line."""


def line_identity(line: LogLine) -> Identity:
    """``(agent_id, agent_version, app_id)`` of a line, read from the raw JSON when it was rejected.

    A rejected line that is a JSON object gets the ids it names (``"unknown"`` when absent, as
    :class:`stef.models.AgentLogRecord` would give); a line that is not a JSON object names no
    agent: ``(None, None, None)``.

    >>> from stef.logs import parse_line
    >>> line_identity(parse_line(b'{"run_id": "r9", "agent_id": "sales-bot", "sql": "SELECT 1"}', "a.jsonl", 3))
    ('sales-bot', 'unknown', None)
    >>> line_identity(parse_line(b'{"run_id": "r9", "agent_id": "sales-b', "a.jsonl", 4))
    (None, None, None)
    """
    if line.record is not None:
        return line.record.agent_id, line.record.agent_version, line.record.app_id
    payload = decode_json_object(line.raw)
    if payload is None:
        return None, None, None
    return (
        _text(payload.get("agent_id")) or UNKNOWN,
        _text(payload.get("agent_version")) or UNKNOWN,
        _text(payload.get("app_id")),
    )


INSERT_CHUNK_ROWS = 10_000
"""Rows per Arrow table written to a staging table (each chunk committed on its own): bounds the
Arrow copy and DuckDB's uncommitted rows of a large day to one chunk."""
T = TypeVar("T")
INSERT_CHUNK_BYTES = 16 * 1024 * 1024
"""Text per staging chunk, at most (16 MiB; a single larger row is a chunk of its own): a few lines
near the 16 MiB line cap would otherwise make one chunk larger than DuckDB's memory limit."""


def _chunks(rows: Sequence[T], size_of: Callable[[T], int]) -> Iterator[Sequence[T]]:
    """``rows`` in consecutive slices of at most :data:`INSERT_CHUNK_ROWS` rows and, unless one row
    alone is larger, :data:`INSERT_CHUNK_BYTES` of ``size_of``.

    >>> [[len(row) for row in chunk] for chunk in _chunks(["a" * 10, "b", "c" * 20_000_000, "d"], len)]
    [[10, 1], [20000000], [1]]
    """
    start, size = 0, 0
    for index, row in enumerate(rows):
        row_size = size_of(row)
        if index > start and (index - start >= INSERT_CHUNK_ROWS or size + row_size > INSERT_CHUNK_BYTES):
            yield rows[start:index]
            start, size = index, 0
        size += row_size
    if start < len(rows):
        yield rows[start:]


def _run_size(run: tuple[LogLine, AgentLogRecord]) -> int:
    """Characters of one ``agent_runs`` row's texts (the raw line holds them again)."""
    line, record = run
    return len(line.raw) + len(record.question) + len(record.sql) + len(record.enriched_question or "")


def _evaluation_size(row: tuple[StoredEvaluation, Identity]) -> int:
    """About the characters of one evaluation's evidence JSON (a compact one: :meth:`CompactEvaluation.evidence_size`)."""
    evaluation = row[0]
    return evaluation.evidence_size() if isinstance(evaluation, CompactEvaluation) else 4096


def _quarantine_size(row: tuple[LogLine, str]) -> int:
    """Characters of one ``quarantine`` row's texts."""
    return len(row[0].raw) + len(row[1])


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _evaluator_version(evaluations: Sequence[StoredEvaluation], evaluator_version: str | None) -> str:
    versions = {e.evaluator_version for e in evaluations}
    if evaluator_version is not None:
        versions.add(evaluator_version)
    if len(versions) > 1:
        raise WarehouseError(f"evaluations of one day must share one evaluator version, got {sorted(versions)}")
    return versions.pop() if versions else EVALUATOR_VERSION


def _where(line: LogLine) -> str:
    return f"{line.source}:{line.line_number}"


def _owners(lines: Sequence[LogLine], evaluations: Sequence[StoredEvaluation]) -> dict[str, int]:
    """Map each evaluation's run_id to the index of the line it belongs to; check the contract."""
    valid: dict[str, int] = {}
    rejected: dict[str, int] = {}
    for index, line in enumerate(lines):
        if line.record is not None:
            if line.record.run_id in valid:
                raise WarehouseError(
                    f"run_id {line.record.run_id!r} is a valid record twice ({_where(lines[valid[line.record.run_id]])} "
                    f"and {_where(line)}); quarantine duplicates before storing (tasks.validate_logs does)"
                )
            valid[line.record.run_id] = index
        elif line.run_id is not None:
            rejected.setdefault(line.run_id, index)
    owners: dict[str, int] = {}
    for evaluation in evaluations:
        run_id = evaluation.run_id
        if run_id is None:
            raise WarehouseError(
                "an evaluation without run_id cannot be stored (its key is run_id + evaluator_version)"
            )
        if run_id in owners:
            raise WarehouseError(f"two evaluations for run_id {run_id!r}; pass one per run")
        owner = valid.get(run_id, rejected.get(run_id))
        if owner is None:
            raise WarehouseError(f"evaluation for run_id {run_id!r} matches no log line of the day")
        owners[run_id] = owner
    missing = [run_id for run_id in valid if run_id not in owners]
    if missing:
        raise WarehouseError(
            f"{len(missing)} valid record(s) have no evaluation, first run_id {missing[0]!r} "
            f"({_where(lines[valid[missing[0]]])}); evaluate every record before storing"
        )
    return owners


def stored_elsewhere(
    conn: duckdb.DuckDBPyConnection, run_ids: list[str], evaluator_version: str, log_date: date
) -> dict[str, date]:
    """run_id -> log date for the run ids of ``run_ids`` already stored for another day than
    ``log_date`` (as a run, or as an evaluation of ``evaluator_version``): :func:`store_day`
    quarantines such records ("duplicate run_id"); the nightly flow counts them as bad lines first."""
    if not run_ids:
        return {}
    with registered(conn, "_stef_incoming_ids", pl.DataFrame({"run_id": run_ids}, schema={"run_id": pl.String})):
        rows = conn.execute(
            """
            SELECT run_id, min(log_date) FROM (
                SELECT run_id, log_date FROM agent_runs
                UNION ALL
                SELECT run_id, log_date FROM evaluations WHERE evaluator_version = $version
            ) WHERE run_id IN (SELECT run_id FROM _stef_incoming_ids) AND log_date <> $log_date
            GROUP BY run_id
            """,
            {"version": evaluator_version, "log_date": log_date},
        ).fetchall()
    return {str(run_id): day for run_id, day in rows}


@contextmanager
def registered(conn: duckdb.DuckDBPyConnection, name: str, table: pl.DataFrame | pa.Table) -> Iterator[None]:
    """Expose a polars frame or an Arrow table to SQL as ``name`` for the duration of the block
    (bulk inserts/joins; DuckDB scans either's Arrow memory).

    When the block fails inside a transaction, DuckDB has aborted the transaction and refuses the
    unregistering too ("Current transaction is aborted"): that second error is dropped so the
    block's own error (a constraint violated …) is the one reported.
    """
    conn.register(name, table)
    try:
        yield
    except BaseException:
        try:
            conn.unregister(name)
        except duckdb.Error:
            pass  # the transaction is aborted; the error of the block is the one to report
        raise
    conn.unregister(name)


def _runs_table(runs: Sequence[tuple[LogLine, AgentLogRecord]]) -> pl.DataFrame:
    columns: dict[str, list[Any]] = {name: [] for name in _RUNS_SCHEMA}
    for line, record in runs:
        columns["run_id"].append(record.run_id)
        columns["timestamp"].append(record.timestamp)
        columns["agent_id"].append(record.agent_id)
        columns["agent_version"].append(record.agent_version)
        columns["question"].append(record.question)
        columns["enriched_question"].append(record.enriched_question)
        columns["sql"].append(record.sql)
        columns["dialect"].append(record.dialect)
        columns["app_id"].append(record.app_id)
        columns["tool_calls"].append(_json_or_none(record.tool_calls))
        columns["tokens"].append(_json_or_none(record.tokens))
        columns["latency_ms"].append(record.latency_ms)
        columns["cost_usd"].append(record.cost_usd)
        columns["model_version"].append(record.model_version)
        columns["prompt_version"].append(record.prompt_version)
        columns["source_file"].append(line.source)
        columns["line_number"].append(line.line_number)
        columns["raw"].append(line.raw)
    return pl.DataFrame(columns, schema=_RUNS_SCHEMA)


def _evaluations_table(rows: Sequence[tuple[StoredEvaluation, Identity]]) -> pl.DataFrame:
    columns: dict[str, list[Any]] = {name: [] for name in _EVALUATIONS_SCHEMA}
    for evaluation, (agent_id, agent_version, app_id) in rows:
        columns["run_id"].append(evaluation.run_id)
        columns["evaluator_version"].append(evaluation.evaluator_version)
        columns["agent_id"].append(agent_id if agent_id is not None else evaluation.agent_id)
        columns["agent_version"].append(agent_version if agent_version is not None else evaluation.agent_version)
        columns["app_id"].append(app_id if app_id is not None else evaluation.app_id)
        columns["evidence"].append(evaluation.evidence_json())
    return pl.DataFrame(columns, schema=_EVALUATIONS_SCHEMA)


def _quarantine_table(rows: Sequence[tuple[LogLine, str]]) -> pl.DataFrame:
    columns: dict[str, list[Any]] = {name: [] for name in _QUARANTINE_SCHEMA}
    for line, reason in rows:
        agent_id, agent_version, _ = line_identity(line)
        columns["source_file"].append(line.source)
        columns["line_number"].append(line.line_number)
        columns["run_id"].append(line.run_id)
        columns["agent_id"].append(agent_id)
        columns["agent_version"].append(agent_version)
        columns["reason"].append(reason)
        columns["raw"].append(line.raw)
    return pl.DataFrame(columns, schema=_QUARANTINE_SCHEMA)


def store_day(
    conn: duckdb.DuckDBPyConnection,
    log_date: date,
    log_lines: Sequence[LogLine],
    evaluations: Sequence[StoredEvaluation],
    *,
    evaluator_version: str | None = None,
) -> StoreSummary:
    """Replace one day's rows with ``log_lines`` and their ``evaluations``, in one transaction.

    Deletes the day's ``agent_runs`` and ``quarantine`` rows and its ``evaluations`` of this
    evaluator version, then inserts the new rows (bulk, via Arrow), so a rerun replaces and never
    duplicates; evaluations of other evaluator versions are kept. A valid record whose
    ``run_id`` is already stored for another day is quarantined ("duplicate run_id") instead.
    See the module docstring for the counting rule.

    Args:
        conn: a read-write warehouse connection (:func:`warehouse.connect`).
        log_date: the day (the log folder's date).
        log_lines: every non-blank line of the day, valid (``record`` set) or rejected.
        evaluations: one per valid record, plus optionally one per rejected line with a
            ``run_id`` (status ``invalid_input``); all with the same evaluator version. Full
            :class:`Evaluation` models or their :class:`CompactEvaluation` form (``evidence``
            holds the JSON either way).
        evaluator_version: the version to replace when ``evaluations`` is empty (default
            :data:`stef.models.EVALUATOR_VERSION`); must match the evaluations otherwise.

    Returns:
        A :class:`StoreSummary` with the row counts written.

    Raises:
        WarehouseError: the inputs break the contract (an evaluation without a line, a valid
            record without an evaluation, two valid records with one run_id, mixed evaluator
            versions) or the write failed; nothing is written then.
    """
    with _STORE_LOCK:  # one store at a time per process: the staging tables have fixed names
        return _store_day(conn, log_date, log_lines, evaluations, evaluator_version)


_STORE_LOCK = threading.Lock()


def _store_day(
    conn: duckdb.DuckDBPyConnection,
    log_date: date,
    log_lines: Sequence[LogLine],
    evaluations: Sequence[StoredEvaluation],
    evaluator_version: str | None,
) -> StoreSummary:
    version = _evaluator_version(evaluations, evaluator_version)
    owners = _owners(log_lines, evaluations)
    now = _utc_now()
    params = {"log_date": log_date, "now": now}
    try:
        elsewhere = stored_elsewhere(conn, list(owners), version, log_date)
        runs: list[tuple[LogLine, AgentLogRecord]] = []
        quarantined: list[tuple[LogLine, str]] = []
        for line in log_lines:
            if line.record is None:
                quarantined.append((line, line.reason or "rejected log line"))
            elif line.record.run_id in elsewhere:
                reason = f"duplicate run_id: already stored for log date {elsewhere[line.record.run_id].isoformat()}"
                quarantined.append((line, reason))
            else:
                runs.append((line, line.record))
        kept = [
            (evaluation, line_identity(log_lines[owners[evaluation.run_id]]))
            for evaluation in evaluations
            if evaluation.run_id is not None and evaluation.run_id not in elsewhere
        ]
        evaluated_lines = {owners[e.run_id] for e, _ in kept if e.run_id is not None}
        staged = not _fits_in_one_transaction(conn, runs, kept, quarantined)
        if staged:
            _stage(conn, runs, kept, quarantined, params)
    except duckdb.Error as exc:
        _rollback_and_drop_stages(conn)
        raise WarehouseError(
            f"storing {log_date.isoformat()} failed while staging its rows; nothing of the day changed: {exc}{_memory_hint(exc)}"
        ) from exc
    summary = StoreSummary(
        log_date=log_date,
        evaluator_version=version,
        lines=len(log_lines),
        runs=len(runs),
        evaluations=len(kept),
        evaluated=sum(1 for e, _ in kept if e.status is EvaluationStatus.EVALUATED),
        quarantined=len(quarantined),
        quarantined_without_evaluation=len(log_lines) - len(evaluated_lines),
    )
    try:
        conn.begin()
        conn.execute("DELETE FROM agent_runs WHERE log_date = $log_date", {"log_date": log_date})
        conn.execute("DELETE FROM quarantine WHERE log_date = $log_date", {"log_date": log_date})
        conn.execute(
            "DELETE FROM evaluations WHERE log_date = $log_date AND evaluator_version = $version",
            {"log_date": log_date, "version": version},
        )
        conn.execute(
            "DELETE FROM stored_days WHERE log_date = $log_date AND evaluator_version = $version",
            {"log_date": log_date, "version": version},
        )
        if staged:
            for target, stage in _STAGES.items():
                conn.execute(f"INSERT INTO {target} BY NAME SELECT * FROM {stage}")
                conn.execute(f"DROP TABLE {stage}")
        else:
            _insert_rows(conn, runs, kept, quarantined, params, {target: target for target in _STAGES})
        _record_stored_day(conn, summary, now)
        conn.commit()
    except duckdb.Error as exc:
        _rollback_and_drop_stages(conn)
        raise WarehouseError(
            f"storing {log_date.isoformat()} failed and was rolled back: {exc}{_memory_hint(exc)}"
        ) from exc
    except BaseException:
        _rollback_and_drop_stages(conn)
        raise
    return summary


def _memory_hint(exc: duckdb.Error) -> str:
    """A pointer to the memory setting when DuckDB ran out of memory."""
    if isinstance(exc, duckdb.OutOfMemoryException) or "out of memory" in str(exc).lower():
        return f" (DuckDB's memory limit is {default_memory_limit()}; raise ${MEMORY_LIMIT_ENV_VAR}, e.g. 2GB)"
    return ""


def _rollback_and_drop_stages(conn: duckdb.DuckDBPyConnection) -> None:
    """Undo the day's transaction if one is open, then drop the staging tables (best effort)."""
    try:
        conn.rollback()
    except duckdb.Error:
        pass  # no transaction open (the failure came before or at BEGIN)
    for stage in _STAGES.values():
        try:
            conn.execute(f"DROP TABLE IF EXISTS {stage}")
        except duckdb.Error:
            pass


_STAGES = {
    "agent_runs": "temp._stef_stage_agent_runs",
    "evaluations": "temp._stef_stage_evaluations",
    "quarantine": "temp._stef_stage_quarantine",
}
"""Target table -> its staging table (same columns, no keys), filled chunk by chunk before the
day's one transaction moves the rows over. Temporary tables of the connection: never written to
the warehouse file or its WAL (DuckDB keeps them in memory and spills them to its temp directory
beyond its memory limit), gone with the connection."""


def _stage(
    conn: duckdb.DuckDBPyConnection,
    runs: Sequence[tuple[LogLine, AgentLogRecord]],
    kept: Sequence[tuple[StoredEvaluation, Identity]],
    quarantined: Sequence[tuple[LogLine, str]],
    params: dict[str, Any],
) -> None:
    """Write the day's rows into the staging tables, one committed Arrow chunk at a time.

    DuckDB keeps a transaction's uncommitted rows in memory, so inserting 100k rows in the day's
    transaction itself would cost about 1 GB; staged rows are committed per chunk (and spilled by
    DuckDB under its memory limit). The staging tables are temporary tables of ``conn``
    (:data:`_STAGES`), recreated empty here: they are never written to the warehouse file or its
    WAL, and rows of a run killed while staging vanish with its connection; only the final
    transaction makes the day visible.
    """
    for target, stage in _STAGES.items():
        conn.execute(f"CREATE OR REPLACE TEMP TABLE {stage} AS SELECT * FROM {target} LIMIT 0")
    _insert_rows(conn, runs, kept, quarantined, params, _STAGES)


def _insert_rows(
    conn: duckdb.DuckDBPyConnection,
    runs: Sequence[tuple[LogLine, AgentLogRecord]],
    kept: Sequence[tuple[StoredEvaluation, Identity]],
    quarantined: Sequence[tuple[LogLine, str]],
    params: dict[str, Any],
    tables: dict[str, str],
) -> None:
    """Insert the day's rows, one Arrow chunk (:func:`_chunks`) at a time, into ``tables``
    (``agent_runs`` / ``evaluations`` / ``quarantine`` -> the table that receives its rows: a
    staging table of :data:`_STAGES`, or the table itself inside the day's transaction)."""
    for chunk in _chunks(runs, _run_size):
        with registered(conn, "_stef_runs", _runs_table(chunk)):
            conn.execute(
                f"INSERT INTO {tables['agent_runs']} BY NAME "
                "SELECT *, $log_date::DATE AS log_date, $now::TIMESTAMP AS ingested_at FROM _stef_runs",
                params,
            )
    for evaluations in _chunks(kept, _evaluation_size):
        with registered(conn, "_stef_evaluations", _evaluations_table(evaluations)):
            conn.execute(_insert_evaluations(tables["evaluations"]), params)
    for rejected in _chunks(quarantined, _quarantine_size):
        with registered(conn, "_stef_quarantine", _quarantine_table(rejected)):
            conn.execute(
                f"INSERT INTO {tables['quarantine']} BY NAME "
                "SELECT *, $log_date::DATE AS log_date, $now::TIMESTAMP AS quarantined_at FROM _stef_quarantine",
                params,
            )


DIRECT_INSERT_SHARE = 0.5
"""A day whose texts (:func:`_run_size`, :func:`_evaluation_size`, :func:`_quarantine_size`) total
at most this share of DuckDB's memory limit is inserted inside the day's transaction, without
staging. Staging copies every row twice (into the staging table, then into the warehouse's
table) and, with both copies held under the limit, spills them: on 2 cores a 20k-record day
(about 96 MB of text) stored in 1.96–2.05 s staged and 1.42–1.46 s inserted directly, and a
40k-record day in 5.44 s against 4.06 s, whose direct insert held about 150 MB more in the
process. A larger day stages, so its uncommitted rows stay one chunk (the memory bound of a
100k-record nightly)."""

_SIZE_UNITS = {
    "bytes": 1,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
    "PiB": 1024**5,
    "EiB": 1024**6,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "PB": 1000**5,
}


def memory_limit_bytes(conn: duckdb.DuckDBPyConnection) -> int | None:
    """DuckDB's memory limit of ``conn`` in bytes (its setting reads ``244.1 MiB``), or ``None``
    when the setting has another form.

    >>> memory_limit_bytes(duckdb.connect(config={"memory_limit": "256MB"}))
    255957401
    """
    rows = conn.execute("SELECT current_setting('memory_limit')").fetchall()  # no result left unread (DuckDB 2)
    number, _, unit = str(rows[0][0] if rows else "").strip().partition(" ")
    try:
        value = float(number)
    except ValueError:
        return None
    factor = _SIZE_UNITS.get(unit.strip())
    return None if factor is None else int(value * factor)


def _fits_in_one_transaction(
    conn: duckdb.DuckDBPyConnection,
    runs: Sequence[tuple[LogLine, AgentLogRecord]],
    kept: Sequence[tuple[StoredEvaluation, Identity]],
    quarantined: Sequence[tuple[LogLine, str]],
) -> bool:
    """Whether the day is inserted inside its transaction rather than staged (:data:`DIRECT_INSERT_SHARE`)."""
    limit = memory_limit_bytes(conn)
    if limit is None:
        return False
    texts = sum(map(_run_size, runs)) + sum(map(_evaluation_size, kept)) + sum(map(_quarantine_size, quarantined))
    return texts <= DIRECT_INSERT_SHARE * limit


def _record_stored_day(conn: duckdb.DuckDBPyConnection, summary: StoreSummary, now: datetime) -> None:
    """The day's ``stored_days`` row (inside the day's transaction, last before the commit)."""
    conn.execute(
        "INSERT INTO stored_days (log_date, evaluator_version, lines, runs, evaluations, quarantined, stored_at) "
        "VALUES ($log_date, $version, $lines, $runs, $evaluations, $quarantined, $now)",
        {
            "log_date": summary.log_date,
            "version": summary.evaluator_version,
            "lines": summary.lines,
            "runs": summary.runs,
            "evaluations": summary.evaluations,
            "quarantined": summary.quarantined,
            "now": now,
        },
    )


def store_rejected_lines(conn: duckdb.DuckDBPyConnection, log_date: date, log_lines: Sequence[LogLine]) -> int:
    """Store the rejected lines of a day that is not stored (its run failed validation), to be inspected.

    A stored day keeps its rows (they are consistent with each other; the failed rerun changes
    nothing): a day with a ``stored_days`` row under any evaluator version (a day whose every line
    was quarantined has no run) or with stored runs. Otherwise the day's ``quarantine`` rows are
    replaced by one row per line whose ``record is None``, with its reason, in one transaction. The
    day is not marked stored.

    Returns:
        The rows written (0 when the day is already stored).

    Raises:
        WarehouseError: the write failed (rolled back).
    """
    (stored,) = conn.execute(
        "SELECT (SELECT count(*) FROM stored_days WHERE log_date = $log_date) "
        "+ (SELECT count(*) FROM agent_runs WHERE log_date = $log_date)",
        {"log_date": log_date},
    ).fetchone() or (0,)
    if stored:
        return 0
    rows = [(line, line.reason or "rejected log line") for line in log_lines if line.record is None]
    table = _quarantine_table(rows).with_columns(
        pl.lit(log_date, pl.Date).alias("log_date"), pl.lit(_utc_now(), pl.Datetime("us")).alias("quarantined_at")
    )
    try:
        conn.begin()
        conn.execute("DELETE FROM quarantine WHERE log_date = $log_date", {"log_date": log_date})
        conn.register("_stef_rejected", table)
        conn.execute("INSERT INTO quarantine BY NAME SELECT * FROM _stef_rejected")
        conn.unregister("_stef_rejected")
        conn.commit()
    except duckdb.Error as exc:
        conn.rollback()
        raise WarehouseError(f"storing the rejected lines of {log_date.isoformat()} failed: {exc}") from exc
    return table.height


def read_quarantine(conn: duckdb.DuckDBPyConnection, log_date: date) -> list[dict[str, Any]]:
    """The day's quarantined lines: ``source_file``, ``line_number``, ``run_id``, ``agent_id``,
    ``agent_version``, ``reason``, ``raw``, ``quarantined_at``, by file and line."""
    rows = conn.execute(
        "SELECT source_file, line_number, run_id, agent_id, agent_version, reason, raw, quarantined_at "
        "FROM quarantine WHERE log_date = $log_date ORDER BY source_file, line_number",
        {"log_date": log_date},
    ).fetchall()
    names = ("source_file", "line_number", "run_id", "agent_id", "agent_version", "reason", "raw", "quarantined_at")
    return [dict(zip(names, row, strict=True)) for row in rows]
