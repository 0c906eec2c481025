"""Tests of the circuit breaker (stef/llm/breaker.py) on a model endpoint that hangs, answers 500
or refuses connections (issue 13).

No network: litellm's mocks and the local stub server (tests/support/llm_server.py, 127.0.0.1 only).
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from stef.llm.breaker import CircuitBreaker, release_breaker, shared_breaker
from stef.llm.evaluate import LLMEvaluator
from stef.llm.litellm_loader import import_litellm
from stef.llm.settings import JudgeSettings
from stef.models import EvaluationStatus
from tests.stef.llm.hostile import (
    ANSWER,
    MODEL,
    cities,
    evaluator,
)
from tests.support.llm_server import stub_llm_server, synthetic_records

pytestmark = pytest.mark.usefixtures("placeholder_key")


def test_a_hung_endpoint_opens_the_breaker_and_every_record_keeps_a_status() -> None:
    records = cities(12)
    with stub_llm_server(hang=True) as server:
        run = LLMEvaluator(
            JudgeSettings.parse(
                MODEL,
                api_base=server.url,
                concurrency=2,
                timeout_s=0.2,
                max_retries=3,
                backoff_s=0.001,
                breaker_failures=3,
            )
        )
        stored = run.evaluate_many(records)
        requests = server.requests
    assert 3 <= requests <= 3 + 2 - 1  # the failures that open it, plus what was in flight: not 12 × 4
    assert len(stored) == 12 and all(e.status is EvaluationStatus.EVALUATED and e.judge == "symbolic" for e in stored)
    reasons = [e.judge_fallback_reason or "" for e in stored]
    assert all(
        f"{MODEL}: " in r and "circuit breaker open after 3 consecutive timeouts/connection failures" in r
        for r in reasons
    )
    started = run.judge.breaker.opened_after_records
    assert started is not None and 2 <= started <= requests  # the records that made a request before it opened
    not_asked = [r for r in reasons if r.startswith(f"{MODEL}: not asked: circuit breaker open")]
    assert len(not_asked) == 12 - started
    assert run.stats.fallbacks == {"circuit breaker open": 12}
    assert run.stats.breaker is not None and run.stats.breaker.startswith(
        f"circuit breaker opened after {started} records"
    )
    assert f"{12 - started} records then judged symbolically without asking the model" in run.stats.breaker
    assert run.stats.breaker in run.stats.summary()


def test_an_endpoint_that_always_answers_500_opens_the_breaker_after_records_run_out_of_retries() -> None:
    records = cities(12)
    with stub_llm_server(fail_share=1.0) as server:
        run = LLMEvaluator(
            JudgeSettings.parse(
                MODEL,
                api_base=server.url,
                concurrency=1,
                timeout_s=2.0,
                max_retries=2,
                backoff_s=0.001,
                breaker_failures=3,
            )
        )
        stored = run.evaluate_many(records)
        requests = server.requests
    assert requests < 12 * 3  # records in flight finish their attempt; no request starts after the breaker opens
    assert all(e.status is EvaluationStatus.EVALUATED and e.judge == "symbolic" for e in stored)
    assert run.judge.breaker.reason is not None and "3 records in a row ran out of retries" in run.judge.breaker.reason
    assert re.fullmatch(
        r"circuit breaker opened after \d+ records \(3 records in a row ran out of retries on server errors; "
        r"last: InternalServerError \(HTTP 500\): OpenAIException - stub server: planned HTTP 500 after 3 request\(s\)\); "
        r"\d+ records then judged symbolically without asking the model",
        run.stats.breaker or "",
    )
    assert sum(1 for e in stored if "circuit breaker open" in (e.judge_fallback_reason or "")) == 12 - 3


def test_a_refused_connection_opens_the_breaker() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again when the block ends: nothing listens there
    run = LLMEvaluator(
        JudgeSettings.parse(
            MODEL,
            api_base=f"http://127.0.0.1:{port}/v1",
            concurrency=1,
            timeout_s=2.0,
            max_retries=3,
            backoff_s=0.001,
            breaker_failures=2,
        )
    )
    stored = run.evaluate_many(cities(5))
    assert run.stats.requests == 2
    assert [e.judge for e in stored] == ["symbolic"] * 5
    assert all("circuit breaker open after 2 consecutive" in (e.judge_fallback_reason or "") for e in stored)
    assert "APIConnectionError" in (run.stats.breaker or "")


def test_only_consecutive_failures_open_the_breaker() -> None:
    litellm = import_litellm()
    calls: list[int] = []

    async def completion(**kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) % 3:  # two timeouts, then an answer, again and again
            return await litellm.acompletion(**kwargs, mock_timeout=True, mock_response="never sent")
        return await litellm.acompletion(**kwargs, mock_response=ANSWER)

    run = evaluator(completion, concurrency=1, timeout_s=0.05, max_retries=3, breaker_failures=3)
    stored = [
        evaluation for record in cities(4) for evaluation in run.evaluate_many([record])
    ]  # one run, record after record
    assert len(calls) == 12 and [e.judge for e in stored] == [MODEL] * 4  # 8 timeouts in all, never 3 in a row
    assert run.stats.breaker is None and not run.judge.breaker.is_open


def test_the_batches_of_a_run_share_one_breaker() -> None:
    key = "test-run-shared-breaker"
    try:
        with stub_llm_server(hang=True) as server:
            settings = JudgeSettings.parse(
                MODEL, api_base=server.url, concurrency=1, timeout_s=0.2, max_retries=0, breaker_failures=2, run_key=key
            )
            first, second = LLMEvaluator(settings), LLMEvaluator(settings)
            one = first.evaluate_many(cities(3))
            two = second.evaluate_many(cities(6)[3:])
            requests = server.requests
        assert first.judge.breaker is second.judge.breaker is shared_breaker(key)
    finally:
        breaker = release_breaker(key)
    assert requests == 2 and second.stats.requests == 0
    assert all(
        (e.judge_fallback_reason or "").startswith(f"{MODEL}: not asked: circuit breaker open") for e in [one[2], *two]
    )
    assert breaker is not None and breaker.opened_after_records == 2 and breaker.not_asked == 4
    assert release_breaker(key) is None


def test_breaker_failures_zero_never_opens() -> None:
    breaker = CircuitBreaker(0)
    for _ in range(100):
        breaker.failed("Timeout")
    assert not breaker.is_open and breaker.summary() is None


def test_the_breaker_summary_names_what_opened_it() -> None:
    unreachable, tired = CircuitBreaker(2), CircuitBreaker(2)
    for _ in range(2):
        unreachable.started()
        unreachable.failed("Timeout")
        tired.started()
        tired.exhausted("RateLimitError (HTTP 429) after 4 request(s)")
    tail = "; 0 records then judged symbolically without asking the model"
    assert unreachable.summary() == (
        "circuit breaker opened after 2 records (2 consecutive timeouts/connection failures; last: Timeout)" + tail
    )
    assert tired.summary() == (
        "circuit breaker opened after 2 records (2 records in a row ran out of retries on server errors; "
        "last: RateLimitError (HTTP 429) after 4 request(s))" + tail
    )


def test_stef_evaluate_shows_the_servers_error_text_with_its_control_characters_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 429 whose message holds terminal escapes: the breaker caption quotes it visibly (``\\x1b``)."""
    from typer.testing import CliRunner

    from flows.cli.main import app

    monkeypatch.setitem(JudgeSettings.parse.__func__.__kwdefaults__, "backoff_s", 0.001)  # type: ignore[attr-defined]
    logs = tmp_path / "in.jsonl"
    logs.write_text("".join(json.dumps(row) + "\n" for row in synthetic_records(3)), encoding="utf-8")
    with stub_llm_server(delay_s=0.0, script=(429,) * 100, error_message="err \x1b[31mred\x1b[0m") as server:
        result = CliRunner().invoke(
            app,
            [
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
                "--breaker-failures",
                "2",
            ],
        )
        requests = server.requests
    assert result.exit_code == 0, result.output
    assert 2 * 4 <= requests <= 3 * 4  # two records ran out of retries (1 + 3 requests); the third may have started
    assert "\x1b" not in result.stdout
    caption = " ".join(result.stdout.split())  # the caption is wrapped to the terminal's width
    assert re.search(
        r"circuit breaker opened after \d records \(2 records in a row ran out of retries on server errors; "
        r"last: RateLimitError \(HTTP 429\): OpenAIException - err \\x1b\[31mred\\x1b\[0m after 4 request\(s\)\); "
        r"[01] records then judged symbolically without asking the model",
        caption,
    ), caption
