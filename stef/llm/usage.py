"""What one model response cost, without trusting the numbers the server reports.

A response's ``usage`` (token counts) and litellm's ``response_cost`` come from the endpoint;
a broken or hostile one may report negative, huge, fractional, boolean or non-numeric counts
and a negative or NaN cost. :func:`read_usage` accepts only whole counts in
``[0, MAX_TOKENS_PER_REQUEST]`` (and a finite, non-negative cost); anything else makes the
response's cost and tokens unknown, with a flag saying what was reported. The run's budget is
then charged an estimate from the prompt and answer texts (litellm's tokenizer and price
table), so a server that under-reports never gets more requests than the budget allows.

litellm is imported lazily (:func:`stef.llm.litellm_loader.import_litellm` sets the local cost map first).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stef.llm.litellm_loader import import_litellm

logger = logging.getLogger("stef.llm_judge")  # the LLM judge's logger (stef.llm.judge)

MAX_TOKENS_PER_REQUEST = 10_000_000
"""Most tokens one judge request can plausibly use (prompt, answer or total); more is a flag."""
USAGE_FLAG = "judge_usage_untrusted"
"""Prefix of the evaluation flag set when a response's usage or cost was not trusted."""
_TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")
_SHOWN_CHARS = 40


@dataclass(frozen=True, slots=True)
class UsageReading:
    """The figures of one response.

    Attributes:
        tokens: total tokens (``None``: unknown, not reported or not trusted).
        cost_usd: the response's cost (``None``: litellm has no price for the model, or the
            reported figures were not trusted).
        charge_usd: what the run's budget is charged: ``cost_usd`` when trusted, else an
            estimate from the texts (``None``: no price to estimate with); never negative.
        problem: why the usage was not trusted (``None``: it was).
    """

    tokens: int | None
    cost_usd: float | None
    charge_usd: float | None
    problem: str | None = None

    @property
    def flag(self) -> str | None:
        """The evaluation flag for :attr:`problem` (``None`` when trusted)."""
        return None if self.problem is None else f"{USAGE_FLAG}: {self.problem}; cost and tokens recorded as unknown"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def _field(usage: Any, name: str) -> Any:
    return usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)


def check_count(name: str, value: Any) -> str | None:
    """Why ``value`` is not a plausible token count for one request (``None``: it is).

    >>> check_count("prompt_tokens", 12), check_count("prompt_tokens", -3), check_count("total_tokens", True)
    (None, 'prompt_tokens=-3 is negative', 'total_tokens=True is not a whole number')
    >>> check_count("prompt_tokens", 10**15)
    'prompt_tokens=1000000000000000 is over the cap of 10,000,000 per request'
    """
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{name}={_shown(value)} is not a whole number"
    if value < 0:
        return f"{name}={value} is negative"
    if value > MAX_TOKENS_PER_REQUEST:
        return f"{name}={value} is over the cap of {MAX_TOKENS_PER_REQUEST:,} per request"
    return None


def check_cost(value: Any, name: str = "response_cost") -> str | None:
    """Why ``value`` is not a plausible cost in USD (``None``: it is).

    >>> check_cost(0.002), check_cost(-1.0), check_cost(float("nan")), check_cost("0.1")
    (None, 'response_cost=-1.0 is negative', 'response_cost=nan is not finite', "response_cost='0.1' is not a number")
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{name}={_shown(value)} is not a number"
    if not math.isfinite(value):
        return f"{name}={_shown(value)} is not finite"
    if value < 0:
        return f"{name}={value} is negative"
    return None


def trusted_tokens(usage: Any) -> tuple[int | None, str | None]:
    """``(total tokens, problem)`` of a ``usage`` object or mapping.

    Every count present must pass :func:`check_count`; ``total_tokens`` must be there (or both
    of the others) and may not be smaller than either of the others. No usage at all, or zero
    tokens for a request that certainly had a prompt, is a problem too (a server that reports
    nothing would otherwise be free).

    >>> trusted_tokens({"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30})
    (30, None)
    >>> trusted_tokens({"prompt_tokens": 10, "completion_tokens": -20, "total_tokens": -10})
    (None, 'completion_tokens=-20 is negative')
    >>> trusted_tokens(None)
    (None, 'no usage reported')
    """
    if usage is None:
        return None, "no usage reported"
    counts: dict[str, int] = {}
    for name in _TOKEN_FIELDS:
        value = _field(usage, name)
        if value is None:
            continue
        problem = check_count(name, value)
        if problem is not None:
            return None, problem
        counts[name] = value
    total = counts.get("total_tokens")
    if total is None and "prompt_tokens" in counts and "completion_tokens" in counts:
        total = counts["prompt_tokens"] + counts["completion_tokens"]
    if total is None:
        return None, "no total_tokens reported"
    if total < max(counts.get("prompt_tokens", 0), counts.get("completion_tokens", 0)):
        return (
            None,
            f"total_tokens={total} is below prompt_tokens={counts.get('prompt_tokens')} or completion_tokens={counts.get('completion_tokens')}",
        )
    if total == 0 or counts.get("prompt_tokens") == 0:
        return None, "zero tokens reported for a request with a prompt"
    return total, None


_UNPRICED_WARNED: set[str] = set()
_UNTRUSTED_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def _first_time(seen: set[str], model: str) -> bool:
    with _WARNED_LOCK:
        if model in seen:
            return False
        seen.add(model)
        return True


def warn_unpriced(model: str) -> None:
    """Log once per process and model that litellm has no price for ``model``."""
    if _first_time(_UNPRICED_WARNED, model):
        logger.warning(
            "litellm has no price for model %s: cost_usd stays null for its verdicts (the budget cannot count them)",
            model,
        )


def estimate_cost(model: str, messages: Sequence[Mapping[str, Any]], answer: str | None) -> float | None:
    """What a request should cost by the texts sent and received: litellm's token counter and
    price table (``None`` when litellm has no price for ``model``).

    Never negative; used to charge the budget when the reported usage is not trusted.
    """
    litellm = import_litellm()
    try:
        prompt_tokens = int(litellm.token_counter(model=model, messages=[dict(m) for m in messages]))
        completion_tokens = int(litellm.token_counter(model=model, text=answer or ""))
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:
        return None
    total = float(prompt_cost) + float(completion_cost)
    return total if math.isfinite(total) and total >= 0 else None


ANSWER_RESERVE_TOKENS = 512
"""Answer tokens a request asks for at most (its ``max_tokens``) and its budget reserve allows for
(:func:`reserve_cost`): a verdict is a few hundred characters, well under this. A server that
honours the limit never charges more than the reserve, so the run stays within ``--max-cost-usd``;
a longer answer (a server that ignores it) is charged what it reports."""


def reserve_cost(model: str, messages: Sequence[Mapping[str, Any]]) -> float | None:
    """What the run's budget holds for one request before it is sent, in USD: the price of its
    prompt by litellm's token counter and price table, plus :data:`ANSWER_RESERVE_TOKENS`
    answer tokens (``None`` when litellm has no price for ``model``: the budget cannot count it).

    Never negative. The request then settles with its actual charge (:class:`UsageReading`).
    """
    litellm = import_litellm()
    try:
        prompt_tokens = int(litellm.token_counter(model=model, messages=[dict(m) for m in messages]))
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=ANSWER_RESERVE_TOKENS
        )
    except Exception:
        return None
    total = float(prompt_cost) + float(completion_cost)
    return total if math.isfinite(total) and total >= 0 else None


def read_usage(response: Any, model: str, messages: Sequence[Mapping[str, Any]], answer: str | None) -> UsageReading:
    """The tokens and cost of one completion response, checked (see module docstring).

    Args:
        response: the litellm response (``usage``, ``_hidden_params["response_cost"]``).
        model: the model string (for the price table).
        messages: the messages sent (for the estimate).
        answer: the answer text received (for the estimate).

    Returns:
        A :class:`UsageReading`; a model without a price gets ``cost_usd=None`` without a
        problem (and one warning per process).
    """
    tokens, problem = trusted_tokens(getattr(response, "usage", None))
    cost: float | None = None
    if problem is None:
        hidden = getattr(response, "_hidden_params", None)
        reported = hidden.get("response_cost") if isinstance(hidden, dict) else None
        if reported is None:
            try:
                reported = import_litellm().completion_cost(completion_response=response)
            except Exception:
                warn_unpriced(model)
                return UsageReading(tokens, None, None)
            if reported is None:
                return UsageReading(tokens, None, None)
        problem = check_cost(reported)
        if problem is None:
            cost = float(reported)
            return UsageReading(tokens, cost, cost)
    if _first_time(_UNTRUSTED_WARNED, model):
        logger.warning(
            "model %s reported an implausible usage (%s): such responses get unknown cost and tokens and the flag %s; "
            "the budget is charged an estimate",
            model,
            problem,
            USAGE_FLAG,
        )
    return UsageReading(None, None, estimate_cost(model, messages, answer), problem)
