"""The model's answer: the NL2SQL-BUGs taxonomy, the :class:`LLMVerdict` response model, its JSON
Schema (sent as ``response_format``) and the strict validation of an answer text (:func:`parse_verdict`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stef.llm.models import MalformedOutputError
from stef.models import JudgeResult, SuspectedError, Verdict

MAX_RATIONALE_CHARS = 2000
"""Longest rationale kept (stored, cached, shown)."""
MAX_EVIDENCE_CHARS = 500
"""Longest ``evidence`` of a suspected error kept."""
MAX_SUSPECTED_ERRORS = 10
"""Most suspected errors kept per verdict."""
MAX_ANSWER_CHARS = 100_000
"""Longest model answer that is parsed at all (a verdict is a few hundred characters); a longer
one is malformed without being read."""
MAX_PROBLEM_CHARS = 500
"""Longest description of a malformed answer (it ends up in ``judge_fallback_reason``)."""
CONTRADICTION_FLAG = "model_confidence_contradicts_verdict"
"""Prefix of the evaluation flag of a record whose model answered with a verdict that its own
confidence contradicts (:func:`contradiction`); the flag quotes the verdict and the raw γ."""
CONSISTENT_FROM = 0.5
"""Lowest confidence γ that agrees with any verdict: γ is the model's certainty that its verdict is
right, so below 0.5 it says the verdict is more likely wrong than right (:func:`contradiction`)."""


class SelfContradictoryVerdictError(MalformedOutputError):
    """The answer validates, but its confidence contradicts its verdict (:func:`contradiction`): a
    malformed answer like any other (one repair request, then the symbolic fallback).

    Attributes:
        verdict: the answer as the model gave it (its raw γ in ``verdict.confidence``).
    """

    def __init__(self, message: str, verdict: LLMVerdict) -> None:
        super().__init__(message)
        self.verdict = verdict


TAXONOMY: dict[str, tuple[str, ...]] = {
    "Attribute-Related Errors": ("Attribute Mismatch", "Attribute Redundancy", "Attribute Missing"),
    "Table-Related Errors": (
        "Table Mismatch",
        "Table Redundancy",
        "Table Missing",
        "Join Condition Mismatch",
        "Join Type Mismatch",
    ),
    "Value-Related Errors": ("Value Mismatch", "Data Format Mismatch"),
    "Operator-Related Errors": ("Comparison Operator", "Logical Operator"),
    "Condition-Related Errors": (
        "Explicit Condition Missing",
        "Explicit Condition Mismatch",
        "Explicit Condition Redundancy",
        "Implicit Condition Missing",
    ),
    "Function-Related Errors": (
        "Aggregate Functions",
        "Window Functions",
        "Date/Time Functions",
        "Conversion Functions",
        "Math Functions",
        "String Functions",
        "Conditional Functions",
    ),
    "Clause-Related Errors": ("Clause Missing", "Clause Redundancy"),
    "Subquery-Related Errors": ("Subquery Missing", "Subquery Mismatch", "Partial Query"),
    "Other Errors": ("ASC/DESC", "DISTINCT", "Other"),
}
"""The NL2SQL-BUGs error taxonomy (9 categories, 31 subcategories) the model must use."""

ErrorCategory = Literal[
    "Attribute-Related Errors",
    "Table-Related Errors",
    "Value-Related Errors",
    "Operator-Related Errors",
    "Condition-Related Errors",
    "Function-Related Errors",
    "Clause-Related Errors",
    "Subquery-Related Errors",
    "Other Errors",
]
ErrorSubcategory = Literal[
    "Attribute Mismatch",
    "Attribute Redundancy",
    "Attribute Missing",
    "Table Mismatch",
    "Table Redundancy",
    "Table Missing",
    "Join Condition Mismatch",
    "Join Type Mismatch",
    "Value Mismatch",
    "Data Format Mismatch",
    "Comparison Operator",
    "Logical Operator",
    "Explicit Condition Missing",
    "Explicit Condition Mismatch",
    "Explicit Condition Redundancy",
    "Implicit Condition Missing",
    "Aggregate Functions",
    "Window Functions",
    "Date/Time Functions",
    "Conversion Functions",
    "Math Functions",
    "String Functions",
    "Conditional Functions",
    "Clause Missing",
    "Clause Redundancy",
    "Subquery Missing",
    "Subquery Mismatch",
    "Partial Query",
    "ASC/DESC",
    "DISTINCT",
    "Other",
]


class LLMSuspectedError(BaseModel):
    """One suspected error named with the NL2SQL-BUGs taxonomy (:data:`TAXONOMY`); strict
    types (every field a JSON string)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    category: ErrorCategory
    subcategory: ErrorSubcategory
    evidence: str

    @model_validator(mode="after")
    def _subcategory_of_category(self) -> LLMSuspectedError:
        if self.subcategory not in TAXONOMY[self.category]:
            raise ValueError(
                f"subcategory {self.subcategory!r} is not one of {self.category!r}: {', '.join(TAXONOMY[self.category])}"
            )
        return self


class LLMVerdict(BaseModel):
    """The structured answer of the model (STEF paper §2.D): the JSON object it must return.

    Strict types, validated from the JSON text (:func:`parse_verdict`): ``verdict`` is one of
    the enum strings, ``confidence`` a finite JSON number (not a boolean, not a string),
    ``rationale`` a string, ``suspected_errors`` an array of taxonomy objects.

    Attributes:
        verdict: ``CORRECT``, ``LIKELY_CORRECT``, ``POTENTIALLY_INCORRECT`` or ``INCORRECT``.
        confidence: γ ∈ [0, 1].
        rationale: a short explanation (truncated to 2,000 characters when stored).
        suspected_errors: ``[{category, subcategory, evidence}]`` (at most 10 are kept).

    >>> LLMVerdict.model_validate_json('{"verdict": "CORRECT", "confidence": 0.9, "rationale": "ok", "suspected_errors": []}').verdict
    <Verdict.CORRECT: 'CORRECT'>
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    verdict: Verdict
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    rationale: str
    suspected_errors: list[LLMSuspectedError]

    def capped(self) -> LLMVerdict:
        """This verdict with what is kept of it: rationale, evidence and the number of
        suspected errors cut to :data:`MAX_RATIONALE_CHARS`, :data:`MAX_EVIDENCE_CHARS` and
        :data:`MAX_SUSPECTED_ERRORS` (what is cached and stored)."""
        errors = [
            e.model_copy(update={"evidence": e.evidence[:MAX_EVIDENCE_CHARS]})
            for e in self.suspected_errors[:MAX_SUSPECTED_ERRORS]
        ]
        return self.model_copy(
            update={"rationale": self.rationale.strip()[:MAX_RATIONALE_CHARS], "suspected_errors": errors}
        )

    def to_result(self, judge: str) -> JudgeResult:
        """The :class:`JudgeResult` of this answer, named after ``judge`` (the model string).

        The model's verdict and confidence become p_correct as for every judge
        (:func:`stef.pipeline.judge.calibrate.probability_from_verdict`: p = γ on the correct side, 1 − γ on the
        other, within the verdict's band); γ is then the probability of the verdict's side, so a
        model verdict reads like a symbolic one.
        """
        from stef.pipeline.judge.calibrate import probability_from_verdict, verdict_from_probability

        p_correct = probability_from_verdict(self.verdict, float(self.confidence))
        _, gamma = verdict_from_probability(p_correct)
        return JudgeResult(
            verdict=self.verdict,
            confidence=gamma,
            p_correct=p_correct,
            rationale=self.rationale.strip()[:MAX_RATIONALE_CHARS] or f"{self.verdict.value} (no rationale given)",
            judge=judge,
            suspected_errors=tuple(
                SuspectedError(category=e.category, subcategory=e.subcategory, evidence=e.evidence[:MAX_EVIDENCE_CHARS])
                for e in self.suspected_errors[:MAX_SUSPECTED_ERRORS]
            ),
        )


def contradiction(verdict: LLMVerdict) -> str | None:
    """Why ``verdict`` contradicts its own confidence, or ``None`` when it does not.

    γ is the model's certainty that its verdict is right (the system prompt says so). Below
    :data:`CONSISTENT_FROM` the answer says its verdict is more likely wrong than right: CORRECT
    with γ 0.1 puts p_correct at 0.1 by γ but at 0.65 or more by the verdict, and no p satisfies
    both. Such an answer is not used as given (:func:`parse_verdict` rejects it); a γ at or
    above 0.5 that merely lies outside the verdict's band (LIKELY_CORRECT with γ 0.95) is not a
    contradiction: p is moved into the band as for every judge.

    >>> answer = {"rationale": "r", "suspected_errors": []}
    >>> contradiction(LLMVerdict(verdict=Verdict.CORRECT, confidence=0.1, **answer))
    'self-contradictory answer: verdict CORRECT with confidence 0.1 (below 0.5: the verdict more likely wrong than right)'
    >>> contradiction(LLMVerdict(verdict=Verdict.INCORRECT, confidence=0.5, **answer)) is None
    True
    """
    gamma = float(verdict.confidence)
    if gamma >= CONSISTENT_FROM:
        return None
    return (
        f"self-contradictory answer: verdict {verdict.verdict.value} with confidence {gamma:g} "
        f"(below {CONSISTENT_FROM:g}: the verdict more likely wrong than right)"
    )


def _inline_refs(node: Any, defs: Mapping[str, Any]) -> Any:
    """Resolve ``$ref`` into ``$defs``, drop ``title``/``default``, close every object."""
    if isinstance(node, list):
        return [_inline_refs(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _inline_refs(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    out = {key: _inline_refs(value, defs) for key, value in node.items() if key not in ("title", "default", "$defs")}
    if out.get("type") == "object" and "properties" in out:
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


@lru_cache(maxsize=1)
def schema_text() -> str:
    """The strict JSON Schema of :class:`LLMVerdict` (:func:`response_schema`) as compact JSON text
    (sorted keys; built once): part of every cache key and of the repair request."""
    raw = LLMVerdict.model_json_schema()
    return json.dumps(
        _inline_refs(raw, raw.get("$defs", {})), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )


def response_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`LLMVerdict` in the strict form OpenAI-compatible servers enforce.

    References are inlined, every property is required and no other property is allowed. Each
    call returns a new dict (built once, copied per call).

    >>> schema = response_schema()
    >>> schema["required"], schema["properties"]["verdict"]["enum"][0], schema["additionalProperties"]
    (['verdict', 'confidence', 'rationale', 'suspected_errors'], 'CORRECT', False)
    """
    schema: dict[str, Any] = json.loads(schema_text())
    return schema


def response_format() -> dict[str, Any]:
    """The ``response_format`` argument of the completion call (JSON Schema, strict).

    >>> response_format()["json_schema"]["name"], response_format()["type"]
    ('stef_verdict', 'json_schema')
    """
    return {"type": "json_schema", "json_schema": {"name": "stef_verdict", "strict": True, "schema": response_schema()}}


def _strip_fences(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        if stripped.rstrip().endswith("```"):
            stripped = stripped.rstrip()[:-3]
    return stripped.strip()


def _short(text: str, limit: int = 80) -> str:
    """``repr`` of the first ``limit`` characters of ``text`` (``…`` when cut)."""
    return repr(text[:limit]) + ("…" if len(text) > limit else "")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise MalformedOutputError(f"key {_short(repeated[0], 40)} appears more than once (an ambiguous answer)")
    return dict(pairs)


def _problems(exc: ValidationError) -> str:
    def where(loc: tuple[int | str, ...]) -> str:
        return ".".join(str(part)[:40] for part in loc) or "(root)"

    text = "; ".join(f"{where(error['loc'])}: {error['msg']}" for error in exc.errors(include_input=False)[:3])
    return text[:MAX_PROBLEM_CHARS]


def parse_verdict(content: str | None) -> LLMVerdict:
    """Validate the model's answer text (a Markdown code fence around it is tolerated).

    The text must be one JSON object without repeated keys that validates strictly against
    :class:`LLMVerdict`; an answer over :data:`MAX_ANSWER_CHARS` is not read. The error message
    quotes at most 80 characters of the answer.

    Args:
        content: the ``message.content`` of the response.

    Returns:
        The validated :class:`LLMVerdict`, capped (:meth:`LLMVerdict.capped`).

    Raises:
        MalformedOutputError: empty, too long, not JSON, or not valid against the schema; the
            message names the first problems (``confidence: Input should be less than or equal to 1``).
        SelfContradictoryVerdictError: valid, but its confidence contradicts its verdict
            (:func:`contradiction`, e.g. CORRECT with confidence 0.1).

    >>> parse_verdict('```json\\n{"verdict": "INCORRECT", "confidence": 1, "rationale": "r", "suspected_errors": []}\\n```').confidence
    1.0
    >>> parse_verdict('{"verdict": "WRONG", "confidence": 2, "rationale": "r", "suspected_errors": []}')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stef.llm.models.MalformedOutputError: not a valid verdict: verdict: Input should be 'CORRECT', ...; confidence: Input should be less than or equal to 1
    >>> parse_verdict('{"verdict": "CORRECT", "confidence": true, "rationale": "r", "suspected_errors": []}')
    Traceback (most recent call last):
    ...
    stef.llm.models.MalformedOutputError: not a valid verdict: confidence: Input should be a valid number
    """
    raw = content or ""
    if len(raw) > MAX_ANSWER_CHARS:
        raise MalformedOutputError(
            f"answer of {len(raw):,} characters, over the {MAX_ANSWER_CHARS:,} cap (not read): starts {_short(raw)}"
        )
    text = _strip_fences(raw)
    if not text:
        raise MalformedOutputError("empty answer")
    try:
        payload = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except ValueError as exc:
        raise MalformedOutputError(f"not JSON ({str(exc)[:120]}): {_short(text)}") from None
    except RecursionError:
        raise MalformedOutputError(f"not JSON (nested too deeply): {_short(text)}") from None
    if not isinstance(payload, dict):
        raise MalformedOutputError(f"not a JSON object: {_short(text)}")
    try:
        verdict = LLMVerdict.model_validate_json(text).capped()
    except ValidationError as exc:
        raise MalformedOutputError(f"not a valid verdict: {_problems(exc)}") from None
    problem = contradiction(verdict)
    if problem is not None:
        raise SelfContradictoryVerdictError(problem, verdict)
    return verdict
