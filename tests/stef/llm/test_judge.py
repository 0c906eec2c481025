"""Tests of the LLM judge (stef/llm/judge.py) through the model path: retries, repair, cache, budget and fallbacks.

No network: every model call goes through litellm with ``mock_response`` / ``mock_timeout``
(litellm's own mock path: real exception types, real usage and real price table). Each scenario
asserts what is stored: verdict, γ, Φ, cost, tokens, judge and fallback reason.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from stef.llm.budget import usd
from stef.llm.cache import MemoryJudgeCache
from stef.llm.judge import LLMJudge
from stef.llm.litellm_loader import import_litellm
from stef.llm.prompt import PROMPT_VERSION
from stef.models import EVALUATOR_VERSION, Band, EvaluationStatus, Verdict
from stef.pipeline.evaluate import evaluate
from stef.pipeline.rules import RuleBook
from tests.stef.llm.mocked import (
    AUTH_ERROR,
    MODEL,
    MODEL_ANSWER,
    MODEL_GAMMA,
    MODEL_P,
    MODEL_PHI,
    RECORD,
    RETRIES,
    TIMEOUT,
    evaluator,
    one_call_cost,
    reserves,
    scripted,
)
from tests.support.llm_server import prompt_blocks

pytestmark = pytest.mark.usefixtures("warm_litellm")


@pytest.mark.parametrize(
    ("steps", "calls", "from_model", "billed_calls", "reason"),
    [
        pytest.param([MODEL_ANSWER], 1, True, 1, None, id="valid_answer"),
        pytest.param(["litellm.RateLimitError", MODEL_ANSWER], 2, True, 1, None, id="429_then_success"),
        pytest.param(["litellm.InternalServerError", MODEL_ANSWER], 2, True, 1, None, id="500_then_success"),
        pytest.param([TIMEOUT, MODEL_ANSWER], 2, True, 1, None, id="timeout_then_success"),
        pytest.param(["The SQL looks right to me.", MODEL_ANSWER], 2, True, 2, None, id="not_json_then_repaired"),
        pytest.param(["litellm.RateLimitError"], RETRIES + 1, False, 0, "RateLimitError (HTTP 429)", id="429_forever"),
        pytest.param([TIMEOUT], RETRIES + 1, False, 0, "Timeout", id="timeout_forever"),
        pytest.param(
            ["{not json", "still not json"],
            2,
            False,
            2,
            "malformed model output after one repair request: not JSON",
            id="not_json_twice",
        ),
        pytest.param(
            [MODEL_ANSWER.replace("POTENTIALLY_INCORRECT", "MAYBE")],
            2,
            False,
            2,
            "verdict: Input should be 'CORRECT'",
            id="wrong_enum",
        ),
        pytest.param(
            [MODEL_ANSWER.replace("0.7", "1.7")],
            2,
            False,
            2,
            "confidence: Input should be less than or equal to 1",
            id="gamma_out_of_range",
        ),
        pytest.param([AUTH_ERROR], 1, False, 0, "AuthenticationError (HTTP 401)", id="401_not_retried"),
    ],
)
def test_model_scenarios_store_verdict_gamma_cost_and_status(
    steps: list[Any], calls: int, from_model: bool, billed_calls: int, reason: str | None, symbolic: Any
) -> None:
    litellm = import_litellm()
    steps = [
        litellm.AuthenticationError(message="bad key", llm_provider="openai", model=MODEL) if s == AUTH_ERROR else s
        for s in steps
    ]
    run, made = evaluator(*steps)
    [stored] = run.evaluate_many([RECORD])

    assert len(made) == calls
    assert stored.status is EvaluationStatus.EVALUATED
    assert stored.evaluator_version == f"{EVALUATOR_VERSION}+judge={MODEL};prompt={PROMPT_VERSION}"
    if from_model:
        assert (stored.judge, stored.judge_fallback_reason) == (MODEL, None)
        assert (stored.verdict, stored.confidence, stored.score, stored.band) == (
            Verdict.POTENTIALLY_INCORRECT,
            MODEL_GAMMA,
            MODEL_PHI,
            Band.MARGINAL,
        )
        assert stored.p_correct == MODEL_P
        assert [e.subcategory for e in stored.suspected_errors] == ["Aggregate Functions"]
    else:
        assert stored.judge == "symbolic"
        assert stored.judge_fallback_reason is not None and stored.judge_fallback_reason.startswith(f"{MODEL}: ")
        assert reason is not None and reason in stored.judge_fallback_reason
        assert (stored.verdict, stored.confidence, stored.score) == (
            symbolic.verdict,
            symbolic.confidence,
            symbolic.score,
        )
    if billed_calls:
        assert stored.cost_usd == pytest.approx(billed_calls * one_call_cost())
        assert stored.tokens == 30 * billed_calls
    else:
        assert (stored.cost_usd, stored.tokens) == (None, None)
    assert run.stats.requests == calls
    assert run.stats.fallback_count == (0 if from_model else 1)
    assert run.stats.spent_usd == pytest.approx(billed_calls * one_call_cost())


def test_every_request_is_temperature_0_with_the_json_schema_and_the_injected_rules(tmp_path: Path) -> None:
    rules = tmp_path / "shop.json"
    rules.write_text(
        json.dumps(
            {
                "app_id": "shop",
                "column_mappings": {"town": "city"},
                "benign_filters": [
                    {"column": "tenant_id", "operator": "=", "value": "acme", "reason": "row-level security"}
                ],
            }
        ),
        encoding="utf-8",
    )
    run, made = evaluator(MODEL_ANSWER)
    run.evaluate_many([RECORD], RuleBook(rules_file=rules))
    [call] = made
    assert call["temperature"] == 0
    assert call["model"] == MODEL
    schema = call["response_format"]["json_schema"]["schema"]
    assert call["response_format"]["type"] == "json_schema" and call["response_format"]["json_schema"]["strict"] is True
    assert schema["properties"]["verdict"]["enum"] == [v.value for v in Verdict]
    assert schema["properties"]["confidence"] == {"type": "number", "minimum": 0.0, "maximum": 1.0}
    blocks = prompt_blocks(call["messages"])
    assert blocks["stef-rules"] == {
        "app_id": "shop",
        "column_mappings": [{"synonym": "town", "canonical_column": "city"}],
        "benign_filters": [{"column": "tenant_id", "operator": "=", "value": "acme", "reason": "row-level security"}],
    }
    assert (blocks["stef-record"]["question"], blocks["stef-record"]["sql"]) == (RECORD.question, RECORD.sql)
    assert blocks["stef-record"]["sql_comments_removed"] is False
    assert "Explicit Condition Missing" in call["messages"][0]["content"]


def test_a_rerun_with_the_cache_makes_no_model_call_and_stores_the_same_figures() -> None:
    cache = MemoryJudgeCache()
    records = [
        RECORD,
        RECORD.model_copy(update={"run_id": "r-rome-again"}),
        RECORD.model_copy(
            update={
                "run_id": "r-oslo",
                "question": "How many customers live in 'Oslo'?",
                "sql": "SELECT COUNT(*) FROM customers WHERE city = 'Oslo'",
            }
        ),
    ]
    first, first_calls = evaluator(MODEL_ANSWER, cache=cache)
    before = first.evaluate_many(records)
    assert len(first_calls) == 2  # the two identical Rome records are asked once
    assert first.stats.cache_hits == 1 and first.stats.requests == 2

    second, second_calls = evaluator(MODEL_ANSWER, cache=cache)
    after = second.evaluate_many(records)
    assert second_calls == []
    assert (second.stats.requests, second.stats.cache_hits, second.stats.spent_usd) == (0, 3, 0.0)
    for old, new in zip(before, after, strict=True):
        assert (new.verdict, new.confidence, new.score, new.judge, new.cost_usd, new.tokens) == (
            old.verdict,
            old.confidence,
            old.score,
            MODEL,
            old.cost_usd,
            old.tokens,
        )
    assert after[0].cost_usd == pytest.approx(one_call_cost())


def test_the_warehouse_cache_persists_across_runs_and_keeps_no_fallback(tmp_path: Path) -> None:
    from warehouse import connect
    from warehouse.judge_cache import DuckDBJudgeCache

    path = tmp_path / "cache" / "judge.duckdb"
    failed, _ = evaluator("litellm.RateLimitError", cache=DuckDBJudgeCache(path))
    [fallback] = failed.evaluate_many([RECORD])
    assert fallback.judge_fallback_reason is not None
    answered, calls = evaluator(MODEL_ANSWER, cache=DuckDBJudgeCache(path))
    [fresh] = answered.evaluate_many([RECORD])
    assert len(calls) == 1  # the fallback was not cached: asked again
    rerun, rerun_calls = evaluator(MODEL_ANSWER, cache=DuckDBJudgeCache(path))
    [cached] = rerun.evaluate_many([RECORD])
    assert rerun_calls == []
    assert (cached.verdict, cached.confidence, cached.cost_usd, cached.tokens) == (
        Verdict.POTENTIALLY_INCORRECT,
        MODEL_GAMMA,
        fresh.cost_usd,
        30,
    )
    with connect(path) as conn:
        rows = conn.execute(
            "SELECT model, prompt_version, response->>'verdict', cost_usd, tokens FROM judge_cache"
        ).fetchall()
    assert rows == [(MODEL, PROMPT_VERSION, "POTENTIALLY_INCORRECT", pytest.approx(one_call_cost()), 30)]


def test_max_cost_stops_calling_the_model_and_says_so() -> None:
    records = [
        RECORD.model_copy(
            update={
                "run_id": f"r{i}",
                "question": f"How many customers live in 'City {i}'?",
                "sql": f"SELECT COUNT(*) FROM customers WHERE city = 'City {i}'",
            }
        )
        for i in range(4)
    ]
    held = reserves(records)
    assert all(r > 10 * one_call_cost() for r in held)  # the prompt's price + 512 answer tokens
    assert max(held) - min(held) < one_call_cost()  # the prompts are about as long
    limit = one_call_cost() + max(held)
    run, calls = evaluator(MODEL_ANSWER, concurrency=1, max_cost_usd=limit)
    stored = run.evaluate_many(records)
    assert len(calls) == 2  # spent + the second call's reserve fits the limit, the third's would pass it
    assert [e.judge for e in stored] == [MODEL, MODEL, "symbolic", "symbolic"]
    for evaluation in stored[2:]:
        assert evaluation.judge_fallback_reason == (
            f"{MODEL}: cost budget reached: ${usd(2 * one_call_cost())} spent of --max-cost-usd ${usd(limit)} "
            "for the run; symbolic judge used"
        )
        assert evaluation.cost_usd is None and evaluation.status is EvaluationStatus.EVALUATED
    assert run.stats.fallbacks == {"cost budget reached": 2}
    assert run.stats.spent_usd == pytest.approx(2 * one_call_cost())


def test_the_judge_protocol_method_judges_one_record() -> None:
    from stef.pipeline.judge.models import Judge

    completion, _ = scripted(MODEL_ANSWER)
    judge: Judge = LLMJudge(MODEL, completion=completion, timeout_s=0.05)
    stored = evaluate(RECORD, judge=judge)
    assert (stored.judge, stored.verdict, stored.confidence, stored.score) == (
        MODEL,
        Verdict.POTENTIALLY_INCORRECT,
        MODEL_GAMMA,
        MODEL_PHI,
    )
    failing, _ = scripted("litellm.RateLimitError")
    fallback = evaluate(RECORD, judge=LLMJudge(MODEL, completion=failing, max_retries=0))
    assert (
        fallback.judge == "symbolic"
        and fallback.rationale is not None
        and fallback.rationale.startswith("[LLM judge fell back: ")
    )


class _BrokenCache:
    """A judge cache whose warehouse is locked: every call fails."""

    def get_many(self, keys: Any) -> Any:
        from warehouse import WarehouseLockedError

        raise WarehouseLockedError("another stef process writes to wh.duckdb")

    def put_many(self, entries: Any, valid: Any = None) -> int:
        from warehouse import WarehouseLockedError

        raise WarehouseLockedError("another stef process writes to wh.duckdb")


def test_a_cache_that_cannot_be_used_costs_no_record(caplog: pytest.LogCaptureFixture) -> None:
    run, calls = evaluator(MODEL_ANSWER, cache=_BrokenCache())
    with caplog.at_level(logging.WARNING, logger="stef.llm_judge"):
        [stored] = run.evaluate_many([RECORD])
    assert len(calls) == 1
    assert (stored.judge, stored.verdict, stored.score) == (MODEL, Verdict.POTENTIALLY_INCORRECT, MODEL_PHI)
    assert stored.cost_usd == pytest.approx(one_call_cost())
    messages = [r.getMessage() for r in caplog.records if r.name == "stef.llm_judge"]
    assert any("judge cache not read" in m for m in messages) and any(
        "judge cache not written (1 verdicts)" in m for m in messages
    )


def test_an_authentication_error_stops_asking_the_model_for_the_run() -> None:
    litellm = import_litellm()
    other = RECORD.model_copy(
        update={
            "run_id": "r-oslo",
            "question": "How many customers live in 'Oslo'?",
            "sql": "SELECT COUNT(*) FROM customers WHERE city = 'Oslo'",
        }
    )
    run, calls = evaluator(
        litellm.AuthenticationError(message="bad key", llm_provider="openai", model=MODEL), concurrency=1
    )
    stored = run.evaluate_many([RECORD, other])
    assert len(calls) == 1
    reasons = [e.judge_fallback_reason or "" for e in stored]
    assert "AuthenticationError (HTTP 401): bad key" in reasons[0]
    assert reasons[1].startswith(f"{MODEL}: not asked: AuthenticationError (HTTP 401)")
    assert [e.judge for e in stored] == ["symbolic", "symbolic"]
    assert run.stats.fallbacks == {"AuthenticationError (HTTP 401)": 1, "model disabled after an error": 1}


CONTRADICTORY = json.dumps(
    {"verdict": "CORRECT", "confidence": 0.1, "rationale": "Looks right.", "suspected_errors": []}
)
"""CORRECT with γ 0.1: by γ p_correct would be 0.1, by the verdict at least 0.65 (it used to be
stored as p 0.65, γ 0.65, with no flag)."""
CONTRADICTION = (
    "self-contradictory answer: verdict CORRECT with confidence 0.1 "
    "(below 0.5: the verdict more likely wrong than right)"
)


def test_a_self_contradictory_answer_is_repaired_once_and_the_record_is_flagged() -> None:
    cache = MemoryJudgeCache()
    run, made = evaluator(CONTRADICTORY, MODEL_ANSWER, cache=cache)
    [stored] = run.evaluate_many([RECORD])

    assert len(made) == 2  # the contradiction was sent back once, as for any malformed answer
    assert CONTRADICTION in made[1]["messages"][-1]["content"]
    assert (stored.judge, stored.judge_fallback_reason) == (MODEL, None)
    assert (stored.verdict, stored.confidence, stored.p_correct, stored.score) == (
        Verdict.POTENTIALLY_INCORRECT,
        MODEL_GAMMA,
        MODEL_P,
        MODEL_PHI,
    )
    assert (
        "model_confidence_contradicts_verdict: the first answer was verdict CORRECT with confidence 0.1; "
        "not used as given"
    ) in stored.flags
    assert stored.cost_usd == pytest.approx(2 * one_call_cost())
    [entry] = cache.entries.values()  # the repaired verdict is cached, not the contradictory one
    assert (entry.response["verdict"], entry.response["confidence"]) == ("POTENTIALLY_INCORRECT", 0.7)


def test_a_self_contradictory_answer_twice_falls_back_with_the_reason_and_the_flag(symbolic: Any) -> None:
    run, made = evaluator(CONTRADICTORY, cache=MemoryJudgeCache())
    [stored] = run.evaluate_many([RECORD])

    assert len(made) == 2
    assert stored.judge == "symbolic"
    assert stored.judge_fallback_reason == f"{MODEL}: malformed model output after one repair request: {CONTRADICTION}"
    # the symbolic verdict, never the model's CORRECT at p 0.65
    assert (stored.verdict, stored.confidence, stored.p_correct) == (
        symbolic.verdict,
        symbolic.confidence,
        symbolic.p_correct,
    )
    assert [flag for flag in stored.flags if flag.startswith("model_confidence_contradicts_verdict")] == [
        "model_confidence_contradicts_verdict: the first answer was verdict CORRECT with confidence 0.1; not used as given",
        "model_confidence_contradicts_verdict: the repaired answer was verdict CORRECT with confidence 0.1; not used as given",
    ]
    assert run.stats.fallbacks == {"malformed model output": 1}


def test_a_self_contradictory_verdict_in_the_cache_is_asked_again_and_replaced() -> None:
    cache = MemoryJudgeCache()
    run, _ = evaluator(MODEL_ANSWER, cache=cache)
    run.evaluate_many([RECORD])
    [key] = cache.entries
    cache.entries[key] = replace(cache.entries[key], response=json.loads(CONTRADICTORY))  # an older release's row
    again, made = evaluator(MODEL_ANSWER, cache=cache)
    [stored] = again.evaluate_many([RECORD])

    assert len(made) == 1 and again.stats.cache_hits == 0
    assert (stored.verdict, stored.p_correct) == (Verdict.POTENTIALLY_INCORRECT, MODEL_P)
    assert cache.entries[key].response["verdict"] == "POTENTIALLY_INCORRECT"
