"""Stage D with a language model: the LLM judge (STEF paper §2.D, DESIGN.md §3 stage 4).

:class:`LLMJudge` gives the same four-point verdict and confidence γ as
:class:`stef.pipeline.judge.symbolic.SymbolicJudge`, but asks a language model through litellm, so any provider
works (``openai/…``, ``anthropic/…``, ``azure/…``, ``bedrock/…``, ``ollama/…``,
``hosted_vllm/…``) as does any OpenAI-compatible endpoint (``api_base``). Keys are read by
litellm from the environment only; nothing here takes a key.

What the model sees is a versioned prompt (:data:`stef.llm.prompt.PROMPT_VERSION`, :mod:`stef.llm.prompt`): Q_u, Q_e, S, the extracted
specs, the filter alignment, the production rules that fired and the **R_app rules injected by
templating** (column mappings, benign filters: the paper's configurable rule injection). Q_u, Q_e
and S are written by a user and by the monitored agent, so everything taken from the record is
one JSON object in a data block whose tags carry a nonce, R_app another
(:mod:`stef.untrusted`): no value can end its block, add a key or a section; the system message
says the blocks are data, never instructions; comments and optimizer hints are removed from S
(sqlglot's tokenizer) and the prompt says so. The answer is requested as a JSON Schema built
from :class:`stef.llm.verdict.LLMVerdict` (``response_format``, so any OpenAI-compatible server can enforce it),
at temperature 0, and validated strictly with pydantic.

Bounded and never losing a record:

* requests run concurrently, at most ``concurrency`` in flight for the whole run
  (:class:`stef.llm.pool.RequestSlots`, :data:`stef.llm.settings.DEFAULT_CONCURRENCY`): every batch
  queues its requests on the run's slots as soon as it is started (:meth:`LLMJudge.start_many`),
  so batches overlap and none waits for another's stragglers;
* each request has a timeout; 429, 5xx, connection errors and timeouts are retried with
  exponential backoff and jitter (tenacity), other errors are not;
* a :class:`stef.llm.breaker.CircuitBreaker` shared by the run's batches stops calling a model that does not
  answer: after :data:`stef.llm.breaker.DEFAULT_BREAKER_FAILURES` consecutive timeouts / connection failures (or
  as many records in a row that ran out of retries on 429 / 5xx) the
  rest of the run gets the symbolic verdict without a request (and each record says so);
* a response litellm cannot read (token counts that are not whole numbers: "Invalid response
  object", which litellm reports as HTTP 500) is not retried: the record falls back with
  :data:`UNREADABLE_RESPONSE`, its cost unknown and the budget charged an estimate;
* a malformed answer (not JSON, wrong enum, γ out of range, a boolean γ, a verdict its own γ
  contradicts: CORRECT with γ 0.1, :func:`stef.llm.verdict.contradiction`, which also flags the
  record with :data:`stef.llm.verdict.CONTRADICTION_FLAG`) gets one repair
  request, which repeats at most :data:`stef.llm.prompt.MAX_ECHO_CHARS` of it; an answer over
  :data:`stef.llm.verdict.MAX_ANSWER_CHARS` is not parsed;
* the reported usage and cost are checked (:mod:`stef.llm.usage`): implausible figures make the
  cost and tokens unknown with a flag, and the budget is charged an estimate, never less;
* when all that fails, or the cost budget is spent, the record gets the symbolic verdict and the
  reason in :attr:`stef.llm.models.JudgeOutcome.fallback_reason`;
* verdicts are cached by ``(model, prompt version, hash of the rendered inputs, endpoint)`` (the
  endpoint only with an ``api_base``: :func:`stef.llm.prompt.cache_key`) in any
  :class:`stef.llm.models.JudgeCache` (the warehouse's ``judge_cache`` table: :mod:`warehouse.judge_cache`);
  a cached row that does not hold a valid verdict (:func:`holds_verdict`) is asked again and
  replaced, a valid one is never overwritten.

litellm is imported lazily, only when a model is called (:mod:`stef.llm.litellm_loader` sets
``LITELLM_LOCAL_MODEL_COST_MAP`` first so that importing it never reaches the network).
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from stef.display import one_line
from stef.errors import StefError
from stef.llm import request_stop
from stef.llm.breaker import BREAKER_OPEN, CircuitBreaker, shared_breaker
from stef.llm.budget import BUDGET_REACHED, CostBudget
from stef.llm.litellm_loader import import_litellm
from stef.llm.models import CachedVerdict, JudgeCache, JudgeConfigError, JudgeOutcome, MalformedOutputError
from stef.llm.pool import RequestSlots, shared_slots
from stef.llm.prompt import PROMPT_VERSION, cache_key, render_messages, repair_messages
from stef.llm.settings import (
    DEFAULT_BACKOFF_S,
    DEFAULT_CONCURRENCY,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    MAX_BACKOFF_S,
    JudgeSettings,
    unpriced_cap_error,
)
from stef.llm.usage import (
    ANSWER_RESERVE_TOKENS,
    UsageReading,
    check_cost,
    check_count,
    estimate_cost,
    read_usage,
    reserve_cost,
)
from stef.llm.verdict import (
    CONTRADICTION_FLAG,
    MAX_RATIONALE_CHARS,
    LLMVerdict,
    SelfContradictoryVerdictError,
    contradiction,
    parse_verdict,
    response_format,
)
from stef.models import JudgeResult
from stef.pipeline.judge.models import Judge, JudgeInput
from stef.pipeline.judge.symbolic import SymbolicJudge

if TYPE_CHECKING:
    import asyncio
    from types import ModuleType

logger = logging.getLogger("stef.llm_judge")  # its name from before stef.llm: log filters keep working
_warmed: set[str] = set()
"""Models whose litellm first-call set-up ran in this process (:meth:`LLMJudge.warm_up`)."""
_warm_lock = threading.Lock()


Completion = Callable[..., Awaitable[Any]]
"""An async completion function with ``litellm.acompletion``'s keyword arguments."""

_T = TypeVar("_T")


INLINE_REQUEST_PROVIDERS = frozenset({"openai"})
"""litellm providers (the prefix of ``openai/gpt-4o-mini``) whose requests the judge loop builds in its
own thread (:class:`_LoopExecutor`): OpenAI and OpenAI-compatible servers (``openai/…`` with an
``api_base``), whose request litellm builds from the call's arguments and the environment alone (no
credential file, no token refresh, no tokenizer file: it returns the coroutine that sends the request
before it makes any client). Not ``hosted_vllm``: its first request loads a tokenizer file, which
tiktoken may download without a timeout."""

UNREADABLE_RESPONSE = "response not readable by litellm"
"""Fallback kind of a record whose answer litellm could not read: it rejects a response it cannot
convert (token counts that are not whole numbers or NaN in ``usage``, ...) with "Invalid response
object", reported as ``InternalServerError`` (HTTP 500) although the server answered with a 200.
Such a record is not retried (the server would answer the same); its cost is unknown and the
budget is charged an estimate, as for any untrusted usage (:mod:`stef.llm.usage`)."""

BUDGET_WAIT_S = 0.02
"""How often a request whose reserve only the reserves of requests in flight keep out checks the
budget again (seconds): it waits for them to settle rather than fall back while money is left."""

UNPRICED_UNDER_CAP = "cost cap cannot be enforced"
"""Fallback kind of a record not sent to a model litellm has no price for under a ``--max-cost-usd``
above 0 (:func:`stef.llm.settings.preflight` refuses that setting before any work; this is the
guard for callers that skipped it): its requests could not be counted against the cap."""

_INVALID_RESPONSE = "Invalid response object"
"""What litellm's message says when it could not read a response (``convert_to_model_response_object``)."""
_VALIDATION_LINE = re.compile(r"\d+ validation errors? for \w+")
_USAGE_SERIALIZER_WARNING = (
    r"Pydantic serializer warnings:\s+PydanticSerializationUnexpectedValue\(Expected `int` - serialized value "
    r"may not be as expected \[field_name='(?:prompt|completion|total)_tokens'"
)
"""The warning pydantic prints when the OpenAI SDK's response object holding token counts that are
not whole numbers is dumped (litellm then rejects the response: :data:`UNREADABLE_RESPONSE`)."""

INLINE_BLOCKING_KEYWORDS = ("model_list", "deployment_id", "azure")
"""Arguments of a call that send litellm's ``completion`` elsewhere than the plain provider path
(several deployments in threads, Azure): a call that sets any of them is built in a pool thread."""


def builds_litellm_request(fn: Callable[..., object]) -> bool:
    """Whether ``fn`` is what ``litellm.acompletion`` hands to its event loop's default executor for a
    provider of :data:`INLINE_REQUEST_PROVIDERS`: ``partial(Context.run, partial(litellm.main.completion,
    model=..., acompletion=True, ...))``, litellm's synchronous ``completion`` that, for an async
    call, builds the request and returns the coroutine that sends it.

    Only when no process-wide litellm setting may make that build wait on I/O or switch provider:
    proxy auth (an OAuth token fetch), a model alias map, a secret manager, input callbacks (run
    synchronously before the request); nor :data:`INLINE_BLOCKING_KEYWORDS`. Anything else, including
    a litellm release that hands over another shape, is ``False``: it runs in a thread as before,
    only slower. (A wrapper installed on ``litellm.main.completion`` by instrumentation counts as
    ``completion``: it runs in the loop's thread too.)

    >>> builds_litellm_request(print)
    False
    """
    if not isinstance(fn, partial) or fn.keywords or len(fn.args) != 1:
        return False
    if not isinstance(getattr(fn.func, "__self__", None), contextvars.Context):
        return False
    inner = fn.args[0]
    litellm_main = sys.modules.get("litellm.main")
    litellm = sys.modules.get("litellm")
    if litellm_main is None or litellm is None or not isinstance(inner, partial) or inner.args:
        return False
    if inner.func is not getattr(litellm_main, "completion", None) or inner.keywords.get("acompletion") is not True:
        return False
    if any(inner.keywords.get(name) not in (None, False) for name in INLINE_BLOCKING_KEYWORDS):
        return False
    if getattr(litellm, "proxy_auth", None) is not None or getattr(litellm, "secret_manager_client", None) is not None:
        return False
    if getattr(litellm, "model_alias_map", None) or getattr(litellm, "input_callback", None):
        return False
    provider = inner.keywords.get("custom_llm_provider") or str(inner.keywords.get("model") or "").partition("/")[0]
    return provider in INLINE_REQUEST_PROVIDERS


class _LoopExecutor(ThreadPoolExecutor):
    """The default executor of the judge's event loop (:class:`_LoopThread`).

    ``litellm.acompletion`` runs its synchronous ``completion`` in the loop's default executor and
    awaits it: for an async call that only builds the request (CPU, no I/O for the providers of
    :data:`INLINE_REQUEST_PROVIDERS` under the conditions of :func:`builds_litellm_request`), yet each call then crosses to a pool thread and back, and both
    crossings wait for the interpreter while the loop's thread answers other requests. Those calls
    (:func:`builds_litellm_request`) run here at once, in the loop's thread; everything else handed
    to the default executor (aiohttp's DNS lookups, other providers' set-up) runs in the pool's
    threads as in the standard executor. On 1,000 calls at 200 ms and 16 in flight (issue 20, 10
    alternating runs each): from the first request to the end 14.37 s against 14.77 s, the whole run
    18.41 s against 18.84 s (medians).
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run ``fn(*args, **kwargs)``: at once when :func:`builds_litellm_request`, else in a thread."""
        if args or kwargs or not builds_litellm_request(fn):
            return super().submit(fn, *args, **kwargs)
        done: Future[Any] = Future()
        try:
            result = fn()
        except BaseException as exc:  # as a pool thread would: the awaiting call gets it
            done.set_exception(exc)
        else:
            done.set_result(result)
        return done


class _LoopThread:
    """One event loop in a daemon thread for every model call of the process.

    litellm keeps its async HTTP clients per process; running all batches (also those of parallel
    Prefect task threads) on one loop keeps those clients on the loop they were made on. Its default
    executor is a :class:`_LoopExecutor`. The loop is registered with :mod:`stef.llm.request_stop`,
    which cancels its tasks when the run is interrupted.
    """

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def submit(cls, coro: Coroutine[Any, Any, _T]) -> Future[_T]:
        """Schedule ``coro`` on the process's judge loop (started on first use); returns at once.

        While the model requests are stopped (:func:`stef.llm.request_stop.stopped`: an
        interrupted run) the coroutine is not run: the future returned is cancelled.
        """
        import asyncio  # not at module level: `stef evaluate` with the symbolic judge imports this module too

        with cls._lock:
            if request_stop.stopped():
                coro.close()
                given_up: Future[_T] = Future()
                given_up.cancel()
                return given_up
            if cls._loop is None or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                loop.set_default_executor(_LoopExecutor(thread_name_prefix="stef-llm-judge-executor"))
                threading.Thread(target=loop.run_forever, name="stef-llm-judge", daemon=True).start()
                cls._loop = loop
                request_stop.register_loop(loop)
            loop = cls._loop
        return asyncio.run_coroutine_threadsafe(cls._unless_stopped(coro), loop)

    @staticmethod
    async def _unless_stopped(coro: Coroutine[Any, Any, _T]) -> _T:
        """``await coro``, unless the requests were stopped between :meth:`submit` and now (a stop
        whose cancellation of the loop's tasks ran before this task was made)."""
        import asyncio

        if request_stop.stopped():
            coro.close()
            raise asyncio.CancelledError
        return await coro

    @classmethod
    def run(cls, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the process's judge loop and wait for its result."""
        return cls.submit(coro).result()


class ModelRequestsAbandoned(StefError):
    """The batch's model requests were given up: its run is being interrupted
    (:mod:`stef.llm.request_stop`). The batch has no evaluations; nothing of it is stored."""


class _Stop(Exception):
    """A record's model calls end here; ``reason`` is its fallback reason, ``kind`` its class."""

    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


@dataclass(slots=True)
class _Tally:
    """What one record's requests cost; a single unknown figure makes the sum unknown."""

    requests: int = 0
    cost_usd: float | None = None
    tokens: int | None = None
    spent_usd: float = 0.0
    priced: bool = True
    counted: bool = True
    flags: list[str] = field(default_factory=list)

    def add(self, usage: UsageReading) -> None:
        if usage.cost_usd is None:
            self.priced = False
        else:
            self.cost_usd = (self.cost_usd or 0.0) + usage.cost_usd
        if usage.tokens is None:
            self.counted = False
        else:
            self.tokens = (self.tokens or 0) + usage.tokens
        if usage.charge_usd is not None:
            self.spent_usd += usage.charge_usd
        if usage.flag is not None and usage.flag not in self.flags:
            self.flags.append(usage.flag)

    @property
    def cost(self) -> float | None:
        return self.cost_usd if self.priced else None

    @property
    def token_count(self) -> int | None:
        return self.tokens if self.counted else None


def _describe(exc: BaseException) -> str:
    name = type(exc).__name__
    head = _kind(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    for prefix in (f"litellm.{name}: ", f"{name}: "):  # litellm repeats the class name in its messages
        while text.startswith(prefix):
            text = text[len(prefix) :]
    return f"{head}: {text[:200]}" if text else head


def holds_verdict(response: Mapping[str, Any]) -> bool:
    """Whether a cached ``response`` (:attr:`stef.llm.models.CachedVerdict.response`, without its
    flags) is a valid :class:`stef.llm.verdict.LLMVerdict`, as the judge reads it from the cache: a
    row for which this is ``False`` is asked again and replaced (:meth:`stef.llm.models.JudgeCache.put_many`).

    >>> holds_verdict({"verdict": "WRONG", "confidence": 0.9, "rationale": "x", "suspected_errors": []})
    False
    >>> holds_verdict({"verdict": "CORRECT", "confidence": 0.9, "rationale": "x", "suspected_errors": []})
    True
    >>> holds_verdict({"verdict": "CORRECT", "confidence": 0.1, "rationale": "x", "suspected_errors": []})  # self-contradictory
    False
    """
    try:
        verdict = LLMVerdict.model_validate_json(json.dumps(response, allow_nan=False))
    except (ValidationError, ValueError, TypeError, RecursionError):
        return False
    return contradiction(verdict) is None


def _unreadable(exc: BaseException) -> str | None:
    """What litellm could not read in a response, when ``exc`` was raised from litellm's own
    "Invalid response object" error (a plain ``Exception`` raised while it converts an answer),
    else ``None``. A server's error text that merely quotes those words is an HTTP error, not this.

    >>> _unreadable(ValueError("Invalid response object"))
    >>> _unreadable(Exception("Invalid response object Traceback ..."))
    'invalid response object'
    >>> _unreadable(Exception("Invalid response object ...\\nValidationError: 1 validation error for Usage\\n"
    ...     "prompt_tokens\\n  Input should be a valid integer [input_value=1.5]\\n    For further information ..."))
    '1 validation error for Usage: prompt_tokens: Input should be a valid integer [input_value=1.5]'
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        text = str(current)
        if type(current) is Exception and text.startswith(_INVALID_RESPONSE):
            lines = text.splitlines()
            for index, line in enumerate(lines):
                found = _VALIDATION_LINE.search(line)
                if found is not None:
                    detail = [found.group(0)] + [part.strip() for part in lines[index + 1 : index + 3] if part.strip()]
                    return ": ".join(detail)[:240]
            return "invalid response object"
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _quiet_usage_serializer_warnings() -> None:
    """Ignore pydantic's serializer warning on fractional token counts (:data:`_USAGE_SERIALIZER_WARNING`):
    the record's fallback reason says what happened. Added once; only that warning is ignored."""
    if not any(getattr(entry[1], "pattern", None) == _USAGE_SERIALIZER_WARNING for entry in list(warnings.filters)):
        warnings.filterwarnings("ignore", message=_USAGE_SERIALIZER_WARNING, category=UserWarning)


def _kind(exc: BaseException) -> str:
    """The class of an error for run summaries: its type and HTTP status (``Timeout``,
    ``RateLimitError (HTTP 429)``); a connection failure that litellm reports with a status
    is named as such (``APIConnectionError (reported as InternalServerError (HTTP 500))``)."""
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__ + (f" (HTTP {status})" if isinstance(status, int) else "")
    cause = _unreachable(exc) if isinstance(status, int) else None
    return f"{type(cause).__name__} (reported as {kind})" if cause is not None and cause is not exc else kind


@dataclass
class LLMJudge:
    """A :class:`stef.pipeline.judge.models.Judge` that asks a language model through litellm (STEF paper §2.D).

    Use :meth:`judge_many` for batches (concurrency, cache, budget, fallback reasons); the
    :meth:`judge` method of the ``Judge`` protocol judges one record without a cache.

    Attributes:
        model: any litellm model string (``openai/gpt-4o-mini``, ``anthropic/…``, ``ollama/…``).
        api_base: base URL of an OpenAI-compatible endpoint (``None``: the provider's default).
        concurrency: requests in flight across every batch given to this judge (the size of
            ``slots`` when it is made here).
        timeout_s: seconds per request.
        max_retries: retries after the first attempt on 429 / 5xx / connection errors / timeouts.
        backoff_s: first backoff wait (doubles per retry, plus jitter, at most :data:`MAX_BACKOFF_S`).
        fallback: the judge used when the model cannot give a verdict.
        completion: the async completion function (default ``litellm.acompletion``).
        extra_params: more keyword arguments for every call (e.g. ``mock_response`` in tests).
        breaker: the run's :class:`CircuitBreaker` (default: a new one with
            :data:`stef.llm.breaker.DEFAULT_BREAKER_FAILURES`); give the same breaker to every judge of a run.
        slots: the run's request pool (default: a new one of ``concurrency`` slots); give the same
            pool to every judge of a run (:func:`stef.llm.pool.shared_slots`).
    """

    model: str
    api_base: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_RETRIES
    backoff_s: float = DEFAULT_BACKOFF_S
    fallback: Judge = field(default_factory=SymbolicJudge)
    completion: Completion | None = None
    extra_params: Mapping[str, Any] = field(default_factory=dict)
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)
    slots: RequestSlots | None = None
    name: str = field(init=False)
    """The model string (stored as ``Evaluation.judge``)."""
    _asking: dict[str, Future[tuple[JudgeOutcome, LLMVerdict | None]]] = field(
        init=False, default_factory=dict, repr=False, compare=False
    )
    """Cache keys asked by a started batch whose verdicts are not in the cache yet: a later batch
    with the same inputs takes that answer (as it would have from the cache) instead of asking again."""
    _asking_lock: threading.Lock = field(init=False, default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.name = self.model
        if self.slots is None:
            self.slots = RequestSlots(self.concurrency)

    @property
    def pool(self) -> RequestSlots:
        """The request pool of this judge's run (``slots``)."""
        assert self.slots is not None  # set in __post_init__
        return self.slots

    @classmethod
    def from_settings(cls, settings: JudgeSettings, **overrides: Any) -> LLMJudge:
        """The judge for ``settings`` (which must name a model); with ``settings.run_key`` its
        breaker is the run's :func:`shared_breaker` and its request pool the run's
        :func:`stef.llm.pool.shared_slots`, else new ones.

        Raises:
            JudgeConfigError: ``settings`` is the symbolic judge.
        """
        if settings.model is None:
            raise JudgeConfigError("the symbolic judge calls no model; give --judge MODEL or hybrid:MODEL")
        breaker = (
            shared_breaker(settings.run_key, settings.breaker_failures)
            if settings.run_key is not None
            else CircuitBreaker(settings.breaker_failures)
        )
        params: dict[str, Any] = {
            "model": settings.model,
            "api_base": settings.api_base,
            "concurrency": settings.concurrency,
            "timeout_s": settings.timeout_s,
            "max_retries": settings.max_retries,
            "backoff_s": settings.backoff_s,
            "breaker": breaker,
            "slots": shared_slots(settings.run_key, settings.concurrency) if settings.run_key is not None else None,
        }
        return cls(**{**params, **overrides})

    def warm_up(self) -> None:
        """Import litellm and run its first-call set-up for this model now, in the calling thread
        (once per process and model; a no-op with a ``completion`` of the caller's).

        litellm's first call of a process imports more of litellm and fills its provider tables
        (≈ 0.2 s on one free core, seconds once the event loop shares the interpreter with the
        symbolic stages of the next batch). One call answered by litellm itself
        (``mock_response``: nothing is sent, nothing is charged; ``no-log``: no logging callback
        of the user's records it) does it before the request pool starts. A warm-up that fails is logged and changes nothing: the real
        requests report their own errors.
        """
        litellm = import_litellm()
        if self.completion is not None:
            return
        with _warm_lock:
            if self.model in _warmed:
                return
            _warmed.add(self.model)
            try:
                litellm.completion(
                    model=self.model,
                    messages=[{"role": "user", "content": "warm-up"}],
                    mock_response="{}",
                    drop_params=True,
                    **{"no-log": True},  # litellm's own switch: the user's logging callbacks never see it
                )
            except Exception as exc:  # any failure of the warm-up is harmless
                logger.debug("litellm warm-up for %s failed: %s", self.model, exc)

    def judge(self, judge_input: JudgeInput) -> JudgeResult:
        """Judge one record (the :class:`stef.pipeline.judge.models.Judge` protocol); no cache, no budget.

        When the model cannot answer, the fallback verdict is returned with the reason at the
        start of its rationale.
        """
        outcome = self.judge_many([judge_input])[0]
        if outcome.fallback_reason is None:
            return outcome.result
        rationale = f"[LLM judge fell back: {outcome.fallback_reason}] {outcome.result.rationale}"
        return outcome.result.model_copy(update={"rationale": rationale[:MAX_RATIONALE_CHARS]})

    def _fallback(
        self,
        judge_input: JudgeInput,
        reason: str,
        kind: str,
        tally: _Tally | None = None,
        latency_ms: float = 0.0,
        known: JudgeResult | None = None,
    ) -> JudgeOutcome:
        """The symbolic verdict with ``reason`` (prefixed with the model) and what the requests cost;
        ``known``: that verdict when the caller has it already (the fallback judge is then not run again)."""
        result = known if known is not None else self.fallback.judge(judge_input)
        if tally is None or not tally.requests:
            return JudgeOutcome(result, f"{self.model}: {reason}", latency_ms=latency_ms, fallback_kind=kind)
        return JudgeOutcome(
            result,
            f"{self.model}: {reason}",
            tally.cost,
            tally.token_count,
            tally.requests,
            tally.spent_usd,
            latency_ms=latency_ms,
            fallback_kind=kind,
            flags=tuple(tally.flags),
        )

    def _from_cache(self, entry: CachedVerdict) -> JudgeOutcome | None:
        """The outcome of a cached verdict, or ``None`` when the row does not validate (then it is asked again)."""
        try:
            verdict = LLMVerdict.model_validate_json(json.dumps(entry.response, allow_nan=False))
        except (ValidationError, ValueError, TypeError) as exc:
            logger.warning(
                "judge cache row %s… does not hold a valid verdict (%s); asking the model again",
                entry.key[:12],
                str(exc).splitlines()[0][:120],
            )
            return None
        problem = contradiction(verdict)
        if problem is not None:  # cached before such answers were rejected: asked again and replaced
            logger.warning("judge cache row %s… holds a %s; asking the model again", entry.key[:12], problem)
            return None
        cost = entry.cost_usd if entry.cost_usd is not None and check_cost(entry.cost_usd) is None else None
        tokens = entry.tokens if entry.tokens is not None and check_count("tokens", entry.tokens) is None else None
        return JudgeOutcome(
            verdict.capped().to_result(self.model), None, cost, tokens, cache_hit=True, flags=entry.flags
        )

    def judge_many(
        self,
        inputs: Sequence[JudgeInput],
        cache: JudgeCache | None = None,
        budget: CostBudget | None = None,
        fallbacks: Sequence[JudgeResult] | None = None,
    ) -> list[JudgeOutcome]:
        """Judge a batch: cache lookup, concurrent model calls for the misses, cache write
        (:meth:`start_many`, then :meth:`PendingJudgements.outcomes`).

        Identical inputs in the batch are asked once. Only valid model answers are cached, so a
        record that fell back is asked again on the next run. A cache that cannot be read or
        written (a locked warehouse ...) is logged as a warning and skipped: it never costs a
        record; nor does a cached row that does not validate (it is asked again).

        Args:
            inputs: the records' evidence.
            cache: verdict cache (``None``: none).
            budget: the run's cost budget (``None``: no limit).
            fallbacks: the fallback judge's verdict of each input, when the caller has them
                (same length as ``inputs``): a record that falls back gets it without running
                the fallback judge again (``None``: it is run for each such record).

        Returns:
            One :class:`JudgeOutcome` per input, same order; never raises for a model failure.

        Raises:
            ValueError: ``fallbacks`` is not as long as ``inputs``.
        """
        return self.start_many(inputs, cache, budget, fallbacks).outcomes()

    def start_many(
        self,
        inputs: Sequence[JudgeInput],
        cache: JudgeCache | None = None,
        budget: CostBudget | None = None,
        fallbacks: Sequence[JudgeResult] | None = None,
    ) -> PendingJudgements:
        """Start judging a batch and return at once: prompts rendered, the cache read, and a
        request queued on the run's pool (:attr:`slots`) for every miss, in this order.

        Batches started one after the other share the pool: a later batch's requests take the
        slots an earlier one frees, so the pool stays full across batch boundaries. With a cache,
        an input that a started batch is still asking about is not asked again: it gets that
        answer as a cache hit (what it would have read from the cache once that batch wrote it).

        Args: as :meth:`judge_many`.

        Returns:
            The :class:`PendingJudgements` of the batch; its :meth:`PendingJudgements.outcomes`
            waits for the answers and writes the cache (call it in the thread that uses the cache).

        Raises:
            ValueError: ``fallbacks`` is not as long as ``inputs``.
        """
        pending = PendingJudgements(self, cache, budget or CostBudget())
        pending.add(inputs, fallbacks)
        return pending

    def _ask(
        self, judge_input: JudgeInput, messages: list[dict[str, str]], budget: CostBudget, known: JudgeResult | None
    ) -> Future[tuple[JudgeOutcome, LLMVerdict | None]]:
        """Queue one record's requests on the judge loop (they wait for a slot of :attr:`slots`)."""
        return _LoopThread.submit(self._ask_one(judge_input, messages, budget, known))

    def _answered(self, key: str, asked: Future[tuple[JudgeOutcome, LLMVerdict | None]]) -> None:
        """The batch that asked ``key`` has written its cache: later batches read it from there."""
        with self._asking_lock:
            if self._asking.get(key) is asked:
                del self._asking[key]

    async def _ask_one(
        self,
        judge_input: JudgeInput,
        messages: list[dict[str, str]],
        budget: CostBudget,
        known: JudgeResult | None = None,
    ) -> tuple[JudgeOutcome, LLMVerdict | None]:
        started = time.perf_counter()
        tally = _Tally()
        verdict: LLMVerdict | None = None
        reason, kind = "", ""
        try:
            response = await self._request(messages, budget, tally, first=True)
            answer = _content(response)
            try:
                verdict = parse_verdict(answer)
            except MalformedOutputError as problem:
                _note_contradiction(problem, tally, "the first answer")
                repair = repair_messages(messages, answer, str(problem))
                response = await self._request(repair, budget, tally, first=False)
                try:
                    verdict = parse_verdict(_content(response))
                except MalformedOutputError as again:
                    _note_contradiction(again, tally, "the repaired answer")
                    reason, kind = f"malformed model output after one repair request: {again}", "malformed model output"
        except _Stop as stop:
            reason, kind = stop.reason, stop.kind
        except Exception as exc:
            reason, kind = f"unexpected error: {_describe(exc)}", "unexpected error"
        latency = round((time.perf_counter() - started) * 1000, 3)
        if verdict is not None:
            outcome = JudgeOutcome(
                verdict.to_result(self.model),
                None,
                tally.cost,
                tally.token_count,
                tally.requests,
                tally.spent_usd,
                latency_ms=latency,
                flags=tuple(tally.flags),
            )
            return outcome, verdict
        return self._fallback(judge_input, reason, kind, tally, latency, known), None

    async def _request(
        self,
        messages: list[dict[str, str]],
        budget: CostBudget,
        tally: _Tally,
        *,
        first: bool,
    ) -> Any:
        """One completion with retries; raises :class:`_Stop` with the reason when it gives up.

        Every attempt waits for a slot of the run's pool (:attr:`slots`). Before every attempt
        the run's breaker is checked, then the budget holds the request's reserve
        (:func:`stef.llm.usage.reserve_cost`; :meth:`CostBudget.reserve`): an attempt whose reserve
        does not fit is not made. The attempt then settles with its charge (0 when it failed).
        Every timeout or connection failure counts on the breaker, any answer from the server resets it.
        """
        import asyncio

        from tenacity import (
            AsyncRetrying,
            RetryError,
            retry_if_exception,
            stop_after_attempt,
            wait_exponential_jitter,
        )

        litellm = import_litellm()
        _quiet_usage_serializer_warnings()
        completion = self.completion or litellm.acompletion
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": ANSWER_RESERVE_TOKENS,  # what the budget holds for the answer: a cap the server enforces
            "response_format": response_format(),
            "timeout": self.timeout_s,
            "max_retries": 0,  # retries are ours (below), not the provider SDK's
            "drop_params": True,  # a provider without response_format still gets the schema in the prompt
            **({"api_base": self.api_base} if self.api_base else {}),
            **self.extra_params,
        }
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=wait_exponential_jitter(initial=self.backoff_s, max=MAX_BACKOFF_S, jitter=self.backoff_s),
            retry=retry_if_exception(lambda exc: _is_retryable(exc, litellm)),
            reraise=False,
        )
        breaker = self.breaker
        slots = self.pool
        response: Any = None
        reserve = reserve_cost(self.model, messages) if budget.max_usd is not None else None
        if budget.max_usd is not None and budget.max_usd > 0 and reserve is None:
            # no price: the request could not be counted against the cap (preflight refuses such a
            # setting; a caller that skipped it gets no request rather than an unbounded one)
            raise _Stop(unpriced_cap_error(self.model), UNPRICED_UNDER_CAP)
        held = 0.0
        unread_charge: float | None = None
        try:
            async for attempt in retrying:
                with attempt:
                    async with slots:
                        if breaker.is_open:
                            raise _Stop(breaker.kept(tally.requests), breaker.kind or BREAKER_OPEN)
                        admitted = budget.reserve(reserve)
                        while admitted is None and budget.may_fit_later(reserve):
                            # only the reserves of requests in flight keep it out: wait for them to settle
                            await asyncio.sleep(BUDGET_WAIT_S)
                            admitted = budget.reserve(reserve)
                        if admitted is None:
                            raise _Stop(budget.reason(tally.requests), BUDGET_REACHED)
                        held = admitted
                        if tally.requests == 0:
                            breaker.started()
                        tally.requests += 1
                        try:
                            async with asyncio.timeout(self.timeout_s + 1.0):
                                response = await completion(**params)
                        except Exception as exc:
                            # no answer: nothing charged; an answer litellm could not read: its reserve
                            # (without a cap, an estimate of its prompt)
                            unread = _unreadable(exc) is not None
                            if unread:
                                unread_charge = held if held > 0 else estimate_cost(self.model, messages, None)
                            budget.settle(held, unread_charge if unread else None)
                            if _unreachable(exc) is not None:
                                breaker.failed(_describe(exc))
                            else:
                                breaker.answered()
                                if unread:  # an HTTP 200 that litellm could not read
                                    breaker.succeeded()
                            raise
                        except BaseException:  # cancelled: the reserve is released too
                            budget.settle(held, None)
                            raise
                        breaker.answered()
                        breaker.succeeded()
        except RetryError as exhausted:
            last = exhausted.last_attempt.exception()
            if last is not None and _unreachable(last) is None:  # the server answered every attempt with an error
                breaker.exhausted(f"{_describe(last)} after {tally.requests} request(s)")
            raise _Stop(
                f"{_describe(last) if last else 'failed'} after {tally.requests} request(s)",
                _kind(last) if last else "failed",
            ) from None
        except _Stop:
            raise
        except Exception as exc:
            unreadable = _unreadable(exc)
            if unreadable is not None:  # the server answered (and charged); its figures are unknown
                # the budget was charged when the request ended (unread_charge): the tally counts the same
                tally.add(UsageReading(None, None, unread_charge, "the response could not be read by litellm"))
                raise _Stop(
                    f"the model's response could not be read by litellm: {unreadable} after {tally.requests} request(s)",
                    UNREADABLE_RESPONSE,
                ) from None
            if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError, litellm.NotFoundError)):
                breaker.disable(_describe(exc))
            raise _Stop(f"{_describe(exc)} after {tally.requests} request(s)", _kind(exc)) from None
        usage = read_usage(response, self.model, messages, _content(response))
        tally.add(usage)
        budget.settle(held, usage.charge_usd)
        return response


class PendingJudgements:
    """A batch whose requests are queued or in flight (:meth:`LLMJudge.start_many`'s result).

    :meth:`outcomes` waits for the answers, writes the new verdicts to the cache and returns
    one :class:`JudgeOutcome` per input, in order; :meth:`cancel` gives up the requests not yet made.
    """

    def __init__(self, judge: LLMJudge, cache: JudgeCache | None, budget: CostBudget) -> None:
        self.judge = judge
        self.cache = cache
        self.budget = budget
        self.inputs: list[JudgeInput] = []
        self.keys: list[str] = []
        """The cache key of each input (``""``: its prompt could not be rendered)."""
        self.first: dict[str, int] = {}
        """The first input with each key."""
        self.unrendered: dict[int, str] = {}
        self.cached: dict[str, JudgeOutcome] = {}
        self.fallbacks: list[JudgeResult | None] = []
        self.asked: dict[str, Future[tuple[JudgeOutcome, LLMVerdict | None]]] = {}
        """Keys this batch asked the model about (the first record with each key)."""
        self.followed: dict[str, Future[tuple[JudgeOutcome, LLMVerdict | None]]] = {}
        """Keys an earlier batch was still asking about when this one started."""
        self._outcomes: list[JudgeOutcome] | None = None

    def add(self, inputs: Sequence[JudgeInput], fallbacks: Sequence[JudgeResult] | None = None) -> None:
        """Add inputs to the batch: render their prompts, read the cache for their new keys and queue
        a request for every miss at once (so a long batch can be added in parts whose requests
        start while the next part is prepared). Identical inputs of the batch are asked once.

        Args:
            inputs: the records' evidence.
            fallbacks: their fallback verdicts when the caller has them (as :meth:`LLMJudge.judge_many`).

        Raises:
            ValueError: ``fallbacks`` is not as long as ``inputs``, or the batch was collected already.
        """
        if fallbacks is not None and len(fallbacks) != len(inputs):
            raise ValueError(f"{len(fallbacks)} fallback verdicts for {len(inputs)} inputs")
        if self._outcomes is not None:
            raise ValueError("inputs added to a batch whose outcomes were collected")
        judge, cache = self.judge, self.cache
        offset = len(self.inputs)
        self.inputs.extend(inputs)
        self.fallbacks.extend(fallbacks if fallbacks is not None else [None] * len(inputs))
        messages: dict[int, list[dict[str, str]]] = {}
        new: dict[str, int] = {}
        for index, item in enumerate(inputs, start=offset):
            try:
                messages[index] = render_messages(item)
            except (ValueError, TypeError, RecursionError) as exc:  # one record's odd evidence never stops the batch
                self.unrendered[index] = f"the prompt could not be rendered ({type(exc).__name__}: {str(exc)[:120]})"
                self.keys.append("")
                continue
            key = cache_key(judge.model, messages[index], api_base=judge.api_base)
            self.keys.append(key)
            if key not in self.first:
                self.first[key] = new[key] = index
        if cache is not None and new:
            try:
                rows = cache.get_many(list(new))
            except StefError as exc:  # a cache that cannot be read costs money, not records
                logger.warning("judge cache not read, asking the model for every record: %s", one_line(exc))
                rows = {}
            for key, entry in rows.items():
                outcome = judge._from_cache(entry)
                if outcome is not None:
                    self.cached[key] = outcome
        todo = [index for key, index in new.items() if key not in self.cached]
        if todo:
            judge.warm_up()  # in this thread, before the pool starts: seconds that must not stall the loop
        for index in todo:
            key = self.keys[index]
            if cache is not None:
                with judge._asking_lock:
                    earlier = judge._asking.get(key)
                if earlier is not None:
                    self.followed[key] = earlier
                    continue
            asked = judge._ask(self.inputs[index], messages[index], self.budget, self.fallback(index))
            self.asked[key] = asked
            if cache is not None:
                with judge._asking_lock:
                    judge._asking[key] = asked

    def fallback(self, index: int) -> JudgeResult | None:
        """The caller's fallback verdict of input ``index`` (``None``: not given)."""
        return self.fallbacks[index]

    def cancel(self) -> None:
        """Give up this batch: its requests not yet started are not made (those in flight end on their own)."""
        for key, asked in self.asked.items():
            asked.cancel()
            self.judge._answered(key, asked)

    def outcomes(self) -> list[JudgeOutcome]:
        """Wait for the batch's answers, cache the valid new verdicts, and return one
        :class:`JudgeOutcome` per input, same order (computed once; later calls return the same list).

        Never raises for a model failure (those records get the fallback verdict and the reason);
        a cache that cannot be written is logged as a warning.
        """
        if self._outcomes is None:
            self._outcomes = self._collect()
        return self._outcomes

    def _collect(self) -> list[JudgeOutcome]:
        judge, keys, inputs = self.judge, self.keys, self.inputs
        fresh: dict[str, JudgeOutcome] = {}
        new_entries: list[CachedVerdict] = []
        again: dict[str, Future[tuple[JudgeOutcome, LLMVerdict | None]]] = {}
        for key, earlier in self.followed.items():
            try:
                outcome, verdict = earlier.result()
            except CancelledError:  # the earlier batch was given up
                verdict = None
            entry = _entry(judge.model, key, outcome, verdict) if verdict is not None else None
            hit = judge._from_cache(entry) if entry is not None else None
            if hit is not None:
                fresh[key] = hit
            else:  # the earlier batch's record fell back: asked again, as a cache miss would be
                index = self.first[key]
                messages = render_messages(inputs[index])
                again[key] = judge._ask(inputs[index], messages, self.budget, self.fallback(index))
        for key, asked in (*self.asked.items(), *again.items()):
            try:
                outcome, verdict = asked.result()
            except CancelledError:  # stopped (stef.llm.request_stop): the run is being interrupted
                self.cancel()
                raise ModelRequestsAbandoned(
                    "the model requests of this batch were abandoned: the run is being interrupted"
                ) from None
            fresh[key] = outcome
            if verdict is not None:
                new_entries.append(_entry(judge.model, key, outcome, verdict))
        if self.cache is not None and new_entries:
            try:
                self.cache.put_many(new_entries, valid=holds_verdict)  # a damaged row is replaced
            except StefError as exc:  # the verdicts are kept; only the next run pays for them again
                logger.warning("judge cache not written (%d verdicts): %s", len(new_entries), one_line(exc))
        for key, asked in self.asked.items():
            judge._answered(key, asked)
        outcomes: list[JudgeOutcome] = []
        for index, key in enumerate(keys):
            if index in self.unrendered:
                outcomes.append(
                    judge._fallback(
                        inputs[index], self.unrendered[index], "prompt not rendered", known=self.fallback(index)
                    )
                )
            elif key in self.cached:
                outcomes.append(self.cached[key])
            elif self.first[key] == index:
                outcomes.append(fresh[key])
            else:  # the same inputs as an earlier record of this batch: its verdict, asked once
                outcome = fresh[key]
                if outcome.fallback_reason is None:
                    outcomes.append(
                        JudgeOutcome(
                            outcome.result, None, outcome.cost_usd, outcome.tokens, cache_hit=True, flags=outcome.flags
                        )
                    )
                else:
                    outcomes.append(
                        JudgeOutcome(outcome.result, outcome.fallback_reason, fallback_kind=outcome.fallback_kind)
                    )
        return outcomes


def _entry(model: str, key: str, outcome: JudgeOutcome, verdict: LLMVerdict) -> CachedVerdict:
    """The cache row of a valid model answer."""
    return CachedVerdict(
        key, model, PROMPT_VERSION, verdict.model_dump(mode="json"), outcome.cost_usd, outcome.tokens, outcome.flags
    )


def _note_contradiction(problem: MalformedOutputError, tally: _Tally, which: str) -> None:
    """Add the :data:`stef.llm.verdict.CONTRADICTION_FLAG` flag to the record's ``tally`` when
    ``problem`` is a self-contradictory answer: the record says so (with the verdict and the raw γ)
    whether the repair request then gives a consistent verdict or the record falls back."""
    if isinstance(problem, SelfContradictoryVerdictError):
        flag = (
            f"{CONTRADICTION_FLAG}: {which} was verdict {problem.verdict.verdict.value} with confidence "
            f"{float(problem.verdict.confidence):g}; not used as given"
        )
        if flag not in tally.flags:
            tally.flags.append(flag)


def _content(response: Any) -> str | None:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None


def _unreachable(exc: BaseException) -> BaseException | None:
    """The timeout or connection error behind ``exc`` (``exc`` itself or one it was raised
    from), or ``None`` when a server answered. litellm reports a refused connection as
    ``InternalServerError`` (HTTP 500) raised from ``openai.APIConnectionError``."""
    import httpx
    import openai

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, TimeoutError | ConnectionError | openai.APIConnectionError | httpx.TransportError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _is_retryable(exc: BaseException, litellm: ModuleType) -> bool:
    """429, 408, 5xx, connection errors and timeouts are worth another attempt; not a response that
    litellm could not read (:data:`UNREADABLE_RESPONSE`), which it reports as HTTP 500."""
    if isinstance(exc, _Stop) or _unreadable(exc) is not None:
        return False
    if isinstance(
        exc,
        TimeoutError
        | litellm.Timeout
        | litellm.RateLimitError
        | litellm.APIConnectionError
        | litellm.InternalServerError
        | litellm.ServiceUnavailableError
        | litellm.BadGatewayError,
    ):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 429) or status >= 500)
