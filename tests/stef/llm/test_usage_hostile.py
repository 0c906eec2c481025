"""The usage checks (stef/llm/usage.py) on figures a broken or hostile endpoint reports (issue 13):
implausible usage is unknown with a flag and the budget is charged an estimate.

No network: fake response objects and the local stub server (tests/support/llm_server.py, 127.0.0.1 only).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stef.llm.evaluate import LLMEvaluator
from stef.llm.judge import LLMJudge
from stef.llm.settings import JudgeSettings
from stef.llm.usage import USAGE_FLAG, read_usage
from stef.models import AgentLogRecord, EvaluationStatus
from tests.stef.llm.hostile import (
    ANSWER,
    MODEL,
    RECORD,
    cities,
    evaluator,
    fake_response,
    usage,
)
from tests.stef.llm.mocked import reserves
from tests.support.checkout import checkout_env
from tests.support.llm_server import stub_llm_server, synthetic_records

pytestmark = pytest.mark.usefixtures("placeholder_key")


@pytest.mark.parametrize(
    ("reported", "cost", "problem"),
    [
        pytest.param(
            usage(-1_000_000, -5, -1_000_005), None, "prompt_tokens=-1000000 is negative", id="negative_tokens"
        ),
        pytest.param(
            usage(10**15, 1, 10**15 + 1),
            None,
            "prompt_tokens=1000000000000000 is over the cap of 10,000,000",
            id="huge_tokens",
        ),
        pytest.param(usage(10.5, 2.5, 13.0), None, "prompt_tokens=10.5 is not a whole number", id="float_tokens"),
        pytest.param(usage("100", "20", "120"), None, "prompt_tokens='100' is not a whole number", id="string_tokens"),
        pytest.param(usage(True, False, True), None, "prompt_tokens=True is not a whole number", id="bool_tokens"),
        pytest.param(
            usage(float("nan"), 1, float("nan")), None, "prompt_tokens=nan is not a whole number", id="nan_tokens"
        ),
        pytest.param(usage(100, 20, 5), None, "total_tokens=5 is below", id="total_below_parts"),
        pytest.param(None, None, "no usage reported", id="no_usage"),
        pytest.param(usage(0, 0, 0), None, "zero tokens reported", id="zero_usage"),
        pytest.param(usage(), -0.5, "response_cost=-0.5 is negative", id="negative_response_cost"),
        pytest.param(usage(), float("nan"), "response_cost=nan is not finite", id="nan_response_cost"),
        pytest.param(usage(), float("inf"), "response_cost=inf is not finite", id="infinite_response_cost"),
        pytest.param(usage(), True, "response_cost=True is not a number", id="bool_response_cost"),
        pytest.param(usage(), "0.01", "response_cost='0.01' is not a number", id="string_response_cost"),
    ],
)
def test_implausible_usage_is_unknown_cost_with_a_flag_and_the_budget_charged_an_estimate(
    reported: Any, cost: Any, problem: str
) -> None:
    messages = [{"role": "user", "content": "How many customers live in Rome? " * 20}]
    reading = read_usage(fake_response(ANSWER, reported, cost), MODEL, messages, ANSWER)
    assert (reading.tokens, reading.cost_usd) == (None, None)
    assert reading.problem is not None and problem in reading.problem
    assert reading.flag is not None and reading.flag.startswith(f"{USAGE_FLAG}: ")
    assert reading.charge_usd is not None and 0 < reading.charge_usd < 0.01  # litellm's tokenizer and price table


def test_plausible_usage_is_trusted() -> None:
    reading = read_usage(fake_response(ANSWER, usage(), 0.00012), MODEL, [], ANSWER)
    assert (reading.tokens, reading.cost_usd, reading.charge_usd, reading.flag) == (120, 0.00012, 0.00012, None)


@pytest.mark.parametrize(
    "reported",
    [
        pytest.param(usage(-1_000_000, -5, -1_000_005), id="negative_tokens"),
        pytest.param(usage(10**15, 1, 10**15 + 1), id="huge_tokens"),
        pytest.param(usage(True, 0, 1), id="bool_tokens"),
    ],
)
def test_reported_usage_never_lowers_the_spend_or_defeats_the_budget(reported: dict[str, Any]) -> None:
    async def completion(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return fake_response(ANSWER, reported, -0.15 if reported["prompt_tokens"] == -1_000_000 else None)

    calls: list[dict[str, Any]] = []
    records = cities(4)
    run = evaluator(completion, concurrency=1, max_cost_usd=max(reserves(records)))  # room for one reserve
    stored = run.evaluate_many(records)
    assert len(calls) == 1  # the first request's estimated charge leaves no room for the second's reserve
    assert stored[0].judge == MODEL and (stored[0].cost_usd, stored[0].tokens) == (None, None)
    assert [f for f in stored[0].flags if f.startswith(USAGE_FLAG)] and "cost and tokens recorded as unknown" in stored[
        0
    ].flags[-1]
    assert all("cost budget reached" in (e.judge_fallback_reason or "") for e in stored[1:])
    assert 0 < run.stats.spent_usd < 0.01 and run.budget.spent_usd == run.stats.spent_usd
    assert (run.stats.usage_untrusted, run.stats.unpriced) == (1, 0)


@pytest.mark.parametrize(
    ("reported", "flagged"),
    [
        pytest.param(
            '{"prompt_tokens": -1000000, "completion_tokens": -5, "total_tokens": -1000005}', True, id="negative_tokens"
        ),
        pytest.param(
            '{"prompt_tokens": 1000000000000000, "completion_tokens": 1, "total_tokens": 1000000000000001}',
            True,
            id="huge_tokens",
        ),
        pytest.param("null", True, id="no_usage"),
        pytest.param(
            '{"prompt_tokens": "900", "completion_tokens": "20", "total_tokens": "920"}',
            False,
            id="string_tokens_litellm_converts",
        ),
    ],
)
def test_usage_from_a_real_endpoint_is_checked(reported: str, flagged: bool) -> None:
    records = [AgentLogRecord(**row) for row in synthetic_records(3)]
    limit = max(reserves(records))  # room for the first request's reserve only
    with stub_llm_server(delay_s=0.0, usage=reported) as server:
        run = LLMEvaluator(
            JudgeSettings.parse(MODEL, api_base=server.url, concurrency=1, max_retries=0, max_cost_usd=limit)
        )
        stored = run.evaluate_many(records)
        requests = server.requests
    assert requests == 1 and stored[0].judge == MODEL
    assert all(e.status is EvaluationStatus.EVALUATED for e in stored)
    assert all("cost budget reached" in (e.judge_fallback_reason or "") for e in stored[1:])
    if flagged:
        assert (stored[0].cost_usd, stored[0].tokens) == (None, None)
        assert any(f.startswith(USAGE_FLAG) for f in stored[0].flags)
        assert 0 < run.stats.spent_usd < 0.01
    else:
        assert stored[0].tokens == 920 and stored[0].cost_usd is not None and stored[0].cost_usd > 0
        assert not any(f.startswith(USAGE_FLAG) for f in stored[0].flags)


UNREADABLE_FLAG = f"{USAGE_FLAG}: the response could not be read by litellm; cost and tokens recorded as unknown"


@pytest.mark.parametrize(
    ("reported", "detail"),
    [
        pytest.param(
            '{"prompt_tokens": 10.5, "completion_tokens": 2.5, "total_tokens": 13.0}',
            "2 validation errors for Usage: completion_tokens: Input should be a valid integer, got a number with a "
            "fractional part [type=int_from_float, input_value=2.5, input_type=float]",
            id="float_tokens",
        ),
        pytest.param(
            '{"prompt_tokens": NaN, "completion_tokens": 1, "total_tokens": NaN}',
            "2 validation errors for Usage: prompt_tokens: Input should be a finite number "
            "[type=finite_number, input_value=nan, input_type=float]",
            id="nan_tokens",
        ),
    ],
)
def test_usage_litellm_rejects_is_a_fallback_with_its_reason_not_retried_and_charged_an_estimate(
    reported: str, detail: str
) -> None:
    """litellm rejects such a response ("Invalid response object", reported as HTTP 500): not a server
    error, so it is not retried and the breaker does not count it; its cost is unknown and the budget
    is charged an estimate."""
    with stub_llm_server(delay_s=0.0, usage=reported) as server:
        run = LLMEvaluator(
            JudgeSettings.parse(
                MODEL, api_base=server.url, concurrency=1, max_retries=3, backoff_s=0.001, breaker_failures=1
            )
        )
        stored = run.evaluate_many(cities(2))
        requests = server.requests
    assert requests == 2 and all(e.status is EvaluationStatus.EVALUATED and e.judge == "symbolic" for e in stored)
    assert [e.judge_fallback_reason for e in stored] == [
        f"{MODEL}: the model's response could not be read by litellm: {detail} after 1 request(s)"
    ] * 2
    assert [(e.cost_usd, e.tokens, e.flags) for e in stored] == [(None, None, (UNREADABLE_FLAG,))] * 2
    assert 0 < run.stats.spent_usd < 0.01 and run.stats.usage_untrusted == 2
    assert run.stats.fallbacks == {"response not readable by litellm": 2} and run.judge.breaker.reason is None


def test_usage_litellm_rejects_prints_no_pydantic_warning(tmp_path: Path) -> None:
    """The real command line: no serializer warnings of pydantic on stderr, one request per record."""
    logs = tmp_path / "in.jsonl"
    logs.write_text("".join(json.dumps(row) + "\n" for row in synthetic_records(2)), encoding="utf-8")
    usage_text = '{"prompt_tokens": 100.5, "completion_tokens": 20, "total_tokens": 120.5}'
    with stub_llm_server(delay_s=0.0, usage=usage_text) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "flows.cli",
                "evaluate",
                str(logs),
                "--out",
                str(tmp_path / "out.jsonl"),
                "--judge",
                MODEL,
                "--api-base",
                server.url,
                "--concurrency",
                "1",
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=checkout_env(),
            timeout=300,
            check=False,
        )
        requests = server.requests
    assert done.returncode == 0, done.stderr
    assert "Pydantic" not in done.stderr and "Warning" not in done.stderr, done.stderr
    assert requests == 2
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [row["judge_fallback_reason"] for row in rows] == [
        f"{MODEL}: the model's response could not be read by litellm: 2 validation errors for Usage: prompt_tokens: "
        "Input should be a valid integer, got a number with a fractional part "
        "[type=int_from_float, input_value=100.5, input_type=float] after 1 request(s)"
    ] * 2


def test_a_cached_verdict_keeps_its_usage_flag(tmp_path: Path) -> None:
    from warehouse.judge_cache import DuckDBJudgeCache

    async def completion(**kwargs: Any) -> Any:
        return fake_response(ANSWER, usage(-5, 1, -4))

    path = tmp_path / "cache.duckdb"
    settings = JudgeSettings.parse(MODEL, timeout_s=0.5)
    first = LLMEvaluator(
        settings, cache=DuckDBJudgeCache(path), judge=LLMJudge.from_settings(settings, completion=completion)
    )
    [fresh] = first.evaluate_many([RECORD])
    second = LLMEvaluator(
        settings, cache=DuckDBJudgeCache(path), judge=LLMJudge.from_settings(settings, completion=completion)
    )
    [cached] = second.evaluate_many([RECORD])
    assert second.stats.cache_hits == 1 and second.stats.requests == 0
    assert (cached.cost_usd, cached.tokens, cached.flags) == (None, None, fresh.flags)
    assert any(f.startswith(USAGE_FLAG) for f in cached.flags)


def test_a_server_error_that_quotes_litellms_words_is_still_a_retried_http_500() -> None:
    with stub_llm_server(delay_s=0.0, script=(500, 500), error_message="Invalid response object x") as server:
        run = LLMEvaluator(
            JudgeSettings.parse(MODEL, api_base=server.url, concurrency=1, max_retries=1, backoff_s=0.001)
        )
        [stored] = run.evaluate_many([RECORD])
        requests = server.requests
    assert requests == 2 and stored.judge == "symbolic"
    assert run.stats.fallbacks == {"InternalServerError (HTTP 500)": 1}
    assert (stored.judge_fallback_reason or "").endswith("Invalid response object x after 2 request(s)")
