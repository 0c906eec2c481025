"""TEMPORARY STUB — the real pipeline is being written. Signatures are final."""

from __future__ import annotations

from collections.abc import Iterable

from stef.models import AgentLogRecord, Band, Evaluation, EvaluationStatus, FilterStatus, Verdict
from stef.rules import AppRules, RuleBook


def evaluate(record: AgentLogRecord, rules: AppRules | None = None, judge: object | None = None) -> Evaluation:
    """Evaluate one record (stub)."""
    if not record.question.strip() or not record.sql.strip():
        return Evaluation(run_id=record.run_id, status=EvaluationStatus.INVALID_INPUT, status_reason="empty question or SQL",
                          agent_id=record.agent_id, agent_version=record.agent_version, app_id=record.app_id)
    return Evaluation(run_id=record.run_id, status=EvaluationStatus.EVALUATED, score=80.0, band=Band.GOOD,
                      filter_status=FilterStatus.FULLY_APPLIED, verdict=Verdict.LIKELY_CORRECT, confidence=0.9,
                      agent_id=record.agent_id, agent_version=record.agent_version, app_id=record.app_id)


def evaluate_many(records: Iterable[AgentLogRecord], rulebook: RuleBook | None = None, judge: object | None = None) -> list[Evaluation]:
    """Evaluate records in order; one bad record never stops the batch."""
    rulebook = rulebook or RuleBook()
    return [evaluate(r, rulebook.for_app(r.app_id), judge) for r in records]


def rejected_evaluation(run_id: str | None, reason: str) -> Evaluation:
    """The ``invalid_input`` evaluation of a log line that is not a valid record."""
    return Evaluation(run_id=run_id, status=EvaluationStatus.INVALID_INPUT, status_reason=reason)
