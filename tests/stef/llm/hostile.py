"""Helpers of the LLM judge tests on hostile and broken input (issue 13): the record and a valid
answer, the prompt's nonce, scripted completions, response objects with any usage figures and an
evaluator wired to a completion.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

from stef.llm.evaluate import LLMEvaluator
from stef.llm.judge import LLMJudge
from stef.llm.litellm_loader import import_litellm
from stef.llm.settings import JudgeSettings
from stef.models import AgentLogRecord
from stef.pipeline.evaluate import Prepared, prepare
from stef.pipeline.judge.models import JudgeInput

MODEL = "openai/gpt-4o-mini"


RECORD = AgentLogRecord(
    run_id="r-rome",
    question="How many customers live in 'Rome'?",
    sql="SELECT COUNT(*) FROM customers WHERE city = 'Rome'",
    dialect="sqlite",
)


VERDICT = {
    "verdict": "POTENTIALLY_INCORRECT",
    "confidence": 0.7,
    "rationale": "COUNT(*) may count twice.",
    "suspected_errors": [
        {"category": "Function-Related Errors", "subcategory": "Aggregate Functions", "evidence": "COUNT(*)"}
    ],
}


ANSWER = json.dumps(VERDICT)


RECORD_KEYS = {
    "question",
    "enriched_question",
    "enrichment_check",
    "sql_dialect",
    "sql",
    "sql_not_shown",
    "sql_features",
    "requirements_from_question",
    "requirements_from_enriched_question",
    "filter_alignment",
    "normalisation_rules_applied",
    "group_by_structurally_required",
    "sql_comments_removed",
    "symbolic_findings",
}


NONCE = "{nonce}"
"""Replaced in a hostile text by the nonce of the benign record's prompt (a block's real tag)."""


def judge_input_of(record: AgentLogRecord) -> JudgeInput:
    prepared = prepare(record)
    assert isinstance(prepared, Prepared), prepared.status_reason
    return prepared.judge_input


def nonce_of(messages: list[dict[str, str]]) -> str:
    opening = next(line for line in messages[1]["content"].split("\n") if line.startswith("<stef-record-"))
    return opening[len("<stef-record-") : -1]


def scripted(*steps: Any) -> tuple[Callable[..., Awaitable[Any]], list[dict[str, Any]]]:
    """A completion that answers the n-th call with litellm's mock of the n-th step (the last repeats)."""
    litellm = import_litellm()
    calls: list[dict[str, Any]] = []

    async def completion(**kwargs: Any) -> Any:
        step = steps[min(len(calls), len(steps) - 1)]
        calls.append(kwargs)
        return await litellm.acompletion(**kwargs, mock_response=step)

    return completion, calls


def fake_response(content: str, usage: Any, response_cost: Any = None) -> SimpleNamespace:
    """A response object with any ``usage`` and ``response_cost`` (litellm's own types would coerce them)."""
    hidden = {} if response_cost is None else {"response_cost": response_cost}
    return SimpleNamespace(
        choices=[SimpleNamespace(message=SimpleNamespace(content=content))], usage=usage, _hidden_params=hidden
    )


def evaluator(completion: Callable[..., Awaitable[Any]], **overrides: Any) -> LLMEvaluator:
    settings = JudgeSettings.parse(MODEL, **{"timeout_s": 0.5, "max_retries": 1, "backoff_s": 0.001, **overrides})
    return LLMEvaluator(settings, judge=LLMJudge.from_settings(settings, completion=completion))


def cities(count: int) -> list[AgentLogRecord]:
    return [
        RECORD.model_copy(
            update={
                "run_id": f"r{i}",
                "question": f"How many customers live in 'City {i}'?",
                "sql": f"SELECT COUNT(*) FROM customers WHERE city = 'City {i}'",
            }
        )
        for i in range(count)
    ]


def answer_with(**changes: Any) -> str:
    return json.dumps({**VERDICT, **changes})


def usage(prompt: Any = 100, completion: Any = 20, total: Any = 120) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}
