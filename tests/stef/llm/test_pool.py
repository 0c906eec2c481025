"""Tests of the model path at its latency bound (stef/llm/pool.py, LLMJudge.start_many,
LLMEvaluator.submit / evaluate_batches): one request pool per run, batches that overlap on it,
each record through the pipeline once, and the same rows as one batch at a time.

No network: litellm's ``mock_response`` through a scripted completion, or the stub server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from stef.llm.cache import MemoryJudgeCache
from stef.llm.evaluate import LLMEvaluator
from stef.llm.judge import LLMJudge
from stef.llm.litellm_loader import import_litellm
from stef.llm.pool import RequestSlots, shared_slots
from stef.llm.settings import JudgeSettings
from stef.llm.verdict import parse_verdict
from stef.models import AgentLogRecord, Evaluation, EvaluationStatus
from stef.pipeline.evaluate import evaluate, finish, prepare
from tests.stef.llm.mocked import MODEL, MODEL_ANSWER, RECORD, one_call_cost, settings
from tests.support.llm_server import stub_llm_server, synthetic_records

pytestmark = pytest.mark.usefixtures("warm_litellm")

RECORDS = [AgentLogRecord(**row) for row in synthetic_records(20)]


def batches_of(records: list[AgentLogRecord], size: int) -> list[list[AgentLogRecord]]:
    return [records[start : start + size] for start in range(0, len(records), size)]


def without_duration(evaluations: list[Evaluation]) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json", exclude={"duration_ms"}) for e in evaluations]


class Recorder:
    """A completion that records, per call, the batch of its record and how many calls were in
    flight; each call takes ``delay_s`` and answers ``MODEL_ANSWER`` (litellm's mock path)."""

    def __init__(self, delay_s: float, batch_of: dict[str, int], fail: frozenset[str] = frozenset()) -> None:
        self.delay_s = delay_s
        self.batch_of = batch_of
        self.fail = fail
        self.in_flight: list[int] = []
        """Batches of the calls in flight now."""
        self.max_in_flight = 0
        self.overlaps = 0
        """Calls that started while a call of an earlier batch was in flight."""
        self.calls: list[str] = []

    async def __call__(self, **kwargs: Any) -> Any:
        litellm = import_litellm()
        prompt = str(kwargs["messages"][1]["content"])
        question = next(q for q in self.batch_of if json.dumps(q)[1:-1] in prompt)
        batch = self.batch_of[question]
        self.calls.append(question)
        self.overlaps += any(other < batch for other in self.in_flight)
        self.in_flight.append(batch)
        self.max_in_flight = max(self.max_in_flight, len(self.in_flight))
        try:
            await asyncio.sleep(self.delay_s)
            if question in self.fail:
                raise litellm.InternalServerError(message="planned", llm_provider="openai", model=MODEL)
            return await litellm.acompletion(**kwargs, mock_response=MODEL_ANSWER)
        finally:
            self.in_flight.remove(batch)


def recorded_evaluator(
    recorder: Recorder, concurrency: int, cache: Any = None, **overrides: Any
) -> tuple[LLMEvaluator, JudgeSettings]:
    judge_settings = settings(concurrency=concurrency, timeout_s=5.0, **overrides)
    judge = LLMJudge.from_settings(judge_settings, completion=recorder)
    return LLMEvaluator(judge_settings, cache=cache, judge=judge), judge_settings


def test_batches_share_one_pool_of_concurrency_requests_and_overlap() -> None:
    """Four batches of five records, 3 in flight: never more than 3 for the run, the pool is full,
    and the next batch's requests start while the previous batch's last ones are still answered."""
    batches = batches_of(RECORDS, 5)
    recorder = Recorder(0.05, {r.question: n for n, batch in enumerate(batches) for r in batch})
    run, _ = recorded_evaluator(recorder, concurrency=3)
    evaluated = list(run.evaluate_batches(batches))
    assert [len(batch) for batch in evaluated] == [5, 5, 5, 5]
    assert recorder.max_in_flight == 3 and run.judge.pool.max_in_flight == 3
    assert run.judge.pool.in_flight == 0 and run.judge.pool.entered == 20
    assert recorder.overlaps > 0  # batch k+1 did not wait for batch k's stragglers
    assert sorted(recorder.calls) == sorted(r.question for r in RECORDS)  # each record asked once
    assert {e.judge for batch in evaluated for e in batch} == {MODEL}
    assert run.stats.requests == 20 and run.stats.model_verdicts == 20


def test_one_batch_at_a_time_never_overlaps() -> None:
    """``ahead=0``: a batch is collected before the next is submitted (the old behaviour)."""
    batches = batches_of(RECORDS[:10], 5)
    recorder = Recorder(0.02, {r.question: n for n, batch in enumerate(batches) for r in batch})
    run, _ = recorded_evaluator(recorder, concurrency=3)
    list(run.evaluate_batches(batches, ahead=0))
    assert recorder.overlaps == 0 and recorder.max_in_flight == 3


def test_overlapping_batches_give_the_rows_of_one_batch_at_a_time_and_of_evaluate() -> None:
    """The same rows whether batches overlap or not, and the ones evaluate() + finish() give: the
    symbolic fields of evaluate(record), the model's verdict finished on the record's stages."""
    batches = batches_of(RECORDS, 6)
    questions = {r.question: n for n, batch in enumerate(batches) for r in batch}
    overlapped, _ = recorded_evaluator(Recorder(0.01, questions), concurrency=4)
    pipelined = [e for batch in overlapped.evaluate_batches(batches) for e in batch]
    sequential, judge_settings = recorded_evaluator(Recorder(0.01, questions), concurrency=4)
    one_by_one = [e for batch in batches for e in sequential.evaluate_many(batch)]
    assert without_duration(pipelined) == without_duration(one_by_one)
    model = parse_verdict(MODEL_ANSWER).to_result(MODEL)
    for record, row in zip(RECORDS, pipelined, strict=True):
        prepared = prepare(record)
        assert not isinstance(prepared, Evaluation)
        expected = finish(prepared, model, judge_settings.evaluator_version)
        symbolic = evaluate(record)
        assert row.model_dump(exclude={"duration_ms", "cost_usd", "tokens"}) == expected.model_dump(
            exclude={"duration_ms", "cost_usd", "tokens"}
        )
        assert (row.alignment, row.sql_spec, row.filter_status) == (
            symbolic.alignment,
            symbolic.sql_spec,
            symbolic.filter_status,
        )
        assert (row.cost_usd, row.tokens) == (pytest.approx(one_call_cost()), 30)
    assert overlapped.stats.summary() == sequential.stats.summary()


def test_each_record_is_prepared_judged_and_finished_once_also_when_the_model_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stages A–E, the symbolic judge and finish() run once per record, also for the records that
    fall back (their symbolic verdict is the one computed before the request, not a second one)."""
    import stef.llm.evaluate as model_path
    import stef.pipeline.evaluate as pipeline

    counts: Counter[str] = Counter()
    real_prepare, real_finish = pipeline._prepare_stages, model_path.finish

    def counting_prepare(record: AgentLogRecord, *args: Any, **kwargs: Any) -> Any:  # stages A–E of the batch loop
        counts["prepare"] += 1
        return (yield from real_prepare(record, *args, **kwargs))

    def counting_finish(*args: Any, **kwargs: Any) -> Any:
        counts["finish"] += 1
        return real_finish(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_prepare_stages", counting_prepare)
    monkeypatch.setattr(model_path, "finish", counting_finish)
    batches = batches_of(RECORDS, 7)
    failing = frozenset(r.question for r in RECORDS[::3])
    recorder = Recorder(0.0, {r.question: n for n, batch in enumerate(batches) for r in batch}, fail=failing)
    # breaker_failures=0: the failing records end after the others, five in a row would open the breaker
    run, _ = recorded_evaluator(recorder, concurrency=4, max_retries=1, breaker_failures=0)
    symbolic = run.symbolic
    real_judge = type(symbolic).judge

    def counting_judge(self: Any, judge_input: Any) -> Any:
        counts["symbolic judge"] += 1
        return real_judge(self, judge_input)

    monkeypatch.setattr(type(symbolic), "judge", counting_judge)
    rows = [e for batch in run.evaluate_batches(batches) for e in batch]
    assert counts == {"prepare": 20, "symbolic judge": 20, "finish": 20}
    fell_back = [e for e in rows if e.judge_fallback_reason is not None]
    assert {e.run_id for e in fell_back} == {r.run_id for r in RECORDS[::3]}
    for row in fell_back:
        expected = evaluate(next(r for r in RECORDS if r.run_id == row.run_id))
        assert (row.judge, row.verdict, row.confidence, row.score) == (
            "symbolic",
            expected.verdict,
            expected.confidence,
            expected.score,
        )
        reason = row.judge_fallback_reason or ""
        assert "InternalServerError (HTTP 500)" in reason and "after 2 request(s)" in reason
    assert all(e.status is EvaluationStatus.EVALUATED for e in rows)
    assert run.stats.fallback_count == len(fell_back) and run.stats.model_verdicts == 20 - len(fell_back)


def test_a_record_repeated_in_the_next_batch_is_asked_once_with_a_cache() -> None:
    """With a cache, a record whose twin in the previous batch is still being asked takes that
    answer as a cache hit (as it would have read it from the cache once that batch wrote it);
    without a cache it is asked again, as before."""
    twin = RECORD.model_copy(update={"run_id": "twin"})
    batches = [[RECORD], [twin]]
    cache = MemoryJudgeCache()
    recorder = Recorder(0.05, {RECORD.question: 0})
    run, _ = recorded_evaluator(recorder, concurrency=2, cache=cache)
    first, second = run.evaluate_batches(batches)
    assert len(recorder.calls) == 1 and len(cache.entries) == 1
    assert (second[0].judge, second[0].verdict, second[0].cost_usd) == (MODEL, first[0].verdict, first[0].cost_usd)
    assert (run.stats.requests, run.stats.cache_hits, run.stats.model_verdicts) == (1, 1, 2)
    uncached = Recorder(0.05, {RECORD.question: 0})
    again, _ = recorded_evaluator(uncached, concurrency=2)
    list(again.evaluate_batches(batches))
    assert len(uncached.calls) == 2


def test_a_run_that_stops_gives_up_the_batches_still_queued() -> None:
    """A generator closed early cancels the requests of the batch submitted ahead."""
    batches = batches_of(RECORDS, 10)
    recorder = Recorder(0.05, {r.question: n for n, batch in enumerate(batches) for r in batch})
    run, _ = recorded_evaluator(recorder, concurrency=1)
    evaluated = run.evaluate_batches(batches)
    assert len(next(evaluated)) == 10
    evaluated.close()
    asked = len(recorder.calls)
    time.sleep(0.2)
    assert asked < 20 and len(recorder.calls) <= asked + 1  # at most the one in flight went on


def test_wait_entered_returns_once_the_slots_were_taken_or_at_the_timeout() -> None:
    """The waiting thread wakes when the loop's requests have taken ``count`` slots in all, a count
    never reached ends the wait at the timeout with the slots taken so far, and on the loop's own
    thread the wait returns at once (it would stop the loop that takes the slots)."""
    import threading

    slots = RequestSlots(2)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    release = asyncio.Event()

    async def request() -> None:
        async with slots:
            await release.wait()

    async def wait_on_the_loop() -> int:
        return slots.wait_entered(10, timeout_s=30.0)

    try:
        started = time.perf_counter()
        futures = [asyncio.run_coroutine_threadsafe(request(), loop) for _ in range(3)]
        assert slots.wait_entered(2, timeout_s=30.0) == 2
        assert time.perf_counter() - started < 10.0  # woken by the slots, not by the timeout
        waited = time.perf_counter()
        assert slots.wait_entered(3, timeout_s=0.1) == 2  # the third waits for a slot held until release
        assert time.perf_counter() - waited >= 0.09
        on_loop = time.perf_counter()
        assert asyncio.run_coroutine_threadsafe(wait_on_the_loop(), loop).result(timeout=30) == 2
        assert time.perf_counter() - on_loop < 10.0
        loop.call_soon_threadsafe(release.set)
        for future in futures:
            future.result(timeout=30)
        assert slots.wait_entered(3, timeout_s=0.0) == 3 and slots.in_flight == 0
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


def test_a_runs_first_requests_start_before_the_rest_of_its_first_batch_is_prepared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After queueing its first part, a run's first batch waits for the pool to start those requests
    and, with twice as many queued as slots, for one answer (``concurrency + 1`` slots taken in all)
    before preparing its next records; a judge joining a run whose pool has started requests already
    (another batch of the nightly while a judge of the run holds its pool) does not wait."""
    import stef.llm.evaluate as model_path

    monkeypatch.setattr(model_path, "FIRST_PART", 4)
    monkeypatch.setattr(model_path, "FIRST_REQUESTS_WAIT_S", 60.0)  # the answer, not the cap, ends the wait
    entered_when_prepared: list[int] = []
    real_prepare = model_path.judge_many_prepared

    def recording_prepare(records: Any, **kwargs: Any) -> Any:
        entered_when_prepared.append(run.judge.pool.entered)
        return real_prepare(records, **kwargs)

    monkeypatch.setattr(model_path, "judge_many_prepared", recording_prepare)
    batch = RECORDS[:10]
    recorder = Recorder(0.2, {r.question: 0 for r in batch})
    run, judge_settings = recorded_evaluator(recorder, concurrency=2)
    pending = run.submit(batch)
    assert entered_when_prepared[0] == 0  # part 1: nothing queued yet
    assert entered_when_prepared[1] >= 3  # part 2: prepared once both slots were taken and one again
    assert len(pending.evaluations()) == 10 and run.judge.pool.entered == 10

    waits: list[int] = []
    real_wait = RequestSlots.wait_entered

    def recording_wait(self: RequestSlots, count: int, timeout_s: float) -> int:
        waits.append(count)
        return real_wait(self, count, timeout_s)

    monkeypatch.setattr(RequestSlots, "wait_entered", recording_wait)
    joining = LLMEvaluator(
        judge_settings, judge=LLMJudge.from_settings(judge_settings, completion=recorder, slots=run.judge.pool)
    )
    entered_when_prepared.clear()
    assert len(joining.submit(RECORDS[10:16]).evaluations()) == 6
    assert waits == [] and run.judge.pool.entered == 16


def test_shared_slots_are_one_pool_per_run_key() -> None:
    first = shared_slots("run-a", 3)
    assert shared_slots("run-a", 8) is first and first.limit == 3
    assert shared_slots("run-b", 3) is not first
    judge_settings = JudgeSettings.parse(MODEL, concurrency=2, run_key="run-c")
    one, two = LLMJudge.from_settings(judge_settings), LLMJudge.from_settings(judge_settings)
    assert one.pool is two.pool and one.pool.limit == 2
    assert LLMJudge(MODEL, concurrency=2).pool is not LLMJudge(MODEL, concurrency=2).pool
    with pytest.raises(ValueError, match="at least 1 slot"):
        RequestSlots(0)


@pytest.mark.usefixtures("placeholder_key")
def test_stef_evaluate_keeps_the_pool_full_across_batches_and_every_record_has_a_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``stef evaluate`` with batches of 8: the stub never sees more than --concurrency requests;
    with a third of them answered HTTP 500 every record still gets a row and a status, and the
    ones that fell back say so."""
    import flows.cli.evaluate as command

    monkeypatch.setattr(command, "BATCH_SIZE", 8)
    rows = synthetic_records(40)
    logs = tmp_path / "logs.jsonl"
    logs.write_text("".join(json.dumps(row) + "\n" for row in rows) + "not json\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    with stub_llm_server(delay_s=0.02, fail_share=1 / 3, seed=4) as server:
        started = time.perf_counter()
        result = CliRunner().invoke(
            app,
            [
                "evaluate",
                str(logs),
                "--out",
                str(out),
                "--judge",
                MODEL,
                "--api-base",
                server.url,
                "--concurrency",
                "4",
                "--timeout",
                "5",
                "--cache",
                str(tmp_path / "cache.duckdb"),
            ],
        )
        assert result.exit_code == 0, result.output
        assert server.max_in_flight <= 4 and server.failures > 0
        assert server.first_request_at is not None and started < server.first_request_at < time.perf_counter()
        server.reset_counts()  # what the benchmark does between two runs
        assert server.first_request_at is None and server.requests == 0
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row.get("run_id") for row in written[:-1]] == [row["run_id"] for row in rows]
    assert written[-1]["status"] == "invalid_input"
    assert all(row["status"] == "evaluated" for row in written[:-1])
    for row in written[:-1]:
        if row["judge_fallback_reason"] is None:
            assert row["judge"] == MODEL
        else:
            assert row["judge"] == "symbolic" and "HTTP 500" in row["judge_fallback_reason"]


@pytest.mark.usefixtures("placeholder_key")
def test_the_warm_up_sends_nothing_runs_once_per_model_and_the_judge_then_asks_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``LLMJudge.warm_up`` runs litellm's first call locally (``mock_response``): the server gets
    no request from it, a second warm-up of the same model makes no call at all, and the judge's
    real requests reach the server afterwards."""
    import stef.llm.judge as judge_module

    monkeypatch.setattr(judge_module, "_warmed", set())
    litellm = import_litellm()
    calls: list[dict[str, Any]] = []
    real_completion = litellm.completion

    def counting(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return real_completion(**kwargs)

    monkeypatch.setattr(litellm, "completion", counting)
    with stub_llm_server(delay_s=0.0) as server:
        judge = LLMJudge(model=MODEL, api_base=server.url, timeout_s=5.0)
        judge.warm_up()
        judge.warm_up()
        assert server.requests == 0
        assert len(calls) == 1 and calls[0]["mock_response"] == "{}" and calls[0]["model"] == MODEL
        assert calls[0]["no-log"] is True  # the user's litellm callbacks never log the warm-up
        LLMJudge(model=MODEL, api_base=server.url).warm_up()  # another judge, same model: done already
        assert len(calls) == 1
        monkeypatch.setattr(litellm, "completion", real_completion)
        prepared = prepare(RECORDS[0])
        outcome = judge.judge_many([prepared.judge_input])[0]
        assert server.requests == 1
        assert outcome.fallback_reason is None, outcome.fallback_reason
        assert outcome.result.judge == MODEL


def test_a_judge_with_its_own_completion_is_not_warmed_up(monkeypatch: pytest.MonkeyPatch) -> None:
    import stef.llm.judge as judge_module

    monkeypatch.setattr(judge_module, "_warmed", set())
    recorder = Recorder(0.0, {r.question: 0 for r in RECORDS})
    LLMJudge(model=MODEL, completion=recorder).warm_up()
    assert judge_module._warmed == set() and recorder.calls == []


@pytest.mark.usefixtures("placeholder_key")
def test_litellm_builds_each_request_in_the_loops_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """``litellm.acompletion`` hands its synchronous ``completion`` (which builds the request) to the
    loop's default executor: for an OpenAI-compatible model it runs in the judge loop's own thread
    (``_LoopExecutor``), not in a pool thread, and the request still reaches the server."""
    import sys
    import threading

    litellm_main = sys.modules[import_litellm().__name__ + ".main"]
    threads: list[str] = []
    real_completion = litellm_main.completion

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real_completion(*args, **kwargs)

    monkeypatch.setattr(litellm_main, "completion", recording)
    with stub_llm_server(delay_s=0.0) as server:
        judge = LLMJudge(model=MODEL, api_base=server.url, timeout_s=5.0)
        outcomes = judge.judge_many([prepare(record).judge_input for record in RECORDS[:3]])
    assert server.requests == 3
    assert all(outcome.fallback_reason is None for outcome in outcomes), [o.fallback_reason for o in outcomes]
    assert threads == ["stef-llm-judge"] * 3


def test_the_loop_executor_runs_only_litellms_request_building_inline() -> None:
    """Which calls ``_LoopExecutor`` runs at once in the calling thread: litellm's ``completion`` of an
    async call for an OpenAI-compatible provider, handed over as ``partial(Context.run, partial(...))``;
    another provider, a sync call, another function or extra arguments go to a pool thread. An
    exception of an inline call reaches the future."""
    import contextvars
    import sys
    import threading
    from functools import partial

    from stef.llm.judge import _LoopExecutor, builds_litellm_request

    completion = sys.modules[import_litellm().__name__ + ".main"].completion

    def handed(**kwargs: Any) -> partial[Any]:
        return partial(contextvars.copy_context().run, partial(completion, **kwargs))

    assert builds_litellm_request(handed(model="openai/gpt-4o-mini", acompletion=True))
    assert builds_litellm_request(handed(model="gpt-4o", custom_llm_provider="openai", acompletion=True))
    assert not builds_litellm_request(handed(model="hosted_vllm/llama", acompletion=True))  # loads a tokenizer file
    assert not builds_litellm_request(handed(model="bedrock/anthropic.claude-v2", acompletion=True))
    assert not builds_litellm_request(handed(model="openai/x", custom_llm_provider="azure", acompletion=True))
    for keyword, value in (("model_list", [{"model_name": "x"}]), ("deployment_id", "d"), ("azure", True)):
        assert not builds_litellm_request(handed(model="openai/x", acompletion=True, **{keyword: value}))
    litellm = import_litellm()
    for setting, value in (
        ("proxy_auth", object()),
        ("secret_manager_client", object()),
        ("model_alias_map", {"openai/x": "bedrock/y"}),
        ("input_callback", [print]),
    ):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(litellm, setting, value)
            assert not builds_litellm_request(handed(model="openai/x", acompletion=True)), setting
    assert not builds_litellm_request(handed(model="openai/gpt-4o-mini"))  # a sync call sends the request itself
    assert not builds_litellm_request(handed(model="gpt-4o-mini", acompletion=True))  # provider unknown here
    assert not builds_litellm_request(partial(contextvars.copy_context().run, partial(print, "x")))
    assert not builds_litellm_request(partial(completion, model="openai/gpt-4o-mini", acompletion=True))

    executor = _LoopExecutor(thread_name_prefix="test-executor")
    try:
        here = threading.current_thread().name
        assert executor.submit(threading.current_thread).result().name.startswith("test-executor")
        context_run = partial(contextvars.copy_context().run, lambda: threading.current_thread().name)
        assert executor.submit(context_run).result(timeout=30).startswith("test-executor")

        def build(**kwargs: Any) -> str:
            if kwargs.get("fail"):
                raise ValueError("bad arguments")
            return threading.current_thread().name

        with pytest.MonkeyPatch.context() as monkeypatch:
            litellm_main = sys.modules[import_litellm().__name__ + ".main"]
            monkeypatch.setattr(litellm_main, "completion", build)
            inline = partial(contextvars.copy_context().run, partial(build, model="openai/x", acompletion=True))
            done = executor.submit(inline)
            assert done.done() and done.result() == here
            failing = partial(
                contextvars.copy_context().run, partial(build, model="openai/x", acompletion=True, fail=True)
            )
            with pytest.raises(ValueError, match="bad arguments"):
                executor.submit(failing).result()
            other = partial(contextvars.copy_context().run, partial(build, model="bedrock/x", acompletion=True))
            assert executor.submit(other).result(timeout=30).startswith("test-executor")

            def interrupted(**kwargs: Any) -> str:
                raise KeyboardInterrupt

            monkeypatch.setattr(litellm_main, "completion", interrupted)
            stopped = partial(contextvars.copy_context().run, partial(interrupted, model="openai/x", acompletion=True))
            with pytest.raises(KeyboardInterrupt):  # as a pool thread hands it over: to whoever awaits the future
                executor.submit(stopped).result()
    finally:
        executor.shutdown(wait=True)
