"""The LLM judge (stef/llm/judge.py) on broken answers and damaged cache rows (issue 13): a boolean
confidence, capped echoes of huge answers, capped rationales, cached rows that do not validate.

No network: litellm's mocks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stef.llm.cache import MemoryJudgeCache
from stef.llm.models import CachedVerdict
from stef.llm.prompt import MAX_ECHO_CHARS, PROMPT_VERSION, cache_key, render_messages
from stef.models import Verdict
from stef.pipeline.evaluate import evaluate
from tests.stef.llm.hostile import (
    ANSWER,
    MODEL,
    RECORD,
    VERDICT,
    answer_with,
    evaluator,
    judge_input_of,
    scripted,
)

pytestmark = pytest.mark.usefixtures("placeholder_key")


def test_a_boolean_confidence_is_repaired_or_falls_back_never_stored_as_gamma_1() -> None:
    completion, calls = scripted(answer_with(confidence=True))
    run = evaluator(completion)
    [stored] = run.evaluate_many([RECORD])
    symbolic = evaluate(RECORD)
    assert len(calls) == 2  # the answer and one repair request
    assert (stored.judge, stored.confidence) == ("symbolic", symbolic.confidence)
    assert "confidence: Input should be a valid number" in (stored.judge_fallback_reason or "")


def test_a_huge_malformed_answer_is_echoed_capped_and_its_reason_is_short() -> None:
    huge = "{" + "x" * 5_000_000
    completion, calls = scripted(huge, ANSWER)
    [repaired] = evaluator(completion).evaluate_many([RECORD])
    assert len(calls) == 2
    echoed = calls[1]["messages"][2]
    assert echoed["role"] == "assistant"
    assert echoed["content"].startswith(huge[:MAX_ECHO_CHARS]) and len(echoed["content"]) < MAX_ECHO_CHARS + 200
    assert "truncated: 4,998,001 more characters" in echoed["content"]
    assert (
        "over the 100,000 cap" in calls[1]["messages"][3]["content"] and len(calls[1]["messages"][3]["content"]) < 5000
    )
    assert (repaired.judge, repaired.verdict) == (MODEL, Verdict.POTENTIALLY_INCORRECT)

    completion, calls = scripted(huge)
    [fallback] = evaluator(completion).evaluate_many([RECORD])
    reason = fallback.judge_fallback_reason or ""
    assert len(calls) == 2 and fallback.judge == "symbolic"
    assert "over the 100,000 cap" in reason and len(reason) < 400


def test_a_valid_answer_with_a_huge_rationale_is_stored_and_cached_capped() -> None:
    cache = MemoryJudgeCache()
    long = answer_with(
        rationale="r" * 60_000, suspected_errors=[{**VERDICT["suspected_errors"][0], "evidence": "e" * 1500}] * 20
    )
    assert 90_000 < len(long) < 100_000
    completion, _ = scripted(long)
    run = evaluator(completion)
    run.cache = cache
    [stored] = run.evaluate_many([RECORD])
    [entry] = cache.entries.values()
    assert len(entry.response["rationale"]) == 2000 and len(entry.response["suspected_errors"]) == 10
    assert {len(e["evidence"]) for e in entry.response["suspected_errors"]} == {500}
    assert stored.rationale is not None and len(stored.rationale) == 2000 and len(stored.suspected_errors) == 10


@pytest.mark.parametrize(
    "response",
    [
        pytest.param({**VERDICT, "confidence": True}, id="boolean_confidence"),
        pytest.param({**VERDICT, "confidence": "0.99"}, id="string_confidence"),
        pytest.param({**VERDICT, "verdict": "MAYBE"}, id="unknown_verdict"),
        pytest.param({"verdict": "CORRECT"}, id="fields_missing"),
    ],
)
def test_a_cached_row_that_does_not_validate_is_asked_again(response: dict[str, Any]) -> None:

    cache = MemoryJudgeCache()
    key = cache_key(MODEL, render_messages(judge_input_of(RECORD)))
    cache.put_many([CachedVerdict(key, MODEL, PROMPT_VERSION, response, -3.0, -30)])
    completion, calls = scripted(ANSWER)
    run = evaluator(completion)
    run.cache = cache
    [stored] = run.evaluate_many([RECORD])
    assert len(calls) == 1 and run.stats.cache_hits == 0
    assert (stored.judge, stored.verdict, stored.confidence) == (
        MODEL,
        Verdict.POTENTIALLY_INCORRECT,
        0.65,
    )  # γ 0.7 on the incorrect side: p 0.3 -> 0.35 (the band's floor)


def test_a_damaged_warehouse_cache_row_is_a_miss(tmp_path: Path) -> None:
    from warehouse import connect
    from warehouse.judge_cache import DuckDBJudgeCache

    path = tmp_path / "cache.duckdb"
    key = cache_key(MODEL, render_messages(judge_input_of(RECORD)))
    cache = DuckDBJudgeCache(path)
    cache.put_many([CachedVerdict(key, MODEL, PROMPT_VERSION, VERDICT, 0.001, 30)])
    with connect(path) as conn:
        conn.execute("UPDATE judge_cache SET response = '[1, 2]'::JSON")
    assert cache.get_many([key]) == {}
    completion, calls = scripted(ANSWER)
    run = evaluator(completion)
    run.cache = cache
    [stored] = run.evaluate_many([RECORD])
    assert len(calls) == 1 and stored.judge == MODEL


def test_cached_figures_that_are_not_plausible_are_unknown() -> None:

    cache = MemoryJudgeCache()
    key = cache_key(MODEL, render_messages(judge_input_of(RECORD)))
    cache.put_many([CachedVerdict(key, MODEL, PROMPT_VERSION, VERDICT, float("nan"), -30)])
    completion, calls = scripted(ANSWER)
    run = evaluator(completion)
    run.cache = cache
    [stored] = run.evaluate_many([RECORD])
    assert calls == [] and (stored.judge, stored.cost_usd, stored.tokens) == (MODEL, None, None)
