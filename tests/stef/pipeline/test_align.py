"""Tests of the filter alignment (stef.pipeline.align): the filter-status classes, the evidence
lists and the leniency bonus for benign extra filters.
"""

from __future__ import annotations

import pytest
import sqlglot

from stef.models import AgentLogRecord, AlignmentResult, FilterStatus
from stef.pipeline.align import align_filters
from stef.pipeline.evaluate import evaluate
from stef.pipeline.extract_nl import extract_question_spec
from stef.pipeline.extract_sql import extract_sql_spec
from stef.pipeline.rules import parse_rules
from tests.stef.pipeline.stages import STAGES, Case, check_rejection, stage_cases


def _align(question: str, enriched: str | None, sql: str) -> AlignmentResult:
    spec = extract_sql_spec(sqlglot.parse_one(sql, read="sqlite"), "sqlite")
    return align_filters(
        spec,
        extract_question_spec(question, "sqlite"),
        extract_question_spec(enriched, "sqlite", reference=question),
        question,
        enriched,
    )


@pytest.mark.parametrize(
    ("question", "enriched", "sql", "status"),
    [
        pytest.param(
            "How many users live in 'Rome'?",
            None,
            "SELECT COUNT(*) FROM users WHERE city = 'Rome'",
            FilterStatus.FULLY_APPLIED,
            id="fully",
        ),
        pytest.param(
            "How many users live in 'Rome'?",
            None,
            "SELECT COUNT(*) FROM users WHERE city = 'Rome' AND kind = 'premium'",
            FilterStatus.FULLY_APPLIED_WITH_EXTRAS,
            id="with_extras",
        ),
        pytest.param(
            "How many male users live in 'Rome'?",
            "How many male users live in 'Rome'? male refers to gender = 'M'",
            "SELECT COUNT(*) FROM users WHERE city = 'Rome' AND gender = 'F'",
            FilterStatus.PARTIALLY_APPLIED,
            id="partially_wrong_value",
        ),
        pytest.param(
            "How many users live in 'Rome'?",
            None,
            "SELECT COUNT(*) FROM users",
            FilterStatus.NOT_APPLIED,
            id="not_applied",
        ),
        pytest.param(
            "Which molecule is TR010?",
            None,
            "SELECT * FROM molecule WHERE id = 'TR018'",
            FilterStatus.NOT_APPLIED,
            id="wrong_entity",
        ),
    ],
)
def test_filter_alignment_classes(question: str, enriched: str | None, sql: str, status: FilterStatus) -> None:
    assert _align(question, enriched, sql).status is status


def test_alignment_evidence_lists() -> None:
    result = _align(
        "How many male users live in 'Rome'?",
        "How many male users live in 'Rome'? male refers to gender = 'M'",
        "SELECT COUNT(*) FROM users WHERE city = 'Rome' AND gender = 'F'",
    )
    assert result.missing == ()
    assert result.wrong == ("gender = m: S filters gender = 'F' (another value)",)
    assert "city = rome" in result.matched


def test_benign_extra_filter_earns_the_leniency_bonus() -> None:
    rules = parse_rules({"benign_filters": [{"column": "tenant_id"}]}, "rules/t.json")
    record = AgentLogRecord(
        run_id="r",
        question="How many users live in 'Rome'?",
        sql="SELECT COUNT(*) FROM users WHERE city = 'Rome' AND tenant_id = 42",
    )
    evaluation = evaluate(record, rules)
    assert evaluation.filter_status is FilterStatus.FULLY_APPLIED_WITH_EXTRAS
    assert evaluation.alignment is not None and evaluation.alignment.benign_extra == ("tenant_id = 42",)
    breakdown = evaluation.score_breakdown
    assert breakdown is not None and breakdown.leniency_bonus == 1.0 and breakdown.filter_score == 4.0
    assert breakdown.base == min(10.0, 4.0 + breakdown.verdict_score + 1.0)


@pytest.mark.parametrize("case", stage_cases("alignment"))
def test_alignment_golden(case: Case) -> None:
    """the alignment on each case of ``tests/fixtures/stages/alignment.jsonl`` gives the recorded output."""
    assert STAGES["alignment"](case["input"]) == case["expected"]


@pytest.mark.parametrize("case", stage_cases("alignment", invalid=True))
def test_alignment_golden_rejections(case: Case) -> None:
    """Each input of ``tests/fixtures/stages/alignment__invalid.jsonl`` is rejected as recorded."""
    check_rejection("alignment", case)
