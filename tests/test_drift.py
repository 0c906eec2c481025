"""Tests of stef/monitor/drift.py: statistics against scipy and hand-computed values, the decision rule,
windows and version order, and the rule on real NL2SQL-BUGs scores (bundled sample)."""

from __future__ import annotations

import doctest
import math
from datetime import date

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats

import stef.monitor.drift
import stef.monitor.models
import stef.monitor.statistics
import stef.monitor.windows
from stef.monitor.drift import compare
from stef.monitor.models import DriftDirection, DriftError, DriftSample, DriftThresholds, DriftVerdict
from stef.monitor.statistics import bootstrap_delta, category_test, psi, score_histogram
from stef.monitor.windows import order_versions, previous_window, trailing_window, version_sort_key
from tests.support.monitoring_support import bugs_pools, draw

FAST = DriftThresholds(n_resamples=500)
"""Fewer resamples keep the tests fast; the decision logic is the same."""


def sample(
    scores: list[float], unscored: int = 0, verdicts: tuple[str, ...] = (), filters: tuple[str, ...] = ()
) -> DriftSample:
    return DriftSample(tuple(scores), records=len(scores) + unscored, verdicts=verdicts, filter_statuses=filters)


# --------------------------------------------------------------------------- statistics


@pytest.mark.parametrize(
    ("baseline", "candidate", "expected"),
    [
        pytest.param([5.0, 15.0], [5.0, 15.0], 0.0, id="identical"),
        # shares (0.5, 0.5) -> (0.25, 0.75): (0.25-0.5) ln(0.5) + (0.75-0.5) ln(1.5)
        pytest.param(
            [5.0, 15.0], [5.0, 15.0, 15.0, 15.0], -0.25 * math.log(0.5) + 0.25 * math.log(1.5), id="shift_within_bins"
        ),
        # an empty bin counts as 1e-4: (1-0.5) ln(1/0.5) + (1e-4-0.5) ln(1e-4/0.5)
        pytest.param(
            [5.0, 15.0], [5.0, 5.0], 0.5 * math.log(2) + (1e-4 - 0.5) * math.log(1e-4 / 0.5), id="empty_bin_epsilon"
        ),
        # 100 falls in the last bin [90, 100]
        pytest.param([95.0, 100.0], [90.0, 100.0], 0.0, id="hundred_in_last_bin"),
    ],
)
def test_psi_matches_hand_computation(baseline: list[float], candidate: list[float], expected: float) -> None:
    assert psi(baseline, candidate) == pytest.approx(expected, abs=1e-12)


def test_psi_needs_scores_on_both_sides() -> None:
    with pytest.raises(DriftError, match=r"PSI needs at least one score on each side"):
        psi([], [50.0])


def test_score_histogram_uses_fixed_ten_point_bins() -> None:
    assert score_histogram([0.0, 9.999, 10.0, 49.5, 89.99, 90.0, 100.0]) == (2, 1, 0, 0, 1, 0, 0, 0, 1, 2)


def test_bootstrap_delta_matches_scipy_bootstrap() -> None:
    rng = np.random.default_rng(3)
    baseline = rng.choice([0.0, 16.0, 56.0, 72.0, 80.0, 100.0], 300)
    candidate = rng.choice([0.0, 16.0, 56.0, 72.0, 80.0, 100.0], 250)
    delta = bootstrap_delta(baseline, candidate, stef.monitor.statistics.mean, FAST)
    expected = stats.bootstrap(
        (baseline, candidate),
        lambda x, y, axis: np.mean(y, axis=axis) - np.mean(x, axis=axis),
        paired=False,
        vectorized=True,
        n_resamples=500,
        method="percentile",
        confidence_level=0.95,
        rng=np.random.default_rng(0),
    ).confidence_interval
    assert delta.baseline == pytest.approx(baseline.mean())
    assert delta.candidate == pytest.approx(candidate.mean())
    assert delta.delta == pytest.approx(candidate.mean() - baseline.mean())
    assert (delta.ci_low, delta.ci_high) == pytest.approx((expected.low, expected.high))


def test_bootstrap_of_tied_values_gives_a_point_interval() -> None:
    delta = bootstrap_delta([80.0] * 50, [80.0] * 60, stef.monitor.statistics.p90, FAST)
    assert (delta.delta, delta.ci_low, delta.ci_high, delta.excludes_zero) == (0.0, 0.0, 0.0, False)


def test_bootstrap_needs_two_values_per_side() -> None:
    with pytest.raises(DriftError, match=r"two values per side, got 1 and 3"):
        bootstrap_delta([1.0], [1.0, 2.0, 3.0], stef.monitor.statistics.mean)


def test_category_test_matches_chi2_contingency() -> None:
    baseline = ["CORRECT"] * 50 + ["INCORRECT"] * 10 + ["LIKELY_CORRECT"] * 40
    candidate = ["CORRECT"] * 30 + ["INCORRECT"] * 30 + ["LIKELY_CORRECT"] * 40
    result = category_test(baseline, candidate)
    assert result is not None
    table = np.array([[50, 10, 40], [30, 30, 40]])
    expected = stats.chi2_contingency(table)
    assert result.categories == ("CORRECT", "INCORRECT", "LIKELY_CORRECT")
    assert (result.baseline_counts, result.candidate_counts) == ((50, 10, 40), (30, 30, 40))
    assert (result.statistic, result.pvalue, result.dof) == (
        pytest.approx(expected.statistic),
        pytest.approx(expected.pvalue),
        2,
    )
    assert result.cramers_v == pytest.approx(math.sqrt(expected.statistic / 200))


@pytest.mark.parametrize(
    ("baseline", "candidate"),
    [
        pytest.param([], ["CORRECT"], id="empty_side"),
        pytest.param(["CORRECT"] * 3, ["CORRECT"] * 5, id="one_category"),
    ],
)
def test_category_test_needs_two_categories_and_two_sides(baseline: list[str], candidate: list[str]) -> None:
    assert category_test(baseline, candidate) is None


def test_compare_reports_the_scipy_statistics() -> None:
    rng = np.random.default_rng(11)
    b = rng.choice([16.0, 56.0, 72.0, 80.0, 100.0], 400).tolist()
    c = rng.choice([16.0, 56.0, 72.0, 80.0, 100.0], 300, p=[0.2, 0.2, 0.2, 0.2, 0.2]).tolist()
    verdicts_b = ("CORRECT",) * 300 + ("INCORRECT",) * 100
    verdicts_c = ("CORRECT",) * 150 + ("INCORRECT",) * 150
    result = compare(sample(b, unscored=10, verdicts=verdicts_b), sample(c, unscored=30, verdicts=verdicts_c), FAST)
    ks = stats.ks_2samp(b, c, method="asymp")
    distance = stats.wasserstein_distance(b, c)
    assert (result.ks_statistic, result.ks_pvalue) == (pytest.approx(ks.statistic), pytest.approx(ks.pvalue))
    assert result.wasserstein == pytest.approx(distance)
    assert result.wasserstein_norm == pytest.approx(distance / np.std(b, ddof=1))
    assert result.psi == pytest.approx(psi(b, c))
    assert result.p90 is not None and result.p90.delta == pytest.approx(np.percentile(c, 90) - np.percentile(b, 90))
    assert result.coverage is not None
    assert (result.coverage.baseline, result.coverage.candidate) == (pytest.approx(400 / 410), pytest.approx(300 / 330))
    assert result.verdict_test is not None
    assert result.verdict_test.statistic == pytest.approx(stats.chi2_contingency([[300, 100], [150, 150]]).statistic)
    assert result.filter_status_test is None  # no filter statuses given
    assert (result.n_baseline, result.n_candidate, result.records_baseline, result.records_candidate) == (
        400,
        300,
        410,
        330,
    )
    assert result.baseline_histogram == score_histogram(b)
    summary = result.summary()
    assert summary["mean_delta"] == pytest.approx(np.mean(c) - np.mean(b))
    assert summary["mean_delta_ci"] == [result.mean.ci_low, result.mean.ci_high]  # type: ignore[union-attr]


# --------------------------------------------------------------------------- decision rule


def _cycle(values: list[float], n: int) -> list[float]:
    return [values[i % len(values)] for i in range(n)]


@pytest.mark.parametrize(
    ("baseline", "candidate", "verdict", "direction", "fired"),
    [
        pytest.param(
            sample(_cycle([60.0, 80.0, 100.0], 300)),
            sample(_cycle([50.0, 70.0, 90.0], 300)),
            DriftVerdict.DRIFT,
            DriftDirection.WORSE,
            "mean",
            id="ten_points_lower_is_worse",
        ),
        pytest.param(
            sample(_cycle([50.0, 70.0, 90.0], 300)),
            sample(_cycle([60.0, 80.0, 100.0], 300)),
            DriftVerdict.DRIFT,
            DriftDirection.BETTER,
            "mean",
            id="ten_points_higher_is_better",
        ),
        pytest.param(
            sample(_cycle([40.0, 80.0, 100.0], 300)),
            sample(_cycle([40.0, 80.0, 100.0], 300)),
            DriftVerdict.NO_DRIFT,
            None,
            None,
            id="same_scores",
        ),
        # 0.3 points lower at n = 20,000 per side: the interval excludes 0, the effect is trivial
        pytest.param(
            sample(_cycle([60.0, 80.0], 20_000)),
            sample(_cycle([59.7, 79.7], 20_000)),
            DriftVerdict.NO_DRIFT,
            None,
            None,
            id="trivial_shift_at_large_n",
        ),
        # only 50 of 400 candidate records scored: coverage collapses, too few scores for the rest
        pytest.param(
            sample(_cycle([60.0, 80.0], 400)),
            sample(_cycle([60.0, 80.0], 50), unscored=350),
            DriftVerdict.DRIFT,
            DriftDirection.WORSE,
            "coverage",
            id="coverage_collapse_with_few_scores",
        ),
        # scores up, coverage down
        pytest.param(
            sample(_cycle([50.0, 70.0], 400)),
            sample(_cycle([70.0, 90.0], 300), unscored=100),
            DriftVerdict.DRIFT,
            DriftDirection.MIXED,
            "mean",
            id="mixed_directions",
        ),
    ],
)
def test_decision_rule(
    baseline: DriftSample,
    candidate: DriftSample,
    verdict: DriftVerdict,
    direction: DriftDirection | None,
    fired: str | None,
) -> None:
    result = compare(baseline, candidate, FAST)
    assert (result.verdict, result.direction) == (verdict, direction)
    if fired is not None:
        assert any(reason.startswith(f"{fired} delta") for reason in result.reasons), result.reasons
    else:
        assert result.reasons == ("no criterion reaches its threshold with an interval that excludes 0",)


def test_trivial_shift_has_an_interval_excluding_zero_but_no_drift() -> None:
    result = compare(sample(_cycle([60.0, 80.0], 20_000)), sample(_cycle([59.7, 79.7], 20_000)), FAST)
    assert result.mean is not None and result.mean.excludes_zero and result.mean.delta == pytest.approx(-0.3)
    assert result.ks_pvalue is not None and result.ks_pvalue < 1e-6  # a p-value alone would flag it
    assert result.verdict is DriftVerdict.NO_DRIFT


def test_too_few_samples_is_its_own_verdict() -> None:
    result = compare(sample(_cycle([60.0, 80.0], 30)), sample(_cycle([20.0, 40.0], 30)), FAST)
    assert (result.verdict, result.direction) == (DriftVerdict.INSUFFICIENT_DATA, None)
    assert result.reasons == (
        "baseline has 30 scored records, fewer than the minimum of 100",
        "candidate has 30 scored records, fewer than the minimum of 100",
    )
    assert result.mean is not None and result.mean.delta == pytest.approx(-40.0)  # still reported


def test_an_empty_side_gives_no_score_statistics() -> None:
    result = compare(sample([]), sample(_cycle([60.0, 80.0], 200)), FAST)
    assert result.verdict is DriftVerdict.INSUFFICIENT_DATA
    assert (result.mean, result.ks_pvalue, result.psi, result.coverage) == (None, None, None, None)
    assert result.summary()["mean_delta_ci"] is None


def test_thresholds_are_configurable() -> None:
    baseline, candidate = sample(_cycle([60.0, 80.0], 300)), sample(_cycle([57.0, 77.0], 300))
    assert compare(baseline, candidate, FAST).verdict is DriftVerdict.DRIFT
    assert compare(baseline, candidate, FAST.model_copy(update={"mean_delta": 5.0})).verdict is DriftVerdict.NO_DRIFT
    assert (
        compare(baseline, candidate, FAST.model_copy(update={"min_samples": 500})).verdict
        is DriftVerdict.INSUFFICIENT_DATA
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"min_samples": 1}, r"min_samples\s+Input should be greater than or equal to 2", id="min_samples"),
        pytest.param({"confidence_level": 1.0}, r"confidence_level\s+Input should be less than 1", id="confidence"),
        pytest.param(
            {"ci_method": "studentized"}, r"ci_method\s+Input should be 'percentile', 'basic' or 'BCa'", id="method"
        ),
        pytest.param({"mean_delta": 1, "typo": 2}, r"typo\s+Extra inputs are not permitted", id="unknown_field"),
    ],
)
def test_invalid_thresholds_are_rejected(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DriftThresholds(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("scores", "records", "message"),
    [
        pytest.param((101.0,), 1, r"holds the score 101\.0; scores must lie in \[0, 100\]", id="above_100"),
        pytest.param((float("nan"),), 1, r"holds the score nan", id="nan"),
        pytest.param((50.0, 60.0), 1, r"has 2 scores but only 1 records", id="more_scores_than_records"),
    ],
)
def test_invalid_samples_are_rejected(scores: tuple[float, ...], records: int, message: str) -> None:
    with pytest.raises(DriftError, match=message):
        DriftSample(scores, records)


def test_sample_from_rows_counts_unscored_rows() -> None:
    s = DriftSample.from_rows(
        [
            ("evaluated", 80.0, "CORRECT", "FULLY_APPLIED"),
            ("parse_error", None, None, None),
            ("evaluated", 40.0, "INCORRECT", "NOT_APPLIED"),
        ]
    )
    assert (s.scores, s.records, s.verdicts, s.filter_statuses) == (
        (80.0, 40.0),
        3,
        ("CORRECT", "INCORRECT"),
        ("FULLY_APPLIED", "NOT_APPLIED"),
    )
    assert s.coverage == pytest.approx(2 / 3)


# --------------------------------------------------------------------------- windows and versions


def test_windows() -> None:
    assert trailing_window(date(2026, 11, 26), 7) == (date(2026, 11, 20), date(2026, 11, 26))
    assert trailing_window(date(2026, 11, 26), 1) == (date(2026, 11, 26), date(2026, 11, 26))
    assert previous_window(date(2026, 11, 20), date(2026, 11, 26)) == (date(2026, 11, 13), date(2026, 11, 19))
    with pytest.raises(DriftError, match=r"at least one day, got 0"):
        trailing_window(date(2026, 11, 26), 0)
    with pytest.raises(DriftError, match=r"window end 2026-11-19 is before its start 2026-11-20"):
        previous_window(date(2026, 11, 20), date(2026, 11, 19))


@pytest.mark.parametrize(
    ("first_seen", "expected"),
    [
        pytest.param({"v2.0": date(2026, 11, 2), "v1.0": date(2026, 11, 1)}, ["v1.0", "v2.0"], id="by_first_day"),
        pytest.param(
            {"v1.10.0": date(2026, 11, 1), "v1.9.0": date(2026, 11, 1)},
            ["v1.9.0", "v1.10.0"],
            id="natural_order_on_ties",
        ),
        pytest.param({"b": date(2026, 11, 1), "a": date(2026, 11, 5)}, ["b", "a"], id="names_without_numbers"),
    ],
)
def test_order_versions(first_seen: dict[str, date], expected: list[str]) -> None:
    assert order_versions(first_seen) == expected


def test_version_sort_key_is_natural() -> None:
    assert sorted(["rc10", "rc9", "rc9a"], key=version_sort_key) == ["rc9", "rc9a", "rc10"]


def test_drift_doctests() -> None:
    for module in (stef.monitor.drift, stef.monitor.models, stef.monitor.statistics, stef.monitor.windows):
        assert doctest.testmod(module).failed == 0, module.__name__


# --------------------------------------------------------------------------- real records


@pytest.fixture(scope="module")
def pools() -> dict[bool, tuple[tuple[str, float | None, str | None, str | None], ...]]:
    return bugs_pools()


def test_real_scores_are_lower_on_incorrect_sql(
    pools: dict[bool, tuple[tuple[str, float | None, str | None, str | None], ...]],
) -> None:
    correct = [row[1] for row in pools[True] if row[1] is not None]
    incorrect = [row[1] for row in pools[False] if row[1] is not None]
    assert (len(correct), len(incorrect)) == (60, 60)
    assert np.mean(correct) - np.mean(incorrect) > 5.0


@pytest.mark.parametrize(
    ("baseline_share", "candidate_share", "n", "verdict", "direction"),
    [
        pytest.param(0.30, 0.45, 5000, DriftVerdict.DRIFT, DriftDirection.WORSE, id="fifteen_points_more_incorrect"),
        pytest.param(0.30, 0.30, 5000, DriftVerdict.NO_DRIFT, None, id="same_pool"),
        pytest.param(0.30, 0.45, 30, DriftVerdict.INSUFFICIENT_DATA, None, id="thirty_per_side"),
    ],
)
def test_decision_on_real_nl2sql_bugs_scores(
    pools: dict[bool, tuple[tuple[str, float | None, str | None, str | None], ...]],
    baseline_share: float,
    candidate_share: float,
    n: int,
    verdict: DriftVerdict,
    direction: DriftDirection | None,
) -> None:
    rng = np.random.default_rng(2026)
    result = compare(draw(pools, n, baseline_share, rng), draw(pools, n, candidate_share, rng), FAST)
    assert (result.verdict, result.direction) == (verdict, direction), result.reasons
