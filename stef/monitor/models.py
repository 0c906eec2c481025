"""Data types of the drift checks: thresholds, samples, results and planned checks (DESIGN.md §6).

The warehouse reads the samples and stores the results; :mod:`stef.monitor.drift` computes them
(decision rule), :mod:`stef.monitor.statistics` holds the statistics.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from stef.errors import StefError

if TYPE_CHECKING:
    from stef.models import Evaluation

SCORE_BIN_EDGES: tuple[float, ...] = tuple(float(edge) for edge in range(0, 101, 10))
"""Edges of the fixed PSI / histogram bins: ``[0, 10), [10, 20) … [90, 100]`` (last bin closed)."""

PSI_EPSILON = 1e-4
"""Share used in place of an empty bin's share in the PSI (avoids ``log(0)``)."""

DEFAULT_WINDOW_DAYS = 7
"""Length of the default comparison window (days, the last one included)."""


ERROR_RATE_KEYS: tuple[str, ...] = (
    "error_rate_baseline",
    "error_rate_baseline_ci",
    "error_rate_candidate",
    "error_rate_candidate_ci",
    "error_rate_delta",
    "error_rate_delta_ci",
)
"""The estimated shares of wrong answers of a check summary (:meth:`DriftResult.summary`), fractions in [0, 1]."""

DRIFT_RESULT_COLUMNS: tuple[str, ...] = (*ERROR_RATE_KEYS, "category_shifts", "sentence")
"""Summary keys that ``drift_checks`` also stores as columns (migration 0007; :meth:`DriftCheck.row`)."""


CALIBRATION_ARTIFACTS: Mapping[str, str] = {
    "symbolic": "symbolic-v2.json",
    "schema": "schema-v1.json",
    "observed": "observed-v1.json",
    "schema-observed": "schema-observed-v1.json",
}
"""Calibration key of an evaluation (what the symbolic judge checked it against) -> shipped calibrator artifact."""


def calibration_key(judge: str | None, schema_checked: bool, observed_checked: bool) -> str | None:
    """Which shipped calibrator gave an evaluation its ``p_correct`` (a key of :data:`CALIBRATION_ARTIFACTS`).

    The symbolic judge picks its calibrator by what the record was checked against
    (:meth:`stef.pipeline.judge.symbolic.SymbolicJudge.calibrator_for`); any other judge (an LLM)
    has no shipped operating characteristics: ``None``.

    >>> calibration_key("symbolic", True, False), calibration_key("gpt-4o-mini", False, False)
    ('schema', None)
    """
    if judge != "symbolic":
        return None
    if schema_checked:
        return "schema-observed" if observed_checked else "schema"
    return "observed" if observed_checked else "symbolic"


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
    """Thresholds of the decision rule (:mod:`stef.monitor.drift`); every one can be changed.

    Attributes:
        min_samples: scored records needed on each side for the score criteria (records, scored
            or not, for the coverage criterion); fewer gives ``insufficient_data``.
        confidence_level: level of the confidence intervals (and 1 − the false discovery rate of
            the category shifts).
        error_rate_delta: smallest |delta of the estimated share of wrong answers| (share, 0.05 = 5
            points) that counts as drift.
        mean_delta: smallest |mean Φ delta| (Φ points) flagged as supporting evidence; decides only
            when the samples carry no ``p_correct`` (evaluations stored before migration 0005).
        p90_delta: the same for the P90 Φ delta.
        coverage_delta: smallest |coverage delta| (share, 0.02 = 2 points) that counts as drift.
        min_paired_questions: shared questions needed for the paired difference.
        n_resamples: bootstrap resamples per interval.
        ci_method: ``scipy.stats.bootstrap`` method (``percentile`` stays defined on the tied,
            discrete scores where ``BCa`` degenerates).
        seed: seed of the bootstrap generator (same samples, same intervals).
    """

    min_samples: int = Field(default=100, ge=2)
    confidence_level: float = Field(default=0.95, gt=0.0, lt=1.0)
    error_rate_delta: float = Field(default=0.05, ge=0.0, le=1.0)
    mean_delta: float = Field(default=1.25, ge=0.0)
    p90_delta: float = Field(default=5.0, ge=0.0)
    coverage_delta: float = Field(default=0.02, ge=0.0, le=1.0)
    min_paired_questions: int = Field(default=30, ge=2)
    n_resamples: int = Field(default=2000, ge=100)
    ci_method: Literal["percentile", "basic", "BCa"] = "percentile"
    seed: int = 0


DriftSampleRow = tuple[Any, ...]
"""A warehouse row of a drift sample: ``(status, score, verdict, filter_status[, p_correct,
calibration key, suspected error categories, normalised question])``."""


@dataclass(frozen=True, slots=True)
class DriftSample:
    """The evaluations of one side of a comparison.

    Attributes:
        scores: Φ of every scored record (status ``evaluated``), each in [0, 100].
        records: every evaluation of the side, scored or not (the coverage denominator).
        verdicts: the verdict of every scored record (``CORRECT`` …).
        filter_statuses: the filter status of every scored record (``FULLY_APPLIED`` …).
        p_correct: per scored record its calibrated P(correct), ``None`` when it has none (stored
            before migration 0005); empty, or one per score.
        calibrations: per scored record the calibration key of its ``p_correct``
            (:func:`calibration_key`; ``None``: no shipped operating
            point); empty, or one per score.
        categories: per scored record the set of its suspected error categories; empty, or one per score.
        questions: per scored record its normalised question (:func:`stef.monitor.error_rate.question_key`),
            ``None`` when unknown; empty, or one per score.

    Raises:
        DriftError: a score outside [0, 100] or not finite, fewer records than scores, a
            ``p_correct`` outside [0, 1], or a per-record field of another length than ``scores``.
    """

    scores: tuple[float, ...]
    records: int
    verdicts: tuple[str, ...] = ()
    filter_statuses: tuple[str, ...] = ()
    p_correct: tuple[float | None, ...] = ()
    calibrations: tuple[str | None, ...] = ()
    categories: tuple[frozenset[str], ...] = ()
    questions: tuple[str | None, ...] = ()

    def __post_init__(self) -> None:
        if self.records < len(self.scores):
            raise DriftError(f"a drift sample has {len(self.scores)} scores but only {self.records} records")
        for score in self.scores:
            if not (math.isfinite(score) and 0.0 <= score <= 100.0):
                raise DriftError(f"a drift sample holds the score {score!r}; scores must lie in [0, 100]")
        for name in ("p_correct", "calibrations", "categories", "questions"):
            values = getattr(self, name)
            if values and len(values) != len(self.scores):
                raise DriftError(f"a drift sample has {len(self.scores)} scores but {len(values)} {name}")
        for p in self.p_correct:
            if p is not None and not (math.isfinite(p) and 0.0 <= p <= 1.0):
                raise DriftError(f"a drift sample holds p_correct {p!r}; it must lie in [0, 1]")

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
                e.p_correct,
                calibration_key(e.judge, e.schema_report is not None, e.observed_report is not None),
                frozenset(error.category for error in e.suspected_errors),
                None,
            )
            for e in evaluations
        )

    @classmethod
    def from_rows(cls, rows: Iterable[DriftSampleRow]) -> DriftSample:
        """Build a sample from warehouse rows (:data:`DriftSampleRow`): ``(status, score, verdict,
        filter_status)``, optionally followed by ``p_correct``, the calibration key, the suspected
        error categories and the normalised question.

        A row counts as scored when its status is ``evaluated`` and it has a score. The per-record
        fields are kept only when every scored row has them (4-tuples give none).

        >>> DriftSample.from_rows([("evaluated", 72.0, "LIKELY_CORRECT", "FULLY_APPLIED"), ("parse_error", None, None, None)]).n
        1
        >>> DriftSample.from_rows([("evaluated", 72.0, "LIKELY_CORRECT", "FULLY_APPLIED", 0.61, "symbolic", frozenset(), "q")]).p_correct
        (0.61,)
        """
        scores: list[float] = []
        verdicts: list[str] = []
        filters: list[str] = []
        extra: list[tuple[Any, ...]] = []
        complete = True
        records = 0
        for row in rows:
            status, score, verdict, filter_status = row[:4]
            records += 1
            if status != "evaluated" or score is None:
                continue
            scores.append(float(score))
            if verdict is not None:
                verdicts.append(verdict)
            if filter_status is not None:
                filters.append(filter_status)
            if len(row) >= 8:
                extra.append(tuple(row[4:8]))
            else:
                complete = False
        if not complete or not extra:
            return cls(tuple(scores), records, tuple(verdicts), tuple(filters))
        return cls(
            tuple(scores),
            records,
            tuple(verdicts),
            tuple(filters),
            p_correct=tuple(None if e[0] is None else float(e[0]) for e in extra),
            calibrations=tuple(None if e[1] is None else str(e[1]) for e in extra),
            categories=tuple(frozenset(e[2] or ()) for e in extra),
            questions=tuple(None if e[3] is None else str(e[3]) for e in extra),
        )


class Delta(_Frozen):
    """A candidate − baseline difference of one statistic with its confidence interval (a bootstrap
    interval; for the coverage, Newcombe's score interval: :func:`stef.monitor.statistics.proportion_delta`).

    Attributes:
        baseline: the statistic on the baseline sample.
        candidate: the statistic on the candidate sample.
        delta: ``candidate - baseline``.
        ci_low: lower end of the confidence interval of ``delta``.
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


class OperatingPoint(_Frozen):
    """How a judge's ``p_correct`` separates correct from wrong answers (:mod:`stef.monitor.error_rate`).

    Attributes:
        name: the judge or calibrator it describes (e.g. ``calib-symbolic-v2``).
        mean_p_correct: ``a``, the mean ``p_correct`` of correct answers (soft specificity).
        mean_p_incorrect: ``b``, the mean ``p_correct`` of wrong answers (1 − soft sensitivity); below ``a``.
        se_p_correct, se_p_incorrect: standard errors of ``a`` and ``b``.
        source: where the figures come from (cross-validation, reviewer labels).

    Raises:
        ValueError: ``a ≤ b`` (the judge does not separate the answers) or a value outside [0, 1].
    """

    name: str
    mean_p_correct: float = Field(ge=0.0, le=1.0)
    mean_p_incorrect: float = Field(ge=0.0, le=1.0)
    se_p_correct: float = Field(default=0.0, ge=0.0)
    se_p_incorrect: float = Field(default=0.0, ge=0.0)
    source: str = ""

    def model_post_init(self, context: Any, /) -> None:
        if self.mean_p_correct <= self.mean_p_incorrect:
            raise ValueError(
                f"operating point {self.name!r}: mean p of correct answers {self.mean_p_correct} is not above "
                f"that of wrong answers {self.mean_p_incorrect}"
            )

    @property
    def sensitivity(self) -> float:
        """Soft sensitivity to wrong answers, ``E[1 − p | wrong] = 1 − b``."""
        return 1.0 - self.mean_p_incorrect

    @property
    def specificity(self) -> float:
        """Soft specificity, ``E[p | correct] = a``."""
        return self.mean_p_correct

    def wrongness(self, p_correct: float) -> float:
        """The answer's estimated wrongness ``(a − p) / (a − b)`` (unclipped; its mean over answers is π̂).

        >>> OperatingPoint(name="j", mean_p_correct=0.6, mean_p_incorrect=0.4).wrongness(0.45)
        0.75
        """
        a, b = self.mean_p_correct, self.mean_p_incorrect
        return round((a - p_correct) / (a - b), 12)


UNCORRECTED = OperatingPoint(name="uncorrected", mean_p_correct=1.0, mean_p_incorrect=0.0, source="no correction")
"""The operating point of a judge with no measured characteristics: wrongness ``1 − p``."""


class ErrorRate(_Frozen):
    """Estimated share of wrong answers of one sample (:func:`stef.monitor.error_rate.estimate_error_rate`).

    Attributes:
        estimate: share of wrong answers among the scored ones, in [0, 1] (``raw_estimate`` clipped).
        raw_estimate: the unclipped estimate (the mean estimated wrongness).
        ci_low, ci_high: its normal interval, clipped to [0, 1].
        standard_error: of ``raw_estimate`` (sampling and operating-point uncertainty).
        n: scored answers with a ``p_correct``.
        records: every answer of the sample.
        with_unscored: share of wrong answers counting the unscored ones as wrong, with
            ``with_unscored_ci_low`` … ``with_unscored_ci_high``.
        method: how it was estimated.
    """

    estimate: float
    raw_estimate: float
    ci_low: float
    ci_high: float
    standard_error: float
    n: int
    records: int
    with_unscored: float
    with_unscored_ci_low: float
    with_unscored_ci_high: float
    method: str


class CategoryShift(_Frozen):
    """Share of scored answers with one suspected error category, baseline vs candidate.

    Attributes:
        category: the NL2SQL-BUGs taxonomy category (e.g. ``Condition-Related Errors``).
        baseline_count, candidate_count: answers with it.
        baseline_share, candidate_share: their share of the scored answers.
        pvalue: Fisher's exact test, two-sided.
        qvalue: Benjamini–Hochberg adjusted p-value over the categories of the check.
        significant: ``qvalue`` at most the false discovery rate.
    """

    category: str
    baseline_count: int
    candidate_count: int
    baseline_share: float
    candidate_share: float
    pvalue: float
    qvalue: float
    significant: bool


class PairedDelta(_Frozen):
    """Paired difference of the estimated wrongness on the questions both versions answered.

    Attributes:
        questions: shared normalised questions.
        answers_baseline, answers_candidate: answers to them per side.
        delta: weighted mean of the per-question differences (candidate − baseline).
        ci_low, ci_high: its normal interval.
    """

    questions: int
    answers_baseline: int
    answers_candidate: int
    delta: float
    ci_low: float
    ci_high: float

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly above or wholly below zero."""
        return self.ci_low > 0.0 or self.ci_high < 0.0


class DriftResult(_Frozen):
    """The statistics and the verdict of one comparison (:mod:`stef.monitor.drift`).

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
        error_rate_baseline, error_rate_candidate: estimated share of wrong answers per side
            (``None`` without ``p_correct``, or with fewer than two scored answers).
        error_rate: the delta of the estimated share of wrong answers (candidate − baseline) with
            its interval: the deciding statistic.
        error_rate_with_unscored: the same counting unscored answers as wrong.
        category_shifts: share of answers per suspected error category, FDR-tested.
        paired: the paired difference on shared questions (``None`` when too few).
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
    error_rate_baseline: ErrorRate | None = None
    error_rate_candidate: ErrorRate | None = None
    error_rate: Delta | None = None
    error_rate_with_unscored: Delta | None = None
    category_shifts: tuple[CategoryShift, ...] = ()
    paired: PairedDelta | None = None
    thresholds: DriftThresholds = DriftThresholds()

    def summary(self) -> dict[str, Any]:
        """Flat JSON-ready dict (``stef drift --json``): verdict, direction, sizes and the headline statistics.

        Keys: ``verdict``, ``direction``, ``n_baseline``, ``n_candidate``, ``records_baseline``,
        ``records_candidate``, ``mean_baseline``, ``mean_candidate``, ``mean_delta``,
        ``mean_delta_ci`` (``[low, high]``), ``p90_baseline``, ``p90_candidate``, ``p90_delta``,
        ``p90_delta_ci``, ``coverage_baseline``, ``coverage_candidate``, ``coverage_delta``,
        ``coverage_delta_ci``, ``ks_statistic``, ``ks_pvalue``, ``wasserstein``,
        ``wasserstein_norm``, ``psi``, ``verdict_chi2_pvalue``, ``verdict_cramers_v``,
        ``filter_status_chi2_pvalue``, ``filter_status_cramers_v``, ``reasons``; the estimated
        share of wrong answers (fractions in [0, 1]): ``error_rate_baseline``,
        ``error_rate_baseline_ci``, ``error_rate_candidate``, ``error_rate_candidate_ci``,
        ``error_rate_delta``, ``error_rate_delta_ci``, the same with unscored answers counted as
        wrong (``error_rate_with_unscored_baseline`` …, ``error_rate_with_unscored_delta_ci``),
        ``error_rate_method``; ``category_shifts`` (list of :class:`CategoryShift` dicts);
        ``paired_questions``, ``paired_error_rate_delta``, ``paired_error_rate_delta_ci``.
        Missing values (and non-finite ones) are ``None``.
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
        )
        for side, rate in (("baseline", self.error_rate_baseline), ("candidate", self.error_rate_candidate)):
            row[f"error_rate_{side}"] = _finite(rate.estimate) if rate else None
            row[f"error_rate_{side}_ci"] = [_finite(rate.ci_low), _finite(rate.ci_high)] if rate else None
        row["error_rate_delta"] = _finite(self.error_rate.delta) if self.error_rate else None
        row["error_rate_delta_ci"] = (
            [_finite(self.error_rate.ci_low), _finite(self.error_rate.ci_high)] if self.error_rate else None
        )
        for side, rate in (("baseline", self.error_rate_baseline), ("candidate", self.error_rate_candidate)):
            row[f"error_rate_with_unscored_{side}"] = _finite(rate.with_unscored) if rate else None
            row[f"error_rate_with_unscored_{side}_ci"] = (
                [_finite(rate.with_unscored_ci_low), _finite(rate.with_unscored_ci_high)] if rate else None
            )
        unscored = self.error_rate_with_unscored
        row["error_rate_with_unscored_delta"] = _finite(unscored.delta) if unscored else None
        row["error_rate_with_unscored_delta_ci"] = (
            [_finite(unscored.ci_low), _finite(unscored.ci_high)] if unscored else None
        )
        rate = self.error_rate_candidate or self.error_rate_baseline
        row["error_rate_method"] = rate.method if rate else None
        row["category_shifts"] = [shift.model_dump() for shift in self.category_shifts]
        row["paired_questions"] = self.paired.questions if self.paired else None
        row["paired_error_rate_delta"] = _finite(self.paired.delta) if self.paired else None
        row["paired_error_rate_delta_ci"] = (
            [_finite(self.paired.ci_low), _finite(self.paired.ci_high)] if self.paired else None
        )
        row["min_samples"] = self.thresholds.min_samples
        row["confidence_level"] = self.thresholds.confidence_level
        row["reasons"] = list(self.reasons)
        return row


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class DriftPlan:
    """What one check compares.

    Attributes:
        agent_id: the agent.
        kind: ``version`` (candidate version vs baseline version) or ``temporal`` (a version
            vs its own previous window).
        baseline_version, candidate_version: the agent versions (equal for ``temporal``).
        baseline_window, candidate_window: ``(first day, last day)``, both included.
        evaluator_version: whose evaluations are compared.
    """

    agent_id: str
    kind: DriftKind
    baseline_version: str
    candidate_version: str
    baseline_window: tuple[date, date]
    candidate_window: tuple[date, date]
    evaluator_version: str


@dataclass(frozen=True, slots=True)
class DriftCheck:
    """A planned check with its result.

    Attributes:
        plan: what is compared.
        result: the comparison.
        left_out: per side, the answers of the compared agent version in its window that only
            other evaluator versions scored, so the check does not see them (days scored before
            ``--schema-dir`` or a refit calibrator): dicts of ``side`` (``baseline`` or
            ``candidate``), ``agent_version``, ``evaluator_version``, ``evaluations``,
            ``first_day`` and ``last_day`` (dates).
    """

    plan: DriftPlan
    result: DriftResult
    left_out: tuple[dict[str, Any], ...] = ()

    def summary(self) -> dict[str, Any]:
        """Flat JSON-ready dict: the plan (agent, kind, versions, windows as ``YYYY-MM-DD``), :meth:`DriftResult.summary`,
        ``sentence``, the check in one sentence (:func:`stef.monitor.sentence.drift_sentence`), and
        ``left_out`` (:attr:`left_out`, days as ``YYYY-MM-DD``)."""
        from stef.monitor.sentence import drift_sentence

        plan = self.plan
        out = {
            "agent_id": plan.agent_id,
            "kind": plan.kind.value,
            "baseline_version": plan.baseline_version,
            "candidate_version": plan.candidate_version,
            "baseline_window": [plan.baseline_window[0].isoformat(), plan.baseline_window[1].isoformat()],
            "candidate_window": [plan.candidate_window[0].isoformat(), plan.candidate_window[1].isoformat()],
            "evaluator_version": plan.evaluator_version,
            **self.result.summary(),
        }
        out["sentence"] = drift_sentence(out)
        out["left_out"] = [
            {**entry, "first_day": entry["first_day"].isoformat(), "last_day": entry["last_day"].isoformat()}
            for entry in self.left_out
        ]
        return out

    def row(self, source: str) -> dict[str, Any]:
        """The ``drift_checks`` row (:func:`warehouse.monitoring.store_drift_checks`); ``statistics`` holds the
        full result, the error-rate columns of migration 0007 and ``sentence`` repeat :meth:`summary`'s."""
        plan = self.plan
        summary = self.summary()
        return {
            "agent_id": plan.agent_id,
            "kind": plan.kind.value,
            "baseline_version": plan.baseline_version,
            "candidate_version": plan.candidate_version,
            "evaluator_version": plan.evaluator_version,
            "window_start": plan.candidate_window[0],
            "window_end": plan.candidate_window[1],
            "baseline_window_start": plan.baseline_window[0],
            "baseline_window_end": plan.baseline_window[1],
            "n_baseline": self.result.n_baseline,
            "n_candidate": self.result.n_candidate,
            "verdict": self.result.verdict.value,
            "direction": self.result.direction.value if self.result.direction else None,
            "statistics": _json_safe({"summary": summary, "result": self.result.model_dump(mode="json")}),
            "source": source,
            **{name: _json_safe(summary[name]) for name in DRIFT_RESULT_COLUMNS},
        }


def _json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (JSON has no NaN or infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value
