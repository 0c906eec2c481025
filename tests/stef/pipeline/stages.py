"""The per-stage golden files (``tests/fixtures/stages/<stage>.jsonl``): reading them and running a case.

Each line of ``<stage>.jsonl`` is ``{"id", "source", "input", "expected"}``: ``expected`` is what
:data:`STAGES` ``[stage]`` returns for ``input``, as parsed JSON (``model_dump(mode="json")`` of
the stage's result). Each line of ``<stage>__invalid.jsonl`` is an input the pipeline must reject:
``expected`` is ``{"status", "reason"}`` (the typed failure status and its reason) or
``{"error", "reason"}`` (the :class:`~stef.errors.StefError` subclass raised and its message).
``tests/fixtures/stages/regenerate.py`` writes ``expected``; see the README there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stef import errors
from stef.models import AgentLogRecord, AlignmentResult, FilterStatus, Verdict
from stef.pipeline.align import align_filters
from stef.pipeline.clean import parse_sql_with_fallback
from stef.pipeline.dialects import resolve_dialect
from stef.pipeline.enrichment import validate_enrichment
from stef.pipeline.evaluate import evaluate
from stef.pipeline.extract_nl import extract_question_spec
from stef.pipeline.extract_sql import extract_sql_spec
from stef.pipeline.rules import AppRules, default_rules, parse_rules
from stef.pipeline.score import compute_score
from tests.stef.pipeline.cases import read_jsonl
from tests.support.checkout import FIXTURES

STAGES_DIR = FIXTURES / "stages"
"""The folder of the per-stage golden files."""

Case = dict[str, Any]


def _rules(case_input: Case) -> AppRules:
    """The rule set of a case: its ``rules`` payload parsed, else the default rules."""
    payload = case_input.get("rules")
    return parse_rules(payload, "rules/golden.json") if payload is not None else default_rules()


def _parsed_answer(case_input: Case) -> tuple[Any, str, tuple[str, ...]]:
    """The answer tree, dialect and flags of ``case_input["sql"]`` cleaned and parsed (stage A)."""
    parsed = parse_sql_with_fallback(case_input["sql"], resolve_dialect(case_input.get("dialect") or None))
    assert parsed.answer is not None, f"golden input does not parse: {parsed.error}: {parsed.error_message}"
    return parsed.answer, parsed.dialect, parsed.flags


def clean_stage(case_input: Case) -> Case:
    """Stage A: ``{"sql", "dialect"}`` -> the status (``"parsed"`` or the failure status), its
    reason, the dialect used, the flags, the cleaned text and the answer statement in its dialect."""
    parsed = parse_sql_with_fallback(case_input["sql"], resolve_dialect(case_input["dialect"] or None))
    return {
        "status": parsed.error or "parsed",
        "reason": parsed.error_message,
        "dialect": parsed.dialect,
        "flags": list(parsed.flags),
        "cleaned_sql": parsed.text,
        "answer": parsed.answer.sql(dialect=parsed.dialect or None) if parsed.answer is not None else None,
    }


def sql_spec_stage(case_input: Case) -> Case:
    """Stage B: ``{"sql", "dialect", "rules"?}`` -> the SQLSpec of the answer statement."""
    answer, dialect, flags = _parsed_answer(case_input)
    return extract_sql_spec(answer, dialect, _rules(case_input), flags).model_dump(mode="json")


def question_spec_stage(case_input: Case) -> Case:
    """Stage C: ``{"question", "enriched_question", "dialect"}`` -> the QuestionSpec of Q_u
    (``question``) and of Q_e read against Q_u (``enriched``)."""
    question, enriched, dialect = case_input["question"], case_input["enriched_question"], case_input["dialect"]
    rules = _rules(case_input)
    return {
        "question": extract_question_spec(question, dialect, rules).model_dump(mode="json"),
        "enriched": extract_question_spec(enriched, dialect, rules, reference=question).model_dump(mode="json"),
    }


def alignment_stage(case_input: Case) -> Case:
    """Stage D: ``{"question", "enriched_question", "sql", "dialect", "rules"?}`` -> the AlignmentResult."""
    answer, dialect, flags = _parsed_answer(case_input)
    rules = _rules(case_input)
    question, enriched = case_input["question"], case_input["enriched_question"]
    return align_filters(
        extract_sql_spec(answer, dialect, rules, flags),
        extract_question_spec(question, dialect, rules),
        extract_question_spec(enriched, dialect, rules, reference=question),
        question,
        enriched,
        rules,
    ).model_dump(mode="json")


def enrichment_stage(case_input: Case) -> Case | None:
    """Stage E: ``{"question", "enriched_question", "dialect"}`` -> the EnrichmentResult (``None`` without Q_e)."""
    question, enriched, dialect = case_input["question"], case_input["enriched_question"], case_input["dialect"]
    result = validate_enrichment(
        extract_question_spec(question, dialect),
        extract_question_spec(enriched, dialect, reference=question),
        question,
        enriched,
    )
    return result.model_dump(mode="json") if result is not None else None


def score_stage(case_input: Case) -> Case:
    """Φ: ``{"filter_status", "benign_extra", "verdict", "confidence", "rules"?}`` -> the ScoreBreakdown."""
    alignment = AlignmentResult(
        status=FilterStatus(case_input["filter_status"]),
        extra=tuple(case_input["benign_extra"]),
        benign_extra=tuple(case_input["benign_extra"]),
    )
    verdict = Verdict(case_input["verdict"])
    return compute_score(alignment, verdict, case_input["confidence"], _rules(case_input).scoring).model_dump(
        mode="json"
    )


def record_status(case_input: Case) -> Case:
    """``evaluate()`` of the record ``case_input`` (an AgentLogRecord's fields) -> its status and reason."""
    evaluation = evaluate(AgentLogRecord(run_id="golden", **case_input))
    return {"status": evaluation.status.value, "reason": evaluation.status_reason}


def rules_payload(case_input: Case) -> Case:
    """``{"rules"}`` -> the scoring rules of the payload (a rejected payload raises RulesError)."""
    return _rules(case_input).scoring.model_dump(mode="json")


STAGES: dict[str, Callable[[Case], Any]] = {
    "clean": clean_stage,
    "sql_spec": sql_spec_stage,
    "question_spec": question_spec_stage,
    "alignment": alignment_stage,
    "enrichment": enrichment_stage,
    "score": score_stage,
}
"""Each stage's function, from the case's ``input`` to its ``expected``."""

REJECTIONS: dict[str, Callable[[Case], Any]] = {
    "clean": clean_stage,
    "sql_spec": record_status,
    "question_spec": record_status,
    "alignment": record_status,
    "enrichment": record_status,
    "score": rules_payload,
}
"""What each stage's ``__invalid`` inputs are run through: stage A itself; for B–E the whole
record (the boundary turns a bad input into a typed status before the stage); for Φ its rules."""


def stage_file(stage: str, invalid: bool = False) -> Path:
    """``tests/fixtures/stages/<stage>.jsonl`` (``<stage>__invalid.jsonl`` when ``invalid``)."""
    return STAGES_DIR / f"{stage}{'__invalid' if invalid else ''}.jsonl"


def stage_cases(stage: str, invalid: bool = False) -> list[Any]:
    """The cases of a stage's golden file as ``pytest.param``, each with its ``id``."""
    return [pytest.param(case, id=case["id"]) for case in read_jsonl(stage_file(stage, invalid))]


def run_case(stage: str, case: Case, invalid: bool = False) -> Any:
    """What a case gives today: the stage's output, or ``{"error", "reason"}`` when it raises a StefError."""
    run = (REJECTIONS if invalid else STAGES)[stage]
    try:
        return run(case["input"])
    except errors.StefError as exc:
        if not invalid:
            raise
        return {"error": type(exc).__name__, "reason": str(exc)}


def check_rejection(stage: str, case: Case) -> None:
    """Assert an ``__invalid`` case is rejected as recorded: the same error type and message, or
    the same typed status and reason."""
    expected = case["expected"]
    if "error" in expected:
        with pytest.raises(getattr(errors, expected["error"])) as caught:
            REJECTIONS[stage](case["input"])
        assert str(caught.value) == expected["reason"]
    else:
        assert expected["status"] not in {"parsed", "evaluated"}, "an __invalid case must fail"
        assert REJECTIONS[stage](case["input"]) == expected
