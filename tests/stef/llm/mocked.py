"""Helpers of the LLM judge tests that script litellm's own mock path (``mock_response`` /
``mock_timeout``): the record, the model's answer and its hand-computed figures, scripted
completions and an evaluator wired to them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from stef.llm.evaluate import LLMEvaluator
from stef.llm.judge import LLMJudge
from stef.llm.litellm_loader import import_litellm
from stef.llm.settings import JudgeSettings
from stef.models import AgentLogRecord

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


def reserves(records: Sequence[AgentLogRecord], model: str = MODEL) -> list[float]:
    """The budget reserve of each record's request (:func:`stef.llm.usage.reserve_cost` of its
    rendered prompt), for records that reach the judge with the bundled rules."""
    from stef.llm.prompt import render_messages
    from stef.llm.usage import reserve_cost
    from stef.pipeline.evaluate import judge_many_prepared
    from stef.pipeline.rules import RuleBook

    out: list[float] = []
    for item in judge_many_prepared(records, rulebook=RuleBook(), finished=False):
        assert item.prepared is not None
        reserve = reserve_cost(model, render_messages(item.prepared.judge_input))
        assert reserve is not None
        out.append(reserve)
    return out
