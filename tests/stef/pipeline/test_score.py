"""Tests of the score Φ (stef.pipeline.score) on hand-computed values."""

from __future__ import annotations

import pytest

from stef.models import AlignmentResult, Band, FilterStatus, Verdict
from stef.pipeline.rules import default_rules, parse_rules
from stef.pipeline.score import compute_score
from tests.stef.pipeline.stages import STAGES, Case, check_rejection, stage_cases


@pytest.mark.parametrize(
    ("status", "verdict", "gamma", "expected"),
    [
        pytest.param(FilterStatus.FULLY_APPLIED, Verdict.CORRECT, 0.9, 100.0, id="best"),
        pytest.param(FilterStatus.FULLY_APPLIED, Verdict.LIKELY_CORRECT, 0.85, 90.0, id="gamma_boundary_high"),
        pytest.param(FilterStatus.FULLY_APPLIED_WITH_EXTRAS, Verdict.CORRECT, 0.7, 72.0, id="extras_mid_gamma"),
        pytest.param(
            FilterStatus.PARTIALLY_APPLIED, Verdict.POTENTIALLY_INCORRECT, 0.65, 32.0, id="gamma_boundary_low"
        ),
        pytest.param(FilterStatus.NOT_APPLIED, Verdict.INCORRECT, 0.99, 0.0, id="worst"),
        pytest.param(FilterStatus.FULLY_APPLIED, Verdict.CORRECT, 0.5, 50.0, id="low_gamma_halves"),
    ],
)
def test_score_hand_computed(status: FilterStatus, verdict: Verdict, gamma: float, expected: float) -> None:
    # Φ = B/10 × 100 × Γ with B = filter + verdict (+ bonus); maps of DESIGN.md §3.
    breakdown = compute_score(AlignmentResult(status=status), verdict, gamma, default_rules().scoring)
    assert breakdown.score == expected


def test_score_caps_base_at_ten_with_overrides() -> None:
    rules = parse_rules({"scoring": {"filter_scores": {"FULLY_APPLIED_WITH_EXTRAS": 5}}}, "rules/t.json")
    alignment = AlignmentResult(
        status=FilterStatus.FULLY_APPLIED_WITH_EXTRAS, extra=("x = 1",), benign_extra=("x = 1",)
    )
    breakdown = compute_score(alignment, Verdict.CORRECT, 0.9, rules.scoring)
    assert breakdown.base == 10.0 and breakdown.score == 100.0 and breakdown.band is Band.EXCELLENT


@pytest.mark.parametrize("case", stage_cases("score"))
def test_score_golden(case: Case) -> None:
    """Φ on each case of ``tests/fixtures/stages/score.jsonl`` gives the recorded output."""
    assert STAGES["score"](case["input"]) == case["expected"]


@pytest.mark.parametrize("case", stage_cases("score", invalid=True))
def test_score_golden_rejections(case: Case) -> None:
    """Each input of ``tests/fixtures/stages/score__invalid.jsonl`` is rejected as recorded."""
    check_rejection("score", case)
