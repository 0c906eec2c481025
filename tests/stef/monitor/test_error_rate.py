"""Tests of stef/monitor/error_rate.py: the label-shift-corrected share of wrong answers, its intervals, the
operating points (shipped and from labels), the category shifts with Benjamini–Hochberg, the paired delta."""

from __future__ import annotations

import doctest
import json
import logging
import math
from importlib import resources

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats

import stef.monitor.error_rate
from stef.monitor.error_rate import (
    CALIBRATION_ARTIFACTS,
    MIN_REVIEWED_PER_SIDE,
    artifact_operating_point,
    calibration_key,
    category_shifts,
    error_rate_delta,
    estimate_error_rate,
    operating_point_from_labels,
    paired_delta,
    question_key,
    reviewed_operating_points,
    shipped_operating_points,
    with_unscored_delta,
)
from stef.monitor.models import UNCORRECTED, DriftError, OperatingPoint

POINT = OperatingPoint(name="judge", mean_p_correct=0.6, mean_p_incorrect=0.4, se_p_correct=0.01, se_p_incorrect=0.02)


def composed(wrong: int, correct: int) -> list[float]:
    """p of ``correct`` correct answers (0.5, 0.7 alternating: mean 0.6 for an even count) and ``wrong`` wrong
    ones (0.3, 0.5: mean 0.4)."""
    return [(0.5, 0.7)[i % 2] for i in range(correct)] + [(0.3, 0.5)[i % 2] for i in range(wrong)]


def test_hand_computed_estimate_and_interval() -> None:
    rate = estimate_error_rate([0.6, 0.6, 0.4, 0.5], [POINT] * 4, records=4)
    assert rate is not None
    # w = (0.6 - p) / 0.2 = 0, 0, 1, 0.5; sampling variance var(w, ddof=1) / n = (0.6875 / 3) / 4
    sampling = (0.6875 / 3) / 4
    # mean p 0.525: d/da = (0.525 - 0.4) / 0.2² = 3.125, d/db = (0.6 - 0.525) / 0.2² = 1.875
    parameters = (3.125 * 0.01) ** 2 + (1.875 * 0.02) ** 2
    se = math.sqrt(sampling + parameters)
    assert rate.estimate == pytest.approx(0.375)
    assert rate.standard_error == pytest.approx(se)
    assert (rate.ci_low, rate.ci_high) == (pytest.approx(0.0), pytest.approx(min(1.0, 0.375 + 1.959964 * se)))
    assert (rate.n, rate.records, rate.with_unscored) == (4, 4, pytest.approx(0.375))
    assert rate.method == "probabilistic adjusted classify-and-count with judge"


@pytest.mark.parametrize("wrong_share", [0.2, 0.35, 0.5, 0.8])
def test_estimate_is_unbiased_under_label_shift_where_the_plain_mean_is_not(wrong_share: float) -> None:
    wrong = round(1000 * wrong_share)
    ps = composed(wrong, 1000 - wrong)
    rate = estimate_error_rate(ps, [POINT] * len(ps), records=len(ps))
    assert rate is not None
    assert rate.estimate == pytest.approx(wrong_share)
    plain = 1.0 - float(np.mean(ps))  # 1 - (0.6 (1 - π) + 0.4 π) = 0.4 + 0.2 π: pulled toward the middle
    assert plain == pytest.approx(0.4 + 0.2 * wrong_share)
    assert rate.ci_low < wrong_share < rate.ci_high


def test_unscored_answers_count_as_wrong_in_the_second_figure() -> None:
    ps = composed(36, 64)
    rate = estimate_error_rate(ps, [POINT] * 100, records=125)
    assert rate is not None
    assert rate.estimate == pytest.approx(0.36)
    assert rate.with_unscored == pytest.approx((36 + 25) / 125)
    assert rate.with_unscored_ci_high - rate.with_unscored_ci_low == pytest.approx(
        (rate.ci_high - rate.ci_low) * 100 / 125
    )
    delta = with_unscored_delta((composed(36, 64), [POINT] * 100), (ps, [POINT] * 100), 100, 125)
    assert delta is not None and delta.delta == pytest.approx(61 / 125 - 0.36)


def test_the_unscored_change_of_fully_scored_sides_is_the_error_rate_change() -> None:
    """Both sides share the operating point: its uncertainty cancels in the change as it does in
    error_rate_delta, instead of adding up as if the sides were independent (the interval was
    [-0.031, +0.424] around +0.197 where the error rate's excluded 0)."""
    base, cand = composed(140, 260), composed(220, 180)
    main = error_rate_delta((base, [POINT] * 400), (cand, [POINT] * 400))
    unscored = with_unscored_delta((base, [POINT] * 400), (cand, [POINT] * 400), 400, 400)
    assert main is not None and unscored is not None
    assert unscored.delta == pytest.approx(main.delta) == pytest.approx(0.2)
    assert main.excludes_zero and unscored.excludes_zero
    wb, wc = (0.6 - np.asarray(base)) / 0.2, (0.6 - np.asarray(cand)) / 0.2
    sampling = wb.var(ddof=1) / 400 + wc.var(ddof=1) / 400
    move = (np.mean(cand) - np.mean(base)) / 0.04  # the shared point's gradients differ by this for a and b
    half = stats.norm.ppf(0.975) * math.sqrt(sampling + (move * 0.01) ** 2 + (move * 0.02) ** 2)
    assert (unscored.ci_low, unscored.ci_high) == (pytest.approx(0.2 - half), pytest.approx(0.2 + half))


def test_a_change_never_contradicts_the_shares_it_is_the_change_of() -> None:
    """A baseline estimated at -25 % (shown as 0 %) and a candidate at 5 %: the change was the raw
    +30 points; it is the +5 points between the shares shown, in the interval the sides allow."""
    base = [0.75, 0.55] * 300  # wrongness -0.75, +0.25: -0.25
    cand = [0.52, 0.66] * 300  # wrongness +0.4, -0.3: +0.05
    delta = error_rate_delta((base, [POINT] * 600), (cand, [POINT] * 600))
    rate_b = estimate_error_rate(base, [POINT] * 600, records=600)
    rate_c = estimate_error_rate(cand, [POINT] * 600, records=600)
    assert delta is not None and rate_b is not None and rate_c is not None
    assert (delta.baseline, delta.candidate) == (rate_b.estimate, rate_c.estimate) == (0.0, pytest.approx(0.05))
    assert delta.delta == pytest.approx(0.05)
    assert (delta.ci_low, delta.ci_high) == (
        pytest.approx(rate_c.ci_low - rate_b.ci_high),
        pytest.approx(rate_c.ci_high - rate_b.ci_low),
    )
    unscored = with_unscored_delta((base, [POINT] * 600), (cand, [POINT] * 600), 600, 600)
    assert unscored is not None and unscored.delta == pytest.approx(0.05)
    assert unscored.ci_low <= unscored.delta <= unscored.ci_high


def test_delta_interval_tests_equal_mean_p_and_widens_for_the_operating_point() -> None:
    base, cand = composed(350, 650), composed(500, 500)
    delta = error_rate_delta((base, [POINT] * 1000), (cand, [POINT] * 1000))
    assert delta is not None
    assert delta.delta == pytest.approx(0.15)
    wb = (0.6 - np.asarray(base)) / 0.2
    wc = (0.6 - np.asarray(cand)) / 0.2
    z = stats.norm.ppf(0.975)
    half = z * math.sqrt(wb.var(ddof=1) / 1000 + wc.var(ddof=1) / 1000)
    # the shared point's gradients differ by (m_c - m_b) / 0.04 for a and by -(m_c - m_b) / 0.04 for b
    move = (np.mean(cand) - np.mean(base)) / 0.04
    factor = 1 + z * math.hypot(move * 0.01, move * 0.02) / 0.15
    assert (delta.ci_low, delta.ci_high) == (
        pytest.approx((0.15 - half) / factor),
        pytest.approx((0.15 + half) * factor),
    )
    # the sign of the interval is Welch's two-sample z-test of equal mean p, whatever a and b are
    welch = stats.ttest_ind(cand, base, equal_var=False)
    assert delta.excludes_zero and welch.pvalue < 0.05
    assert (0.15 - half > 0) == delta.excludes_zero
    same = error_rate_delta((base, [POINT] * 1000), (list(base), [POINT] * 1000))
    assert same is not None and same.delta == pytest.approx(0.0) and not same.excludes_zero
    flat = OperatingPoint(name="judge", mean_p_correct=0.6, mean_p_incorrect=0.4)  # no uncertainty: no widening
    plain = error_rate_delta((base, [flat] * 1000), (cand, [flat] * 1000))
    assert plain is not None and (plain.ci_low, plain.ci_high) == (
        pytest.approx(0.15 - half),
        pytest.approx(0.15 + half),
    )


def test_answers_without_operating_point_are_uncorrected() -> None:
    ps = [0.8, 0.2, 0.6, 0.4]
    rate = estimate_error_rate(ps, [UNCORRECTED] * 4, records=4)
    assert rate is not None
    assert rate.estimate == pytest.approx(1 - np.mean(ps))
    assert rate.method.startswith("uncorrected")
    mixed = estimate_error_rate(ps, [POINT, POINT, UNCORRECTED, UNCORRECTED], records=4)
    assert mixed is not None
    assert mixed.estimate == pytest.approx(np.mean([-1.0, 2.0, 0.4, 0.6]))  # clipped only as a whole
    assert mixed.method.endswith("(part uncorrected)")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: estimate_error_rate([0.5, 1.5], [POINT] * 2, records=2), "is not a probability"),
        (lambda: estimate_error_rate([0.5, 0.5], [POINT], records=2), "2 probabilities but 1 operating points"),
        (lambda: estimate_error_rate([0.5, 0.5], [POINT] * 2, records=1), "only 1 records"),
        (lambda: operating_point_from_labels([0.9, 0.8, 0.1], [True, True, False], "r"), "two labelled answers"),
    ],
)
def test_bad_input_is_a_clear_error(call: object, message: str) -> None:
    with pytest.raises(DriftError, match=message):
        call()  # type: ignore[operator]


def test_too_few_answers_give_no_estimate() -> None:
    assert estimate_error_rate([0.5], [POINT], records=3) is None
    assert error_rate_delta(([0.5], [POINT]), ([0.5, 0.6], [POINT] * 2)) is None


def test_an_operating_point_must_separate_the_answers() -> None:
    with pytest.raises(ValidationError, match="is not above"):
        OperatingPoint(name="flat", mean_p_correct=0.5, mean_p_incorrect=0.5)
    assert (POINT.sensitivity, POINT.specificity) == (pytest.approx(0.6), 0.6)


def test_operating_point_from_reviewer_labels() -> None:
    ps = [0.9, 0.7, 0.8, 0.3, 0.1, 0.2]
    labels = [True, True, True, False, False, False]
    point = operating_point_from_labels(ps, labels, "reviewed-bird")
    assert (point.mean_p_correct, point.mean_p_incorrect) == (pytest.approx(0.8), pytest.approx(0.2))
    assert point.se_p_correct == pytest.approx(np.std([0.9, 0.7, 0.8], ddof=1) / math.sqrt(3))
    assert point.source == "reviewer labels (3 correct, 3 wrong answers)"


def test_labels_that_do_not_separate_the_answers_give_no_operating_point(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(
        DriftError, match=r"does not separate .* correct ones 0\.2000 is not above .* wrong ones 0\.8000"
    ):
        operating_point_from_labels([0.1, 0.3, 0.9, 0.7], [True, True, False, False], "contrary")
    rows = [
        {"label": label, "status": "evaluated", "p_correct": p, "judge": "symbolic"}
        for label, p in [("correct", 0.2), ("incorrect", 0.8)] * MIN_REVIEWED_PER_SIDE
    ]
    with caplog.at_level(logging.WARNING, logger="stef.monitor.error_rate"):
        assert reviewed_operating_points(rows) == {}
    assert "reviewer labels left out, the shipped operating point stays: reviews (" in caplog.text
    agreeing = [{**row, "label": "incorrect" if row["label"] == "correct" else "correct"} for row in rows]
    [(key, point)] = reviewed_operating_points(agreeing).items()
    assert key == "symbolic" and point.mean_p_correct == pytest.approx(0.8)


def test_a_calibrator_whose_figures_do_not_separate_the_answers_gives_no_point(
    caplog: pytest.LogCaptureFixture,
) -> None:
    figures = {"mean_p_correct": 0.4, "mean_p_incorrect": 0.6, "se_p_correct": 0.01, "se_p_incorrect": 0.01}
    with caplog.at_level(logging.WARNING, logger="stef.monitor.error_rate"):
        assert artifact_operating_point({"quantification": figures}, "calib-x", "nested cross-validation") is None
    assert "calib-x: its cross-validation does not separate the answers" in caplog.text
    figures = {**figures, "mean_p_correct": 0.7, "rows_correct": 10, "rows_incorrect": 5}
    point = artifact_operating_point({"quantification": figures}, "calib-x", "nested cross-validation")
    assert point is not None and point.source == "nested cross-validation (10 correct, 5 wrong answers)"


def test_shipped_operating_points_come_from_the_calibrators_cross_validation() -> None:
    points = shipped_operating_points()
    assert set(points) == set(CALIBRATION_ARTIFACTS)
    for key, artifact in CALIBRATION_ARTIFACTS.items():
        payload = json.loads(
            resources.files("stef.pipeline.judge.calibrators").joinpath(artifact).read_text(encoding="utf-8")
        )
        q = payload["metadata"]["quantification"]
        point = points[key]
        assert point.name == payload["version"]
        assert (point.mean_p_correct, point.mean_p_incorrect) == (q["mean_p_correct"], q["mean_p_incorrect"])
        assert point.se_p_incorrect == pytest.approx(math.hypot(q["se_p_incorrect"], q["transfer_sd_p_incorrect"]))
        assert 0.1 < point.mean_p_correct - point.mean_p_incorrect < 0.5
        assert q["rows_correct"] + q["rows_incorrect"] == payload["metadata"]["rows"]


def test_calibration_key_follows_what_the_record_was_checked_against() -> None:
    assert [calibration_key("symbolic", s, o) for s in (False, True) for o in (False, True)] == [
        "symbolic",
        "observed",
        "schema",
        "schema-observed",
    ]
    assert calibration_key("openai/gpt-4o-mini", True, True) is None


def test_category_shifts_match_fisher_and_benjamini_hochberg() -> None:
    cond, attr, table = "Condition-Related Errors", "Attribute-Related Errors", "Table-Related Errors"
    baseline = [frozenset({cond})] * 10 + [frozenset({attr})] * 20 + [frozenset({table})] * 5 + [frozenset()] * 65
    candidate = [frozenset({cond, attr})] * 30 + [frozenset({table})] * 6 + [frozenset()] * 64
    shifts = {s.category: s for s in category_shifts(baseline, candidate)}
    tables = {cond: (10, 30), attr: (20, 30), table: (5, 6)}
    pvalues = {k: stats.fisher_exact([[b, 100 - b], [c, 100 - c]]).pvalue for k, (b, c) in tables.items()}
    ordered = sorted(pvalues, key=pvalues.__getitem__)  # BH by hand: q_(i) = min_{j ≥ i} p_(j) m / j
    q, running = {}, 1.0
    for rank in range(len(ordered), 0, -1):
        key = ordered[rank - 1]
        running = min(running, pvalues[key] * len(ordered) / rank)
        q[key] = running
    for key, (b, c) in tables.items():
        s = shifts[key]
        assert (s.baseline_count, s.candidate_count, s.baseline_share, s.candidate_share) == (b, c, b / 100, c / 100)
        assert s.pvalue == pytest.approx(pvalues[key])
        assert s.qvalue == pytest.approx(q[key])
        assert s.significant is bool(q[key] <= 0.05)
    assert shifts[cond].significant and not shifts[table].significant
    assert category_shifts(baseline, candidate)[0].category == cond  # largest rise first
    assert category_shifts([], candidate) == () and category_shifts([frozenset()], [frozenset()]) == ()


def test_paired_delta_weights_questions_by_their_answers() -> None:
    baseline = [(f"q{i}", 0.0) for i in range(30)] + [("q0", 0.0)]
    candidate = [(f"q{i}", 1.0 if i < 6 else 0.0) for i in range(30)] + [("new", 1.0)]
    paired = paired_delta(baseline, candidate)
    assert paired is not None
    weights = np.asarray([2 / (1 / 2 + 1 / 1)] + [1.0] * 29)
    diffs = np.asarray([1.0] * 6 + [0.0] * 24)
    delta = float(np.sum(weights * diffs) / np.sum(weights))
    variance = np.sum(weights**2 * (diffs - delta) ** 2) / np.sum(weights) ** 2 * 30 / 29
    assert (paired.questions, paired.answers_baseline, paired.answers_candidate) == (30, 31, 30)
    assert paired.delta == pytest.approx(delta)
    assert paired.ci_high - paired.delta == pytest.approx(stats.norm.ppf(0.975) * math.sqrt(variance))
    assert paired_delta(baseline, candidate, min_questions=31) is None


def test_question_key_ignores_case_spacing_and_final_punctuation() -> None:
    assert question_key("How many  SINGERS?") == question_key("how many singers") == "how many singers"
    assert question_key("ｈｏｗ") == "how"  # NFKC: full-width letters
    assert question_key("Which year?") != question_key("Which years?")


def test_module_doctests() -> None:
    assert doctest.testmod(stef.monitor.error_rate).failed == 0


def test_mixed_operating_points_in_other_shares_keep_a_bounded_interval() -> None:
    other = OperatingPoint(
        name="other", mean_p_correct=0.7, mean_p_incorrect=0.3, se_p_correct=0.02, se_p_incorrect=0.02
    )
    base = composed(70, 130) + [0.3 + 0.4 * (i % 2) for i in range(800)]  # 20 % judged by POINT, 80 % by other
    cand = composed(280, 520) + [0.3 + 0.4 * (i % 2) for i in range(200)]  # the other way round
    delta = error_rate_delta((base, [POINT] * 200 + [other] * 800), (cand, [POINT] * 800 + [other] * 200))
    assert delta is not None
    plain_b = OperatingPoint(name="judge", mean_p_correct=0.6, mean_p_incorrect=0.4)
    plain_o = OperatingPoint(name="other", mean_p_correct=0.7, mean_p_incorrect=0.3)
    sampling = error_rate_delta((base, [plain_b] * 200 + [plain_o] * 800), (cand, [plain_b] * 800 + [plain_o] * 200))
    assert sampling is not None and sampling.delta == pytest.approx(delta.delta)
    width, sampling_width = delta.ci_high - delta.ci_low, sampling.ci_high - sampling.ci_low
    assert (
        sampling_width < width < min(0.3, 3 * sampling_width)
    )  # wider for the points' uncertainty, never tens of points
    assert delta.ci_low < delta.delta < delta.ci_high
    exactly_zero = error_rate_delta((base, [POINT] * 200 + [other] * 800), (list(base), [POINT] * 200 + [other] * 800))
    assert exactly_zero is not None and 0 < exactly_zero.ci_high < 0.1


def test_a_change_of_error_rate_and_its_interval_stay_within_one() -> None:
    """From every answer right to every answer wrong, through a judge that barely separates them
    and whose operating point is uncertain: the rescaled interval would end past +100 points (the
    drift sentence printed "+112 points"); a change of a share is cut to [−1, 1]."""
    point = OperatingPoint(
        name="flat", mean_p_correct=0.55, mean_p_incorrect=0.45, se_p_correct=0.02, se_p_incorrect=0.02
    )
    baseline = ([0.56, 0.54] * 10, [point] * 20)
    candidate = ([0.46, 0.44] * 10, [point] * 20)
    delta = error_rate_delta(baseline, candidate)
    assert delta is not None
    assert delta.ci_high == 1.0 and delta.delta == pytest.approx(1.0)
    assert -1.0 <= delta.ci_low < delta.delta
    paired = paired_delta([("q", 0.0), ("r", 0.0), ("s", 0.1)], [("q", 1.0), ("r", 1.0), ("s", 0.7)], 2)
    assert paired is not None and -1.0 <= paired.ci_low <= paired.ci_high <= 1.0
