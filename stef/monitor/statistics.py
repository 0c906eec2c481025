"""Statistics of a drift check: score histogram, PSI, bootstrap deltas, chi-square tests (DESIGN.md §6).

Pure: numpy and scipy only (imported when a statistic is computed). :func:`p90` is STEF's one P90
(numpy's linear interpolation): of the drift checks' bootstrap, and through :func:`p90_score` of
``stef evaluate``'s summary and the weekly report.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stef.monitor.models import (
    PSI_EPSILON,
    SCORE_BIN_EDGES,
    CategoryTest,
    Delta,
    DriftError,
    DriftThresholds,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


def score_histogram(scores: Sequence[float] | npt.NDArray[np.float64]) -> tuple[int, ...]:
    """Counts of ``scores`` per fixed 10-point bin (:data:`SCORE_BIN_EDGES`, 100 in the last bin).

    >>> score_histogram([0.0, 9.99, 10.0, 55.0, 90.0, 100.0])
    (2, 1, 0, 0, 0, 1, 0, 0, 0, 2)
    """
    import numpy as np

    counts, _ = np.histogram(np.asarray(scores, dtype=float), bins=np.asarray(SCORE_BIN_EDGES))
    return tuple(int(c) for c in counts)


def psi(
    baseline: Sequence[float] | npt.NDArray[np.float64],
    candidate: Sequence[float] | npt.NDArray[np.float64],
    epsilon: float = PSI_EPSILON,
) -> float:
    """Population stability index of ``candidate`` against ``baseline`` over the 10-point bins.

    ``PSI = Σ (c_i − b_i) · ln(c_i / b_i)`` over the bins, with ``b_i``, ``c_i`` the shares of
    each side in bin ``i`` and an empty bin's share replaced by ``epsilon``. Rules of thumb:
    < 0.1 stable, 0.1–0.25 moderate shift, > 0.25 major shift.

    Args:
        baseline: baseline scores in [0, 100].
        candidate: candidate scores in [0, 100].
        epsilon: share used for an empty bin.

    Returns:
        The PSI (≥ 0).

    Raises:
        DriftError: a side is empty.

    >>> round(psi([5.0, 15.0], [5.0, 5.0]), 4)  # (1 - .5) ln(1 / .5) + (1e-4 - .5) ln(1e-4 / .5)
    4.6043
    """
    import numpy as np

    b_counts = np.asarray(score_histogram(baseline), dtype=float)
    c_counts = np.asarray(score_histogram(candidate), dtype=float)
    if b_counts.sum() == 0 or c_counts.sum() == 0:
        raise DriftError("PSI needs at least one score on each side")
    b_share = np.where(b_counts > 0, b_counts / b_counts.sum(), epsilon)
    c_share = np.where(c_counts > 0, c_counts / c_counts.sum(), epsilon)
    return float(np.sum((c_share - b_share) * np.log(c_share / b_share)))


def mean(x: npt.NDArray[np.float64], axis: int = -1) -> npt.NDArray[np.float64]:
    """Mean of ``x`` along ``axis`` (vectorised statistic of :func:`bootstrap_delta`)."""
    import numpy as np

    return np.asarray(np.mean(x, axis=axis), dtype=float)


def p90(x: npt.NDArray[np.float64], axis: int = -1) -> npt.NDArray[np.float64]:
    """90th percentile of ``x`` along ``axis``, numpy's linear interpolation (vectorised, :func:`bootstrap_delta`).

    The values of ``numpy.percentile(x, 90, axis=axis)`` as float; NaN-free float64 arrays (the drift
    checks' bootstrap resamples) through :func:`_linear_quantile`, about 4 times faster, anything else
    through numpy itself.

    >>> import numpy as np
    >>> float(p90(np.asarray([10.0, 20.0, 30.0, 40.0, 50.0])))
    46.0
    """
    import numpy as np

    values = np.asarray(x)
    if (
        not isinstance(axis, int)  # None or a tuple: numpy flattens or reduces several axes
        or (isinstance(x, np.ndarray) and type(x) is not np.ndarray)  # a masked array, a matrix
        or values.dtype != np.float64  # numpy interpolates in the input's own type (float32, integers ...)
        or values.ndim == 0
        or np.isnan(values).any()
    ):
        return np.asarray(np.percentile(x, 90.0, axis=axis), dtype=float)  # numpy's own rules
    values = np.moveaxis(values, axis, -1)  # numpy's AxisError for an axis the array does not have
    if values.shape[-1] < 2:
        return np.asarray(np.percentile(x, 90.0, axis=axis), dtype=float)  # one value, or none
    return _linear_quantile(values, 0.9)


def _linear_quantile(values: npt.NDArray[np.float64], q: float) -> npt.NDArray[np.float64]:
    """``numpy.quantile(values, q, axis=-1)`` (method ``linear``) to the last bit (a zero's sign aside:
    which of ``0.0`` and ``-0.0`` lands on a rank depends on the partition), for NaN-free float64
    ``values`` with at least two along the last axis, from one partition around the lower rank.

    numpy's own call partitions around four ranks (the lower and upper rank, the first and the
    last, the last to find NaN): about 4 times the work on the drift checks' bootstrap (2,000
    resamples of about 10k Φ per side). Here the upper neighbour is the smallest value above the
    lower rank, and the virtual index ``(n − 1) q``, its fraction and the interpolation repeat
    numpy's arithmetic operation for operation (``_QuantileMethods["linear"]``, ``_lerp``); a test
    compares the two on every length up to 1,000 and on bootstrap-sized rows, with ties.
    """
    import numpy as np

    count = values.shape[-1]
    virtual = _virtual_index(count, q)
    if virtual >= count - 1:  # numpy's bound: the last value itself
        return np.asarray(np.max(values, axis=-1), dtype=float)
    low_rank = math.floor(virtual)
    partitioned = np.partition(values, low_rank, axis=-1)
    below = partitioned[..., low_rank]
    above = np.min(partitioned[..., low_rank + 1 :], axis=-1)
    return _interpolate(below, above, virtual - low_rank)


def _virtual_index(count: int, q: float) -> float:
    """numpy's virtual index of the ``q`` quantile of ``count`` values, method ``linear``: ``(count − 1) q``,
    with ``q`` as :func:`numpy.percentile` turns a percentage into a fraction."""
    import numpy as np

    return (count - 1) * float(np.true_divide(q * 100, 100))


def _interpolate(
    below: npt.NDArray[np.float64], above: npt.NDArray[np.float64], gamma: float
) -> npt.NDArray[np.float64]:
    """numpy's ``_lerp(below, above, gamma)``: from ``below`` for ``gamma < 0.5``, back from ``above`` otherwise."""
    import numpy as np

    difference = above - below
    result = np.asarray(np.add(below, difference * gamma))
    np.subtract(above, difference * (1 - gamma), out=result, where=gamma >= 0.5, casting="unsafe")
    return np.asarray(result, dtype=float)


def p90_score(scores: Sequence[float]) -> float | None:
    """The P90 of a list of Φ scores (:func:`p90`, the one P90 of STEF's Python code); ``None`` for no scores.

    Used by ``stef evaluate``'s summary and the weekly report; the warehouse's ``p90_score`` is DuckDB's
    ``quantile_cont``, the same definition (linear interpolation between closest ranks).

    >>> p90_score([10.0, 20.0, 30.0, 40.0, 50.0])
    46.0
    >>> p90_score([]) is None
    True
    """
    if not scores:
        return None
    import numpy as np

    return float(p90(np.asarray(scores, dtype=float)))


def bootstrap_delta(
    baseline: Sequence[float] | npt.NDArray[np.float64],
    candidate: Sequence[float] | npt.NDArray[np.float64],
    statistic: Callable[..., Any],
    thresholds: DriftThresholds | None = None,
) -> Delta:
    """``statistic(candidate) − statistic(baseline)`` with a bootstrap confidence interval.

    Both samples are resampled independently (``scipy.stats.bootstrap`` with
    ``paired=False``), ``thresholds.n_resamples`` times, at ``thresholds.confidence_level``,
    with ``thresholds.ci_method`` and a generator seeded with ``thresholds.seed``. When every
    resample gives the same value (e.g. the P90 of tied scores) the interval is that value.
    :func:`bootstrap_deltas` with one statistic.

    Args:
        baseline: baseline values (at least two).
        candidate: candidate values (at least two).
        statistic: vectorised statistic ``f(x, axis=-1)`` (``numpy.mean`` …).
        thresholds: bootstrap settings (default :class:`DriftThresholds`).

    Returns:
        A :class:`Delta`.

    Raises:
        DriftError: a side has fewer than two values.
    """
    (delta,) = bootstrap_deltas(baseline, candidate, (statistic,), thresholds)
    return delta


def bootstrap_deltas(
    baseline: Sequence[float] | npt.NDArray[np.float64],
    candidate: Sequence[float] | npt.NDArray[np.float64],
    statistics: Sequence[Callable[..., Any]],
    thresholds: DriftThresholds | None = None,
) -> list[Delta]:
    """:func:`bootstrap_delta` of several statistics of the same two samples, from one set of resamples.

    Each statistic's interval is the one :func:`bootstrap_delta` gives it alone, to the last bit:
    with the same seed, samples and batch size, the resamples drawn do not depend on the
    statistics, so drawing them once and evaluating the statistics side by side (a vector-valued
    statistic) changes no figure and draws the resamples once.

    Samples of few distinct values (Φ scores; :data:`COUNTS_BOOTSTRAP_MAX_DISTINCT_SHARE`) when every
    statistic is :func:`mean` or :func:`p90` are resampled through their value counts
    (:func:`_bootstrap_from_counts`: the same bootstrap distribution, drawn in ``O(distinct values)``
    per resample; the drift checks of the 20k nightly benchmark: 0.14 s instead of 0.9-1.5 s), and
    ``scipy.stats.bootstrap`` computes the interval of that distribution (``bootstrap_result``,
    ``n_resamples=0``) with ``thresholds.ci_method``; other samples, and every statistic of a list
    holding one without a counts form, are resampled value by value by ``scipy.stats.bootstrap``
    itself (10k distinct values per side: 0.71 s): a statistic's interval is then the one it gets
    alone only among statistics resampled the same way.

    Args:
        baseline: baseline values (at least two).
        candidate: candidate values (at least two).
        statistics: vectorised statistics ``f(x, axis=-1)`` (:func:`mean`, :func:`p90` …), at least one.
        thresholds: bootstrap settings (default :class:`DriftThresholds`).

    Returns:
        One :class:`Delta` per statistic, in order.

    Raises:
        DriftError: a side has fewer than two values.
        ValueError: no statistic.
    """
    import numpy as np
    from scipy.stats import bootstrap

    if not statistics:
        raise ValueError("bootstrap_deltas needs at least one statistic")
    limits = thresholds or DriftThresholds()
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    if b.size < 2 or c.size < 2:
        raise DriftError(f"a bootstrap interval needs two values per side, got {b.size} and {c.size}")
    points = [(float(statistic(b, axis=-1)), float(statistic(c, axis=-1))) for statistic in statistics]
    if b.min() == b.max() and c.min() == c.max():
        # every resample of a constant sample is that sample (e.g. the coverage indicators of a day
        # that scored every answer): the bootstrap distribution is one value, the interval that point
        return [Delta(baseline=bv, candidate=cv, delta=cv - bv, ci_low=cv - bv, ci_high=cv - bv) for bv, cv in points]

    def differences(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], axis: int = -1) -> npt.NDArray[np.float64]:
        return np.stack([np.asarray(statistic(y, axis=axis) - statistic(x, axis=axis)) for statistic in statistics])

    rng = np.random.default_rng(limits.seed)
    drawn = _bootstrap_from_counts(b, c, statistics, limits.n_resamples, rng)
    batch = max(1, 4_000_000 // max(b.size, c.size))  # bounds the memory of one vectorised call
    result = bootstrap(
        (b, c),
        differences,
        paired=False,
        vectorized=True,
        n_resamples=limits.n_resamples if drawn is None else 0,  # 0: scipy's interval of the distribution drawn
        bootstrap_result=drawn,
        batch=batch,
        confidence_level=limits.confidence_level,
        method=limits.ci_method,
        rng=rng,
    )
    lows = np.atleast_1d(result.confidence_interval.low)
    highs = np.atleast_1d(result.confidence_interval.high)
    deltas: list[Delta] = []
    for index, (b_value, c_value) in enumerate(points):
        low, high = float(lows[index]), float(highs[index])
        if not (math.isfinite(low) and math.isfinite(high)):  # degenerate bootstrap distribution
            spread = np.asarray(result.bootstrap_distribution, dtype=float).reshape(len(points), -1)[index]
            low, high = float(spread.min()), float(spread.max())
        deltas.append(Delta(baseline=b_value, candidate=c_value, delta=c_value - b_value, ci_low=low, ci_high=high))
    return deltas


COUNTS_BOOTSTRAP_MAX_DISTINCT_SHARE = 0.1
"""A side of :func:`bootstrap_deltas` with at most this many distinct values per value (Φ scores:
tens to hundreds of distinct values in a day of thousands) is resampled through its value counts
(:func:`_bootstrap_from_counts`); a side of more distinct values is resampled value by value by
``scipy.stats.bootstrap`` itself."""


@dataclass(frozen=True, slots=True)
class CountsBootstrap:
    """A bootstrap distribution drawn by :func:`_bootstrap_from_counts`, in the shape
    ``scipy.stats.bootstrap``'s ``bootstrap_result`` reads: ``bootstrap_distribution`` holds one row
    per statistic and one column per resample (``(statistics, n_resamples)``)."""

    bootstrap_distribution: npt.NDArray[np.float64]


def mean_of_counts(values: npt.NDArray[np.float64], counts: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """:func:`mean` of each resample given by its value counts: ``counts[r, j]`` copies of ``values[j]``.

    Args:
        values: the distinct values, shape ``(k,)``.
        counts: one row of counts per resample, shape ``(resamples, k)``, rows of equal sum ``n``.

    Returns:
        Shape ``(resamples,)``: ``Σ_j counts[r, j] · values[j] / n`` (equal to the mean of the
        resample written out up to float rounding).
    """
    import numpy as np

    n = int(counts[0].sum())
    return np.asarray(counts @ values / n, dtype=float)


def p90_of_counts(values: npt.NDArray[np.float64], counts: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """:func:`p90` of each resample given by its value counts, to the last bit of ``numpy.percentile(…, 90)``
    on the resample written out (``numpy.repeat(values, counts[r])``).

    The values at ranks ``⌊(n − 1)·0.9⌋`` and the one above of the sorted resample are the first
    values whose cumulative count exceeds each rank; numpy's interpolation between them follows
    (:func:`_interpolate`).

    Args:
        values: the distinct values in increasing order (``numpy.unique``), shape ``(k,)``.
        counts: one row of counts per resample, shape ``(resamples, k)``, rows of equal sum ``n ≥ 2``.

    Returns:
        Shape ``(resamples,)``.
    """
    import numpy as np

    n = int(counts[0].sum())
    cumulative = np.cumsum(counts, axis=-1)

    def at_rank(rank: int) -> npt.NDArray[np.float64]:
        return np.asarray(values[np.sum(cumulative <= rank, axis=-1)], dtype=float)

    virtual = _virtual_index(n, 0.9)
    if virtual >= n - 1:
        return at_rank(n - 1)
    low_rank = math.floor(virtual)
    return _interpolate(at_rank(low_rank), at_rank(low_rank + 1), virtual - low_rank)


_COUNTS_STATISTICS: dict[Callable[..., Any], Callable[..., Any]] = {mean: mean_of_counts, p90: p90_of_counts}
"""Statistics :func:`_bootstrap_from_counts` computes from value counts."""


def _bootstrap_from_counts(
    baseline: npt.NDArray[np.float64],
    candidate: npt.NDArray[np.float64],
    statistics: Sequence[Callable[..., Any]],
    n_resamples: int,
    rng: np.random.Generator,
) -> CountsBootstrap | None:
    """The bootstrap distribution of ``statistic(candidate*) − statistic(baseline*)`` for each statistic,
    drawn through the value counts of each side; ``None`` when a side has too many distinct values
    (:data:`COUNTS_BOOTSTRAP_MAX_DISTINCT_SHARE`), a value that is not finite, or a statistic has no
    counts form (:data:`_COUNTS_STATISTICS`): ``scipy.stats.bootstrap`` then resamples value by value.

    Drawing ``n`` values with replacement from a sample of ``n`` values with ``k`` distinct ones
    gives counts of the distinct values that follow the multinomial law ``Multinomial(n, counts / n)``
    (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, §6.2: the bootstrap sample is
    a draw from the empirical distribution), so each resample is drawn as ``k`` counts
    (``numpy.random.Generator.multinomial``) instead of ``n`` indices: the same bootstrap
    distribution, in ``O(k)`` instead of ``O(n)`` per resample (the drift checks of the 20k nightly
    benchmark, 2,000 resamples of about 10k Φ with a few hundred distinct values per side: 0.05 s
    instead of 1.5 s). The draws come from ``rng`` (baseline, then candidate, in batches of at most
    4M counts); they depend on neither the statistics nor their number, so each statistic's
    distribution is the one it gets alone.
    """
    import numpy as np

    counters = [_COUNTS_STATISTICS.get(statistic) for statistic in statistics]
    if any(counter is None for counter in counters):
        return None
    sides = []
    for sample in (baseline, candidate):
        if not np.isfinite(sample).all():
            return None
        values, counts = np.unique(sample, return_counts=True)
        if values.size > COUNTS_BOOTSTRAP_MAX_DISTINCT_SHARE * sample.size:
            return None
        sides.append((values, counts / sample.size, int(sample.size)))
    batch = max(1, 4_000_000 // max(values.size for values, _, _ in sides))
    columns = []
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        (b_values, b_shares, b_n), (c_values, c_shares, c_n) = sides
        b_counts = rng.multinomial(b_n, b_shares, size=size)
        c_counts = rng.multinomial(c_n, c_shares, size=size)
        columns.append(
            np.stack(
                [
                    counter(c_values, c_counts) - counter(b_values, b_counts)  # type: ignore[misc]
                    for counter in counters
                ]
            )
        )
    return CountsBootstrap(bootstrap_distribution=np.concatenate(columns, axis=-1))


def category_test(baseline: Sequence[str], candidate: Sequence[str]) -> CategoryTest | None:
    """Chi-square test of independence of the category counts of two samples.

    Args:
        baseline: one category per baseline record.
        candidate: one category per candidate record.

    Returns:
        A :class:`CategoryTest` (``scipy.stats.chi2_contingency`` on the 2 × k table of the
        categories present), or ``None`` when a side is empty or fewer than two categories occur.

    >>> category_test(["A"] * 30 + ["B"] * 10, ["A"] * 10 + ["B"] * 30).dof
    1
    """
    import numpy as np
    from scipy.stats import chi2_contingency

    if not baseline or not candidate:
        return None
    b_counts, c_counts = Counter(baseline), Counter(candidate)
    categories = tuple(sorted(set(b_counts) | set(c_counts)))
    if len(categories) < 2:
        return None
    table = np.array([[b_counts[k] for k in categories], [c_counts[k] for k in categories]])
    result = chi2_contingency(table)
    statistic = float(result.statistic)
    return CategoryTest(
        categories=categories,
        baseline_counts=tuple(int(v) for v in table[0]),
        candidate_counts=tuple(int(v) for v in table[1]),
        statistic=statistic,
        pvalue=float(result.pvalue),
        dof=int(result.dof),
        cramers_v=math.sqrt(statistic / float(table.sum())),
    )


def proportion_delta(
    baseline_successes: int, baseline_trials: int, candidate_successes: int, candidate_trials: int, level: float
) -> Delta:
    """``candidate − baseline`` of two independent binomial proportions with Newcombe's hybrid score
    interval (Newcombe 1998, *Statistics in Medicine* 17:873-890, method 10): each side's Wilson score
    interval (``scipy.stats.binomtest(...).proportion_ci(method="wilson")``), combined as
    ``δ − √((p̂c − lc)² + (ub − p̂b)²)`` … ``δ + √((uc − p̂c)² + (p̂b − lb)²)``.

    The drift checks' coverage delta (share of records that got a score). Unlike a bootstrap of the
    0/1 indicators it stays honest where coverage lives, at or near 100 %: a side with every record
    scored has a Wilson interval of positive width, while each of its resamples is that same 100 %,
    so a bootstrap called 116/120 against 120/120 a significant drop (Fisher's exact p = 0.12);
    Newcombe's interval is −8.3 … +0.4 points. Closed form: no resampling.

    Args:
        baseline_successes, baseline_trials: the baseline's scored records and records (trials ≥ 1).
        candidate_successes, candidate_trials: the candidate's.
        level: confidence level in (0, 1).

    Returns:
        A :class:`Delta` of the two shares (in [0, 1]) and their difference; the interval within [−1, 1].

    Raises:
        DriftError: a side has no trial, or more successes than trials.

    Newcombe's Table II, example (a): 56/70 − 48/80 = 0.2000, interval 0.0524 … 0.3339.

    >>> d = proportion_delta(48, 80, 56, 70, 0.95)
    >>> round(d.delta, 4), round(d.ci_low, 4), round(d.ci_high, 4)
    (0.2, 0.0524, 0.3339)
    """
    from scipy.stats import binomtest

    for successes, trials in ((baseline_successes, baseline_trials), (candidate_successes, candidate_trials)):
        if trials < 1 or not 0 <= successes <= trials:
            raise DriftError(f"a proportion needs 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    p_b, p_c = baseline_successes / baseline_trials, candidate_successes / candidate_trials
    low_b, high_b = binomtest(baseline_successes, baseline_trials).proportion_ci(level, method="wilson")
    low_c, high_c = binomtest(candidate_successes, candidate_trials).proportion_ci(level, method="wilson")
    delta = p_c - p_b
    return Delta(
        baseline=p_b,
        candidate=p_c,
        delta=delta,
        ci_low=max(-1.0, delta - math.sqrt((p_c - low_c) ** 2 + (high_b - p_b) ** 2)),
        ci_high=min(1.0, delta + math.sqrt((high_c - p_c) ** 2 + (p_b - low_b) ** 2)),
    )
