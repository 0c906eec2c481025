"""Stage D: the semantic verdict (STEF paper §2.D).

A :class:`stef.pipeline.judge.models.Judge` turns the evidence of the earlier stages into one of
four verdicts, a confidence γ ∈ [0, 1] and a short rationale. :class:`SymbolicJudge` is
deterministic, needs no network and is the default; an LLM judge (litellm) implements the same
protocol.

How the symbolic verdict follows from the evidence
--------------------------------------------------
Each check in :data:`CHECKS` looks for one kind of semantic error and reports
:class:`stef.models.SuspectedError` items (NL2SQL-BUGs taxonomy names) with a severity weight. The weights
of all suspected errors are summed into W:

    W = 0            -> CORRECT      (weak findings, weight <= 0.25, only lower γ)
    0 < W < 1.0      -> LIKELY_CORRECT
    1.0 <= W < 2.0   -> POTENTIALLY_INCORRECT
    W >= 2.0         -> INCORRECT

γ grows with the amount of evidence the judge could check (hints in Q_e, requested filters)
and with the distance of W from the nearest verdict boundary; it is lower when the question
offered little to check against.
"""

from __future__ import annotations

from collections.abc import Mapping

from stef.models import (
    JudgeResult,
    SQLSpec,
    Verdict,
)
from stef.pipeline.judge.calibrate import (
    DEFAULT_CALIBRATOR,
    OBSERVED_CALIBRATOR,
    SCHEMA_CALIBRATOR,
    SCHEMA_OBSERVED_CALIBRATOR,
    Calibrator,
    feature_vector,
    load_calibrator,
    schema_capped,
    verdict_from_probability,
)
from stef.pipeline.judge.deployment import (
    CALIBRATION_VERSION_PREFIX,
    SHIPPED_LOGIT,
    calibrator_set_digest,
    shipped_logit,
)
from stef.pipeline.judge.evidence_checks import (
    check_dates,
    check_enrichment,
    check_null_handling,
    check_observed,
    check_schema,
    check_statements,
    check_subqueries,
)
from stef.pipeline.judge.models import Check, Finding, JudgeInput
from stef.pipeline.judge.requirement_checks import (
    check_aggregations,
    check_distinct,
    check_filters,
    check_formulas,
    check_hint_columns,
    check_ordering,
    check_structure,
)

CHECKS: tuple[Check, ...] = (
    check_statements,
    check_schema,
    check_observed,
    check_enrichment,
    check_filters,
    check_hint_columns,
    check_aggregations,
    check_formulas,
    check_ordering,
    check_distinct,
    check_structure,
    check_dates,
    check_null_handling,
    check_subqueries,
)
"""The symbolic checks, in the order their findings are reported."""

VERDICT_THRESHOLDS: tuple[tuple[float, Verdict], ...] = (
    (2.0, Verdict.INCORRECT),
    (1.0, Verdict.POTENTIALLY_INCORRECT),
    (1e-9, Verdict.LIKELY_CORRECT),
)
"""(minimum summed weight W, verdict), first match wins; W = 0 is CORRECT."""
WEAK_WEIGHT = 0.25
"""Findings of this weight or less are weak evidence (e.g. COUNT over a join without
DISTINCT): they are reported and lower γ by :data:`WEAK_PENALTY` each, but
do not change the verdict."""
WEAK_PENALTY = 0.08


class SymbolicJudge:
    """Deterministic rule-based judge (the default; no network, no model).

    >>> SymbolicJudge().name
    'symbolic'
    """

    name = "symbolic"

    def __init__(
        self,
        checks: tuple[Check, ...] = CHECKS,
        calibrator: Calibrator | str | None = DEFAULT_CALIBRATOR,
        schema_calibrator: Calibrator | str | None = SCHEMA_CALIBRATOR,
        observed_calibrator: Calibrator | str | None = OBSERVED_CALIBRATOR,
        schema_observed_calibrator: Calibrator | str | None = SCHEMA_OBSERVED_CALIBRATOR,
        deployment: Mapping[str | None, Calibrator] | None = None,
    ) -> None:
        """Args:
        checks: the checks to run, in order.
        calibrator: a :class:`stef.pipeline.judge.calibrate.Calibrator`, the name of an artifact in
            ``stef/pipeline/judge/calibrators/``, or ``None`` for the uncalibrated rule mapping of W.
        schema_calibrator: the same for records checked against a schema (its features
            include the schema findings); ``None``: use ``calibrator`` for them too.
        observed_calibrator: the same for records compared with an observed catalog.
        schema_observed_calibrator: the same for records checked against both.
        deployment: calibrators fitted on this deployment's reviewer labels
            (:mod:`stef.pipeline.judge.deployment`), by app id; the key ``None`` applies to every
            app without its own. They refit the shipped calibrator's p of each record (which
            must then not be ``None``).
        """
        self.checks = checks
        self._calibrator = calibrator
        self._schema_calibrator = schema_calibrator
        self._observed_calibrator = observed_calibrator
        self._schema_observed_calibrator = schema_observed_calibrator
        self.deployment: Mapping[str | None, Calibrator] = dict(deployment or {})

    @property
    def calibrator(self) -> Calibrator | None:
        """The calibrator of schema-free records (an artifact name is loaded on first use)."""
        if isinstance(self._calibrator, str):
            self._calibrator = load_calibrator(self._calibrator)
        return self._calibrator

    @property
    def schema_calibrator(self) -> Calibrator | None:
        """The calibrator of records checked against a schema (``None``: :attr:`calibrator`)."""
        if isinstance(self._schema_calibrator, str):
            self._schema_calibrator = load_calibrator(self._schema_calibrator)
        return self._schema_calibrator if self._schema_calibrator is not None else self.calibrator

    @property
    def observed_calibrator(self) -> Calibrator | None:
        """The calibrator of records compared with an observed catalog (``None``: :attr:`calibrator`)."""
        if isinstance(self._observed_calibrator, str):
            self._observed_calibrator = load_calibrator(self._observed_calibrator)
        return self._observed_calibrator if self._observed_calibrator is not None else self.calibrator

    @property
    def schema_observed_calibrator(self) -> Calibrator | None:
        """The calibrator of records checked against a schema and an observed catalog (``None``: :attr:`schema_calibrator`)."""
        if isinstance(self._schema_observed_calibrator, str):
            self._schema_observed_calibrator = load_calibrator(self._schema_observed_calibrator)
        return (
            self._schema_observed_calibrator if self._schema_observed_calibrator is not None else self.schema_calibrator
        )

    def calibrator_for(self, judge_input: JudgeInput) -> Calibrator | None:
        """The calibrator that judges ``judge_input``, by what it was checked against: a schema,
        an observed catalog, both, or neither."""
        if self._calibrator is None:
            return None
        if judge_input.schema_report is not None:
            return (
                self.schema_observed_calibrator if judge_input.observed_report is not None else self.schema_calibrator
            )
        return self.observed_calibrator if judge_input.observed_report is not None else self.calibrator

    @property
    def version_suffix(self) -> str:
        """``+calib=<digest>`` of the deployment calibrators (``""`` without any): appended to the
        evaluator version of every evaluation this judge makes."""
        if not self.deployment:
            return ""
        return CALIBRATION_VERSION_PREFIX + calibrator_set_digest(self.deployment)

    def deployment_calibrator_for(self, judge_input: JudgeInput) -> Calibrator | None:
        """The deployment calibrator of the record's app, else the one of every app, else ``None``."""
        if not self.deployment:
            return None
        own = self.deployment.get(judge_input.app_id) if judge_input.app_id is not None else None
        return own if own is not None else self.deployment.get(None)

    def calibration_features(self, judge_input: JudgeInput) -> dict[str, float] | None:
        """The features a deployment calibrator reads for ``judge_input``: the shipped calibrator's
        (:func:`stef.pipeline.judge.calibrate.feature_vector`, held within its training range:
        :meth:`Calibrator.clipped`) and the logit of its p
        (:data:`stef.pipeline.judge.deployment.SHIPPED_LOGIT`); ``None`` without a calibrator."""
        calibrator = self.calibrator_for(judge_input)
        if calibrator is None:
            return None
        features = calibrator.clipped(feature_vector(judge_input, self.findings(judge_input)))
        features[SHIPPED_LOGIT] = shipped_logit(calibrator.probability(features))
        return features

    def findings(self, judge_input: JudgeInput) -> list[Finding]:
        """Every check's findings (suspected error, weight), in check order."""
        found: list[Finding] = []
        for check in self.checks:
            found.extend(check(judge_input))
        return found

    def judge(self, judge_input: JudgeInput) -> JudgeResult:
        """Run every check, sum the weights, map to a verdict and a confidence γ.

        Returns:
            :class:`JudgeResult` with ``suspected_errors`` in check order.
        """
        findings = self.findings(judge_input)
        errors = tuple(error for error, _ in findings)
        calibrator = self.calibrator_for(judge_input)
        if calibrator is not None:
            features = calibrator.clipped(feature_vector(judge_input, findings))  # as the refit was fitted on
            p = calibrator.probability(features)
            name = calibrator.version
            refit = self.deployment_calibrator_for(judge_input)
            if refit is not None:
                features[SHIPPED_LOGIT] = shipped_logit(p)
                p = refit.probability(features)
                name = f"{name} refit by {refit.version}"
            probability = round(schema_capped(p, judge_input), 4)
            verdict, confidence = verdict_from_probability(probability)
            detail = "; ".join(e.evidence for e in errors[:6]) or "no semantic mismatch found"
            rationale = f"{verdict.value} (calibrated P(correct)={probability:.2f}, {name}): {detail}"
            return JudgeResult(
                verdict=verdict,
                confidence=confidence,
                rationale=rationale[:2000],
                judge=self.name,
                suspected_errors=errors,
                p_correct=probability,
            )
        weight = sum(w for _, w in findings if w > WEAK_WEIGHT)
        weak = sum(1 for _, w in findings if w <= WEAK_WEIGHT)
        verdict = Verdict.CORRECT
        for threshold, candidate in VERDICT_THRESHOLDS:
            if weight >= threshold:
                verdict = candidate
                break
        confidence = _confidence(judge_input, weight, verdict, weak)
        if errors:
            rationale = f"{verdict.value} (W={weight:.2f}): " + "; ".join(e.evidence for e in errors[:6])
        else:
            checked = _evidence_count(judge_input)
            rationale = f"CORRECT: no semantic mismatch found across {checked} checked requirement(s)"
        return JudgeResult(
            verdict=verdict, confidence=confidence, rationale=rationale[:2000], judge=self.name, suspected_errors=errors
        )


def _evidence_count(judge_input: JudgeInput) -> int:
    alignment = judge_input.alignment
    enriched = judge_input.enriched_spec
    return len(alignment.matched) + len(enriched.column_mentions) + len(enriched.aggregations) + len(enriched.formulas)


def structural_complexity(spec: SQLSpec) -> int:
    """Constructs a schema-free judge checks least reliably (STEF paper §6, limitations):
    tables beyond two, subqueries, set operations and window functions, one point each."""
    return max(0, len(spec.tables) - 2) + spec.subquery_count + len(spec.set_operations) + len(spec.window_functions)


def _confidence(judge_input: JudgeInput, weight: float, verdict: Verdict, weak: int = 0) -> float:
    """γ: more checked evidence and a W far from the verdict boundaries mean more confidence;
    structural complexity and weak findings lower the confidence in a CORRECT verdict."""
    evidence = _evidence_count(judge_input)
    richness = min(evidence, 6) / 6.0
    if verdict is Verdict.CORRECT:
        doubt = 0.1 * structural_complexity(judge_input.sql_spec) + WEAK_PENALTY * weak
        return round(max(0.66, 0.78 + 0.2 * richness - doubt), 3)
    if verdict is Verdict.LIKELY_CORRECT:
        return round(0.86 - 0.1 * weight, 3)
    if verdict is Verdict.POTENTIALLY_INCORRECT:
        return round(0.7 + 0.05 * richness, 3)
    return round(min(0.95, 0.75 + 0.05 * (weight - 2.0)), 3)
