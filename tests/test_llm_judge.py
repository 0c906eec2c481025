"""Tests of the LLM judge (stef/llm/judge.py, stef/llm/evaluate.py, warehouse/judge_cache.py).

No network: every model call goes through litellm with ``mock_response`` / ``mock_timeout``
(litellm's own mock path: real exception types, real usage and real price table). Each scenario
asserts what is stored: verdict, γ, Φ, cost, tokens, judge and fallback reason.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import stef.llm.judge as llm_judge
import stef.llm.usage as llm_usage
from stef.llm.evaluate import LLMEvaluator, evaluate_with_judge
from stef.llm.judge import (
    PROMPT_VERSION,
    CostBudget,
    JudgeConfigError,
    JudgeSettings,
    LLMJudge,
    MalformedOutputError,
    MemoryJudgeCache,
    cache_key,
    import_litellm,
    parse_verdict,
    render_messages,
)
from stef.models import EVALUATOR_VERSION, AgentLogRecord, Band, EvaluationStatus, Verdict
from stef.pipeline.evaluate import evaluate
from stef.pipeline.rules import RuleBook, parse_rules
from tests.support.llm_server import prompt_blocks, synthetic_records

MODEL = "openai/gpt-4o-mini"
TIMEOUT = "timeout"
"""A scripted step: litellm's mock timeout (sleeps the request timeout, raises ``litellm.Timeout``)."""
RETRIES = 2
RECORD = AgentLogRecord(
    run_id="r-rome",
    agent_id="sales-bot",
    agent_version="v1",
    question="How many customers live in 'Rome'?",
    sql="SELECT COUNT(*) FROM customers WHERE city = 'Rome'",
    dialect="sqlite",
)
"""FULLY_APPLIED: filter score 5 (hand-computed Φ below)."""
MODEL_ANSWER = json.dumps(
    {
        "verdict": "POTENTIALLY_INCORRECT",
        "confidence": 0.7,
        "rationale": "COUNT(*) may count customers twice.",
        "suspected_errors": [
            {"category": "Function-Related Errors", "subcategory": "Aggregate Functions", "evidence": "COUNT(*)"}
        ],
    }
)
MODEL_PHI = 56.0
"""(FULLY_APPLIED 5 + POTENTIALLY_INCORRECT 2) / 10 × 100 × Γ(γ 0.65 → 0.8): the model's γ 0.7 on the
incorrect side is p = 0.3, moved into the verdict's band [0.35, 0.5): p 0.35, γ 0.65."""
MODEL_GAMMA = 0.65
MODEL_P = 0.35


def one_call_cost() -> float:
    """Price of one mocked call (10 prompt + 20 completion tokens) from litellm's own price table."""
    prices = import_litellm().model_cost["gpt-4o-mini"]
    return float(10 * prices["input_cost_per_token"] + 20 * prices["output_cost_per_token"])


def scripted(*steps: Any) -> tuple[Callable[..., Awaitable[Any]], list[dict[str, Any]]]:
    """A completion function that sends the n-th call to litellm with the n-th ``mock_response``
    (the last step repeats); returns it and the list of the calls' keyword arguments."""
    litellm = import_litellm()
    calls: list[dict[str, Any]] = []

    async def completion(**kwargs: Any) -> Any:
        step = steps[min(len(calls), len(steps) - 1)]
        calls.append(kwargs)
        if step == TIMEOUT:
            return await litellm.acompletion(**kwargs, mock_timeout=True, mock_response="never sent")
        return await litellm.acompletion(**kwargs, mock_response=step)

    return completion, calls


def settings(**overrides: Any) -> JudgeSettings:
    return JudgeSettings.parse(
        overrides.pop("judge", MODEL), **{"timeout_s": 0.05, "max_retries": RETRIES, "backoff_s": 0.001, **overrides}
    )


def evaluator(*steps: Any, cache: Any = None, **overrides: Any) -> tuple[LLMEvaluator, list[dict[str, Any]]]:
    completion, calls = scripted(*steps)
    judge_settings = settings(**overrides)
    return LLMEvaluator(
        judge_settings, cache=cache, judge=LLMJudge.from_settings(judge_settings, completion=completion)
    ), calls


AUTH_ERROR = "auth"


@pytest.fixture(scope="module", autouse=True)
def warm_litellm() -> None:
    """One mocked call before the tests: litellm imports its provider modules on the first call,
    which on a busy machine can take longer than the tests' 0.05 s request timeout (+ 1 s guard)
    and would turn a scripted answer into a timeout."""
    import asyncio

    litellm = import_litellm()
    asyncio.run(
        litellm.acompletion(model=MODEL, messages=[{"role": "user", "content": "warm up"}], mock_response=MODEL_ANSWER)
    )


@pytest.fixture(scope="module")
def symbolic() -> Any:
    """The symbolic evaluation of :data:`RECORD` (what every fallback must store)."""
    return evaluate(RECORD)


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


def test_cache_key_covers_model_prompt_version_and_the_injected_rules() -> None:
    from dataclasses import replace

    from stef.pipeline.evaluate import Prepared, prepare

    prepared = prepare(RECORD)
    assert isinstance(prepared, Prepared)
    judge_input = prepared.judge_input
    base = render_messages(judge_input)
    with_rules = render_messages(
        replace(judge_input, rules=parse_rules({"app_id": "shop", "column_mappings": {"town": "city"}}, "shop.json"))
    )
    keys = {
        cache_key(MODEL, base),
        cache_key(MODEL, with_rules),
        cache_key("anthropic/claude-3-5-haiku-20241022", base),
        cache_key(MODEL, base, prompt_version="stef-judge-0"),
    }
    assert len(keys) == 4
    assert cache_key(MODEL, base) == cache_key(MODEL, render_messages(judge_input))


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
    run, calls = evaluator(MODEL_ANSWER, concurrency=1, max_cost_usd=1.5 * one_call_cost())
    stored = run.evaluate_many(records)
    assert len(calls) == 2  # the second call starts below the limit, the third would start above it
    assert [e.judge for e in stored] == [MODEL, MODEL, "symbolic", "symbolic"]
    for evaluation in stored[2:]:
        assert (
            evaluation.judge_fallback_reason is not None and "cost budget reached" in evaluation.judge_fallback_reason
        )
        assert evaluation.cost_usd is None and evaluation.status is EvaluationStatus.EVALUATED
    assert run.stats.fallbacks == {"cost budget reached": 2}
    assert run.stats.spent_usd == pytest.approx(2 * one_call_cost())


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
    with caplog.at_level(logging.WARNING, logger="stef.llm.judge"):
        run, _ = evaluator(MODEL_ANSWER, judge="openai/stef-local-judge")
        stored = run.evaluate_many(records)
    assert [(e.judge, e.verdict, e.judge_fallback_reason, e.cost_usd, e.tokens) for e in stored] == [
        ("openai/stef-local-judge", Verdict.POTENTIALLY_INCORRECT, None, None, 30)
    ] * 2
    warnings = [r.getMessage() for r in caplog.records if r.name == "stef.llm.judge"]
    assert len(warnings) == 1 and "no price for model openai/stef-local-judge" in warnings[0]
    assert run.stats.unpriced == 2


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


def test_symbolic_settings_evaluate_without_any_model() -> None:
    evaluations, stats = evaluate_with_judge([RECORD], JudgeSettings.parse("symbolic"))
    assert (evaluations[0].judge, evaluations[0].cost_usd, evaluations[0].evaluator_version) == (
        "symbolic",
        None,
        EVALUATOR_VERSION,
    )
    assert (stats.records, stats.escalated, stats.requests) == (1, 0, 0)


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        pytest.param("hybrid:", {}, "hybrid: needs a model", id="hybrid_without_model"),
        pytest.param("gpt 4o", {}, "has no spaces", id="model_with_space"),
        pytest.param(MODEL, {"concurrency": 0}, "--concurrency must be at least 1", id="zero_concurrency"),
        pytest.param(MODEL, {"max_cost_usd": -1.0}, "--max-cost-usd must be 0 or more", id="negative_budget"),
        pytest.param(MODEL, {"timeout_s": 0.0}, "--timeout must be positive", id="zero_timeout"),
    ],
)
def test_unusable_judge_settings_are_rejected(spec: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(JudgeConfigError, match=message):
        JudgeSettings.parse(spec, **options)


def test_api_base_comes_from_the_option_else_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEF_LLM_API_BASE", "http://127.0.0.1:9999/v1")
    assert JudgeSettings.parse(MODEL).api_base == "http://127.0.0.1:9999/v1"
    assert JudgeSettings.parse(MODEL, api_base="http://127.0.0.1:1/v1").api_base == "http://127.0.0.1:1/v1"


@pytest.mark.parametrize(
    ("model", "env", "message"),
    [
        pytest.param("madeup-model-xyz", {}, "does not know this provider", id="unknown_provider"),
        pytest.param(
            "anthropic/claude-3-5-haiku-20241022", {}, "set ANTHROPIC_API_KEY in the environment", id="missing_key"
        ),
    ],
)
def test_preflight_rejects_a_model_that_cannot_work(
    model: str, env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(JudgeConfigError, match=message):
        llm_judge.preflight(JudgeSettings.parse(model))


def test_preflight_accepts_a_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-placeholder")
    assert llm_judge.preflight(JudgeSettings.parse(MODEL)) == []
    assert llm_judge.preflight(JudgeSettings.parse("hosted_vllm/judge", api_base="http://127.0.0.1:1/v1")) == []


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


def test_cost_budget_counts_only_priced_calls() -> None:
    budget = CostBudget(None)
    budget.add(None)
    budget.add(0.5)
    assert (budget.spent_usd, budget.exhausted) == (0.5, False)


class _BrokenCache:
    """A judge cache whose warehouse is locked: every call fails."""

    def get_many(self, keys: Any) -> Any:
        from warehouse import WarehouseLockedError

        raise WarehouseLockedError("another stef process writes to wh.duckdb")

    def put_many(self, entries: Any) -> int:
        from warehouse import WarehouseLockedError

        raise WarehouseLockedError("another stef process writes to wh.duckdb")


def test_a_cache_that_cannot_be_used_costs_no_record(caplog: pytest.LogCaptureFixture) -> None:
    run, calls = evaluator(MODEL_ANSWER, cache=_BrokenCache())
    with caplog.at_level(logging.WARNING, logger="stef.llm.judge"):
        [stored] = run.evaluate_many([RECORD])
    assert len(calls) == 1
    assert (stored.judge, stored.verdict, stored.score) == (MODEL, Verdict.POTENTIALLY_INCORRECT, MODEL_PHI)
    assert stored.cost_usd == pytest.approx(one_call_cost())
    messages = [r.getMessage() for r in caplog.records if r.name == "stef.llm.judge"]
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
