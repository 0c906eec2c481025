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
* coverage delta (share of records that got a score) with Newcombe's hybrid score interval
  (:func:`stef.monitor.statistics.proportion_delta`: Wilson intervals of both shares, honest at
  and near 100 % coverage, where a bootstrap of the 0/1 indicators is too narrow);
* chi-square tests of the verdict and filter-status counts (``scipy.stats.chi2_contingency``)
  with Cramér's V.

* the estimated share of wrong answers of each side, corrected for label shift, with its 95 %
  interval, and the delta (:mod:`stef.monitor.error_rate`); the same with unscored answers counted
  as wrong; the paired delta on the questions both sides answered (when at least
  ``min_paired_questions`` are shared);
* per suspected error category, the share of answers with it on each side (Fisher's exact test,
  Benjamini–Hochberg FDR at ``1 − confidence_level``).

Decision rule (thresholds in :class:`DriftThresholds`): a *criterion* fires when its effect size
reaches the threshold **and** its confidence interval excludes zero — the delta of the estimated
share of wrong answers (default 5 points) and the coverage delta (2 points). p-values alone never
decide: at large samples they flag shifts too small to matter. The score statistics (KS, PSI,
Wasserstein, mean and P90 Φ), the paired delta and the category shifts are supporting evidence,
listed in the reasons. Evaluations stored without ``p_correct`` (before migration 0005) have no
error-rate estimate; for them the mean Φ (1.25 points) and P90 Φ (5 points) criteria decide, as
before. The verdict is ``drift`` when a criterion fires; otherwise ``insufficient_data`` when a
side has fewer scored records than ``min_samples`` (the coverage criterion counts all records, so
a coverage collapse is reported even when few records were scored); otherwise ``no_drift``. The
direction is ``worse`` when every fired criterion moved the wrong way (more wrong answers, less
coverage, lower Φ), ``better`` when every one moved the right way, ``mixed`` otherwise.

The intervals of the error rate are normal (delta method). With the symbolic judge's separation
(mean p 0.59 for correct and 0.40 for wrong answers, out of fold) a rise from 35 % to 50 % wrong
answers at 700 answers per side is detected in about three trials out of four on unseen
NL2SQL-BUGs questions (the information bound of ``p_correct`` is about 80 %), and in more with a
schema, reviewer labels or more answers; ``tests/benchmarks/bench_drift_trials.py`` measures
detection, false alarms and the bias of the estimate on real records (README, drift checks).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from stef.monitor.error_rate import (
    category_shifts,
    error_rate_delta,
    estimate_error_rate,
    normal_quantile,
    paired_delta,
    shipped_operating_points,
    with_unscored_delta,
)
from stef.monitor.models import (
    UNCORRECTED,
    Delta,
    DriftDirection,
    DriftError,
    DriftResult,
    DriftSample,
    DriftThresholds,
    DriftVerdict,
    ErrorRate,
    OperatingPoint,
)
from stef.monitor.statistics import (
    bootstrap_deltas,
    category_test,
    mean,
    p90,
    proportion_delta,
    psi,
    score_histogram,
)

THRESHOLDS_ENV = "STEF_DRIFT_THRESHOLDS"
"""Environment variable with a JSON object of :class:`stef.monitor.models.DriftThresholds` fields for the
nightly checks, e.g. ``{"mean_delta": 2.0, "min_samples": 200}``."""


def thresholds_from_env(environ: Mapping[str, str] | None = None) -> DriftThresholds:
    """The nightly thresholds: :data:`THRESHOLDS_ENV` (JSON object) over the defaults.

    Raises:
        DriftError: the variable is not a JSON object of known threshold fields.

    >>> thresholds_from_env({"STEF_DRIFT_THRESHOLDS": '{"mean_delta": 2}'}).mean_delta
    2.0
    """
    text = (environ if environ is not None else os.environ).get(THRESHOLDS_ENV, "").strip()
    if not text:
        return DriftThresholds()
    try:
        return DriftThresholds.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())
        raise DriftError(f"${THRESHOLDS_ENV} is not a valid set of drift thresholds ({problems})") from exc


def _estimable(
    sample: DriftSample, points: Mapping[str, OperatingPoint]
) -> tuple[list[float], list[OperatingPoint], list[tuple[str | None, float]]]:
    """The scored answers with a ``p_correct``: their p, operating points and (question, wrongness)."""
    ps: list[float] = []
    used: list[OperatingPoint] = []
    pairs: list[tuple[str | None, float]] = []
    calibrations = sample.calibrations or (None,) * len(sample.p_correct)
    questions = sample.questions or (None,) * len(sample.p_correct)
    for p, key, question in zip(sample.p_correct, calibrations, questions, strict=True):
        if p is None:
            continue
        point = points.get(key, UNCORRECTED) if key is not None else UNCORRECTED
        ps.append(p)
        used.append(point)
        pairs.append((question, point.wrongness(p)))
    return ps, used, pairs


def sample_error_rate(
    sample: DriftSample,
    operating_points: Mapping[str, OperatingPoint] | None = None,
    confidence_level: float = 0.95,
) -> ErrorRate | None:
    """The estimated share of wrong answers of one sample, as :func:`compare` estimates each side
    (the weekly report's headline uses it, so the two agree on the same rows).

    Args:
        sample: the answers (:meth:`stef.monitor.models.DriftSample.from_rows`).
        operating_points: per calibration key (default: the shipped calibrators').
        confidence_level: level of the interval.

    Returns:
        :class:`stef.monitor.models.ErrorRate` (shares in [0, 1]), or ``None`` when fewer than two
        scored answers have a ``p_correct``.
    """
    points = shipped_operating_points() if operating_points is None else operating_points
    ps, used, _ = _estimable(sample, points)
    if not ps:
        return None
    # the denominator: the answers with a p_correct and the unscored ones (a scored answer stored
    # without p_correct, before migration 0005, is neither right nor wrong here)
    return estimate_error_rate(ps, used, len(ps) + sample.records - sample.n, confidence_level)


def compare(
    baseline: DriftSample,
    candidate: DriftSample,
    thresholds: DriftThresholds | None = None,
    operating_points: Mapping[str, OperatingPoint] | None = None,
) -> DriftResult:
    """Compare ``candidate`` with ``baseline`` and decide (module docstring).

    Args:
        baseline: the reference side (previous version, or the version's previous window).
        candidate: the side under test.
        thresholds: decision thresholds (default :class:`DriftThresholds`).
        operating_points: calibration key -> operating point of the judge (default: the shipped
            calibrators', :func:`stef.monitor.error_rate.shipped_operating_points`; reviewer labels
            give others, :func:`stef.monitor.error_rate.operating_point_from_labels`).

    Returns:
        A :class:`DriftResult` with every statistic that the sample sizes allow.

    >>> low = DriftSample(tuple([40.0, 60.0] * 100), records=200, p_correct=(0.35, 0.55) * 100)
    >>> high = DriftSample(tuple([60.0, 80.0] * 100), records=200, p_correct=(0.55, 0.65) * 100)
    >>> result = compare(high, low)
    >>> result.verdict.value, result.direction.value, round(result.error_rate.delta, 3)
    ('drift', 'worse', 0.15)
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
        mean_delta, p90_delta = bootstrap_deltas(b, c, (mean, p90), limits)  # one set of resamples for both
        stats.update(
            mean=mean_delta,
            p90=p90_delta,
            ks_statistic=float(ks.statistic),
            ks_pvalue=float(ks.pvalue),
            wasserstein=distance,
            wasserstein_norm=distance / spread if spread > 0 else 0.0,
            psi=psi(b, c),
        )
    if baseline.records >= 2 and candidate.records >= 2:
        stats["coverage"] = proportion_delta(
            baseline.n, baseline.records, candidate.n, candidate.records, limits.confidence_level
        )

    points = shipped_operating_points() if operating_points is None else operating_points
    b_p, b_points, b_pairs = _estimable(baseline, points)
    c_p, c_points, c_pairs = _estimable(candidate, points)
    level = limits.confidence_level
    # the denominators: the answers with a p_correct and the unscored ones (a scored answer stored without
    # p_correct, before migration 0005, is neither right nor wrong here)
    rate_b = estimate_error_rate(b_p, b_points, len(b_p) + baseline.records - baseline.n, level) if b_p else None
    rate_c = estimate_error_rate(c_p, c_points, len(c_p) + candidate.records - candidate.n, level) if c_p else None
    # the error rate decides when every scored answer has a p_correct, or when enough have one on both
    # sides; otherwise (windows of evaluations stored before migration 0005) mean and P90 Φ decide, and
    # the partial error rates are not reported (the sentence then speaks of Φ)
    complete = len(b_p) == baseline.n and len(c_p) == candidate.n
    enough_p = len(b_p) >= limits.min_samples and len(c_p) >= limits.min_samples
    # a side whose whole interval lies outside [0, 1] is one the judge's operating characteristics do
    # not fit (its answers get higher, or lower, p_correct than any share of wrong answers explains):
    # its share is not estimated, and mean and P90 Φ decide
    z = normal_quantile(level)
    unfit = [
        f"{side}'s share of wrong answers is not estimated: its answers' p_correct lie beyond the judge's "
        f"operating characteristics (estimate {rate.raw_estimate:+.1%}, {level:.0%} interval "
        f"{rate.raw_estimate - z * rate.standard_error:+.1%} … {rate.raw_estimate + z * rate.standard_error:+.1%}, "
        "outside 0 … 100 %); mean and P90 Φ decide"
        for side, rate in (("baseline", rate_b), ("candidate", rate_c))
        if rate is not None
        and (rate.raw_estimate + z * rate.standard_error < 0.0 or rate.raw_estimate - z * rate.standard_error > 1.0)
    ]
    has_rates = rate_b is not None and rate_c is not None and (complete or enough_p) and not unfit
    if has_rates:
        rate_delta = error_rate_delta((b_p, b_points), (c_p, c_points), level)
        stats.update(
            error_rate_baseline=rate_b,
            error_rate_candidate=rate_c,
            error_rate=rate_delta,
            error_rate_with_unscored=with_unscored_delta(
                (b_p, b_points),
                (c_p, c_points),
                len(b_p) + baseline.records - baseline.n,
                len(c_p) + candidate.records - candidate.n,
                level,
            )
            if rate_b and rate_c
            else None,
        )
    else:
        rate_delta = None
    if baseline.categories and candidate.categories:
        stats["category_shifts"] = category_shifts(baseline.categories, candidate.categories, 1.0 - level)
    if has_rates:  # answers whose question is unknown (no run row) take no part in the pairing
        stats["paired"] = paired_delta(
            [(q, w) for q, w in b_pairs if q is not None],
            [(q, w) for q, w in c_pairs if q is not None],
            limits.min_paired_questions,
            level,
        )

    fired: list[tuple[str, Delta]] = []
    reasons: list[str] = []
    scores_enough = baseline.n >= limits.min_samples and candidate.n >= limits.min_samples
    if has_rates:
        scores_enough = enough_p
    records_enough = baseline.records >= limits.min_samples and candidate.records >= limits.min_samples
    # (name, delta, threshold, enough, unit, whether a rise is worse, decides)
    criteria: list[tuple[str, Delta | None, float, bool, str, bool, bool]] = [
        ("error rate", rate_delta, limits.error_rate_delta, scores_enough, "share", True, has_rates),
        ("coverage", stats.get("coverage"), limits.coverage_delta, records_enough, "share", False, True),
        ("mean", stats.get("mean"), limits.mean_delta, scores_enough, "Φ points", False, not has_rates),
        ("p90", stats.get("p90"), limits.p90_delta, scores_enough, "Φ points", False, not has_rates),
    ]
    level_text = f"{limits.confidence_level:.0%}"
    supporting: list[str] = []
    worse_flags: list[bool] = []
    for name, delta, threshold, enough, unit, rise_is_worse, decides in criteria:
        if delta is None or not enough:
            continue
        if abs(delta.delta) >= threshold and delta.excludes_zero:
            text = (
                f"{name} delta {delta.delta:+.4g} ({level_text} CI {delta.ci_low:+.4g} … {delta.ci_high:+.4g}) "
                f"reaches the threshold {threshold:g} {unit} and its interval excludes 0"
            )
            if decides:
                fired.append((name, delta))
                worse_flags.append((delta.delta > 0) == rise_is_worse)
                reasons.append(text)
            else:
                supporting.append(f"supporting evidence: {text}")
    supporting.extend(unfit)
    paired = stats.get("paired")
    if paired is not None:
        supporting.append(
            f"supporting evidence: paired error-rate delta on {paired.questions} shared questions "
            f"{paired.delta:+.3f} ({level_text} CI {paired.ci_low:+.3f} … {paired.ci_high:+.3f})"
        )
    for shift in stats.get("category_shifts", ()):
        if shift.significant:
            supporting.append(
                f"supporting evidence: suspected {shift.category} in {shift.candidate_share:.1%} of the candidate's "
                f"answers against {shift.baseline_share:.1%} (Fisher p {shift.pvalue:.2g}, BH q {shift.qvalue:.2g})"
            )

    if fired:
        verdict = DriftVerdict.DRIFT
        signs = set(worse_flags)
        direction = (
            DriftDirection.MIXED
            if len(signs) > 1
            else (DriftDirection.WORSE if signs == {True} else DriftDirection.BETTER)
        )
    elif not scores_enough:
        verdict, direction = DriftVerdict.INSUFFICIENT_DATA, None
        for side, sample, estimable in (("baseline", baseline, b_p), ("candidate", candidate, c_p)):
            usable = len(estimable) if has_rates else sample.n
            if usable < limits.min_samples:
                reasons.append(f"{side} has {usable} scored records, fewer than the minimum of {limits.min_samples}")
    else:
        verdict, direction = DriftVerdict.NO_DRIFT, None
        reasons.append("no criterion reaches its threshold with an interval that excludes 0")

    return DriftResult(
        verdict=verdict,
        direction=direction,
        reasons=tuple(reasons + supporting),
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
