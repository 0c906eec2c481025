"""Tests of the enriched-question validation (stef.pipeline.enrichment, stage E)."""

from __future__ import annotations

import pytest

from stef.models import AgentLogRecord, Verdict
from stef.pipeline.evaluate import evaluate
from stef.pipeline.extract_nl import extract_question_spec
from tests.stef.pipeline.stages import STAGES, Case, check_rejection, stage_cases


@pytest.mark.parametrize(
    ("question", "enriched", "status", "evidence"),
    [
        pytest.param("How many users live in Rome?", "How many users live in Rome?", "faithful", (), id="faithful"),
        pytest.param(
            "How many male users live in Rome?",
            "How many male users live in Rome? male refers to gender = 'M'",
            "adds_constraints",
            ("gender = m",),
            id="adds_definition",
        ),
        pytest.param(
            "How many users joined in 2019?", "Count users who joined", "drops_constraints", ("2019",), id="drops_year"
        ),
        pytest.param(
            "What was the class on 2011/2/22?",
            "What was the class on 2011/2/22? date = '2012-02-22'",
            "contradicts",
            ("year 2011 in Q_u, date = 2012-02-22 in Q_e",),
            id="contradicting_year",
        ),
        pytest.param(
            "Show the top 3 products",
            "Show the top 5 products by sales",
            "contradicts",
            ("top 3 in Q_u, top 5 in Q_e",),
            id="contradicting_top_k",
        ),
    ],
)
def test_enrichment_status(question: str, enriched: str, status: str, evidence: tuple[str, ...]) -> None:
    from stef.pipeline.enrichment import validate_enrichment

    result = validate_enrichment(
        extract_question_spec(question), extract_question_spec(enriched, reference=question), question, enriched
    )
    assert result is not None and result.status.value == status
    found = {
        "faithful": (),
        "adds_constraints": result.added,
        "drops_constraints": result.dropped,
        "contradicts": result.contradictions,
    }[status]
    assert found == evidence


def test_contradicting_enrichment_lowers_the_verdict() -> None:
    question = "What was the build up play speed class for Willem II on 2011/2/22?"
    base = {
        "run_id": "r",
        "question": question,
        "sql": "SELECT speed_class FROM team WHERE name = 'Willem II' AND date = '2012-02-22'",
    }
    faithful = evaluate(AgentLogRecord(**base, enriched_question=question + " Willem II refers to name = 'Willem II'"))
    contradicting = evaluate(
        AgentLogRecord(**base, enriched_question=question + " on 2011/2/22 refers to date = '2012-02-22'")
    )
    assert faithful.enrichment_status is None or faithful.enrichment_status.value != "contradicts"
    assert contradicting.enrichment_status is not None and contradicting.enrichment_status.value == "contradicts"
    assert any(e.evidence.startswith("Q_e contradicts Q_u") for e in contradicting.suspected_errors)
    assert contradicting.verdict is Verdict.INCORRECT


@pytest.mark.parametrize("case", stage_cases("enrichment"))
def test_enrichment_golden(case: Case) -> None:
    """stage E on each case of ``tests/fixtures/stages/enrichment.jsonl`` gives the recorded output."""
    assert STAGES["enrichment"](case["input"]) == case["expected"]


@pytest.mark.parametrize("case", stage_cases("enrichment", invalid=True))
def test_enrichment_golden_rejections(case: Case) -> None:
    """Each input of ``tests/fixtures/stages/enrichment__invalid.jsonl`` is rejected as recorded."""
    check_rejection("enrichment", case)
