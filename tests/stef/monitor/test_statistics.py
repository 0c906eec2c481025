"""Tests of stef/monitor/statistics.py: PSI, histogram, bootstrap deltas and chi-square tests against scipy and
hand-computed values."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

import stef.monitor.drift
import stef.monitor.models
import stef.monitor.statistics
import stef.monitor.windows
from stef.monitor.models import DriftError, DriftThresholds
from stef.monitor.statistics import (
    bootstrap_delta,
    bootstrap_deltas,
    category_test,
    proportion_delta,
    psi,
    score_histogram,
)
from tests.stef.monitor.drift_helpers import FAST


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
    """Samples of many distinct values are resampled value by value by scipy itself: its interval."""
    rng = np.random.default_rng(3)
    baseline = rng.random(300) * 100
    candidate = rng.random(250) * 100
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


@pytest.mark.parametrize("statistic", [stef.monitor.statistics.mean, stef.monitor.statistics.p90], ids=["mean", "p90"])
def test_bootstrap_of_few_distinct_values_draws_counts_with_scipys_distribution(statistic: Any) -> None:
    """Issue 20: Φ samples of few distinct values are resampled through their value counts
    (multinomial draws): the bootstrap distribution is the one of scipy's value-by-value
    resampling (two-sample Kolmogorov-Smirnov test on 4,000 resamples each), and the interval
    is scipy's interval of that distribution."""
    rng = np.random.default_rng(7)
    values = (0.0, 16.0, 45.0, 56.0, 72.0, 80.0, 92.5, 100.0)
    baseline = rng.choice(values, 3_000, p=(0.2, 0.05, 0.1, 0.1, 0.1, 0.3, 0.1, 0.05))
    candidate = rng.choice(values, 2_000, p=(0.3, 0.05, 0.1, 0.1, 0.1, 0.2, 0.1, 0.05))
    settings = DriftThresholds(n_resamples=4_000)
    drawn = stef.monitor.statistics._bootstrap_from_counts(
        baseline, candidate, (statistic,), settings.n_resamples, np.random.default_rng(0)
    )
    assert drawn is not None and drawn.bootstrap_distribution.shape == (1, 4_000)
    by_value = stats.bootstrap(
        (baseline, candidate),
        lambda x, y, axis: statistic(y, axis=axis) - statistic(x, axis=axis),
        paired=False,
        vectorized=True,
        n_resamples=4_000,
        method="percentile",
        rng=np.random.default_rng(1),
    )
    assert stats.ks_2samp(drawn.bootstrap_distribution[0], by_value.bootstrap_distribution).pvalue > 0.01
    spread = float(np.std(by_value.bootstrap_distribution))
    delta = bootstrap_delta(baseline, candidate, statistic, settings)
    low, high = np.quantile(drawn.bootstrap_distribution[0], [0.025, 0.975])
    assert (delta.ci_low, delta.ci_high) == pytest.approx((low, high))
    assert delta.ci_low == pytest.approx(by_value.confidence_interval.low, abs=0.15 * spread)
    assert delta.ci_high == pytest.approx(by_value.confidence_interval.high, abs=0.15 * spread)


@pytest.mark.parametrize(
    ("sample", "counted"),
    [
        pytest.param(np.tile([0.0, 45.0, 80.0, 100.0], 250), True, id="scores"),
        pytest.param(np.arange(1_000, dtype=float), False, id="distinct"),
        pytest.param(np.tile([0.0, 45.0, float("nan"), 100.0], 250), False, id="nan"),
    ],
)
def test_only_finite_samples_of_few_distinct_values_are_counted(sample: np.ndarray, counted: bool) -> None:
    drawn = stef.monitor.statistics._bootstrap_from_counts(
        sample, np.tile([10.0, 20.0], 500), (stef.monitor.statistics.mean,), 10, np.random.default_rng(0)
    )
    assert (drawn is not None) is counted
    assert (
        stef.monitor.statistics._bootstrap_from_counts(
            np.tile([10.0, 20.0], 500), np.tile([10.0, 20.0], 500), (np.median,), 10, np.random.default_rng(0)
        )
        is None
    )  # a statistic without a counts form


def test_statistics_of_counts_equal_those_of_the_resample_written_out() -> None:
    """p90_of_counts is numpy.percentile(…, 90) of numpy.repeat(values, counts) to the last bit, the
    mean equal up to rounding, on every resample size from 2 to 400 (ranks on both sides of a tie)."""
    rng = np.random.default_rng(4)
    values = np.asarray([0.0, 16.0, 45.0, 47.5, 80.0, 100.0])
    for n in range(2, 401):
        counts = rng.multinomial(n, [0.1, 0.1, 0.2, 0.1, 0.4, 0.1], size=5)
        written = np.stack([np.repeat(values, row) for row in counts])
        np.testing.assert_array_equal(
            stef.monitor.statistics.p90_of_counts(values, counts), np.percentile(written, 90, axis=-1), strict=True
        )
        np.testing.assert_allclose(
            stef.monitor.statistics.mean_of_counts(values, counts), written.mean(axis=-1), rtol=1e-12
        )


@pytest.mark.parametrize(
    "values",
    [
        pytest.param((0.0, 16.0, 56.0, 72.0, 80.0, 100.0), id="scores"),
        pytest.param((0.0, 80.0, 80.0, 80.0, 80.0, 80.0), id="p90_always_tied"),
    ],
)
def test_joint_bootstrap_gives_each_statistic_the_interval_it_gets_alone(values: tuple[float, ...]) -> None:
    """Issue 20: the drift check draws one set of resamples for the mean and the P90 of Φ; each
    interval is bit for bit the one of a separate bootstrap (same seed, same resample indices)."""
    rng = np.random.default_rng(11)
    baseline = rng.choice(values, 1_200)
    candidate = rng.choice(values, 900)
    statistics = (stef.monitor.statistics.mean, stef.monitor.statistics.p90)
    joint = bootstrap_deltas(baseline, candidate, statistics, FAST)
    alone = [bootstrap_delta(baseline, candidate, statistic, FAST) for statistic in statistics]
    assert joint == alone
    assert joint[0].ci_low < joint[0].ci_high  # a real interval, not the constant-sample shortcut
    with pytest.raises(ValueError, match="at least one statistic"):
        bootstrap_deltas(baseline, candidate, (), FAST)


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(None, id="continuous"),
        pytest.param((0.0, 47.5, 80.0, 80.0, 100.0), id="tied_scores"),
        pytest.param((80.0,), id="constant"),
    ],
)
def test_p90_equals_numpys_percentile_bit_for_bit(values: tuple[float, ...] | None) -> None:
    """Issue 20: :func:`p90` partitions once instead of numpy's four ranks; its values are
    ``numpy.percentile(x, 90)``'s to the last bit (a zero's sign aside) on every length up to 1,000,
    along either axis, and on rows of bootstrap size (the drift checks compare intervals computed with it)."""
    rng = np.random.default_rng(20)
    p90 = stef.monitor.statistics.p90

    def sample(shape: tuple[int, ...]) -> np.ndarray:
        return rng.random(shape) * 100 if values is None else rng.choice(values, shape)

    for length in range(2, 1_001):
        rows = sample((3, length))
        np.testing.assert_array_equal(p90(rows), np.percentile(rows, 90, axis=-1), strict=True)
        np.testing.assert_array_equal(p90(rows[0]), np.percentile(rows[0], 90), strict=True)
    wide = sample((20, 10_007))
    np.testing.assert_array_equal(p90(wide), np.percentile(wide, 90, axis=-1), strict=True)
    np.testing.assert_array_equal(p90(wide.T, axis=0), np.percentile(wide.T, 90, axis=0), strict=True)


def test_p90_keeps_numpys_rules_for_nan_and_a_single_value() -> None:
    p90 = stef.monitor.statistics.p90
    assert math.isnan(float(p90(np.asarray([1.0, float("nan"), 3.0]))))
    assert float(p90(np.asarray([5.0]))) == 5.0
    np.testing.assert_array_equal(p90(np.asarray([[1.0, 2.0], [float("nan"), 4.0]])), [1.9, float("nan")])
    with pytest.raises(np.exceptions.AxisError):
        p90(np.asarray([1.0, 2.0, 3.0]), axis=1)


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(np.asarray([[3.5, 1.25, 90.75, 17.0]], dtype=np.float32), id="float32_interpolated_in_float32"),
        pytest.param(np.asarray([-100, 100], dtype=np.int8), id="int8_difference_wraps_in_numpy"),
        pytest.param(np.asarray([1, 7, 3, 12, 5]), id="int64"),
        pytest.param(np.ma.masked_array([1.0, 2.0, 3.0, 100.0, 5.0], mask=[0, 0, 0, 1, 0]), id="masked"),
        pytest.param(np.arange(24.0).reshape(2, 3, 4), id="three_dimensional"),
    ],
)
def test_p90_leaves_other_inputs_to_numpy(values: np.ndarray) -> None:
    """Only NaN-free float64 arrays take the one-partition path; other types keep numpy's own
    result (float32 and integers interpolate in their own type, a masked array keeps numpy's error),
    and so do ``axis=None`` and every axis of a 3-D array."""
    p90 = stef.monitor.statistics.p90
    axes: list[int | None] = [-1, None] if values.ndim < 3 else [0, 1, 2, None]
    for axis in axes:
        try:
            expected = np.asarray(np.percentile(values, 90.0, axis=axis), dtype=float)
        except Exception as numpy_error:
            with pytest.raises(type(numpy_error)):
                p90(values, axis=axis)  # type: ignore[arg-type]
            continue
        got = p90(values, axis=axis)  # type: ignore[arg-type]
        np.testing.assert_array_equal(got, expected, strict=True)


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


def test_constant_samples_give_their_point_interval_without_resampling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every resample of a constant sample is that sample (a day that scored every answer has
    coverage indicators all 1): the interval is the point scipy's bootstrap would give, computed
    without its resamples; a sample with two values is still resampled by scipy."""

    def no_resampling(*args: object, **kwargs: object) -> None:
        raise AssertionError("constant samples were resampled")

    monkeypatch.setattr(stats, "bootstrap", no_resampling)
    delta = bootstrap_delta([1.0] * 500, [1.0] * 400, stef.monitor.statistics.mean, FAST)
    assert (delta.baseline, delta.candidate, delta.delta, delta.ci_low, delta.ci_high) == (1.0, 1.0, 0.0, 0.0, 0.0)
    shifted = bootstrap_delta([55.5] * 3, [12.0] * 7, stef.monitor.statistics.p90, FAST)
    assert (shifted.delta, shifted.ci_low, shifted.ci_high, shifted.excludes_zero) == (-43.5, -43.5, -43.5, True)
    with pytest.raises(AssertionError, match="resampled"):
        bootstrap_delta([1.0] * 50 + [0.0], [1.0] * 40, stef.monitor.statistics.mean, FAST)


@pytest.mark.parametrize(
    ("first", "second", "low", "high"),
    [
        # Newcombe (1998), Statistics in Medicine 17:873-890, Table II, method 10 (hybrid score), examples a-h
        pytest.param((56, 70), (48, 80), 0.0524, 0.3339, id="a"),
        pytest.param((9, 10), (3, 10), 0.1705, 0.8090, id="b"),
        pytest.param((6, 7), (2, 7), 0.0582, 0.8062, id="c"),
        pytest.param((5, 56), (0, 29), -0.0381, 0.1926, id="d"),
        pytest.param((0, 10), (0, 20), -0.1611, 0.2775, id="g"),
        pytest.param((10, 10), (0, 20), 0.6791, 1.0000, id="h"),
    ],
)
def test_proportion_delta_is_newcombes_hybrid_score_interval(
    first: tuple[int, int], second: tuple[int, int], low: float, high: float
) -> None:
    """The published intervals of θ = p1 − p2 (``proportion_delta`` gives candidate − baseline: p1 is the candidate)."""
    delta = proportion_delta(second[0], second[1], first[0], first[1], 0.95)
    assert delta.delta == pytest.approx(first[0] / first[1] - second[0] / second[1])
    assert (round(delta.ci_low, 4), round(delta.ci_high, 4)) == (low, high)


def test_proportion_delta_keeps_a_full_side_uncertain() -> None:
    """120 of 120 records scored against 116 of 120: a bootstrap of the 0/1 indicators resamples the full side
    as 100 % every time and excluded 0 (Fisher's exact p = 0.12); the score interval does not."""
    assert stats.fisher_exact([[120, 0], [116, 4]]).pvalue > 0.1
    delta = proportion_delta(120, 120, 116, 120, 0.95)
    assert delta.delta == pytest.approx(-4 / 120)
    assert delta.ci_low < 0.0 < delta.ci_high and not delta.excludes_zero
    bootstrap = bootstrap_delta([1.0] * 120, [1.0] * 116 + [0.0] * 4, stef.monitor.statistics.mean, FAST)
    assert bootstrap.excludes_zero  # what the coverage criterion used before
    assert proportion_delta(120, 120, 120, 120, 0.95).ci_low < 0.0  # no width-zero interval at 100 %


@pytest.mark.parametrize(("successes", "trials"), [(0, 0), (5, 4), (-1, 3)])
def test_proportion_delta_refuses_impossible_counts(successes: int, trials: int) -> None:
    with pytest.raises(DriftError, match="0 <= successes <= trials"):
        proportion_delta(successes, trials, 1, 2, 0.95)
