"""The estimated share of wrong answers of an agent version, corrected for label shift (issue 16).

The judge gives every scored answer a calibrated ``p_correct``. Its plain mean is a poor estimate of
the share of correct answers when that share differs from the one the calibrator was trained at
(about one half): a calibrated probability is pulled toward the training base rate, so a version
with 35 % wrong answers and one with 50 % look closer than they are. STEF therefore estimates the
share of wrong answers by *probabilistic adjusted classify-and-count* (Bella et al., "Quantification
via probability estimators", ICDM 2010), the soft form of the Rogan–Gladen correction:

    π̂ = (a − m) / (a − b)

with ``m`` the mean ``p_correct`` of the version's scored answers, ``a`` the judge's mean p over
correct answers (soft specificity) and ``b`` its mean p over wrong answers (one minus the soft
sensitivity). ``a`` and ``b`` are the judge's *operating characteristics*
(:class:`stef.monitor.models.OperatingPoint`); they do not depend on the share of wrong answers,
so the estimate stays unbiased when that share moves. The shipped values come from the grouped
cross-validation predictions of each calibrator (``metadata.quantification`` of
``stef/pipeline/judge/calibrators/*.json``); reviewer labels of an app can replace them
(:func:`operating_point_from_labels`).

The estimate is linear in the answers: each scored answer contributes its *estimated wrongness*
``w = (a − p) / (a − b)`` (an answer judged by a calibrator of its own, or by an LLM with no
measured characteristics, uses its own ``a``, ``b``; an uncorrected answer has ``w = 1 − p``), and
π̂ is the mean of ``w``. Intervals are normal (delta method): the sampling variance of the mean of
``w`` plus the uncertainty of ``a`` and ``b`` (their standard errors, which include how far they
moved between the two development benchmarks). A second figure counts the answers that got no
score (parse errors, non-SELECT statements) as wrong.

Also here: the share of answers with each suspected error category in two samples, tested with
Fisher's exact test and Benjamini–Hochberg control of the false discovery rate, and the paired
difference of the estimated wrongness on the questions both versions answered.

Pure: numpy and scipy (imported when needed); the shipped operating points are read from the
calibrator artifacts.
"""

from __future__ import annotations

import logging
import math
import unicodedata
from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import lru_cache

from stef.monitor.models import (
    CALIBRATION_ARTIFACTS,
    UNCORRECTED,
    CategoryShift,
    Delta,
    DriftError,
    ErrorRate,
    OperatingPoint,
    PairedDelta,
    calibration_key,
)

logger = logging.getLogger(__name__)
"""Says which reviewer labels were left out (:func:`reviewed_operating_points`)."""

__all__ = [
    "CALIBRATION_ARTIFACTS",
    "artifact_operating_point",
    "calibration_key",
    "category_shifts",
    "error_rate_delta",
    "estimate_error_rate",
    "normal_quantile",
    "operating_point_from_labels",
    "paired_delta",
    "question_key",
    "reviewed_operating_points",
    "shipped_operating_points",
    "with_unscored_delta",
]


@lru_cache(maxsize=1)
def shipped_operating_points() -> dict[str, OperatingPoint]:
    """The operating point of every shipped calibrator, by calibration key (:data:`CALIBRATION_ARTIFACTS`).

    ``a`` and ``b`` are the pooled cross-validation means; their standard error combines the
    sampling error and the spread between the development datasets (``sqrt(se² + transfer_sd²)``).

    Raises:
        DriftError: an artifact lacks ``metadata.quantification`` (retrain with ``scripts/train_calibrator.py``).
    """
    from stef.pipeline.judge.calibrate import load_calibrator

    points: dict[str, OperatingPoint] = {}
    for key, artifact in CALIBRATION_ARTIFACTS.items():
        calibrator = load_calibrator(artifact)
        point = artifact_operating_point(
            calibrator.metadata, calibrator.version, f"grouped cross-validation of {calibrator.version}"
        )
        if point is None:
            raise DriftError(f"calibrator {artifact} has no quantification figures; retrain it")
        points[key] = point
    return points


def operating_point_from_labels(p_correct: Sequence[float], labels: Sequence[bool], name: str) -> OperatingPoint:
    """The judge's operating point measured on reviewed answers (``labels``: True = correct).

    Plugs reviewer labels into the estimator: the mean p of the answers reviewers found correct
    and of those they found wrong, with their sampling standard errors.

    Raises:
        DriftError: fewer than two labelled answers on a side, or no separation (``a ≤ b``: the
            judge gave the answers reviewers found correct no higher p than the wrong ones).

    >>> point = operating_point_from_labels([0.9, 0.7, 0.3, 0.1], [True, True, False, False], "reviewed")
    >>> point.mean_p_correct, point.mean_p_incorrect
    (0.8, 0.2)
    """
    import numpy as np

    p = np.asarray(p_correct, dtype=float)
    y = np.asarray(labels, dtype=bool)
    if p.shape != y.shape:
        raise DriftError(f"{p.size} probabilities but {y.size} labels")
    correct, wrong = p[y], p[~y]
    if correct.size < 2 or wrong.size < 2:
        raise DriftError(f"an operating point needs two labelled answers per side, got {correct.size} and {wrong.size}")
    a, b = round(float(correct.mean()), 12), round(float(wrong.mean()), 12)
    if a <= b:
        raise DriftError(
            f"{name}: the judge does not separate the labelled answers: mean p of the {correct.size} "
            f"correct ones {a:.4f} is not above that of the {wrong.size} wrong ones {b:.4f}"
        )
    return OperatingPoint(
        name=name,
        mean_p_correct=a,
        mean_p_incorrect=b,
        se_p_correct=float(correct.std(ddof=1) / math.sqrt(correct.size)),
        se_p_incorrect=float(wrong.std(ddof=1) / math.sqrt(wrong.size)),
        source=f"reviewer labels ({correct.size} correct, {wrong.size} wrong answers)",
    )


def artifact_operating_point(metadata: Mapping[str, object], name: str, source: str) -> OperatingPoint | None:
    """The operating point in a calibrator artifact's ``metadata.quantification``; ``None`` without
    one, or when its figures do not separate the answers (``mean_p_correct ≤ mean_p_incorrect``,
    a calibrator fitted on labels that contradict the judge: named in a warning of :data:`logger`)."""
    figures = metadata.get("quantification")
    if not isinstance(figures, Mapping):
        return None
    if float(figures["mean_p_correct"]) <= float(figures["mean_p_incorrect"]):
        logger.warning(
            "%s: its cross-validation does not separate the answers (mean p %s of correct, %s of wrong ones); "
            "the shipped operating point stays",
            name,
            figures["mean_p_correct"],
            figures["mean_p_incorrect"],
        )
        return None
    return OperatingPoint(
        name=name,
        mean_p_correct=float(figures["mean_p_correct"]),
        mean_p_incorrect=float(figures["mean_p_incorrect"]),
        se_p_correct=math.hypot(float(figures["se_p_correct"]), float(figures.get("transfer_sd_p_correct", 0.0))),
        se_p_incorrect=math.hypot(float(figures["se_p_incorrect"]), float(figures.get("transfer_sd_p_incorrect", 0.0))),
        source=f"{source} ({figures['rows_correct']} correct, {figures['rows_incorrect']} wrong answers)",
    )


MIN_REVIEWED_PER_SIDE = 20
"""Fewest reviewed answers per label (correct, wrong) under one calibration key before their
operating point replaces the shipped one (:func:`reviewed_operating_points`)."""


def reviewed_operating_points(
    rows: Sequence[Mapping[str, object]], minimum_per_side: int = MIN_REVIEWED_PER_SIDE
) -> dict[str, OperatingPoint]:
    """Operating points measured on reviewer labels, per calibration key, where there are enough.

    Args:
        rows: reviewed answers with ``label`` (``correct`` / ``incorrect``), ``status``,
            ``p_correct``, ``judge``, ``schema_checked``, ``observed_checked``
            (:func:`warehouse.reviews.read_reviewed_evaluations`).
        minimum_per_side: fewest labelled answers per label under a key.

    Returns:
        Calibration key -> :func:`operating_point_from_labels` of its reviewed answers, for the
        keys with at least ``minimum_per_side`` answers per label and a > b; the others are left
        out (the shipped point stays; a key with enough labels but a ≤ b is named in a warning of
        :data:`logger`: its labels contradict the judge). The labels should come from a random
        sample: a sample drawn by p (``uncertain``, ``stratified``) shifts the means of p within
        each label.
    """
    grouped: dict[str, tuple[list[float], list[bool]]] = defaultdict(lambda: ([], []))
    for row in rows:
        p = row.get("p_correct")
        if row.get("status") != "evaluated" or not isinstance(p, int | float):
            continue
        key = calibration_key(
            None if row.get("judge") is None else str(row.get("judge")),
            bool(row.get("schema_checked")),
            bool(row.get("observed_checked")),
        )
        if key is None:
            continue
        ps, labels = grouped[key]
        ps.append(float(p))
        labels.append(row.get("label") == "correct")
    points: dict[str, OperatingPoint] = {}
    for key, (ps, labels) in sorted(grouped.items()):
        correct = sum(labels)
        if min(correct, len(labels) - correct) < minimum_per_side:
            continue
        try:
            points[key] = operating_point_from_labels(ps, labels, f"reviews ({key})")
        except DriftError as exc:  # a ≤ b: these labels cannot correct the estimate
            logger.warning("reviewer labels left out, the shipped operating point stays: %s", exc)
    return points


def normal_quantile(level: float) -> float:
    """The two-sided normal quantile of a ``level`` interval (1.96 for 0.95).

    >>> round(normal_quantile(0.95), 2)
    1.96
    """
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2.0))


class _Side:
    """One sample's pieces of π̂: per operating point its count and mean p, and the wrongness of every answer."""

    def __init__(self, p_correct: Sequence[float], points: Sequence[OperatingPoint]) -> None:
        import numpy as np

        if len(p_correct) != len(points):
            raise DriftError(f"{len(p_correct)} probabilities but {len(points)} operating points")
        self.n = len(p_correct)
        groups: dict[OperatingPoint, list[float]] = defaultdict(list)
        for p, point in zip(p_correct, points, strict=True):
            if not (math.isfinite(p) and 0.0 <= p <= 1.0):
                raise DriftError(f"p_correct {p!r} is not a probability")
            groups[point].append(p)
        self.groups = {point: (len(ps), float(np.mean(ps))) for point, ps in groups.items()}
        self.wrongness = np.asarray([point.wrongness(p) for p, point in zip(p_correct, points, strict=True)])

    @property
    def estimate(self) -> float:
        return float(self.wrongness.mean()) if self.n else math.nan

    @property
    def sampling_variance(self) -> float:
        return float(self.wrongness.var(ddof=1) / self.n) if self.n > 1 else math.inf

    def gradient(self) -> dict[tuple[OperatingPoint, str], float]:
        """∂π̂/∂a and ∂π̂/∂b of every operating point used (share × derivative of its group's estimate)."""
        out: dict[tuple[OperatingPoint, str], float] = {}
        for point, (count, mean_p) in self.groups.items():
            share = count / self.n
            a, b = point.mean_p_correct, point.mean_p_incorrect
            out[(point, "a")] = share * (mean_p - b) / (a - b) ** 2
            out[(point, "b")] = share * (a - mean_p) / (a - b) ** 2
        return out


def _parameter_variance(gradient: Mapping[tuple[OperatingPoint, str], float]) -> float:
    total = 0.0
    for (point, which), value in gradient.items():
        se = point.se_p_correct if which == "a" else point.se_p_incorrect
        total += (value * se) ** 2
    return total


def _method(points: Sequence[OperatingPoint]) -> str:
    names = sorted({point.name for point in points})
    corrected = [name for name in names if name != UNCORRECTED.name]
    if not corrected:
        return "uncorrected mean of 1 − p_correct (no operating characteristics for this judge)"
    text = "probabilistic adjusted classify-and-count with " + ", ".join(corrected)
    return text + (" (part uncorrected)" if len(corrected) < len(names) else "")


def estimate_error_rate(
    p_correct: Sequence[float],
    points: Sequence[OperatingPoint],
    records: int,
    confidence_level: float = 0.95,
) -> ErrorRate | None:
    """Estimated share of wrong answers of one sample, with its interval (module docstring).

    Args:
        p_correct: ``p_correct`` of every scored answer, each in [0, 1].
        points: the operating point of each answer's judge (same length).
        records: every answer of the sample, scored or not (≥ ``len(p_correct)``); the unscored
            ones count as wrong in :attr:`ErrorRate.with_unscored`.
        confidence_level: level of the normal intervals.

    Returns:
        An :class:`stef.monitor.models.ErrorRate` (shares in [0, 1]), or ``None`` with fewer than two scored answers.

    Raises:
        DriftError: lengths differ, a p outside [0, 1], or fewer records than scored answers.

    >>> from stef.monitor.models import OperatingPoint
    >>> point = OperatingPoint(name="judge", mean_p_correct=0.6, mean_p_incorrect=0.4)
    >>> rate = estimate_error_rate([0.6, 0.6, 0.4, 0.6], [point] * 4, records=5)
    >>> rate.estimate, round(rate.with_unscored, 12)  # w = 0, 0, 1, 0; with the unscored answer: (1 + 1) / 5
    (0.25, 0.4)
    """
    if records < len(p_correct):
        raise DriftError(f"{len(p_correct)} scored answers but only {records} records")
    if len(p_correct) < 2:
        return None
    side = _Side(p_correct, points)
    z = normal_quantile(confidence_level)
    raw = side.estimate
    se = math.sqrt(side.sampling_variance + _parameter_variance(side.gradient()))
    scored_share = side.n / records
    with_unscored = scored_share * raw + (1.0 - scored_share)
    return ErrorRate(
        estimate=_clip(raw),
        raw_estimate=raw,
        ci_low=_clip(raw - z * se),
        ci_high=_clip(raw + z * se),
        standard_error=se,
        n=side.n,
        records=records,
        with_unscored=_clip(with_unscored),
        with_unscored_ci_low=_clip(with_unscored - z * scored_share * se),
        with_unscored_ci_high=_clip(with_unscored + z * scored_share * se),
        method=_method(points),
    )


def with_unscored_delta(
    baseline: tuple[Sequence[float], Sequence[OperatingPoint]],
    candidate: tuple[Sequence[float], Sequence[OperatingPoint]],
    baseline_records: int,
    candidate_records: int,
    confidence_level: float = 0.95,
) -> Delta | None:
    """Candidate − baseline share of wrong answers counting unscored answers as wrong (the second figure).

    Each side is ``s · π̂ + (1 − s)`` with ``s`` its scored share (taken as known). The interval is
    the delta method's: both samples' variances scaled by ``s²``, plus the operating points'
    uncertainty through the difference of the two sides' gradients (scaled by their ``s``): the
    sides share the operating points, so their uncertainty cancels where the sides agree instead of
    counting twice. It never reaches beyond what the two sides' own intervals allow, as in
    :func:`error_rate_delta`.

    Args:
        baseline: ``(p_correct, operating points)`` of the baseline's scored answers.
        candidate: the same for the candidate.
        baseline_records: every answer of the baseline, scored or not.
        candidate_records: the same for the candidate.
        confidence_level: level of the interval.

    Returns:
        A :class:`stef.monitor.models.Delta` (shares in [0, 1], change and interval in [−1, 1]), or
        ``None`` when a side has fewer than two scored answers.

    Raises:
        DriftError: fewer records than scored answers on a side.

    >>> from stef.monitor.models import OperatingPoint
    >>> point = OperatingPoint(name="judge", mean_p_correct=0.6, mean_p_incorrect=0.4)
    >>> same = ([0.6] * 60 + [0.4] * 40, [point] * 100)
    >>> delta = with_unscored_delta(same, same, 100, 125)  # 25 more answers unscored on the candidate side
    >>> round(delta.baseline, 3), round(delta.candidate, 3), round(delta.delta, 3)
    (0.4, 0.52, 0.12)
    """
    if len(baseline[0]) < 2 or len(candidate[0]) < 2:
        return None
    if baseline_records < len(baseline[0]) or candidate_records < len(candidate[0]):
        raise DriftError("fewer records than scored answers")
    b, c = _Side(*baseline), _Side(*candidate)
    s_b, s_c = b.n / baseline_records, c.n / candidate_records
    gradient = {key: s_c * value for key, value in c.gradient().items()}
    for key, value in b.gradient().items():
        gradient[key] = gradient.get(key, 0.0) - s_b * value
    z = normal_quantile(confidence_level)
    b_value, c_value = s_b * b.estimate + (1.0 - s_b), s_c * c.estimate + (1.0 - s_c)
    change = c_value - b_value
    half = z * math.sqrt(s_b**2 * b.sampling_variance + s_c**2 * c.sampling_variance + _parameter_variance(gradient))
    return _bounded(
        change - half, change + half, (b_value, _side_interval(b, z, s_b)), (c_value, _side_interval(c, z, s_c))
    )


def error_rate_delta(
    baseline: tuple[Sequence[float], Sequence[OperatingPoint]],
    candidate: tuple[Sequence[float], Sequence[OperatingPoint]],
    confidence_level: float = 0.95,
) -> Delta | None:
    """Candidate − baseline estimated share of wrong answers, with a normal interval.

    With one operating point the delta is ``(m_b − m_c) / (a − b)``: an error in ``a`` or ``b`` only
    rescales it. So the interval is the sampling one (the two samples' variances add), whose
    exclusion of 0 is the two-sample test of equal mean ``p_correct`` at its level, and then each
    end moves away from 0 by the scale's relative uncertainty ``z · se(a − b) / (a − b)`` (toward 0
    when it lies on the far side), which widens it without flipping its sign. When the sides mix
    operating points in other shares, the part of the operating points' uncertainty (delta method,
    the difference of both sides' gradients) that a rescaling does not explain is added to the
    sampling variance: it can move the delta itself. The scale's uncertainty is the largest of the
    points used.

    Args:
        baseline: ``(p_correct, operating points)`` of the baseline's scored answers.
        candidate: the same for the candidate.
        confidence_level: level of the interval.

    The interval never reaches beyond what the two sides' own intervals allow (candidate's lower end
    − baseline's upper end … candidate's upper end − baseline's lower end). When a side's estimate
    falls outside [0, 1] (the judge is surer of that version than its operating point allows), the
    change is that of the two shares as shown (cut to [0, 1]) and its interval that bound.

    Returns:
        A :class:`stef.monitor.models.Delta` of the two shares (in [0, 1]), their change and its
        interval (in [−1, 1], holding the change); ``None`` when a side has fewer than two answers.

    >>> from stef.monitor.models import OperatingPoint
    >>> point = OperatingPoint(name="judge", mean_p_correct=0.6, mean_p_incorrect=0.4)
    >>> delta = error_rate_delta(([0.6] * 60 + [0.4] * 40, [point] * 100), ([0.6] * 40 + [0.4] * 60, [point] * 100))
    >>> round(delta.delta, 3), delta.excludes_zero
    (0.2, True)
    >>> sure = error_rate_delta(([0.9] * 100, [point] * 100), ([0.55] * 50 + [0.45] * 50, [point] * 100))
    >>> sure.baseline, sure.candidate, round(sure.delta, 3), sure.ci_low <= sure.delta <= sure.ci_high
    (0.0, 0.5, 0.5, True)
    """
    if len(baseline[0]) < 2 or len(candidate[0]) < 2:
        return None
    b, c = _Side(*baseline), _Side(*candidate)
    gradient: dict[tuple[OperatingPoint, str], float] = dict(c.gradient())
    for key, value in b.gradient().items():
        gradient[key] = gradient.get(key, 0.0) - value
    z = normal_quantile(confidence_level)
    delta = c.estimate - b.estimate
    used = set(b.groups) | set(c.groups)
    relative = max(math.hypot(p.se_p_correct, p.se_p_incorrect) / (p.mean_p_correct - p.mean_p_incorrect) for p in used)
    # the part of the operating points' uncertainty a pure rescaling of the delta does not explain: zero when
    # both sides use one point; when they mix points in other shares, it can move the delta itself
    shift = max(0.0, _parameter_variance(gradient) - (delta * relative) ** 2)
    half = z * math.sqrt(b.sampling_variance + c.sampling_variance + shift)
    low, high = delta - half, delta + half
    factor = 1.0 + z * relative  # the scale's uncertainty moves each end away from 0, or toward it on the far side
    low = low * factor if low < 0.0 else low / factor
    high = high * factor if high > 0.0 else high / factor
    return _bounded(low, high, (b.estimate, _side_interval(b, z)), (c.estimate, _side_interval(c, z)))


def _side_interval(side: _Side, z: float, scored_share: float = 1.0) -> tuple[float, float]:
    """The interval of one side's share of wrong answers, as :func:`estimate_error_rate` gives it
    (in [0, 1]; with ``scored_share`` < 1 that of the share counting the unscored answers as wrong)."""
    se = math.sqrt(side.sampling_variance + _parameter_variance(side.gradient()))
    value = scored_share * side.estimate + (1.0 - scored_share)
    return _clip(value - scored_share * z * se), _clip(value + scored_share * z * se)


def _bounded(
    low: float, high: float, baseline: tuple[float, tuple[float, float]], candidate: tuple[float, tuple[float, float]]
) -> Delta:
    """The :class:`Delta` of two shares from their raw estimates and intervals (``(estimate, (low,
    high))`` each) and the interval ``low … high`` of the difference of the raw estimates.

    The change can be no larger than the sides' own intervals allow (each share in [0, 1]): from
    the candidate's lowest to the baseline's highest share and back; the interval is cut to that
    bound. An estimate outside [0, 1] (the judge surer of a version than its operating point
    allows) gives no usable difference of the raw estimates: the change is then that of the shares
    shown (cut to [0, 1]) and its interval the bound. Both hold the change.
    """
    (b_raw, (b_low, b_high)), (c_raw, (c_low, c_high)) = baseline, candidate
    bound_low, bound_high = c_low - b_high, c_high - b_low
    b_share, c_share = _clip(b_raw), _clip(c_raw)
    if b_share == b_raw and c_share == c_raw:
        low, high = max(low, bound_low), min(high, bound_high)
    else:
        low, high = bound_low, bound_high
    # the rescaled ends can pass ±1 (a small sample, a flat operating point): a change of a share cannot
    return Delta(
        baseline=b_share,
        candidate=c_share,
        delta=_clip_change(c_share - b_share),
        ci_low=_clip_change(low),
        ci_high=_clip_change(high),
    )


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def _clip_change(value: float) -> float:
    """A change of a share, cut to [−1, 1] (the bounds of any difference of two shares)."""
    return min(1.0, max(-1.0, value))


def category_shifts(
    baseline: Sequence[frozenset[str]],
    candidate: Sequence[frozenset[str]],
    false_discovery_rate: float = 0.05,
) -> tuple[CategoryShift, ...]:
    """Share of scored answers with each suspected error category, baseline vs candidate.

    Every category that occurs on either side is tested with Fisher's exact test (two-sided,
    ``scipy.stats.fisher_exact``) on its 2 × 2 table (answers with / without it, per side); the
    p-values are adjusted by Benjamini–Hochberg (``scipy.stats.false_discovery_control``) and a
    shift is ``significant`` when its adjusted value is at most ``false_discovery_rate``.

    Args:
        baseline: per scored baseline answer, the set of its suspected error categories.
        candidate: the same for the candidate.
        false_discovery_rate: FDR level.

    Returns:
        One :class:`stef.monitor.models.CategoryShift` per category, largest candidate − baseline share difference
        first; empty when a side has no answers.

    >>> shifts = category_shifts([frozenset()] * 90 + [frozenset({"Condition-Related Errors"})] * 10,
    ...                          [frozenset()] * 70 + [frozenset({"Condition-Related Errors"})] * 30)
    >>> s = shifts[0]; s.category, s.baseline_share, s.candidate_share, s.significant
    ('Condition-Related Errors', 0.1, 0.3, True)
    """
    if not baseline or not candidate:
        return ()
    import numpy as np
    from scipy.stats import false_discovery_control, fisher_exact

    categories = sorted(set().union(*baseline, *candidate))
    if not categories:
        return ()
    nb, nc = len(baseline), len(candidate)
    counts = [(sum(1 for s in baseline if k in s), sum(1 for s in candidate if k in s)) for k in categories]
    pvalues = [float(fisher_exact([[kb, nb - kb], [kc, nc - kc]]).pvalue) for kb, kc in counts]
    adjusted = np.atleast_1d(false_discovery_control(pvalues, method="bh"))
    shifts = [
        CategoryShift(
            category=category,
            baseline_count=kb,
            candidate_count=kc,
            baseline_share=kb / nb,
            candidate_share=kc / nc,
            pvalue=p,
            qvalue=float(q),
            significant=bool(q <= false_discovery_rate),
        )
        for category, (kb, kc), p, q in zip(categories, counts, pvalues, adjusted, strict=True)
    ]
    return tuple(sorted(shifts, key=lambda s: (-(s.candidate_share - s.baseline_share), s.category)))


def question_key(question: str) -> str:
    """A question normalised for pairing: Unicode NFKC, case-folded, runs of whitespace as one space,
    without surrounding spaces and final ``?``/``.``/``!``.

    >>> question_key("  How many   Singers are there? ") == question_key("how many singers are there")
    True
    """
    text = " ".join(unicodedata.normalize("NFKC", question).casefold().split())
    return text.rstrip("?.! ").strip()


def paired_delta(
    baseline: Sequence[tuple[str, float]],
    candidate: Sequence[tuple[str, float]],
    min_questions: int = 30,
    confidence_level: float = 0.95,
) -> PairedDelta | None:
    """Paired difference of the estimated wrongness on the questions both samples answered.

    For each shared question ``q`` (by :func:`question_key`), ``d_q`` is the candidate's mean
    wrongness on ``q`` minus the baseline's; the paired delta is their mean weighted by the
    harmonic mean of the two answer counts, with a normal interval from the spread of ``d_q``
    across questions (questions are the independent units).

    Args:
        baseline: ``(question key, wrongness)`` per scored baseline answer.
        candidate: the same for the candidate.
        min_questions: fewer shared questions give ``None``.
        confidence_level: level of the interval.

    Returns:
        A :class:`stef.monitor.models.PairedDelta`, or ``None``.

    >>> base = [(f"q{i}", 0.0) for i in range(40)]
    >>> cand = [(f"q{i}", 1.0 if i % 4 == 0 else 0.0) for i in range(40)]
    >>> paired = paired_delta(base, cand)
    >>> paired.questions, paired.delta
    (40, 0.25)
    """
    import numpy as np

    sides: list[dict[str, list[float]]] = [defaultdict(list), defaultdict(list)]
    for side, answers in zip(sides, (baseline, candidate), strict=True):
        for key, wrongness in answers:
            side[key].append(wrongness)
    shared = sorted(set(sides[0]) & set(sides[1]))
    if len(shared) < max(2, min_questions):
        return None
    diffs = np.asarray([np.mean(sides[1][q]) - np.mean(sides[0][q]) for q in shared])
    weights = np.asarray([2.0 / (1.0 / len(sides[0][q]) + 1.0 / len(sides[1][q])) for q in shared])
    delta = float(np.sum(weights * diffs) / np.sum(weights))
    count = len(shared)
    variance = float(np.sum(weights**2 * (diffs - delta) ** 2) / np.sum(weights) ** 2 * count / (count - 1))
    half = normal_quantile(confidence_level) * math.sqrt(variance)
    return PairedDelta(
        questions=count,
        answers_baseline=sum(len(sides[0][q]) for q in shared),
        answers_candidate=sum(len(sides[1][q]) for q in shared),
        delta=delta,
        ci_low=_clip_change(delta - half),
        ci_high=_clip_change(delta + half),
    )
