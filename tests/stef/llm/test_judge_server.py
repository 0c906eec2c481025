"""The LLM judge against a local OpenAI-compatible server (tests/support/llm_server.py, 127.0.0.1 only):
``stef evaluate --judge MODEL --api-base URL --cache FILE``, hybrid, budget and random HTTP 500s.
Real HTTP through litellm; no network beyond the loopback. The nightly flow with a judge setting
is in test_flow.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from stef.llm.evaluate import LLMEvaluator
from stef.llm.litellm_loader import import_litellm
from stef.llm.prompt import PROMPT_VERSION
from stef.llm.settings import JudgeSettings
from stef.models import AgentLogRecord, EvaluationStatus, Verdict
from stef.pipeline.evaluate import evaluate
from tests.support.llm_server import StubLLMServer, prompt_blocks, stub_llm_server, synthetic_records
from warehouse import connect

MODEL = "openai/gpt-4o-mini"


@pytest.fixture(autouse=True)
def placeholder_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stub needs no key, but litellm's openai/ provider wants one in the environment."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-placeholder")
    monkeypatch.delenv("STEF_LLM_API_BASE", raising=False)


def write_logs(path: Path, rows: list[dict[str, Any]], extra_lines: tuple[str, ...] = ()) -> Path:
    path.write_text(
        "".join(json.dumps(row) + "\n" for row in rows) + "".join(line + "\n" for line in extra_lines), encoding="utf-8"
    )
    return path


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def expected_cost(server: StubLLMServer) -> dict[str, float]:
    """question -> cost of its request, from the stub's token counts and litellm's price table."""
    prices = import_litellm().model_cost["gpt-4o-mini"]
    costs = {}
    for body in server.bodies:
        prompt = sum(len(m["content"]) for m in body["messages"]) // 4
        completion = max(1, len(server.answer(body)) // 4)
        question = prompt_blocks(body["messages"])["stef-record"]["question"]
        costs[question] = prompt * prices["input_cost_per_token"] + completion * prices["output_cost_per_token"]
    return costs


def test_evaluate_with_a_model_then_a_rerun_from_the_cache(tmp_path: Path) -> None:
    rows = synthetic_records(30)
    logs = write_logs(tmp_path / "logs.jsonl", rows, ('{"run_id": "cut-off", "question": "How ma',))
    out, cache = tmp_path / "out.jsonl", tmp_path / "judge-cache.duckdb"
    args = ["evaluate", str(logs), "--out", str(out), "--judge", MODEL, "--concurrency", "4", "--cache", str(cache)]
    with stub_llm_server(delay_s=0.02) as server:
        result = CliRunner().invoke(app, [*args, "--api-base", server.url])
        assert result.exit_code == 0, result.output
        first = read_rows(out)
        assert server.requests == 30 and server.max_in_flight <= 4
        costs = expected_cost(server)
        for body in server.bodies:
            assert body["temperature"] == 0
            assert body["response_format"]["type"] == "json_schema"
        questions = {row["run_id"]: row["question"] for row in rows}
        assert len(first) == 31 and first[-1]["status"] == "invalid_input"
        for row in first[:-1]:
            question = questions[row["run_id"]]
            clean = not row["alignment"]["missing"] and not row["alignment"]["wrong"]
            assert (row["status"], row["judge"], row["judge_fallback_reason"]) == ("evaluated", MODEL, None)
            assert (row["verdict"], row["confidence"]) == (("CORRECT", 0.93) if clean else ("INCORRECT", 0.88))
            assert row["cost_usd"] == pytest.approx(costs[question])
            assert row["tokens"] > 0
            assert row["evaluator_version"].endswith(f"+judge={MODEL};prompt={PROMPT_VERSION}")
        assert "Judge openai/gpt-4o-mini" in result.stdout and "model requests" in result.stdout
        assert f"${sum(costs.values()):.6f}" in result.stdout

        server.reset_counts()
        rerun = CliRunner().invoke(app, [*args, "--api-base", server.url])
        assert rerun.exit_code == 0, rerun.output
        assert server.requests == 0
    second = read_rows(out)
    strip = [{k: v for k, v in row.items() if k != "duration_ms"} for row in first]
    assert [{k: v for k, v in row.items() if k != "duration_ms"} for row in second] == strip
    assert any(line.split() == ["│", "cache", "hits", "│", "30", "│"] for line in rerun.stdout.splitlines())


def test_the_cache_keeps_the_verdicts_of_two_endpoints_serving_one_model_name_apart(tmp_path: Path) -> None:
    """Two deployments both called MODEL: the second endpoint is asked although the first one's
    verdicts are cached; the first endpoint again, spelled differently (upper-case scheme and
    host, trailing slash), is answered by the cache alone."""
    logs = write_logs(tmp_path / "logs.jsonl", synthetic_records(5))
    out, cache = tmp_path / "out.jsonl", tmp_path / "judge-cache.duckdb"
    args = ["evaluate", str(logs), "--out", str(out), "--judge", MODEL, "--cache", str(cache)]
    with stub_llm_server(delay_s=0.0) as first, stub_llm_server(delay_s=0.0) as second:
        assert first.url != second.url
        results = [CliRunner().invoke(app, [*args, "--api-base", first.url])]
        asked_first = first.requests
        results.append(CliRunner().invoke(app, [*args, "--api-base", second.url]))
        asked_second = second.requests
        first.reset_counts()
        second.reset_counts()
        respelled = first.url.replace("http://127.0.0.1", "HTTP://127.0.0.1") + "/"
        results.append(CliRunner().invoke(app, [*args, "--api-base", respelled]))
        results.append(CliRunner().invoke(app, [*args, "--api-base", second.url]))
        again = (first.requests, second.requests)
    assert [result.exit_code for result in results] == [0, 0, 0, 0], [result.output for result in results]
    assert (asked_first, asked_second) == (5, 5)  # the second endpoint was asked, not answered from the cache
    assert again == (0, 0)  # the same endpoints again: every verdict from the cache
    with connect(cache, read_only=True) as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT model) FROM judge_cache").fetchall() == [(10, 1)]
        stored = " ".join(str(row[0]) for row in conn.execute("SELECT response::VARCHAR FROM judge_cache").fetchall())
    assert "127.0.0.1" not in stored  # the endpoint is part of the key, never stored


def test_api_base_from_the_environment_and_a_zero_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = write_logs(tmp_path / "logs.jsonl", synthetic_records(3))
    out = tmp_path / "out.jsonl"
    with stub_llm_server(delay_s=0.0) as server:
        monkeypatch.setenv("STEF_LLM_API_BASE", server.url)
        result = CliRunner().invoke(
            app, ["evaluate", str(logs), "--out", str(out), "--judge", MODEL, "--max-cost-usd", "0"]
        )
        assert result.exit_code == 0, result.output
        assert server.requests == 0
        ok = CliRunner().invoke(app, ["evaluate", str(logs), "--out", str(out), "--judge", MODEL])
        assert ok.exit_code == 0 and server.requests == 3
    assert "cost budget reached" in result.stdout
    for row in read_rows(tmp_path / "out.jsonl"):
        assert row["judge"] == MODEL


def test_hybrid_sends_only_uncertain_or_marginal_records(tmp_path: Path) -> None:
    rows = synthetic_records(10)
    symbolic = {r["run_id"]: evaluate(AgentLogRecord(**r)) for r in rows}
    escalated = {
        run_id for run_id, e in symbolic.items() if e.verdict in (Verdict.LIKELY_CORRECT, Verdict.POTENTIALLY_INCORRECT)
    }
    out = tmp_path / "out.jsonl"
    with stub_llm_server(delay_s=0.0) as server:
        result = CliRunner().invoke(
            app,
            [
                "evaluate",
                str(write_logs(tmp_path / "l.jsonl", rows)),
                "--out",
                str(out),
                "--judge",
                f"hybrid:{MODEL}",
                "--api-base",
                server.url,
            ],
        )
        assert result.exit_code == 0, result.output
        assert server.requests == len(escalated)
    stored = {row["run_id"]: row for row in read_rows(out)}
    assert {run_id for run_id, row in stored.items() if row["judge"] == MODEL} == escalated
    for run_id in set(stored) - escalated:
        verdict = symbolic[run_id].verdict
        assert verdict is not None
        assert (stored[run_id]["verdict"], stored[run_id]["score"]) == (verdict.value, symbolic[run_id].score)
    assert f"{len(escalated)} ({len(escalated) / len(rows):.1%})" in result.stdout


def test_random_http_500_every_record_keeps_a_status_and_fallbacks_say_so() -> None:
    records = [AgentLogRecord(**row) for row in synthetic_records(60)]
    with stub_llm_server(delay_s=0.0, fail_share=1 / 3, seed=7) as server:
        evaluator = LLMEvaluator(
            JudgeSettings.parse(MODEL, api_base=server.url, concurrency=1, max_retries=1, backoff_s=0.001)
        )
        stored = evaluator.evaluate_many(records)
        failures, requests = server.failures, server.requests
    assert len(stored) == 60 and all(e.status is EvaluationStatus.EVALUATED for e in stored)
    fell_back = [e for e in stored if e.judge_fallback_reason is not None]
    assert fell_back, "with a third of the requests failing, some record fails twice"
    for evaluation in fell_back:
        reason = evaluation.judge_fallback_reason or ""
        assert evaluation.judge == "symbolic"
        assert "InternalServerError (HTTP 500)" in reason and "after 2 request(s)" in reason
    assert {e.judge for e in stored if e.judge_fallback_reason is None} == {MODEL}
    stats = evaluator.stats
    assert stats.model_verdicts + stats.fallback_count == 60
    assert (stats.requests, failures) == (
        requests,
        requests - stats.model_verdicts,
    )  # every request but the answered ones failed
    assert stats.fallbacks == {"InternalServerError (HTTP 500)": len(fell_back)}


def test_evaluate_against_a_hung_model_opens_the_breaker(tmp_path: Path) -> None:
    rows = synthetic_records(10)
    out = tmp_path / "out.jsonl"
    with stub_llm_server(hang=True) as server:
        result = CliRunner().invoke(
            app,
            [
                "evaluate",
                str(write_logs(tmp_path / "logs.jsonl", rows)),
                "--out",
                str(out),
                "--judge",
                MODEL,
                "--api-base",
                server.url,
                "--concurrency",
                "2",
                "--timeout",
                "0.2",
                "--breaker-failures",
                "2",
            ],
        )
        requests = server.requests
    assert result.exit_code == 0, result.output
    assert 2 <= requests <= 2 + 2 - 1
    stored = read_rows(out)
    assert len(stored) == 10 and all(row["status"] == "evaluated" and row["judge"] == "symbolic" for row in stored)
    assert all(
        "circuit breaker open after 2 consecutive timeouts/connection failures" in row["judge_fallback_reason"]
        for row in stored
    )
    assert "circuit breaker opened after" in result.stdout and "circuit breaker open" in result.stdout


def test_a_stopped_block_cancels_the_queued_and_in_flight_requests_and_starts_no_new_one() -> None:
    """An interrupted run (Ctrl-C, SIGTERM): the batch waiting on a hung model raises
    ModelRequestsAbandoned at once instead of waiting for its queued requests; inside the block a
    new request is never made; after it, requests run again."""
    import threading
    import time

    from stef.llm.judge import ModelRequestsAbandoned
    from stef.llm.request_stop import stopped_block

    records = [AgentLogRecord.model_validate(row) for row in synthetic_records(6)]
    with stub_llm_server(hang=True) as server:
        settings = JudgeSettings.parse(MODEL, api_base=server.url, concurrency=2, timeout_s=60.0, breaker_failures=0)
        pending = LLMEvaluator(settings).submit(records)
        deadline = time.monotonic() + 60
        while server.requests < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests == 2  # two in flight, four queued
        outcome: list[BaseException] = []

        def collect() -> None:
            try:
                pending.evaluations()
            except BaseException as exc:
                outcome.append(exc)

        waiting = threading.Thread(target=collect)
        waiting.start()
        started = time.monotonic()
        with stopped_block():  # as an interrupted run's task-runner shutdown
            waiting.join(timeout=10)
            assert not waiting.is_alive() and time.monotonic() - started < 10
            later = LLMEvaluator(settings).submit(records[:1])
            with pytest.raises(ModelRequestsAbandoned):
                later.evaluations()
        time.sleep(0.3)
        assert server.requests == 2, "a queued request was made after the abandon"
        assert len(outcome) == 1 and isinstance(outcome[0], ModelRequestsAbandoned)
        server.hang = False
        server.delay_s = 0.0
        again = LLMEvaluator(settings).evaluate_many(records[:1])
    assert again[0].status is EvaluationStatus.EVALUATED and again[0].judge_fallback_reason is None


def test_a_signal_stops_the_model_requests_until_the_command_clears_it_and_a_flow_stop_until_its_runner_shutdown() -> (
    None
):
    """What the CLI's signal handler does the moment Ctrl-C arrives (request_stop.stop_for_signal):
    the queued and in-flight requests are cancelled and none starts while the command unwinds,
    however long that takes, also across the task runner's shutdown block (a second Ctrl-C during
    it); clear_signal lets requests start again. A flow's stop (stop_for_interrupt) lasts until
    its runner's shutdown block ends normally (the block also opens when the interrupt reached it
    as another error); not when a second Ctrl-C ends the block, its threads maybe still running."""
    import asyncio
    import time
    from concurrent.futures import CancelledError

    from stef.llm import request_stop
    from stef.llm.judge import ModelRequestsAbandoned, _LoopThread
    from tasks.scoring_pool import abandoning_on_interrupt

    records = [AgentLogRecord.model_validate(row) for row in synthetic_records(8)]
    with stub_llm_server(delay_s=0.3) as server:
        settings = JudgeSettings.parse(MODEL, api_base=server.url, concurrency=2, timeout_s=60.0, breaker_failures=0)
        pending = LLMEvaluator(settings).submit(records)
        deadline = time.monotonic() + 60
        while server.requests < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        request_stop.stop_for_signal()
        at_stop = server.requests
        try:
            assert request_stop.stopped()
            with pytest.raises(ModelRequestsAbandoned):
                pending.evaluations()
            time.sleep(0.5)  # a request already on its way when the stop came arrives by now
            settled = server.requests
            with request_stop.stopped_block():  # the runner's shutdown; its end keeps the signal's stop
                pass
            time.sleep(1.2)  # a slow unwinding: at 0.3 s a request and two slots, the six queued would have started
            assert server.requests == settled <= at_stop + settings.concurrency, "requests started after the stop"
            with pytest.raises(ModelRequestsAbandoned):
                LLMEvaluator(settings).submit(records[:1]).evaluations()
            # a request scheduled in the instant the stop came (its cancellation ran before the task existed)
            late = asyncio.run_coroutine_threadsafe(_LoopThread._unless_stopped(asyncio.sleep(0)), _LoopThread._loop)
            with pytest.raises(CancelledError):
                late.result(timeout=10)
            assert server.requests == settled
        finally:
            request_stop.clear_signal()
        assert not request_stop.stopped()
        server.delay_s = 0.0
        assert LLMEvaluator(settings).evaluate_many(records[:1])[0].status is EvaluationStatus.EVALUATED
        assert server.requests == settled + 1

        request_stop.stop_for_interrupt()  # an interrupt reached the nightly flow's wait
        assert request_stop.stopped()
        with abandoning_on_interrupt(ValueError):  # e.g. pydantic's error for a Ctrl-C inside a serializer
            assert request_stop.stopped()
        assert not request_stop.stopped()
        request_stop.stop_for_interrupt()
        with pytest.raises(KeyboardInterrupt), abandoning_on_interrupt(KeyboardInterrupt):
            raise KeyboardInterrupt  # a second Ctrl-C during the shutdown: its threads may still run
        assert request_stop.stopped()
        request_stop.clear_signal()  # the command's end lifts it
        assert not request_stop.stopped()
        with abandoning_on_interrupt(ValueError):  # a plain error, no interrupt: nothing is stopped
            assert LLMEvaluator(settings).evaluate_many(records[1:2])[0].status is EvaluationStatus.EVALUATED
        assert server.requests == settled + 2
