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
    """A planned check with its result."""

    plan: DriftPlan
    result: DriftResult

    def summary(self) -> dict[str, Any]:
        """Flat JSON-ready dict: the plan (agent, kind, versions, windows as ``YYYY-MM-DD``) + :meth:`DriftResult.summary`."""
        plan = self.plan
        return {
            "agent_id": plan.agent_id,
            "kind": plan.kind.value,
            "baseline_version": plan.baseline_version,
            "candidate_version": plan.candidate_version,
            "baseline_window": [plan.baseline_window[0].isoformat(), plan.baseline_window[1].isoformat()],
            "candidate_window": [plan.candidate_window[0].isoformat(), plan.candidate_window[1].isoformat()],
            "evaluator_version": plan.evaluator_version,
            **self.result.summary(),
        }

    def row(self, source: str) -> dict[str, Any]:
        """The ``drift_checks`` row (:func:`warehouse.monitoring.store_drift_checks`); ``statistics`` holds the full result."""
        plan = self.plan
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
            "statistics": _json_safe({"summary": self.summary(), "result": self.result.model_dump(mode="json")}),
            "source": source,
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
