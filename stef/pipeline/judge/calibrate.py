"""Learned calibration of the symbolic verdict (a small logistic regression, no runtime deps).

The symbolic checks say *what* looks wrong; how much each kind of evidence predicts a wrong
answer is learned from labelled data. :func:`feature_vector` turns one judge input plus its findings
into numbers (finding counts per taxonomy subcategory, alignment counts, structural counts, the
amount of evidence in Q_e); a logistic regression maps them to p = P(answer correct). The
model is a JSON artifact (``stef/pipeline/judge/calibrators/*.json``: feature names, standardisation,
coefficients, training data digests and grouped cross-validation figures) produced by
``scripts/train_calibrator.py``; scoring needs no scikit-learn.

From p to the verdict and γ (:func:`verdict_from_probability`): the verdict is monotone in p
(every CORRECT has a higher p than every LIKELY_CORRECT, and so on down) and γ, the judge's
confidence in its verdict, is the probability that the verdict's side is right:

    p ≥ 0.65          CORRECT                γ = p
    0.50 ≤ p < 0.65   LIKELY_CORRECT         γ = p
    0.35 ≤ p < 0.50   POTENTIALLY_INCORRECT  γ = 1 − p
    p < 0.35          INCORRECT              γ = 1 − p

Φ then follows the paper's formula from the filter score, the verdict and Γ(γ): with the
filters fully applied Φ is 100 for p ≥ 0.85 and 80 for 0.65 ≤ p < 0.85, so Φ ≥ 75 means
P(correct) ≥ 0.65. A judge that states a verdict and γ itself (an LLM) gets the p consistent with
both (:func:`probability_from_verdict`).

Two artifacts ship: ``symbolic-v2.json`` for records judged without a schema and
``schema-v1.json`` for records checked against the app's schema (its features add the schema
findings); both are trained on the NL2SQL-BUGs and the Spider multi-system development files
together, with cross-validation grouped by question.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any

from stef.models import SuspectedError, Verdict
from stef.pipeline.judge.models import JudgeInput
from stef.pipeline.matching import name_is_grounded

DEFAULT_CALIBRATOR = "symbolic-v2.json"
"""Artifact shipped in ``stef/pipeline/judge/calibrators/`` and used by the default symbolic judge (no schema)."""
SCHEMA_CALIBRATOR = "schema-v1.json"
"""Artifact for records checked against the app's schema."""
OBSERVED_CALIBRATOR = "observed-v1.json"
"""Artifact for records compared with the app's observed catalog (no schema)."""
SCHEMA_OBSERVED_CALIBRATOR = "schema-observed-v1.json"
"""Artifact for records checked against both a schema and an observed catalog."""

CORRECT_FROM = 0.65
"""Smallest p of a CORRECT verdict (also the Φ ≥ 75 boundary with fully applied filters)."""
LIKELY_CORRECT_FROM = 0.5
POTENTIALLY_INCORRECT_FROM = 0.35

SUBCATEGORIES: tuple[str, ...] = (
    "Aggregate Functions",
    "ASC/DESC",
    "Attribute Mismatch",
    "Attribute Redundancy",
    "Clause Missing",
    "Clause Redundancy",
    "Comparison Operator Mismatch",
    "Logical Operator Mismatch",
    "Conversion Functions",
    "Date/Time Functions",
    "DISTINCT",
    "Explicit Condition Missing",
    "Explicit Condition Mismatch",
    "Explicit Condition Redundancy",
    "Implicit Condition Missing",
    "Join Condition Mismatch",
    "Math Functions",
    "Other",
    "Subquery Missing",
    "Table Mismatch",
    "Table Redundancy",
    "Value Mismatch",
)
"""Taxonomy subcategories the symbolic checks report (one count feature each)."""
_FINDING_FEATURES = tuple(f"finding:{name}" for name in SUBCATEGORIES)


def _spec_features(judge_input: JudgeInput) -> dict[str, float]:
    spec = judge_input.sql_spec
    text = f"{judge_input.question} {judge_input.enriched_question or ''}"
    alignment = judge_input.alignment
    enriched = judge_input.enriched_spec
    return {
        "alignment_matched": len(alignment.matched),
        "alignment_missing": len(alignment.missing),
        "alignment_wrong": len(alignment.wrong),
        "alignment_extra": len(set(alignment.extra) - set(alignment.benign_extra)),
        "tables": len(spec.tables),
        "joins": len(spec.joins),
        "subqueries": spec.subquery_count,
        "filters": len(spec.filters),
        "aggregations": len(spec.aggregations),
        "distinct": float(spec.distinct),
        "has_limit": float(spec.limit is not None),
        "order_keys": len(spec.order_by),
        "group_keys": len(spec.group_by),
        "projection_columns": len(spec.projection_columns),
        "arithmetic": len(spec.arithmetic),
        "functions": len(spec.functions),
        "window_functions": float(bool(spec.window_functions)),
        "integer_divisions": spec.integer_divisions,
        "hint_columns": len(enriched.column_mentions),
        "hint_bindings": len(enriched.value_bindings),
        "hint_aggregations": len(enriched.aggregations),
        "has_enriched_question": float(judge_input.enriched_question is not None),
        "ungrounded_projections": float(
            sum(1 for c in spec.projection_columns if c != "*" and not name_is_grounded(c, text))
        ),
        "star_projection": float("*" in spec.projection_columns),
        "ungrouped_mixed_projection": float(spec.ungrouped_mixed_projection),
        "own_key_joins": float(spec.own_key_joins),
    }


def feature_vector(judge_input: JudgeInput, findings: Sequence[tuple[SuspectedError, float]]) -> dict[str, float]:
    """Named features of one judged record (see module docstring).

    ``rule_weight`` (the summed severity W of the rule mapping) carries findings of kinds the
    training data never showed, so a new or rare check still lowers p.
    """
    features = dict.fromkeys(_FINDING_FEATURES, 0.0)
    for error, _ in findings:
        name = f"finding:{error.subcategory}"
        if name in features:
            features[name] += 1.0
    features["rule_weight"] = float(sum(weight for _, weight in findings))
    features.update({k: float(v) for k, v in _spec_features(judge_input).items()})
    report = judge_input.schema_report
    if report is not None:
        for name in SCHEMA_FEATURES:
            value = getattr(report, name)
            features[f"schema:{name}"] = float(len(value) if isinstance(value, tuple) else value)
    observed = judge_input.observed_report
    if observed is not None:
        for name in OBSERVED_FEATURES:
            value = getattr(observed, name)
            features[f"observed:{name}"] = float(len(value) if isinstance(value, tuple) else value)
        features["observed:log_queries"] = math.log10(1 + observed.queries)
    return features


OBSERVED_FEATURES: tuple[str, ...] = (
    "unseen_tables",
    "unseen_columns",
    "unseen_joins",
    "tables_checked",
    "joins_checked",
)
"""Fields of :class:`stef.models.ObservedReport` counted as features when an observed catalog was used."""


SCHEMA_FEATURES: tuple[str, ...] = (
    "unknown_tables",
    "unknown_columns",
    "ambiguous_columns",
    "non_key_joins",
    "join_type_mismatches",
    "literal_type_mismatches",
    "text_aggregates",
    "named_columns_unused",
    "impossible_null_tests",
    "primary_key_joins",
    "tables_checked",
    "columns_checked",
    "joins_checked",
)
"""Fields of :class:`stef.models.SchemaReport` counted as features when a schema was given."""


@dataclass(frozen=True)
class Calibrator:
    """A standardised logistic regression: p = σ(b + Σ wᵢ·(clip(xᵢ) − μᵢ)/σᵢ).

    ``clip`` holds each feature within the range the model was trained on (``lower`` ..
    ``upper``): a linear model extrapolates without limit, so a count no training answer reached
    (60 integer divisions ``/1/1/1…``, hundreds of filters) moved p as far as its weight's sign
    said, up to a CORRECT verdict at p = 0.97 for an answer whose own findings listed the bugs.
    Past the training range the evidence counts as the most the training data showed.

    Attributes:
        version: artifact version string (part of the evaluator version).
        names: feature names, in order.
        means, scales: standardisation of each feature.
        coefficients: one weight per feature.
        intercept: bias b.
        metadata: training provenance and cross-validation figures.
        lower, upper: the smallest and largest value of each feature in the training data
            (``None``: no bound, as in artifacts written before the bounds were kept).
    """

    version: str
    names: tuple[str, ...]
    means: tuple[float, ...]
    scales: tuple[float, ...]
    coefficients: tuple[float, ...]
    intercept: float
    metadata: dict[str, Any]
    lower: tuple[float, ...] | None = None
    upper: tuple[float, ...] | None = None

    def probability(self, features: dict[str, float]) -> float:
        """P(answer correct) for named features (missing names count as 0; each value clipped to
        the feature's training range)."""
        z = self.intercept
        for name, zero_term, mean, scale, weight, low, high in self._terms:
            value = features.get(name, 0.0)
            z += zero_term if value == 0.0 else weight * (min(max(value, low), high) - mean) / scale
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def clipped(self, features: dict[str, float]) -> dict[str, float]:
        """``features`` with each of this model's features held within its training range (the
        values :meth:`probability` uses); other names unchanged.

        A deployment refit (:mod:`stef.pipeline.judge.deployment`) is fitted on and applied to
        these values, so it extrapolates no more than the shipped model.
        """
        if self.lower is None and self.upper is None:
            return dict(features)
        out = dict(features)
        for name, _zero, _mean, _scale, _weight, low, high in self._terms:
            if name in out:
                out[name] = min(max(out[name], low), high)
        return out

    @cached_property
    def _terms(self) -> tuple[tuple[str, float, float, float, float, float, float], ...]:
        """(name, term of a zero feature, mean, scale, weight, lower, upper bound) per feature:
        most features of a record are zero, and their term is the same every time."""
        count = len(self.names)
        lower = self.lower if self.lower is not None else (-math.inf,) * count
        upper = self.upper if self.upper is not None else (math.inf,) * count
        return tuple(
            (name, weight * (min(max(0.0, low), high) - mean) / scale, mean, scale, weight, low, high)
            for name, mean, scale, weight, low, high in zip(
                self.names, self.means, self.scales, self.coefficients, lower, upper, strict=True
            )
        )

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> Calibrator:
        """Build from the artifact's JSON document.

        Raises:
            KeyError, TypeError, ValueError: a field is missing or malformed (the callers name the file).
        """
        names = tuple(payload["features"])

        def bounds(key: str) -> tuple[float, ...] | None:
            values = payload.get(key)
            if values is None:
                return None
            bound = tuple(float(v) for v in values)
            if len(bound) != len(names):
                raise ValueError(f"{key} has {len(bound)} values for {len(names)} features")
            return bound

        return cls(
            version=str(payload["version"]),
            names=names,
            means=tuple(float(v) for v in payload["means"]),
            scales=tuple(float(v) or 1.0 for v in payload["scales"]),
            coefficients=tuple(float(v) for v in payload["coefficients"]),
            intercept=float(payload["intercept"]),
            metadata=dict(payload.get("metadata", {})),
            lower=bounds("lower"),
            upper=bounds("upper"),
        )


@lru_cache(maxsize=4)
def load_calibrator(name: str = DEFAULT_CALIBRATOR) -> Calibrator:
    """Load a calibrator artifact shipped in ``stef/pipeline/judge/calibrators/``."""
    text = resources.files("stef.pipeline.judge.calibrators").joinpath(name).read_text(encoding="utf-8")
    return Calibrator.from_json(json.loads(text))


CANNOT_RUN_P = 0.02
"""Largest p of an answer the schema says cannot run (it reads a table or a column the database
does not have, or a column name two of its tables share, unqualified): it fails, so it is wrong;
on the development files all such answers were."""


def schema_capped(p: float, judge_input: JudgeInput) -> float:
    """``p``, at most :data:`CANNOT_RUN_P` when the schema report shows an unknown table or column, or an ambiguous column."""
    report = judge_input.schema_report
    if report is not None and (report.unknown_tables or report.unknown_columns or report.ambiguous_columns):
        return min(p, CANNOT_RUN_P)
    return p


def verdict_from_probability(p: float) -> tuple[Verdict, float]:
    """Map p = P(correct) to (verdict, γ) as in the module docstring's table.

    >>> [(v.value, g) for v, g in map(verdict_from_probability, (0.9, 0.7, 0.6, 0.4, 0.3, 0.1))]
    [('CORRECT', 0.9), ('CORRECT', 0.7), ('LIKELY_CORRECT', 0.6), ('POTENTIALLY_INCORRECT', 0.6), ('INCORRECT', 0.7), ('INCORRECT', 0.9)]
    """
    p = min(1.0, max(0.0, p))
    if p >= CORRECT_FROM:
        return Verdict.CORRECT, round(p, 4)
    if p >= LIKELY_CORRECT_FROM:
        return Verdict.LIKELY_CORRECT, round(p, 4)
    if p >= POTENTIALLY_INCORRECT_FROM:
        return Verdict.POTENTIALLY_INCORRECT, round(1.0 - p, 4)
    return Verdict.INCORRECT, round(1.0 - p, 4)


VERDICT_BANDS: dict[Verdict, tuple[float, float]] = {
    Verdict.CORRECT: (CORRECT_FROM, 1.0),
    Verdict.LIKELY_CORRECT: (LIKELY_CORRECT_FROM, CORRECT_FROM),
    Verdict.POTENTIALLY_INCORRECT: (POTENTIALLY_INCORRECT_FROM, LIKELY_CORRECT_FROM),
    Verdict.INCORRECT: (0.0, POTENTIALLY_INCORRECT_FROM),
}
"""The p interval [low, high) of each verdict (CORRECT includes 1)."""


def probability_from_verdict(verdict: Verdict, confidence: float) -> float:
    """The p consistent with a verdict and its confidence γ stated by a judge (an LLM): p = γ for
    CORRECT and LIKELY_CORRECT, 1 − γ for the other two, moved into the verdict's band so the
    verdict stays monotone in p.

    >>> probability_from_verdict(Verdict.CORRECT, 0.9), probability_from_verdict(Verdict.INCORRECT, 0.8), probability_from_verdict(Verdict.LIKELY_CORRECT, 0.95)
    (0.9, 0.2, 0.6499)
    """
    low, high = VERDICT_BANDS[verdict]
    p = confidence if verdict in (Verdict.CORRECT, Verdict.LIKELY_CORRECT) else 1.0 - confidence
    upper = high if verdict is Verdict.CORRECT else high - 0.0001
    return round(min(upper, max(low, p)), 4)
