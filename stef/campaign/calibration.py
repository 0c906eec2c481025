"""Calibration of STEF against a campaign: how well Φ predicts the reference-based outcome.

Source: DESIGN.md §7 ("the calibration report shows how well Φ predicts the outcome"), issue 6.
Each run becomes a STEF log record (:func:`stef_record`); the evaluations are matched back to
the runs by ``(campaign_id, run_id)`` and summarised as AUROC, confusion matrices at the band
thresholds and mean Φ per outcome class.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from stef.campaign.models import (
    OUTCOME_CLASSES,
    BaselineOutcome,
    CalibrationReport,
    CampaignRunLog,
    CampaignRunResult,
    ConfusionAtThreshold,
    RunOutcome,
)
from stef.models import AgentLogRecord, Evaluation, EvaluationStatus

BAND_THRESHOLDS = (50.0, 75.0, 90.0)
"""Φ thresholds of the bands (marginal, good, excellent) used for the calibration confusion matrices."""

POSITIVE_OUTCOMES = frozenset({RunOutcome.SUCCESS.value, BaselineOutcome.CORRECT.value})
"""Outcomes that count as a correct answer for calibration."""

CAMPAIGN_AGENT_PREFIX = "campaign:"
"""``agent_id`` of a run's STEF record: this prefix + its ``campaign_id``."""


def stef_record(run: CampaignRunLog | CampaignRunResult, dialect: str | None) -> AgentLogRecord:
    """The STEF (schema-free) log record of a run: question + statements (the last SELECT is scored).

    ``agent_id`` is ``campaign:<campaign_id>``, so :func:`index_evaluations` can tell apart runs of
    two campaigns that share a ``run_id``.
    """
    statements = run.statements if isinstance(run, CampaignRunLog) else [s.sql for s in run.statements]
    sql = ";\n".join(s.strip().rstrip(";") for s in statements)
    return AgentLogRecord(
        run_id=run.run_id,
        question=run.question,
        sql=sql,
        dialect=dialect or None,
        agent_id=f"{CAMPAIGN_AGENT_PREFIX}{run.campaign_id}",
    )


def index_evaluations(evaluations: Iterable[Evaluation]) -> dict[tuple[str | None, str | None], Evaluation]:
    """STEF evaluations by ``(campaign_id, run_id)``; ``campaign_id`` is ``None`` for an evaluation
    whose ``agent_id`` is not ``campaign:<id>`` (not made by :func:`stef_record`).

    >>> sorted(index_evaluations([Evaluation(run_id="r1", status=EvaluationStatus.PARSE_ERROR, agent_id="campaign:mcp"),
    ...                           Evaluation(run_id="r1", status=EvaluationStatus.PARSE_ERROR, agent_id="campaign:baseline")]))
    [('baseline', 'r1'), ('mcp', 'r1')]
    """
    out: dict[tuple[str | None, str | None], Evaluation] = {}
    for evaluation in evaluations:
        agent = evaluation.agent_id or ""
        campaign = agent[len(CAMPAIGN_AGENT_PREFIX) :] if agent.startswith(CAMPAIGN_AGENT_PREFIX) else None
        out[(campaign, evaluation.run_id)] = evaluation
    return out


def calibration_report(results: Sequence[CampaignRunResult], evaluations: Sequence[Evaluation]) -> CalibrationReport:
    """AUROC of Φ for ``success``/``correct``, confusion matrices at the band thresholds, mean Φ per class.

    Args:
        results: classified runs.
        evaluations: STEF evaluations, matched to runs by ``(campaign_id, run_id)`` (see
            :func:`index_evaluations`), else by ``run_id`` alone for evaluations with no campaign.

    Returns:
        The :class:`CalibrationReport` (``auroc`` is ``None`` when only one class is present).

    Source: DESIGN.md §7 ("the calibration report shows how well Φ predicts the outcome").
    """
    from stef.monitor.benchmark import auroc

    by_key = index_evaluations(evaluations)
    scores: list[float] = []
    labels: list[bool] = []
    per_class: dict[str, list[float]] = {}
    scored = 0
    for result in results:
        evaluation = by_key.get((result.campaign_id, result.run_id)) or by_key.get((None, result.run_id))
        score = evaluation.score if evaluation is not None and evaluation.status is EvaluationStatus.EVALUATED else None
        if score is not None:
            scored += 1
            per_class.setdefault(result.outcome, []).append(score)
        else:
            per_class.setdefault(result.outcome, [])
        scores.append(score if score is not None else 0.0)
        labels.append(result.outcome in POSITIVE_OUTCOMES)
    area = auroc(scores, labels) if scores else float("nan")
    confusion = [
        ConfusionAtThreshold(
            threshold=t,
            tp=sum(1 for s, y in zip(scores, labels, strict=True) if s >= t and y),
            fp=sum(1 for s, y in zip(scores, labels, strict=True) if s >= t and not y),
            fn=sum(1 for s, y in zip(scores, labels, strict=True) if s < t and y),
            tn=sum(1 for s, y in zip(scores, labels, strict=True) if s < t and not y),
        )
        for t in BAND_THRESHOLDS
    ]
    order = [c for c in OUTCOME_CLASSES if c in per_class]
    return CalibrationReport(
        runs=len(results),
        scored=scored,
        positives=sum(labels),
        auroc=None if math.isnan(area) else round(area, 4),
        confusion=confusion,
        mean_score_by_outcome={
            c: (round(sum(per_class[c]) / len(per_class[c]), 2) if per_class[c] else None) for c in order
        },
        runs_by_outcome={c: sum(1 for r in results if r.outcome == c) for c in order},
    )


__all__ = [
    "BAND_THRESHOLDS",
    "CAMPAIGN_AGENT_PREFIX",
    "POSITIVE_OUTCOMES",
    "calibration_report",
    "index_evaluations",
    "stef_record",
]
