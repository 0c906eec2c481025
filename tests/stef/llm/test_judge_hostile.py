"""The LLM judge (stef/llm/judge.py) on broken answers and damaged cache rows (issue 13): a boolean
confidence, capped echoes of huge answers, capped rationales, cached rows that do not validate.

No network: litellm's mocks.
"""

from __future__ import annotations

import json
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


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(
            """'{"verdict": "WRONG", "confidence": 0.7, "rationale": "x", "suspected_errors": []}'""", id="wrong_enum"
        ),
        pytest.param("'[1, 2]'", id="not_an_object"),
    ],
)
def test_a_damaged_warehouse_cache_row_is_replaced_by_the_new_verdict(tmp_path: Path, damage: str) -> None:
    from warehouse import connect
    from warehouse.judge_cache import DuckDBJudgeCache

    path = tmp_path / "cache.duckdb"
    key = cache_key(MODEL, render_messages(judge_input_of(RECORD)))
    DuckDBJudgeCache(path).put_many([CachedVerdict(key, MODEL, PROMPT_VERSION, VERDICT, 0.001, 30)])
    with connect(path) as conn:
        conn.execute(f"UPDATE judge_cache SET response = {damage}::JSON")
    completion, calls = scripted(ANSWER)
    first = evaluator(completion)
    first.cache = DuckDBJudgeCache(path)
    [asked] = first.evaluate_many([RECORD])
    assert len(calls) == 1 and asked.judge == MODEL and first.stats.cache_hits == 0
    with connect(path, read_only=True) as conn:
        rows = conn.execute("SELECT cache_key, response::VARCHAR FROM judge_cache").fetchall()
    assert [(k, json.loads(r)) for k, r in rows] == [(key, VERDICT)]
    second = evaluator(completion)
    second.cache = DuckDBJudgeCache(path)
    [cached] = second.evaluate_many([RECORD])
    assert len(calls) == 1 and second.stats.cache_hits == 1 and cached.verdict == asked.verdict


def test_a_valid_cached_verdict_is_never_overwritten_only_a_damaged_one_is_replaced(tmp_path: Path) -> None:
    """The rule of put_many: a row is replaced only when the row stored at write time does not hold a
    valid verdict; a concurrent writer's valid verdict, stored after this run read the row as damaged, stays."""
    from stef.llm.judge import holds_verdict
    from warehouse import connect
    from warehouse.judge_cache import DuckDBJudgeCache

    path = tmp_path / "cache.duckdb"
    cache = DuckDBJudgeCache(path)
    other = {**VERDICT, "verdict": "CORRECT", "confidence": 0.9, "suspected_errors": []}
    assert cache.put_many([CachedVerdict("kept", MODEL, PROMPT_VERSION, VERDICT, 0.001, 30, ("f",))]) == 1
    assert cache.put_many([CachedVerdict("damaged", MODEL, PROMPT_VERSION, {"verdict": "WRONG"}, None, None)]) == 1
    written = cache.put_many(
        [
            CachedVerdict("kept", MODEL, PROMPT_VERSION, other, 0.5, 99),
            CachedVerdict("damaged", MODEL, PROMPT_VERSION, other, 0.002, 40),
        ],
        valid=holds_verdict,
    )
    assert written == 1 and cache.stored == 3
    assert cache.put_many([CachedVerdict("damaged", MODEL, PROMPT_VERSION, VERDICT, 0.5, 99)]) == 0  # no check: kept
    with connect(path, read_only=True) as conn:
        rows = conn.execute(
            "SELECT cache_key, response::VARCHAR, cost_usd, tokens FROM judge_cache ORDER BY cache_key"
        ).fetchall()
    assert [(k, json.loads(r), c, t) for k, r, c, t in rows] == [
        ("damaged", other, 0.002, 40),
        ("kept", {**VERDICT, "stef_flags": ["f"]}, 0.001, 30),
    ]
    memory = MemoryJudgeCache()
    memory.put_many([CachedVerdict("kept", MODEL, PROMPT_VERSION, VERDICT, 0.001, 30)])
    memory.put_many([CachedVerdict("damaged", MODEL, PROMPT_VERSION, {"verdict": "WRONG"}, None, None)])
    both = [CachedVerdict(k, MODEL, PROMPT_VERSION, other, 0.5, 99) for k in ("kept", "damaged")]
    assert memory.put_many(both, valid=holds_verdict) == 1
    assert (memory.entries["kept"].response, memory.entries["damaged"].response) == (VERDICT, other)
