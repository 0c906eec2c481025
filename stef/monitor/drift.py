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

import os
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from stef.monitor.models import (
    Delta,
    DriftDirection,
    DriftError,
    DriftResult,
    DriftSample,
    DriftThresholds,
    DriftVerdict,
)
from stef.monitor.statistics import bootstrap_delta, category_test, coverage_indicators, mean, p90, psi, score_histogram

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
            mean=bootstrap_delta(b, c, mean, limits),
            p90=bootstrap_delta(b, c, p90, limits),
            ks_statistic=float(ks.statistic),
            ks_pvalue=float(ks.pvalue),
            wasserstein=distance,
            wasserstein_norm=distance / spread if spread > 0 else 0.0,
            psi=psi(b, c),
        )
    if baseline.records >= 2 and candidate.records >= 2:
        stats["coverage"] = bootstrap_delta(coverage_indicators(baseline), coverage_indicators(candidate), mean, limits)

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
