"""Tests of the usage checks (stef/llm/usage.py): a model without a price gets a null cost and one warning.

No network: litellm's ``mock_response``.
"""

from __future__ import annotations

import logging

import pytest

import stef.llm.usage as llm_usage
from stef.models import Verdict
from tests.stef.llm.mocked import MODEL_ANSWER, RECORD, evaluator

pytestmark = pytest.mark.usefixtures("warm_litellm")


def test_a_model_without_price_gets_null_cost_and_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(llm_usage, "_UNPRICED_WARNED", set())
    records = [
        RECORD,
        RECORD.model_copy(
            update={
                "run_id": "r2",
                "question": "How many customers live in 'Oslo'?",
                "sql": "SELECT COUNT(*) FROM customers WHERE city = 'Oslo'",
            }
        ),
    ]
    with caplog.at_level(logging.WARNING, logger="stef.llm_judge"):
        run, _ = evaluator(MODEL_ANSWER, judge="openai/stef-local-judge")
        stored = run.evaluate_many(records)
    assert [(e.judge, e.verdict, e.judge_fallback_reason, e.cost_usd, e.tokens) for e in stored] == [
        ("openai/stef-local-judge", Verdict.POTENTIALLY_INCORRECT, None, None, 30)
    ] * 2
    warnings = [r.getMessage() for r in caplog.records if r.name == "stef.llm_judge"]
    assert len(warnings) == 1 and "no price for model openai/stef-local-judge" in warnings[0]
    assert run.stats.unpriced == 2
