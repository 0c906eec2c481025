"""How the semantic verdict is given (``--judge`` and its companions): :class:`JudgeSettings`, its
defaults, and :func:`preflight`, the check of a model setting before any work.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache

from stef.llm.breaker import DEFAULT_BREAKER_FAILURES
from stef.llm.litellm_loader import import_litellm
from stef.llm.models import JudgeConfigError
from stef.llm.prompt import PROMPT_VERSION
from stef.models import EVALUATOR_VERSION, OBSERVED_VERSION_SUFFIX, ObservedCatalogBook
from stef.pipeline.judge.deployment import parse_calibrator
from stef.pipeline.judge.symbolic import SymbolicJudge
from stef.pipeline.observed import load_observed_catalogs
from stef.pipeline.schema import SCHEMA_VERSION_SUFFIX
from stef.pipeline.schema_book import SchemaBook

SYMBOLIC = "symbolic"
"""The ``--judge`` value (and ``Evaluation.judge``) of the deterministic judge."""
HYBRID_PREFIX = "hybrid:"
"""``--judge hybrid:MODEL``: symbolic first, the model only for the records the symbolic judge hedged on."""
API_BASE_ENV = "STEF_LLM_API_BASE"
"""Environment variable with the base URL of an OpenAI-compatible endpoint (``--api-base`` wins)."""
DEFAULT_CONCURRENCY = 8
"""Requests in flight for a run, across all its batches (:class:`stef.llm.pool.RequestSlots`)."""
DEFAULT_TIMEOUT_S = 60.0
"""Seconds one request may take before it counts as a timeout (and is retried)."""
DEFAULT_RETRIES = 3
"""Retries after the first attempt on 429 / 5xx / connection errors / timeouts."""
DEFAULT_BACKOFF_S = 1.0
"""First backoff wait; doubles per retry, with up to the same again as jitter."""
MAX_BACKOFF_S = 30.0
"""Longest single backoff wait."""


@dataclass(frozen=True, slots=True)
class JudgeSettings:
    """How the semantic verdict is given: ``--judge`` and its companions.

    Attributes:
        model: the litellm model string, or ``None`` for the symbolic judge.
        hybrid: symbolic first, the model only for the records the symbolic judge hedged on
            (LIKELY_CORRECT or POTENTIALLY_INCORRECT: p_correct in [0.35, 0.65)).
        api_base: base URL of an OpenAI-compatible endpoint (``None``: the provider's default).
        concurrency: requests in flight for the run, across all its batches (one request pool
            per judge; with ``run_key`` one per run: :func:`stef.llm.pool.shared_slots`).
        timeout_s: seconds per request.
        max_retries: retries after the first attempt (429 / 5xx / timeouts).
        backoff_s: first backoff wait in seconds.
        max_cost_usd: the run's budget for model calls in USD (``None``: no limit): a request is
            made only while the run's spend plus the reserves of the requests in flight plus its
            own reserve stays within it (:class:`stef.llm.budget.CostBudget`); the batches of a
            run with ``run_key`` share it in this process (:func:`stef.llm.budget.shared_budget`).
        budget_shares: the batches ``max_cost_usd`` is split evenly over, each with its own
            budget of ``max_cost_usd / budget_shares``, when they run in other processes and
            cannot share one (the nightly flow on the process or Dask task runner); 1: no split.
        breaker_failures: open the run's circuit breaker after this many consecutive timeouts /
            connection failures (0: never); see :class:`stef.llm.breaker.CircuitBreaker`.
        run_key: names the run whose batches share one :class:`stef.llm.breaker.CircuitBreaker` and one
            request pool in this process (:func:`stef.llm.breaker.shared_breaker`,
            :func:`stef.llm.pool.shared_slots`; ``None``: each judge has its own). The nightly flow sets it.
        schema_dir: folder of ``<app_id>.sql`` / ``.json`` schemas (``--schema-dir``): apps with
            one are checked against it (:mod:`stef.pipeline.schema_checks`); part of the evaluator version.
        observed_catalog: an observed catalog file (``--observed-catalog``, :mod:`stef.pipeline.observed`).
        learn_catalog: the nightly flow learns the observed catalogs from the warehouse before
            scoring (``--learn-catalog``). Either one adds ``+observed`` to the evaluator version.
        backfill_max_cost_usd: the user's ``--max-cost-usd`` for the whole backfill these settings
            run one day of (``None``: not a backfill's day); ``max_cost_usd`` is then what was left
            of it when the day started. Budget messages name this cap (:class:`stef.llm.budget.CostBudget`).
        backfill_spent_usd: what the backfill's earlier days spent (USD; 0 outside a backfill).
        calibrators: deployment calibrators fitted on reviewer labels (``stef review calibrate``,
            :mod:`stef.pipeline.judge.deployment`): ``(app_id, artifact JSON)`` pairs, app ``None``
            for every app without its own; they add ``+calib=<digest>`` to the evaluator version.
    """

    model: str | None = None
    hybrid: bool = False
    api_base: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_RETRIES
    backoff_s: float = DEFAULT_BACKOFF_S
    max_cost_usd: float | None = None
    breaker_failures: int = DEFAULT_BREAKER_FAILURES
    run_key: str | None = None
    budget_shares: int = 1
    schema_dir: str | None = None
    observed_catalog: str | None = None
    learn_catalog: bool = False
    calibrators: tuple[tuple[str | None, str], ...] = ()
    backfill_max_cost_usd: float | None = None
    backfill_spent_usd: float = 0.0

    @classmethod
    def parse(
        cls,
        spec: str,
        *,
        api_base: str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_RETRIES,
        backoff_s: float = DEFAULT_BACKOFF_S,
        max_cost_usd: float | None = None,
        breaker_failures: int = DEFAULT_BREAKER_FAILURES,
        run_key: str | None = None,
        schema_dir: str | None = None,
        observed_catalog: str | None = None,
        learn_catalog: bool = False,
        calibrators: tuple[tuple[str | None, str], ...] = (),
    ) -> JudgeSettings:
        """Read ``--judge symbolic | MODEL | hybrid:MODEL`` and check the numbers.

        ``api_base`` defaults to ``$STEF_LLM_API_BASE``.

        Raises:
            JudgeConfigError: an empty model, a concurrency below 1, a negative budget ...

        >>> JudgeSettings.parse("hybrid:openai/gpt-4o-mini", concurrency=4).name
        'hybrid:openai/gpt-4o-mini'
        >>> JudgeSettings.parse("symbolic").is_symbolic
        True
        """
        text = spec.strip()
        if concurrency < 1:
            raise JudgeConfigError(f"--concurrency must be at least 1, got {concurrency}")
        if not timeout_s > 0 or not math.isfinite(timeout_s):
            raise JudgeConfigError(f"--timeout must be positive (seconds), got {timeout_s}")
        if isinstance(breaker_failures, bool) or not isinstance(breaker_failures, int) or breaker_failures < 0:
            raise JudgeConfigError(
                f"--breaker-failures must be a whole number, 0 or more (0: never open), got {breaker_failures!r}"
            )
        if max_retries < 0:
            raise JudgeConfigError(f"retries must be 0 or more, got {max_retries}")
        if max_cost_usd is not None and not max_cost_usd >= 0:
            raise JudgeConfigError(f"--max-cost-usd must be 0 or more, got {max_cost_usd}")
        base = (api_base or os.environ.get(API_BASE_ENV, "")).strip() or None
        common = {
            "api_base": base,
            "concurrency": concurrency,
            "timeout_s": timeout_s,
            "max_retries": max_retries,
            "backoff_s": backoff_s,
            "max_cost_usd": max_cost_usd,
            "breaker_failures": breaker_failures,
            "run_key": run_key,
            "schema_dir": str(schema_dir) if schema_dir else None,
            "observed_catalog": str(observed_catalog) if observed_catalog else None,
            "learn_catalog": bool(learn_catalog),
            "calibrators": tuple(calibrators),
        }
        if text == SYMBOLIC:
            return cls(**common)  # type: ignore[arg-type]
        hybrid = text.startswith(HYBRID_PREFIX)
        model = text[len(HYBRID_PREFIX) :].strip() if hybrid else text
        if not model or model == SYMBOLIC or any(ch.isspace() for ch in model):
            raise JudgeConfigError(
                f"--judge {spec!r}: give 'symbolic', a litellm model string (e.g. openai/gpt-4o-mini, "
                "anthropic/claude-3-5-haiku-20241022, ollama/llama3, hosted_vllm/NAME) or 'hybrid:MODEL'; "
                + ("hybrid: needs a model after the colon" if hybrid else "a model name has no spaces")
            )
        return cls(model=model, hybrid=hybrid, **common)  # type: ignore[arg-type]

    @property
    def is_symbolic(self) -> bool:
        """No model is called at all."""
        return self.model is None

    @property
    def name(self) -> str:
        """``symbolic``, the model string, or ``hybrid:MODEL``."""
        if self.model is None:
            return SYMBOLIC
        return f"{HYBRID_PREFIX}{self.model}" if self.hybrid else self.model

    @property
    def evaluator_version(self) -> str:
        """The evaluator version of evaluations made with these settings (part of their key).

        >>> JudgeSettings.parse("openai/gpt-4o-mini").evaluator_version.endswith("+judge=openai/gpt-4o-mini;prompt=stef-judge-3")
        True
        >>> JudgeSettings().evaluator_version == EVALUATOR_VERSION
        True
        """
        base = EVALUATOR_VERSION + (SCHEMA_VERSION_SUFFIX if self.schema_dir else "")
        base += OBSERVED_VERSION_SUFFIX if self.observed_catalog or self.learn_catalog else ""
        base += self.symbolic_judge().version_suffix
        if self.model is None:
            return base
        return f"{base}+judge={self.name};prompt={PROMPT_VERSION}"

    def symbolic_judge(self) -> SymbolicJudge:
        """The symbolic judge of these settings: the shipped calibrators, refit by
        :attr:`calibrators` when there are any (one judge per distinct set, cached).

        Raises:
            JudgeConfigError: an artifact of :attr:`calibrators` cannot be read.
        """
        return _symbolic_judge(self.calibrators)

    def schemas(self) -> SchemaBook | None:
        """The :class:`stef.pipeline.schema_book.SchemaBook` of :attr:`schema_dir` (``None`` without one)."""
        return SchemaBook(self.schema_dir) if self.schema_dir else None

    def observed(self) -> ObservedCatalogBook | None:
        """The catalogs of :attr:`observed_catalog` (``None`` without a file; the learned ones
        come from the nightly flow).

        Raises:
            ObservedCatalogError: the file cannot be read.
        """
        return _observed_catalogs(self.observed_catalog) if self.observed_catalog else None


@lru_cache(maxsize=8)
def _symbolic_judge(calibrators: tuple[tuple[str | None, str], ...]) -> SymbolicJudge:
    if not calibrators:
        return DEFAULT_SYMBOLIC_JUDGE
    deployment = {}
    for app_id, document in calibrators:
        try:
            deployment[app_id] = parse_calibrator(document, f"calibrator of app {app_id or '(all apps)'}")
        except ValueError as exc:
            raise JudgeConfigError(str(exc)) from exc
    return SymbolicJudge(deployment=deployment)


DEFAULT_SYMBOLIC_JUDGE = SymbolicJudge()
"""The symbolic judge with the shipped calibrators only."""


@lru_cache(maxsize=4)
def _observed_catalogs(path: str) -> ObservedCatalogBook:
    return load_observed_catalogs(path)


def unpriced_cap_error(model: str) -> str:
    """The message of a ``--max-cost-usd`` that cannot be enforced because litellm has no price for ``model``.

    >>> unpriced_cap_error("hosted_vllm/sqlcoder").startswith("--max-cost-usd cannot be enforced for hosted_vllm/sqlcoder")
    True
    """
    return (
        f"--max-cost-usd cannot be enforced for {model}: litellm has no price for it, so no request could be "
        "counted against the cap; drop --max-cost-usd (e.g. for a self-hosted server that costs nothing per "
        "request), or judge with a model litellm has a price for"
    )


def is_priced(model: str) -> bool:
    """Whether litellm's price table has a price for ``model`` (0 counts: a free model is priced).

    >>> is_priced("openai/gpt-4o-mini"), is_priced("hosted_vllm/no-such-weights")
    (True, False)
    """
    litellm = import_litellm()
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(model=model, prompt_tokens=1, completion_tokens=1)
    except Exception:  # litellm raises a plain Exception (NotFoundError in some releases) for an unknown model
        return False
    total = float(prompt_cost) + float(completion_cost)
    return math.isfinite(total) and total >= 0


def preflight(settings: JudgeSettings) -> list[str]:
    """Check a model setting before any work: litellm knows the provider, the keys are set, a
    ``--max-cost-usd`` can be enforced.

    Keys are only ever read from the environment. A missing ``*_API_KEY`` is an error (every
    call would fail); other missing variables (``AWS_…``, ``OLLAMA_API_BASE`` …) are returned as
    warnings because roles, profiles or defaults may supply them.

    Args:
        settings: the judge settings (symbolic: nothing to check).

    Returns:
        Warnings to show the user (may be empty).

    A ``max_cost_usd`` above 0 for a model litellm has no price for (:func:`is_priced`) is refused:
    every request's reserve and charge would be unknown, so the cap could not stop a single
    request (a cap of 0 is kept: it allows no request at all).

    Raises:
        JudgeConfigError: unknown provider, a required ``*_API_KEY`` is not in the environment,
            or a ``max_cost_usd`` above 0 for a model without a price (:func:`unpriced_cap_error`).
    """
    if settings.model is None:
        return []
    litellm = import_litellm()
    try:
        litellm.get_llm_provider(settings.model, api_base=settings.api_base)
    except litellm.exceptions.BadRequestError:
        raise JudgeConfigError(
            f"--judge {settings.model!r}: litellm does not know this provider; prefix the model with one, "
            "e.g. openai/…, anthropic/…, azure/…, bedrock/…, ollama/…, hosted_vllm/… (see docs.litellm.ai/docs/providers)"
        ) from None
    missing = list(
        litellm.validate_environment(model=settings.model, api_base=settings.api_base).get("missing_keys") or []
    )
    keys = [name for name in missing if name.endswith("_API_KEY")]
    if keys:
        hint = (
            " (an OpenAI-compatible server that needs no key still needs a placeholder value, or use hosted_vllm/NAME)"
            if settings.api_base
            else ""
        )
        raise JudgeConfigError(
            f"--judge {settings.model}: set {', '.join(keys)} in the environment; keys are read only from the environment{hint}"
        )
    if settings.max_cost_usd is not None and settings.max_cost_usd > 0 and not is_priced(settings.model):
        raise JudgeConfigError(unpriced_cap_error(settings.model))
    return [f"--judge {settings.model}: {name} is not set in the environment" for name in missing if name not in keys]
