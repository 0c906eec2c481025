"""Data types and errors of the LLM judge: the errors it raises, a cached verdict and the cache
protocol (implemented by the warehouse: :mod:`warehouse.judge_cache`), and the outcome of one record.

Kept free of litellm, prompts and settings so that :mod:`warehouse` can import them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from stef.errors import StefError
from stef.models import JudgeResult


class JudgeConfigError(StefError):
    """A judge setting that cannot work (``--judge``, ``--concurrency``, ``--max-cost-usd`` ...);
    the message names the setting and the fix."""


class MalformedOutputError(StefError):
    """The model's answer is not a JSON object that validates against :class:`stef.llm.verdict.LLMVerdict`."""


@dataclass(frozen=True, slots=True)
class CachedVerdict:
    """One cached model answer (a row of ``judge_cache``).

    Attributes:
        key: :func:`stef.llm.prompt.cache_key`.
        model: the model string.
        prompt_version: :data:`stef.llm.prompt.PROMPT_VERSION` when it was made.
        response: the validated :class:`stef.llm.verdict.LLMVerdict` as a JSON-ready dict.
        cost_usd: what the call(s) behind it cost (``None``: litellm has no price for the model,
            or the reported usage was not trusted).
        tokens: tokens used by the call(s) behind it (``None``: unknown).
        flags: evaluation flags of the answer (an untrusted usage, :data:`stef.llm.usage.USAGE_FLAG`).
    """

    key: str
    model: str
    prompt_version: str
    response: dict[str, Any]
    cost_usd: float | None
    tokens: int | None
    flags: tuple[str, ...] = ()


VerdictCheck = Callable[[Mapping[str, Any]], bool]
"""Whether a cached ``response`` (without its flags) holds a valid verdict (the judge's check,
:func:`stef.llm.judge.holds_verdict`): given to :meth:`JudgeCache.put_many` so that a damaged row
is replaced, and only such a row."""


class JudgeCache(Protocol):
    """Persistent store of verdicts by :func:`stef.llm.prompt.cache_key` (the warehouse: :mod:`warehouse.judge_cache`)."""

    def get_many(self, keys: Sequence[str]) -> dict[str, CachedVerdict]:
        """The cached verdicts among ``keys`` (missing keys are absent)."""
        ...

    def put_many(self, entries: Sequence[CachedVerdict], valid: VerdictCheck | None = None) -> int:
        """Store verdicts; return how many rows were written (new keys and replaced rows).

        A new key is added. A key already stored is kept, unless ``valid`` is given and says the
        stored row does not hold a valid verdict (a damaged row): then it is replaced. The check
        and the write are one atomic step of the store, so a valid verdict that is stored (also by
        a concurrent writer between this run's read and its write) is never overwritten.
        """
        ...


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    """The verdict of one record and what it took.

    Attributes:
        result: the verdict (the symbolic one when the model could not give it).
        fallback_reason: why the symbolic judge was used (``None``: the model answered).
        cost_usd: cost of the model call(s) behind the verdict; for a cache hit, the cost
            recorded when it was made, so a rerun stores the same figures; ``None`` when litellm
            has no price for the model or no model answer was received.
        tokens: tokens of those calls (``None`` when no model answer was received).
        requests: HTTP requests made now for this record (0 for a cache hit).
        spent_usd: money actually spent now (0 for a cache hit).
        cache_hit: the verdict came from the cache (or from an identical record of the batch).
        latency_ms: wall time spent on this record's requests, backoff included.
        fallback_kind: the class of ``fallback_reason`` for run summaries (``cost budget
            reached``, ``circuit breaker open``, ``Timeout``, ``InternalServerError (HTTP 500)`` ...).
        flags: evaluation flags (an untrusted usage: :data:`stef.llm.usage.USAGE_FLAG`).
    """

    result: JudgeResult
    fallback_reason: str | None = None
    cost_usd: float | None = None
    tokens: int | None = None
    requests: int = 0
    spent_usd: float = 0.0
    cache_hit: bool = False
    latency_ms: float = 0.0
    fallback_kind: str | None = None
    flags: tuple[str, ...] = ()
