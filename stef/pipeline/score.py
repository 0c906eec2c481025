"""The STEF score Φ (STEF paper §3; DESIGN.md §3).

    Φ = min(B, 10) / 10 × 100 × Γ
    B = filter score (0–5) + verdict score (0–5) + leniency bonus (1 when every extra filter
        is confirmed benign; only for FULLY_APPLIED_WITH_EXTRAS)
    Γ = 1.0 if γ ≥ 0.85, 0.8 if 0.65 ≤ γ < 0.85, 0.5 if γ < 0.65

Bands: 90–100 excellent, 75–90 good, 50–75 marginal (human review), < 50 poor.
"""

from __future__ import annotations

from stef.models import AlignmentResult, Band, FilterStatus, ScoreBreakdown, Verdict
from stef.pipeline.rules import ScoringRules


def gamma_multiplier(confidence: float, scoring: ScoringRules) -> float:
    """Γ for a judge confidence γ ∈ [0, 1].

    >>> from stef.pipeline.rules import default_rules
    >>> [gamma_multiplier(g, default_rules().scoring) for g in (0.85, 0.849, 0.65, 0.64)]
    [1.0, 0.8, 0.8, 0.5]
    """
    if confidence >= scoring.gamma_high:
        return 1.0
    if confidence >= scoring.gamma_low:
        return 0.8
    return 0.5


def band_for(score: float) -> Band:
    """Band of a Φ value (90 and 75 belong to the upper band).

    >>> band_for(90.0), band_for(89.9), band_for(75.0), band_for(50.0), band_for(49.99)
    (<Band.EXCELLENT: 'excellent'>, <Band.GOOD: 'good'>, <Band.GOOD: 'good'>, <Band.MARGINAL: 'marginal'>, <Band.POOR: 'poor'>)
    """
    if score >= 90.0:
        return Band.EXCELLENT
    if score >= 75.0:
        return Band.GOOD
    if score >= 50.0:
        return Band.MARGINAL
    return Band.POOR


def compute_score(
    alignment: AlignmentResult, verdict: Verdict, confidence: float, scoring: ScoringRules
) -> ScoreBreakdown:
    """Compute Φ and its parts.

    Args:
        alignment: the filter alignment (status and benign extras).
        verdict: the judge verdict.
        confidence: the judge confidence γ ∈ [0, 1].
        scoring: score maps and Γ thresholds (R_app ``scoring``).

    Returns:
        A :class:`ScoreBreakdown`; ``score`` is rounded to 2 decimals.

    >>> from stef.pipeline.rules import default_rules
    >>> a = AlignmentResult(status=FilterStatus.FULLY_APPLIED_WITH_EXTRAS, extra=("x = 1",), benign_extra=("x = 1",))
    >>> compute_score(a, Verdict.LIKELY_CORRECT, 0.7, default_rules().scoring).score
    72.0
    """
    filter_score = float(scoring.filter_scores[alignment.status.value])
    verdict_score = float(scoring.verdict_scores[verdict.value])
    bonus = 0.0
    if (
        alignment.status is FilterStatus.FULLY_APPLIED_WITH_EXTRAS
        and alignment.extra
        and set(alignment.extra) <= set(alignment.benign_extra)
    ):
        bonus = float(scoring.leniency_bonus)
    base = min(filter_score + verdict_score + bonus, 10.0)
    multiplier = gamma_multiplier(confidence, scoring)
    score = round(base / 10.0 * 100.0 * multiplier, 2)
    return ScoreBreakdown(
        filter_score=filter_score,
        verdict_score=verdict_score,
        leniency_bonus=bonus,
        base=base,
        gamma_multiplier=multiplier,
        score=score,
        band=band_for(score),
    )
