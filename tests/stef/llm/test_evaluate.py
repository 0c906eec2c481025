"""Tests of the model path (stef/llm/evaluate.py): prepare once, the model for the batch, finish;
hybrid escalation; records without a verdict; symbolic settings.

No network: litellm's ``mock_response``.
"""

from __future__ import annotations

from typing import Any

import pytest

from stef.llm.evaluate import evaluate_with_judge
from stef.llm.prompt import PROMPT_VERSION
from stef.llm.settings import JudgeSettings
from stef.models import EVALUATOR_VERSION, AgentLogRecord, EvaluationStatus, Verdict
from stef.pipeline.evaluate import evaluate
from tests.stef.llm.mocked import (
    MODEL,
    MODEL_ANSWER,
    RECORD,
    evaluator,
    settings,
)
from tests.support.llm_server import synthetic_records

pytestmark = pytest.mark.usefixtures("warm_litellm")


HEDGED = [
    AgentLogRecord(run_id="hedged-1", question="List the cities of customers.", sql="SELECT city, name FROM customers"),
    AgentLogRecord(
        run_id="hedged-2",
        question="Show the top 3 products by price.",
        sql="SELECT name FROM products ORDER BY price DESC LIMIT 5",
    ),
]
"""Records the symbolic judge hedges on (LIKELY_CORRECT, POTENTIALLY_INCORRECT) with the shipped calibrator."""


def test_the_model_path_parses_each_record_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages A–E run once per record: the model's verdict finishes the prepared record, it does
    not run the pipeline a second time (sqlglot's parser is called once per record's SQL)."""
    import stef.pipeline.evaluate as pipeline

    parsed: list[str] = []
    real = pipeline.parse_sql_with_fallback

    def counting(sql: str, dialect: str) -> Any:
        parsed.append(sql)
        return real(sql, dialect)

    monkeypatch.setattr(pipeline, "parse_sql_with_fallback", counting)
    records = [AgentLogRecord(**row) for row in synthetic_records(6)] + [RECORD]
    run, calls = evaluator(MODEL_ANSWER)
    stored = run.evaluate_many(records)
    assert len(calls) == len(records)  # every record went to the model ...
    assert {e.judge for e in stored} == {MODEL}
    assert sorted(parsed) == sorted(r.sql for r in records)  # ... and each SQL was parsed once


def test_hybrid_asks_the_model_only_for_uncertain_or_marginal_records() -> None:
    records = [AgentLogRecord(**row) for row in synthetic_records(10)] + HEDGED
    expected = {
        r.run_id for r in records if evaluate(r).verdict in (Verdict.LIKELY_CORRECT, Verdict.POTENTIALLY_INCORRECT)
    }
    assert 0 < len(expected) < len(records)  # the sample has both kinds
    run, calls = evaluator(MODEL_ANSWER, judge=f"hybrid:{MODEL}")
    stored = run.evaluate_many(records)
    assert {e.run_id for e in stored if e.judge == MODEL} == expected
    assert len(calls) == len(expected)
    assert {e.judge for e in stored if e.run_id not in expected} == {"symbolic"}
    assert all(e.cost_usd is None and e.judge_fallback_reason is None for e in stored if e.run_id not in expected)
    assert run.stats.escalated_share == pytest.approx(len(expected) / len(records))
    assert stored[0].evaluator_version.endswith(f"+judge=hybrid:{MODEL};prompt={PROMPT_VERSION}")


def test_records_without_a_verdict_keep_their_typed_status_and_ask_no_model() -> None:
    records = [
        RECORD.model_copy(update={"run_id": "empty", "sql": "  "}),
        RECORD.model_copy(update={"run_id": "bad", "sql": "SELECT FROM WHERE"}),
    ]
    run, calls = evaluator(MODEL_ANSWER)
    stored = run.evaluate_many(records)
    assert calls == []
    assert [(e.run_id, e.status) for e in stored] == [
        ("empty", EvaluationStatus.INVALID_INPUT),
        ("bad", EvaluationStatus.PARSE_ERROR),
    ]
    assert {e.evaluator_version for e in stored} == {settings().evaluator_version}


def test_symbolic_settings_evaluate_without_any_model() -> None:
    evaluations, stats = evaluate_with_judge([RECORD], JudgeSettings.parse("symbolic"))
    assert (evaluations[0].judge, evaluations[0].cost_usd, evaluations[0].evaluator_version) == (
        "symbolic",
        None,
        EVALUATOR_VERSION,
    )
    assert (stats.records, stats.escalated, stats.requests) == (1, 0, 0)
