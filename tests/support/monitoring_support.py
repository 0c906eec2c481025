"""Helpers of the monitoring tests: warehouses with chosen scores, agent-log days on disk, real
NL2SQL-BUGs scores (the bundled sample, scored with the symbolic judge)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any

import duckdb

from stef.logs import LogLine, parse_line
from stef.models import (
    AlignmentResult,
    Evaluation,
    EvaluationStatus,
    FilterStatus,
    SuspectedError,
    Verdict,
)
from stef.pipeline.score import band_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"
BUGS_SAMPLE = FIXTURES / "nl2sql_bugs_sample.jsonl"
"""120 NL2SQL-BUGs records (60 correct, 60 incorrect); see fixtures/monitoring/README.md."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer to store: who gave it and its score (``None``: a ``parse_error``)."""

    run_id: str
    agent_id: str
    agent_version: str
    score: float | None
    verdict: Verdict = Verdict.LIKELY_CORRECT
    filter_status: FilterStatus = FilterStatus.FULLY_APPLIED


def _line(number: int, answer: Answer, day: date) -> LogLine:
    payload = {
        "run_id": answer.run_id,
        "timestamp": f"{day.isoformat()}T10:00:00+00:00",
        "agent_id": answer.agent_id,
        "agent_version": answer.agent_version,
        "question": f"How many orders were placed in 'Region {number}'?",
        "sql": f"SELECT COUNT(*) FROM orders WHERE region = 'Region {number}' AND id <> {number}",
    }
    parsed = parse_line(json.dumps(payload).encode(), f"{day.isoformat()}/agent.jsonl", number)
    if parsed is None:  # parse_line returns None only for blank lines
        raise ValueError("blank line")
    return parsed


def _evaluation(answer: Answer) -> Evaluation:
    if answer.score is None:
        return Evaluation(
            run_id=answer.run_id,
            status=EvaluationStatus.PARSE_ERROR,
            status_reason="unparseable",
            agent_id=answer.agent_id,
            agent_version=answer.agent_version,
        )
    missing = ("region = region 1",) if answer.filter_status is FilterStatus.NOT_APPLIED else ()
    return Evaluation(
        run_id=answer.run_id,
        status=EvaluationStatus.EVALUATED,
        score=answer.score,
        band=band_for(answer.score),
        filter_status=answer.filter_status,
        verdict=answer.verdict,
        confidence=0.9,
        rationale=f"synthetic {answer.score:g}",
        agent_id=answer.agent_id,
        agent_version=answer.agent_version,
        alignment=AlignmentResult(status=answer.filter_status, missing=missing, extra=("id <> 1",)),
        suspected_errors=(
            SuspectedError(
                category="Condition-Related Errors", subcategory="Explicit Condition Missing", evidence="synthetic"
            ),
        )
        if missing
        else (),
    )


def store_answers(conn: duckdb.DuckDBPyConnection, day: date, answers: Sequence[Answer]) -> None:
    """Store ``answers`` as the day ``day`` (runs, evaluations, metrics), as the nightly flow would."""
    from warehouse import compute_daily_metrics, store_day

    lines = [_line(number, answer, day) for number, answer in enumerate(answers, start=1)]
    store_day(conn, day, lines, [_evaluation(answer) for answer in answers])
    compute_daily_metrics(conn, day)


def answers(
    prefix: str, agent_id: str, agent_version: str, scores: Iterable[float | None], **fields: Any
) -> list[Answer]:
    """``Answer`` objects with run ids ``<prefix>-0``, ``<prefix>-1`` …"""
    return [Answer(f"{prefix}-{i}", agent_id, agent_version, score, **fields) for i, score in enumerate(scores)]


def write_log_day(logs_root: Path, day: date, records: Sequence[dict[str, Any]], name: str = "agent.jsonl") -> Path:
    """Write ``records`` as ``<logs_root>/<day>/<name>`` (one JSON object per line); return the file."""
    folder = logs_root / day.isoformat()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@lru_cache(maxsize=1)
def bugs_pools() -> dict[bool, tuple[tuple[Any, ...], ...]]:
    """The bundled NL2SQL-BUGs sample scored by the symbolic judge, split by label.

    Returns:
        ``{True: rows of correct SQL, False: rows of incorrect SQL}``, each row ``(status, score,
        verdict, filter_status, p_correct, calibration key, suspected error categories, question key)``
        as :meth:`stef.monitor.models.DriftSample.from_rows` takes (what the warehouse gives a drift check).
    """
    from stef.monitor.benchmark import bugs_record_to_log, read_bugs_file
    from stef.monitor.error_rate import calibration_key, question_key
    from stef.pipeline.evaluate import evaluate_many

    rows = read_bugs_file(BUGS_SAMPLE)
    records = [bugs_record_to_log(row) for row in rows]
    evaluations = evaluate_many(records)
    pools: dict[bool, list[tuple[Any, ...]]] = {True: [], False: []}
    for row, record, e in zip(rows, records, evaluations, strict=True):
        pools[bool(row["label"])].append(
            (
                e.status.value,
                e.score,
                e.verdict.value if e.verdict else None,
                e.filter_status.value if e.filter_status else None,
                e.p_correct,
                calibration_key(e.judge, e.schema_report is not None, e.observed_report is not None),
                frozenset(error.category for error in e.suspected_errors),
                question_key(record.question),
            )
        )
    return {label: tuple(rows) for label, rows in pools.items()}


def draw(
    pools: dict[bool, tuple[tuple[Any, ...], ...]],
    n: int,
    incorrect_share: float,
    rng: Any,
) -> Any:
    """A :class:`stef.monitor.models.DriftSample` of ``n`` answers: each incorrect with probability
    ``incorrect_share`` (then drawn from the incorrect pool, else from the correct one), with replacement."""
    from stef.monitor.models import DriftSample

    incorrect = rng.random(n) < incorrect_share
    rows = [pools[not bad][int(rng.integers(len(pools[not bad])))] for bad in incorrect]
    return DriftSample.from_rows(rows)
