"""Tests of stef/monitor/sentence.py: one sentence per drift check, for every verdict and kind, names as text."""

from __future__ import annotations

import doctest
from typing import Any

import pytest

import stef.monitor.sentence
from stef.monitor.sentence import drift_sentence

BASE: dict[str, Any] = {
    "agent_id": "bird-analyst",
    "kind": "version",
    "baseline_version": "v1.4.0",
    "candidate_version": "v1.5.0",
    "baseline_window": ["2026-11-13", "2026-11-19"],
    "candidate_window": ["2026-11-20", "2026-11-26"],
    "n_baseline": 1400,
    "n_candidate": 700,
    "error_rate_baseline": 0.352,
    "error_rate_baseline_ci": [0.31, 0.394],
    "error_rate_candidate": 0.496,
    "error_rate_candidate_ci": [0.44, 0.552],
    "error_rate_delta": 0.144,
    "error_rate_delta_ci": [0.07, 0.218],
}


@pytest.mark.parametrize(
    ("changes", "sentence"),
    [
        pytest.param(
            {"verdict": "drift", "direction": "worse"},
            "bird-analyst v1.5.0 answers an estimated 50 % (44–55 %) of questions wrongly, "
            "up from 35 % (31–39 %) for v1.4.0: worse (+14 points, 95% CI +7 points to +22 points).",
            id="worse",
        ),
        pytest.param(
            {
                "verdict": "drift",
                "direction": "better",
                "error_rate_candidate": 0.2,
                "error_rate_candidate_ci": [0.17, 0.23],
                "error_rate_delta": -0.152,
                "error_rate_delta_ci": [-0.2, -0.1],
            },
            "bird-analyst v1.5.0 answers an estimated 20 % (17–23 %) of questions wrongly, "
            "down from 35 % (31–39 %) for v1.4.0: better (-15 points, 95% CI -20 points to -10 points).",
            id="better",
        ),
        pytest.param(
            {
                "verdict": "no_drift",
                "direction": None,
                "error_rate_delta": 0.012,
                "error_rate_delta_ci": [-0.04, 0.064],
            },
            "bird-analyst v1.5.0 answers an estimated 50 % (44–55 %) of questions wrongly, up from 35 % (31–39 %) "
            "for v1.4.0: no drift (+1 point, 95% CI -4 points to +6 points).",
            id="no_drift",
        ),
        pytest.param(
            {
                "verdict": "insufficient_data",
                "direction": None,
                "n_baseline": 80,
                "n_candidate": 40,
                "min_samples": 100,
            },
            "bird-analyst v1.5.0: insufficient data, 40 scored answers against 80 for v1.4.0 "
            "(at least 100 per side needed).",
            id="insufficient",
        ),
        pytest.param(
            {"verdict": "drift", "direction": "worse", "kind": "temporal", "baseline_version": "v1.5.0"},
            "bird-analyst v1.5.0 answers an estimated 50 % (44–55 %) of questions wrongly in 2026-11-20…2026-11-26, "
            "up from 35 % (31–39 %) in 2026-11-13…2026-11-19: worse (+14 points, 95% CI +7 points to +22 points).",
            id="temporal",
        ),
        pytest.param(
            {
                "verdict": "drift",
                "direction": "worse",
                "category_shifts": [
                    {
                        "category": "Condition-Related Errors",
                        "baseline_share": 0.12,
                        "candidate_share": 0.24,
                        "significant": True,
                    },
                    {
                        "category": "Table-Related Errors",
                        "baseline_share": 0.05,
                        "candidate_share": 0.04,
                        "significant": False,
                    },
                ],
            },
            "bird-analyst v1.5.0 answers an estimated 50 % (44–55 %) of questions wrongly, up from 35 % (31–39 %) "
            "for v1.4.0; suspected Condition-Related Errors in 24 % of its answers, against 12 %: worse (+14 points, 95% CI +7 points to +22 points).",
            id="category",
        ),
        pytest.param(
            {
                "verdict": "drift",
                "direction": "worse",
                "error_rate_baseline": None,
                "error_rate_candidate": None,
                "mean_baseline": 71.25,
                "mean_candidate": 61.5,
            },
            "bird-analyst v1.5.0 scores a mean Φ of 61.5, against 71.2 for v1.4.0: worse.",
            id="stored_before_p_correct",
        ),
        pytest.param(
            {
                "verdict": "drift",
                "direction": "worse",
                "coverage_baseline": 0.99,
                "coverage_candidate": 0.9,
                "reasons": [
                    "coverage delta -0.09 (95% CI …) reaches the threshold 0.02 share and its interval excludes 0"
                ],
            },
            "bird-analyst v1.5.0 answers an estimated 50 % (44–55 %) of questions wrongly, up from 35 % (31–39 %) "
            "for v1.4.0; it scores 90 % of its answers, down from 99 %: worse (+14 points, 95% CI +7 points to +22 points).",
            id="coverage",
        ),
    ],
)
def test_one_sentence_per_verdict(changes: dict[str, Any], sentence: str) -> None:
    assert drift_sentence({**BASE, **changes}) == sentence


def test_edge_wordings() -> None:
    same = {**BASE, "verdict": "no_drift", "direction": None, "error_rate_candidate": 0.353, "error_rate_delta": 0.001,
            "error_rate_delta_ci": [-0.004, 0.05], "confidence_level": 0.9}  # fmt: skip
    assert drift_sentence(same) == (
        "bird-analyst v1.5.0 answers an estimated 35 % (44–55 %) of questions wrongly, the same as 35 % (31–39 %) "
        "for v1.4.0: no drift (0 points, 90% CI 0 points to +5 points)."
    )
    nothing = {
        **BASE,
        "verdict": "no_drift",
        "direction": None,
        "error_rate_baseline": None,
        "error_rate_candidate": None,
    }
    assert drift_sentence(nothing) == "bird-analyst v1.5.0 has no scored answers to compare with v1.4.0: no drift."


def test_rates_clipped_to_a_bound_are_named_and_never_called_the_same_as_a_drift() -> None:
    """Both versions' answers score above the judge's mean for correct answers: the raw estimates are below 0,
    clipped to 0 % with intervals [0, 0]. The sentence said "0 % (0–0 %) ..., the same as 0 % (0–0 %) ...: worse"."""
    clipped = {**BASE, "verdict": "drift", "direction": "worse",
               "error_rate_baseline": 0.0, "error_rate_baseline_ci": [0.0, 0.0],
               "error_rate_candidate": 0.0, "error_rate_candidate_ci": [0.0, 0.0],
               "error_rate_delta": 0.09, "error_rate_delta_ci": [0.003, 0.24]}  # fmt: skip
    assert drift_sentence(clipped) == (
        "bird-analyst v1.5.0 answers an estimated 0 % (outside the judge's calibrated range) of questions wrongly, "
        "against 0 % (outside the judge's calibrated range) for v1.4.0: worse (+9 points, 95% CI 0 points to +24 points)."
    )
    one_side = {**clipped, "error_rate_candidate": 0.12, "error_rate_candidate_ci": [0.0, 0.3]}
    assert drift_sentence(one_side).startswith(
        "bird-analyst v1.5.0 answers an estimated 12 % (0–30 %) of questions wrongly, up from 0 % (outside the "
        "judge's calibrated range) for v1.4.0: worse"
    )


def test_names_stay_text_on_one_line() -> None:
    hostile = {
        **BASE,
        "verdict": "drift",
        "direction": "worse",
        "agent_id": "<b>bird</b>\n| x",
        "candidate_version": "v" * 80,
    }
    text = drift_sentence(hostile)
    assert "\n" not in text
    assert text.startswith("<b>bird</b> | x " + "v" * 39 + "…")  # plain text: renderers escape it


def test_module_doctests() -> None:
    assert doctest.testmod(stef.monitor.sentence).failed == 0
