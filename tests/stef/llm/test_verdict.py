"""Tests of the model's answer (stef/llm/verdict.py): malformed answers are named, verdict types are strict."""

from __future__ import annotations

import re

import pytest

from stef.llm.models import MalformedOutputError
from stef.llm.verdict import SelfContradictoryVerdictError, parse_verdict
from tests.stef.llm.hostile import ANSWER, VERDICT, answer_with


@pytest.mark.usefixtures("warm_litellm")
@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("", "empty answer", id="empty"),
        pytest.param("[1, 2]", "not a JSON object", id="json_array"),
        pytest.param(
            '{"verdict": "CORRECT", "confidence": 0.9, "rationale": "r"}',
            "suspected_errors: Field required",
            id="missing_field",
        ),
        pytest.param(
            '{"verdict": "CORRECT", "confidence": 0.9, "rationale": "r", "suspected_errors": [{"category": "Other Errors", '
            '"subcategory": "Value Mismatch", "evidence": "e"}]}',
            "is not one of 'Other Errors'",
            id="subcategory_of_another_category",
        ),
    ],
)
def test_malformed_answers_are_named(content: str, message: str) -> None:
    with pytest.raises(MalformedOutputError, match=message):
        parse_verdict(content)


@pytest.mark.usefixtures("placeholder_key")
@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(answer_with(confidence=True), "confidence: Input should be a valid number", id="confidence_true"),
        pytest.param(
            answer_with(confidence=False), "confidence: Input should be a valid number", id="confidence_false"
        ),
        pytest.param(
            answer_with(confidence="0.99"), "confidence: Input should be a valid number", id="confidence_string"
        ),
        pytest.param(answer_with(confidence=None), "confidence: Input should be a valid number", id="confidence_null"),
        pytest.param(ANSWER.replace("0.7", "NaN"), "confidence: Input should be a finite number", id="confidence_nan"),
        pytest.param(
            ANSWER.replace("0.7", "Infinity"), "confidence: Input should be a finite number", id="confidence_infinity"
        ),
        pytest.param(
            ANSWER.replace("0.7", "1e400"), "confidence: Input should be a finite number", id="confidence_overflows"
        ),
        pytest.param(
            answer_with(confidence=-0.1),
            "confidence: Input should be greater than or equal to 0",
            id="confidence_negative",
        ),
        pytest.param(answer_with(verdict="correct"), "verdict: Input should be 'CORRECT'", id="verdict_lower_case"),
        pytest.param(answer_with(verdict=1), "verdict: Input should be 'CORRECT'", id="verdict_number"),
        pytest.param(answer_with(verdict=["CORRECT"]), "verdict: Input should be 'CORRECT'", id="verdict_list"),
        pytest.param(answer_with(rationale=5), "rationale: Input should be a valid string", id="rationale_number"),
        pytest.param(answer_with(rationale=None), "rationale: Input should be a valid string", id="rationale_null"),
        pytest.param(
            answer_with(suspected_errors={}), "suspected_errors: Input should be a valid array", id="errors_object"
        ),
        pytest.param(
            answer_with(suspected_errors="none"), "suspected_errors: Input should be a valid array", id="errors_string"
        ),
        pytest.param(
            answer_with(suspected_errors=["Aggregate Functions"]),
            "suspected_errors.0: Input should be an object",
            id="errors_strings",
        ),
        pytest.param(
            answer_with(suspected_errors=[{**VERDICT["suspected_errors"][0], "evidence": 3}]),
            "suspected_errors.0.evidence: Input should be a valid string",
            id="evidence_number",
        ),
        pytest.param(
            answer_with(suspected_errors=[{**VERDICT["suspected_errors"][0], "severity": "high"}]),
            "severity: Extra inputs are not permitted",
            id="error_with_extra_key",
        ),
        pytest.param(
            ANSWER[:-1] + ', "verdict": "CORRECT"}', "key 'verdict' appears more than once", id="duplicate_key"
        ),
    ],
)
def test_strict_verdict_types(content: str, message: str) -> None:
    with pytest.raises(MalformedOutputError, match=re.escape(message)):
        parse_verdict(content)


@pytest.mark.parametrize(
    ("verdict", "confidence", "p_correct", "gamma"),
    [
        # hand-computed: p = γ (correct side) or 1 − γ (incorrect side), moved into the verdict's band
        pytest.param("CORRECT", 0.5, 0.65, 0.65, id="correct_at_0.5"),
        pytest.param("CORRECT", 0.9, 0.9, 0.9, id="correct_0.9"),
        pytest.param("LIKELY_CORRECT", 0.95, 0.6499, 0.6499, id="likely_correct_confident"),
        pytest.param("INCORRECT", 0.8, 0.2, 0.8, id="incorrect_0.8"),
        pytest.param("POTENTIALLY_INCORRECT", 0.5, 0.4999, 0.5001, id="potentially_incorrect_at_0.5"),
    ],
)
def test_a_consistent_answer_maps_to_p_correct(verdict: str, confidence: float, p_correct: float, gamma: float) -> None:
    result = parse_verdict(answer_with(verdict=verdict, confidence=confidence)).to_result("m")
    assert (result.verdict.value, result.p_correct, result.confidence) == (verdict, p_correct, gamma)


@pytest.mark.parametrize(
    ("verdict", "confidence"),
    [
        pytest.param("CORRECT", 0.1, id="correct_0.1"),
        pytest.param("CORRECT", 0.49, id="correct_0.49"),
        pytest.param("LIKELY_CORRECT", 0.0, id="likely_correct_0"),
        pytest.param("POTENTIALLY_INCORRECT", 0.3, id="potentially_incorrect_0.3"),
        pytest.param("INCORRECT", 0.2, id="incorrect_0.2"),
    ],
)
def test_a_verdict_its_own_confidence_contradicts_is_malformed(verdict: str, confidence: float) -> None:
    with pytest.raises(SelfContradictoryVerdictError) as raised:
        parse_verdict(answer_with(verdict=verdict, confidence=confidence))
    assert str(raised.value) == (
        f"self-contradictory answer: verdict {verdict} with confidence {confidence:g} "
        "(below 0.5: the verdict more likely wrong than right)"
    )
    assert isinstance(raised.value, MalformedOutputError)
    assert (raised.value.verdict.verdict.value, raised.value.verdict.confidence) == (verdict, confidence)
