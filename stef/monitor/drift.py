"""Drift checks: does the score distribution of one agent version differ from another's?

Compares a *candidate* sample of evaluations with a *baseline* sample (DESIGN.md §6): a new agent
version against the one before it, or a version against its own previous window (temporal
drift). Pure: numpy and scipy only, no Prefect, no DuckDB; the warehouse reads the samples and
stores the :class:`DriftResult`.

Statistics (all reported, whatever the verdict):

* two-sample Kolmogorov–Smirnov test of the scores (``scipy.stats.ks_2samp``, asymptotic
  p-value; conservative on the tied scores Φ takes);
* Wasserstein distance of the scores (``scipy.stats.wasserstein_distance``), also divided by the
  baseline's standard deviation (``wasserstein_norm``);
* PSI (population stability index) over the fixed 10-point score bins ``[0, 10) … [90, 100]``;
* mean and P90 deltas (candidate − baseline) with bootstrap confidence intervals
  (``scipy.stats.bootstrap``, independent resampling of both samples);
* coverage delta (share of records that got a score) with a bootstrap confidence interval;
* chi-square tests of the verdict and filter-status counts (``scipy.stats.chi2_contingency``)
  with Cramér's V.

Decision rule (thresholds in :class:`DriftThresholds`): a *criterion* fires when its effect size
reaches the threshold **and** its confidence interval excludes zero — mean Δ (Φ points), P90 Δ
(Φ points), coverage Δ (share). p-values alone never decide: at large samples they flag shifts
too small to matter. The verdict is ``drift`` when a criterion fires; otherwise
``insufficient_data`` when a side has fewer scored records than ``min_samples`` (the coverage
criterion counts all records, so a coverage collapse is reported even when few records were
scored); otherwise ``no_drift``. The direction is ``worse`` when every fired criterion went down,
``better`` when every one went up, ``mixed`` otherwise.

Default thresholds: 100 scored records per side; a mean shift of 1.25 Φ points (with the symbolic
judge, incorrect NL2SQL-BUGs answers score 14–17 points lower on average than correct ones, so
1.25 points is roughly 8 more incorrect answers in 100); 5 points of P90; 2 points of coverage.
Below about 2,000 scored records per side the confidence interval decides (false alarms at its
nominal 5 %); above, the effect threshold does (far fewer). ``tests/benchmarks/bench_drift_trials.py``
measures both on real records.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from stef.errors import StefError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from stef.models import Evaluation

SCORE_BIN_EDGES: tuple[float, ...] = tuple(float(edge) for edge in range(0, 101, 10))
"""Edges of the fixed PSI / histogram bins: ``[0, 10), [10, 20) … [90, 100]`` (last bin closed)."""

PSI_EPSILON = 1e-4
"""Share used in place of an empty bin's share in the PSI (avoids ``log(0)``)."""

DEFAULT_WINDOW_DAYS = 7
"""Length of the default comparison window (days, the last one included)."""


class DriftError(StefError):
    """A drift check cannot be set up (bad sample, bad window, unknown version ...)."""


class DriftVerdict(str, Enum):
    """Outcome of a drift check."""

    DRIFT = "drift"
    NO_DRIFT = "no_drift"
    INSUFFICIENT_DATA = "insufficient_data"


class DriftDirection(str, Enum):
    """Which way the candidate moved (set only for ``drift``)."""

    WORSE = "worse"
    BETTER = "better"
    MIXED = "mixed"


class DriftKind(str, Enum):
    """What is compared."""

    VERSION = "version"
    """A candidate agent version against a baseline version, over the same (or the baseline's last) window."""
    TEMPORAL = "temporal"
    """One agent version against itself in the window before."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DriftThresholds(_Frozen):
    """Thresholds of the decision rule (module docstring); every one can be changed.

    Attributes:
        min_samples: scored records needed on each side for the score criteria (records, scored
            or not, for the coverage criterion); fewer gives ``insufficient_data``.
        confidence_level: level of the bootstrap confidence intervals.
        mean_delta: smallest |mean Φ delta| (Φ points) that counts as drift.
        p90_delta: smallest |P90 Φ delta| (Φ points) that counts as drift.
        coverage_delta: smallest |coverage delta| (share, 0.02 = 2 points) that counts as drift.
        n_resamples: bootstrap resamples per interval.
        ci_method: ``scipy.stats.bootstrap`` method (``percentile`` stays defined on the tied,
            discrete scores where ``BCa`` degenerates).
        seed: seed of the bootstrap generator (same samples, same intervals).
    """

    min_samples: int = Field(default=100, ge=2)
    confidence_level: float = Field(default=0.95, gt=0.0, lt=1.0)
    mean_delta: float = Field(default=1.25, ge=0.0)
    p90_delta: float = Field(default=5.0, ge=0.0)
    coverage_delta: float = Field(default=0.02, ge=0.0, le=1.0)
    n_resamples: int = Field(default=2000, ge=100)
    ci_method: Literal["percentile", "basic", "BCa"] = "percentile"
    seed: int = 0


@dataclass(frozen=True, slots=True)
class DriftSample:
    """The evaluations of one side of a comparison.

    Attributes:
        scores: Φ of every scored record (status ``evaluated``), each in [0, 100].
        records: every evaluation of the side, scored or not (the coverage denominator).
        verdicts: the verdict of every scored record (``CORRECT`` …).
        filter_statuses: the filter status of every scored record (``FULLY_APPLIED`` …).

    Raises:
        DriftError: a score outside [0, 100] or not finite, or fewer records than scores.
    """

    scores: tuple[float, ...]
    records: int
    verdicts: tuple[str, ...] = ()
    filter_statuses: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.records < len(self.scores):
            raise DriftError(f"a drift sample has {len(self.scores)} scores but only {self.records} records")
        for score in self.scores:
            if not (math.isfinite(score) and 0.0 <= score <= 100.0):
                raise DriftError(f"a drift sample holds the score {score!r}; scores must lie in [0, 100]")

    @property
    def n(self) -> int:
        """Scored records."""
        return len(self.scores)

    @property
    def coverage(self) -> float | None:
        """Scored / records (``None`` for an empty side)."""
        return self.n / self.records if self.records else None

    @classmethod
    def from_evaluations(cls, evaluations: Iterable[Evaluation]) -> DriftSample:
        """Build a sample from :class:`stef.models.Evaluation` objects (scored and unscored).

        >>> from stef.models import Evaluation, EvaluationStatus
        >>> DriftSample.from_evaluations([Evaluation(run_id="a", status=EvaluationStatus.EVALUATED, score=80.0),
        ...                               Evaluation(run_id="b", status=EvaluationStatus.PARSE_ERROR)]).coverage
        0.5
        """
        return cls.from_rows(
            (
                e.status.value,
                e.score,
                e.verdict.value if e.verdict is not None else None,
                e.filter_status.value if e.filter_status is not None else None,
            )
            for e in evaluations
        )

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, float | None, str | None, str | None]]) -> DriftSample:
        """Build a sample from ``(status, score, verdict, filter_status)`` rows (warehouse order).

        A row counts as scored when its status is ``evaluated`` and it has a score.

        >>> DriftSample.from_rows([("evaluated", 72.0, "LIKELY_CORRECT", "FULLY_APPLIED"), ("parse_error", None, None, None)]).n
        1
        """
        scores: list[float] = []
        verdicts: list[str] = []
        filters: list[str] = []
        records = 0
        for status, score, verdict, filter_status in rows:
            records += 1
            if status != "evaluated" or score is None:
                continue
            scores.append(float(score))
            if verdict is not None:
                verdicts.append(verdict)
            if filter_status is not None:
                filters.append(filter_status)
        return cls(tuple(scores), records, tuple(verdicts), tuple(filters))


class Delta(_Frozen):
    """A candidate − baseline difference of one statistic with its bootstrap interval.

    Attributes:
        baseline: the statistic on the baseline sample.
        candidate: the statistic on the candidate sample.
        delta: ``candidate - baseline``.
        ci_low: lower end of the bootstrap confidence interval of ``delta``.
        ci_high: upper end.
    """

    baseline: float
    candidate: float
    delta: float
    ci_low: float
    ci_high: float

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly above or wholly below zero."""
        return self.ci_low > 0.0 or self.ci_high < 0.0


class CategoryTest(_Frozen):
    """Chi-square test of category counts (baseline row vs candidate row).

    Attributes:
        categories: the categories present on either side, sorted.
        baseline_counts: counts of the baseline, in ``categories`` order.
        candidate_counts: counts of the candidate.
        statistic: the chi-square statistic (Yates-corrected for a 2 × 2 table, as scipy does).
        pvalue: its p-value.
        dof: degrees of freedom.
        cramers_v: effect size ``sqrt(statistic / total)`` (two rows).
    """

    categories: tuple[str, ...]
    baseline_counts: tuple[int, ...]
    candidate_counts: tuple[int, ...]
    statistic: float
    pvalue: float
    dof: int
    cramers_v: float


class DriftResult(_Frozen):
    """The statistics and the verdict of one comparison (module docstring).

    Score statistics are ``None`` when a side has fewer than two scored records; the coverage
    delta is ``None`` when a side has no records; a chi-square test is ``None`` when fewer than
    two categories occur.

    Attributes:
        verdict: ``drift``, ``no_drift`` or ``insufficient_data``.
        direction: ``worse`` / ``better`` / ``mixed`` for ``drift``, else ``None``.
        reasons: one line per fired criterion, or why the data are insufficient.
        n_baseline, n_candidate: scored records per side.
        records_baseline, records_candidate: records per side (scored or not).
        mean, p90, coverage: the deltas with their intervals.
        ks_statistic, ks_pvalue: two-sample Kolmogorov–Smirnov test.
        wasserstein: Wasserstein distance of the scores (Φ points).
        wasserstein_norm: ``wasserstein`` / baseline standard deviation.
        psi: population stability index over :data:`SCORE_BIN_EDGES`.
        baseline_histogram, candidate_histogram: score counts per 10-point bin.
        verdict_test, filter_status_test: chi-square tests of the categories.
        thresholds: the thresholds applied.
    """

    verdict: DriftVerdict
    direction: DriftDirection | None
    reasons: tuple[str, ...]
    n_baseline: int
    n_candidate: int
    records_baseline: int
    records_candidate: int
    mean: Delta | None = None
    p90: Delta | None = None
    coverage: Delta | None = None
    ks_statistic: float | None = None
    ks_pvalue: float | None = None
    wasserstein: float | None = None
    wasserstein_norm: float | None = None
    psi: float | None = None
    baseline_histogram: tuple[int, ...] = ()
    candidate_histogram: tuple[int, ...] = ()
    verdict_test: CategoryTest | None = None
    filter_status_test: CategoryTest | None = None
    thresholds: DriftThresholds = DriftThresholds()

    def summary(self) -> dict[str, Any]:
        """Flat JSON-ready dict (``stef drift --json``): verdict, direction, sizes and the headline statistics.

        Keys: ``verdict``, ``direction``, ``n_baseline``, ``n_candidate``, ``records_baseline``,
        ``records_candidate``, ``mean_baseline``, ``mean_candidate``, ``mean_delta``,
        ``mean_delta_ci`` (``[low, high]``), ``p90_baseline``, ``p90_candidate``, ``p90_delta``,
        ``p90_delta_ci``, ``coverage_baseline``, ``coverage_candidate``, ``coverage_delta``,
        ``coverage_delta_ci``, ``ks_statistic``, ``ks_pvalue``, ``wasserstein``,
        ``wasserstein_norm``, ``psi``, ``verdict_chi2_pvalue``, ``verdict_cramers_v``,
        ``filter_status_chi2_pvalue``, ``filter_status_cramers_v``, ``reasons``. Missing values
        (and non-finite ones) are ``None``.
        """
        row: dict[str, Any] = {
            "verdict": self.verdict.value,
            "direction": self.direction.value if self.direction else None,
            "n_baseline": self.n_baseline,
            "n_candidate": self.n_candidate,
            "records_baseline": self.records_baseline,
            "records_candidate": self.records_candidate,
        }
        for name, delta in (("mean", self.mean), ("p90", self.p90), ("coverage", self.coverage)):
            row[f"{name}_baseline"] = _finite(delta.baseline) if delta else None
            row[f"{name}_candidate"] = _finite(delta.candidate) if delta else None
            row[f"{name}_delta"] = _finite(delta.delta) if delta else None
            row[f"{name}_delta_ci"] = [_finite(delta.ci_low), _finite(delta.ci_high)] if delta else None
        row.update(
            ks_statistic=_finite(self.ks_statistic),
            ks_pvalue=_finite(self.ks_pvalue),
            wasserstein=_finite(self.wasserstein),
            wasserstein_norm=_finite(self.wasserstein_norm),
            psi=_finite(self.psi),
            verdict_chi2_pvalue=_finite(self.verdict_test.pvalue) if self.verdict_test else None,
            verdict_cramers_v=_finite(self.verdict_test.cramers_v) if self.verdict_test else None,
            filter_status_chi2_pvalue=_finite(self.filter_status_test.pvalue) if self.filter_status_test else None,
            filter_status_cramers_v=_finite(self.filter_status_test.cramers_v) if self.filter_status_test else None,
            reasons=list(self.reasons),
        )
        return row


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


# --------------------------------------------------------------------------- statistics


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


def _mean(x: npt.NDArray[np.float64], axis: int = -1) -> npt.NDArray[np.float64]:
    import numpy as np

    return np.asarray(np.mean(x, axis=axis), dtype=float)


def _p90(x: npt.NDArray[np.float64], axis: int = -1) -> npt.NDArray[np.float64]:
    import numpy as np

    return np.asarray(np.percentile(x, 90.0, axis=axis), dtype=float)  # linear interpolation, as DuckDB's quantile_cont


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
    import numpy as np
    from scipy.stats import bootstrap

    limits = thresholds or DriftThresholds()
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    if b.size < 2 or c.size < 2:
        raise DriftError(f"a bootstrap interval needs two values per side, got {b.size} and {c.size}")
    b_value = float(statistic(b, axis=-1))
    c_value = float(statistic(c, axis=-1))

    def difference(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], axis: int = -1) -> npt.NDArray[np.float64]:
        return np.asarray(statistic(y, axis=axis) - statistic(x, axis=axis))

    batch = max(1, 4_000_000 // max(b.size, c.size))  # bounds the memory of one vectorised call
    result = bootstrap(
        (b, c),
        difference,
        paired=False,
        vectorized=True,
        n_resamples=limits.n_resamples,
        batch=batch,
        confidence_level=limits.confidence_level,
        method=limits.ci_method,
        rng=np.random.default_rng(limits.seed),
    )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):  # degenerate bootstrap distribution
        spread = np.asarray(result.bootstrap_distribution, dtype=float)
        low, high = float(spread.min()), float(spread.max())
    return Delta(baseline=b_value, candidate=c_value, delta=c_value - b_value, ci_low=low, ci_high=high)


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


def _coverage_indicators(sample: DriftSample) -> list[float]:
    return [1.0] * sample.n + [0.0] * (sample.records - sample.n)


# --------------------------------------------------------------------------- decision


def compare(baseline: DriftSample, candidate: DriftSample, thresholds: DriftThresholds | None = None) -> DriftResult:
    """Compare ``candidate`` with ``baseline`` and decide (module docstring).

    Args:
        baseline: the reference side (previous version, or the version's previous window).
        candidate: the side under test.
        thresholds: decision thresholds (default :class:`DriftThresholds`).

    Returns:
        A :class:`DriftResult` with every statistic that the sample sizes allow.

    >>> low = DriftSample(tuple([40.0, 60.0] * 100), records=200)
    >>> high = DriftSample(tuple([60.0, 80.0] * 100), records=200)
    >>> result = compare(high, low)
    >>> result.verdict.value, result.direction.value, result.mean.delta
    ('drift', 'worse', -20.0)
    >>> compare(high, DriftSample((50.0,) * 30, records=30)).verdict.value
    'insufficient_data'
    """
    import numpy as np
    from scipy.stats import ks_2samp, wasserstein_distance

    limits = thresholds or DriftThresholds()
    b = np.asarray(baseline.scores, dtype=float)
    c = np.asarray(candidate.scores, dtype=float)
    stats: dict[str, Any] = {}
    if b.size >= 2 and c.size >= 2:
        ks = ks_2samp(b, c, method="asymp")  # "exact" fails (with a warning) on large tied samples
        distance = float(wasserstein_distance(b, c))
        spread = float(np.std(b, ddof=1)) or float(np.std(np.concatenate([b, c]), ddof=1))
        stats.update(
            mean=bootstrap_delta(b, c, _mean, limits),
            p90=bootstrap_delta(b, c, _p90, limits),
            ks_statistic=float(ks.statistic),
            ks_pvalue=float(ks.pvalue),
            wasserstein=distance,
            wasserstein_norm=distance / spread if spread > 0 else 0.0,
            psi=psi(b, c),
        )
    if baseline.records >= 2 and candidate.records >= 2:
        stats["coverage"] = bootstrap_delta(
            _coverage_indicators(baseline), _coverage_indicators(candidate), _mean, limits
        )

    fired: list[tuple[str, Delta]] = []
    reasons: list[str] = []
    scores_enough = baseline.n >= limits.min_samples and candidate.n >= limits.min_samples
    records_enough = baseline.records >= limits.min_samples and candidate.records >= limits.min_samples
    criteria: list[tuple[str, Delta | None, float, bool, str]] = [
        ("mean", stats.get("mean"), limits.mean_delta, scores_enough, "Φ points"),
        ("p90", stats.get("p90"), limits.p90_delta, scores_enough, "Φ points"),
        ("coverage", stats.get("coverage"), limits.coverage_delta, records_enough, "share"),
    ]
    level = f"{limits.confidence_level:.0%}"
    for name, delta, threshold, enough, unit in criteria:
        if delta is None or not enough:
            continue
        if abs(delta.delta) >= threshold and delta.excludes_zero:
            fired.append((name, delta))
            reasons.append(
                f"{name} delta {delta.delta:+.4g} ({level} CI {delta.ci_low:+.4g} … {delta.ci_high:+.4g}) "
                f"reaches the threshold {threshold:g} {unit} and its interval excludes 0"
            )

    if fired:
        verdict = DriftVerdict.DRIFT
        signs = {delta.delta > 0 for _, delta in fired}
        direction = (
            DriftDirection.MIXED
            if len(signs) > 1
            else (DriftDirection.BETTER if signs == {True} else DriftDirection.WORSE)
        )
    elif not scores_enough:
        verdict, direction = DriftVerdict.INSUFFICIENT_DATA, None
        for side, sample in (("baseline", baseline), ("candidate", candidate)):
            if sample.n < limits.min_samples:
                reasons.append(f"{side} has {sample.n} scored records, fewer than the minimum of {limits.min_samples}")
    else:
        verdict, direction = DriftVerdict.NO_DRIFT, None
        reasons.append("no criterion reaches its threshold with an interval that excludes 0")

    return DriftResult(
        verdict=verdict,
        direction=direction,
        reasons=tuple(reasons),
        n_baseline=baseline.n,
        n_candidate=candidate.n,
        records_baseline=baseline.records,
        records_candidate=candidate.records,
        baseline_histogram=score_histogram(b) if b.size else (),
        candidate_histogram=score_histogram(c) if c.size else (),
        verdict_test=category_test(baseline.verdicts, candidate.verdicts),
        filter_status_test=category_test(baseline.filter_statuses, candidate.filter_statuses),
        thresholds=limits,
        **stats,
    )


# --------------------------------------------------------------------------- windows and versions


def trailing_window(end: date, days: int = DEFAULT_WINDOW_DAYS) -> tuple[date, date]:
    """The ``days`` days ending at ``end`` (both included).

    Raises:
        DriftError: ``days`` < 1.

    >>> trailing_window(date(2026, 11, 26))
    (datetime.date(2026, 11, 20), datetime.date(2026, 11, 26))
    """
    if days < 1:
        raise DriftError(f"a drift window needs at least one day, got {days}")
    return end - timedelta(days=days - 1), end


def previous_window(start: date, end: date) -> tuple[date, date]:
    """The window of the same length just before ``start … end``.

    Raises:
        DriftError: ``end`` is before ``start``.

    >>> previous_window(date(2026, 11, 20), date(2026, 11, 26))
    (datetime.date(2026, 11, 13), datetime.date(2026, 11, 19))
    """
    if end < start:
        raise DriftError(f"window end {end.isoformat()} is before its start {start.isoformat()}")
    length = (end - start).days + 1
    return start - timedelta(days=length), start - timedelta(days=1)


_NUMBER = re.compile(r"([0-9]+)")
"""A run of ASCII digits (``\\d`` would also take other scripts' digits, which ``int()`` reads differently)."""


def version_sort_key(version: str) -> tuple[tuple[int, int, str, int], ...]:
    """Natural sort key of a version name (numbers compare as numbers: ``v1.10`` > ``v1.9``).

    The name is split into runs of ASCII digits ``0-9`` and the text between them. A digit run
    compares by its length without leading zeros, then by its digits, then by its leading zeros
    (``v01`` after ``v1``): the order of the numbers' values for runs of any length, with no ``int()``
    (which refuses runs of more than 4,300 digits). Everything else, ``²`` or ``١٢`` (Arabic-Indic
    digits) included, compares as text. Numbers sort before text at the same position.

    Args:
        version: any agent version name.

    Returns:
        One tuple per part: ``(0, length, digits, leading zeros)`` for a digit run (``digits``
        without its leading zeros), ``(1, 0, text, 0)`` for text.

    >>> sorted(["v1.10.0", "v1.9.2", "v1.9.10"], key=version_sort_key)
    ['v1.9.2', 'v1.9.10', 'v1.10.0']
    >>> sorted(["v1²", "v" + "9" * 5000, "v10", "v١٢", "v010"], key=version_sort_key)[:3]
    ['v1²', 'v10', 'v010']
    """
    key: list[tuple[int, int, str, int]] = []
    for part in _NUMBER.split(version):
        if not part:
            continue
        if _NUMBER.fullmatch(part):
            number = part.lstrip("0") or "0"
            key.append((0, len(number), number, len(part) - len(number)))
        else:
            key.append((1, 0, part, 0))
    return tuple(key)


def order_versions(first_seen: Mapping[str, date]) -> list[str]:
    """Versions from oldest to newest: by the first day each was seen, then by natural order.

    >>> order_versions({"v2": date(2026, 11, 3), "v1": date(2026, 11, 1), "v1.1": date(2026, 11, 3)})
    ['v1', 'v1.1', 'v2']
    """
    return sorted(first_seen, key=lambda v: (first_seen[v], version_sort_key(v)))
