"""Learned calibration of the symbolic verdict (a small logistic regression, no runtime deps).

The symbolic checks say *what* looks wrong; how much each kind of evidence predicts a wrong
answer is learned from labelled data. :func:`feature_vector` turns one judge input plus its findings
into numbers (finding counts per taxonomy subcategory, alignment counts, structural counts, the
amount of evidence in Q_e); a logistic regression maps them to p = P(answer correct). The
model is a JSON artifact (``stef/calibrators/symbolic-v1.json``: feature names, standardisation,
coefficients, training data digest and grouped cross-validation figures) produced by
``scripts/train_calibrator.py`` from the NL2SQL-BUGs development file only; scoring needs no
scikit-learn.

From p to the verdict and γ (:func:`verdict_from_probability`) the mapping keeps Φ monotone in
p and puts Φ ≥ 75 exactly where p ≥ 0.5 when the filters are fully applied. The logistic model
is rarely surer than p ≈ 0.8 on schema-free evidence, so the top bands start at 0.65 and 0.75:

    p ≥ 0.75          CORRECT,               γ = max(p, 0.85)  Φ = 100
    0.65 ≤ p < 0.75   LIKELY_CORRECT,        γ = 0.85          Φ = 90
    0.50 ≤ p < 0.65   CORRECT,               0.65 ≤ γ < 0.85   Φ = 80
    0.35 ≤ p < 0.50   LIKELY_CORRECT,        0.65 ≤ γ < 0.85   Φ = 72
    0.20 ≤ p < 0.35   POTENTIALLY_INCORRECT, γ = 0.85          Φ = 70
    p < 0.20          INCORRECT,             γ = 0.85          Φ = 50
(Φ for FULLY_APPLIED filters; fewer applied filters lower it further.)
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from stef.models import SuspectedError, Verdict

if TYPE_CHECKING:
    from stef.judge import JudgeInput

DEFAULT_CALIBRATOR = "symbolic-v1.json"
"""Artifact shipped in ``stef/calibrators/`` and used by the default symbolic judge."""

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
    "Table Redundancy",
    "Value Mismatch",
)
"""Taxonomy subcategories the symbolic checks report (one count feature each)."""
_FINDING_FEATURES = tuple(f"finding:{name}" for name in SUBCATEGORIES)


def _spec_features(judge_input: JudgeInput) -> dict[str, float]:
    spec = judge_input.sql_spec
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
    return features


@dataclass(frozen=True)
class Calibrator:
    """A standardised logistic regression: p = σ(b + Σ wᵢ·(xᵢ − μᵢ)/σᵢ).

    Attributes:
        version: artifact version string (part of the evaluator version).
        names: feature names, in order.
        means, scales: standardisation of each feature.
        coefficients: one weight per feature.
        intercept: bias b.
        metadata: training provenance and cross-validation figures.
    """

    version: str
    names: tuple[str, ...]
    means: tuple[float, ...]
    scales: tuple[float, ...]
    coefficients: tuple[float, ...]
    intercept: float
    metadata: dict[str, Any]

    def probability(self, features: dict[str, float]) -> float:
        """P(answer correct) for named features (missing names count as 0)."""
        z = self.intercept
        for name, zero_term, mean, scale, weight in self._terms:
            value = features.get(name, 0.0)
            z += zero_term if value == 0.0 else weight * (value - mean) / scale
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    @cached_property
    def _terms(self) -> tuple[tuple[str, float, float, float, float], ...]:
        """(name, term of a zero feature, mean, scale, weight) per feature: most features of a
        record are zero, and their term is the same every time."""
        return tuple(
            (name, weight * (0.0 - mean) / scale, mean, scale, weight)
            for name, mean, scale, weight in zip(self.names, self.means, self.scales, self.coefficients, strict=True)
        )

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> Calibrator:
        """Build from the artifact's JSON document."""
        return cls(
            version=str(payload["version"]),
            names=tuple(payload["features"]),
            means=tuple(float(v) for v in payload["means"]),
            scales=tuple(float(v) or 1.0 for v in payload["scales"]),
            coefficients=tuple(float(v) for v in payload["coefficients"]),
            intercept=float(payload["intercept"]),
            metadata=dict(payload.get("metadata", {})),
        )


@lru_cache(maxsize=4)
def load_calibrator(name: str = DEFAULT_CALIBRATOR) -> Calibrator:
    """Load a calibrator artifact shipped in ``stef/calibrators/``."""
    text = resources.files("stef.calibrators").joinpath(name).read_text(encoding="utf-8")
    return Calibrator.from_json(json.loads(text))


def verdict_from_probability(p: float) -> tuple[Verdict, float]:
    """Map p = P(correct) to (verdict, γ) as in the module docstring's table.

    >>> [(v.value, g) for v, g in map(verdict_from_probability, (0.9, 0.7, 0.6, 0.4, 0.3, 0.1))]
    [('CORRECT', 0.9), ('LIKELY_CORRECT', 0.85), ('CORRECT', 0.783), ('LIKELY_CORRECT', 0.717), ('POTENTIALLY_INCORRECT', 0.85), ('INCORRECT', 0.85)]
    """
    if p >= 0.75:
        return Verdict.CORRECT, round(max(p, 0.85), 3)
    if p >= 0.65:
        return Verdict.LIKELY_CORRECT, 0.85
    if p >= 0.5:
        return Verdict.CORRECT, round(0.65 + 0.2 * (p - 0.5) / 0.15 * 0.999, 3)
    if p >= 0.35:
        return Verdict.LIKELY_CORRECT, round(0.65 + 0.2 * (p - 0.35) / 0.15 * 0.999, 3)
    if p >= 0.2:
        return Verdict.POTENTIALLY_INCORRECT, 0.85
    return Verdict.INCORRECT, 0.85
