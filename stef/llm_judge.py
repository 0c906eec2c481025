"""Stage D with a language model: the LLM judge (STEF paper §2.D, DESIGN.md §3 stage 4).

:class:`LLMJudge` gives the same four-point verdict and confidence γ as
:class:`stef.judge.SymbolicJudge`, but asks a language model through litellm, so any provider
works (``openai/…``, ``anthropic/…``, ``azure/…``, ``bedrock/…``, ``ollama/…``,
``hosted_vllm/…``) as does any OpenAI-compatible endpoint (``api_base``). Keys are read by
litellm from the environment only; nothing here takes a key.

What the model sees is a versioned prompt (:data:`PROMPT_VERSION`): Q_u, Q_e, S, the extracted
specs, the filter alignment, the production rules that fired and the **R_app rules injected by
templating** (column mappings, benign filters: the paper's configurable rule injection). The
answer is requested as a JSON Schema built from :class:`LLMVerdict` (``response_format``, so
any OpenAI-compatible server can enforce it), at temperature 0, and validated with pydantic.

Bounded and never losing a record:

* requests of one batch run concurrently under an ``asyncio.Semaphore`` (:data:`DEFAULT_CONCURRENCY`);
* each request has a timeout; 429, 5xx, connection errors and timeouts are retried with
  exponential backoff and jitter (tenacity), other errors are not;
* a malformed answer (not JSON, wrong enum, γ out of range) gets one repair request;
* when all that fails, or the cost budget is spent, the record gets the symbolic verdict and the
  reason in :attr:`JudgeOutcome.fallback_reason`;
* verdicts are cached by ``(model, prompt version, hash of the rendered inputs)`` in any
  :class:`JudgeCache` (the warehouse's ``judge_cache`` table: :mod:`warehouse.judge_cache`).

litellm is imported lazily, only when a model is called (``LITELLM_LOCAL_MODEL_COST_MAP`` is set
first so that importing it never reaches the network).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from string import Template
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stef.errors import StefError
from stef.judge import Judge, JudgeInput, SymbolicJudge
from stef.models import EVALUATOR_VERSION, JudgeResult, SuspectedError, Verdict

if TYPE_CHECKING:
    import asyncio
    from types import ModuleType

logger = logging.getLogger(__name__)

PROMPT_VERSION = "stef-judge-1"
"""Version of the prompt template and response schema; part of every cache key. Bump it on any
change to :data:`SYSTEM_PROMPT`, :data:`USER_TEMPLATE` or :class:`LLMVerdict`."""

SYMBOLIC = "symbolic"
"""The ``--judge`` value (and ``Evaluation.judge``) of the deterministic judge."""
HYBRID_PREFIX = "hybrid:"
"""``--judge hybrid:MODEL``: symbolic first, the model only for uncertain or marginal records."""
API_BASE_ENV = "STEF_LLM_API_BASE"
"""Environment variable with the base URL of an OpenAI-compatible endpoint (``--api-base`` wins)."""
DEFAULT_CONCURRENCY = 8
"""Requests in flight per batch."""
DEFAULT_TIMEOUT_S = 60.0
"""Seconds one request may take before it counts as a timeout (and is retried)."""
DEFAULT_RETRIES = 3
"""Retries after the first attempt on 429 / 5xx / connection errors / timeouts."""
DEFAULT_BACKOFF_S = 1.0
"""First backoff wait; doubles per retry, with up to the same again as jitter."""
MAX_BACKOFF_S = 30.0
"""Longest single backoff wait."""
MAX_RATIONALE_CHARS = 2000
MAX_SUSPECTED_ERRORS = 10

TAXONOMY: dict[str, tuple[str, ...]] = {
    "Attribute-Related Errors": ("Attribute Mismatch", "Attribute Redundancy", "Attribute Missing"),
    "Table-Related Errors": ("Table Mismatch", "Table Redundancy", "Table Missing", "Join Condition Mismatch", "Join Type Mismatch"),
    "Value-Related Errors": ("Value Mismatch", "Data Format Mismatch"),
    "Operator-Related Errors": ("Comparison Operator", "Logical Operator"),
    "Condition-Related Errors": ("Explicit Condition Missing", "Explicit Condition Mismatch", "Explicit Condition Redundancy", "Implicit Condition Missing"),
    "Function-Related Errors": ("Aggregate Functions", "Window Functions", "Date/Time Functions", "Conversion Functions", "Math Functions", "String Functions", "Conditional Functions"),
    "Clause-Related Errors": ("Clause Missing", "Clause Redundancy"),
    "Subquery-Related Errors": ("Subquery Missing", "Subquery Mismatch", "Partial Query"),
    "Other Errors": ("ASC/DESC", "DISTINCT", "Other"),
}
"""The NL2SQL-BUGs error taxonomy (9 categories, 31 subcategories) the model must use."""

ErrorCategory = Literal[
    "Attribute-Related Errors", "Table-Related Errors", "Value-Related Errors", "Operator-Related Errors",
    "Condition-Related Errors", "Function-Related Errors", "Clause-Related Errors", "Subquery-Related Errors", "Other Errors",
]
ErrorSubcategory = Literal[
    "Attribute Mismatch", "Attribute Redundancy", "Attribute Missing",
    "Table Mismatch", "Table Redundancy", "Table Missing", "Join Condition Mismatch", "Join Type Mismatch",
    "Value Mismatch", "Data Format Mismatch",
    "Comparison Operator", "Logical Operator",
    "Explicit Condition Missing", "Explicit Condition Mismatch", "Explicit Condition Redundancy", "Implicit Condition Missing",
    "Aggregate Functions", "Window Functions", "Date/Time Functions", "Conversion Functions", "Math Functions", "String Functions", "Conditional Functions",
    "Clause Missing", "Clause Redundancy",
    "Subquery Missing", "Subquery Mismatch", "Partial Query",
    "ASC/DESC", "DISTINCT", "Other",
]


class JudgeConfigError(StefError):
    """A judge setting that cannot work (``--judge``, ``--concurrency``, ``--max-cost-usd`` ...);
    the message names the setting and the fix."""


class MalformedOutputError(StefError):
    """The model's answer is not a JSON object that validates against :class:`LLMVerdict`."""


# --------------------------------------------------------------------------- response model


class LLMSuspectedError(BaseModel):
    """One suspected error named with the NL2SQL-BUGs taxonomy (:data:`TAXONOMY`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    category: ErrorCategory
    subcategory: ErrorSubcategory
    evidence: str

    @model_validator(mode="after")
    def _subcategory_of_category(self) -> LLMSuspectedError:
        if self.subcategory not in TAXONOMY[self.category]:
            raise ValueError(f"subcategory {self.subcategory!r} is not one of {self.category!r}: {', '.join(TAXONOMY[self.category])}")
        return self


class LLMVerdict(BaseModel):
    """The structured answer of the model (STEF paper §2.D): the JSON object it must return.

    Attributes:
        verdict: ``CORRECT``, ``LIKELY_CORRECT``, ``POTENTIALLY_INCORRECT`` or ``INCORRECT``.
        confidence: γ ∈ [0, 1].
        rationale: a short explanation (truncated to 2,000 characters when stored).
        suspected_errors: ``[{category, subcategory, evidence}]`` (at most 10 are kept).

    >>> LLMVerdict.model_validate_json('{"verdict": "CORRECT", "confidence": 0.9, "rationale": "ok", "suspected_errors": []}').verdict
    <Verdict.CORRECT: 'CORRECT'>
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    verdict: Verdict
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str
    suspected_errors: list[LLMSuspectedError]

    def to_result(self, judge: str) -> JudgeResult:
        """The :class:`JudgeResult` of this answer, named after ``judge`` (the model string)."""
        return JudgeResult(
            verdict=self.verdict,
            confidence=round(float(self.confidence), 4),
            rationale=self.rationale.strip()[:MAX_RATIONALE_CHARS] or f"{self.verdict.value} (no rationale given)",
            judge=judge,
            suspected_errors=tuple(
                SuspectedError(category=e.category, subcategory=e.subcategory, evidence=e.evidence[:500])
                for e in self.suspected_errors[:MAX_SUSPECTED_ERRORS]
            ),
        )


def _inline_refs(node: Any, defs: Mapping[str, Any]) -> Any:
    """Resolve ``$ref`` into ``$defs``, drop ``title``/``default``, close every object."""
    if isinstance(node, list):
        return [_inline_refs(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _inline_refs(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    out = {key: _inline_refs(value, defs) for key, value in node.items() if key not in ("title", "default", "$defs")}
    if out.get("type") == "object" and "properties" in out:
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


@lru_cache(maxsize=1)
def _schema_text() -> str:
    raw = LLMVerdict.model_json_schema()
    return json.dumps(_inline_refs(raw, raw.get("$defs", {})), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def response_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`LLMVerdict` in the strict form OpenAI-compatible servers enforce.

    References are inlined, every property is required and no other property is allowed. Each
    call returns a new dict (built once, copied per call).

    >>> schema = response_schema()
    >>> schema["required"], schema["properties"]["verdict"]["enum"][0], schema["additionalProperties"]
    (['verdict', 'confidence', 'rationale', 'suspected_errors'], 'CORRECT', False)
    """
    schema: dict[str, Any] = json.loads(_schema_text())
    return schema


def response_format() -> dict[str, Any]:
    """The ``response_format`` argument of the completion call (JSON Schema, strict).

    >>> response_format()["json_schema"]["name"], response_format()["type"]
    ('stef_verdict', 'json_schema')
    """
    return {"type": "json_schema", "json_schema": {"name": "stef_verdict", "strict": True, "schema": response_schema()}}


def _strip_fences(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        if stripped.rstrip().endswith("```"):
            stripped = stripped.rstrip()[:-3]
    return stripped.strip()


def parse_verdict(content: str | None) -> LLMVerdict:
    """Validate the model's answer text (a Markdown code fence around it is tolerated).

    Args:
        content: the ``message.content`` of the response.

    Returns:
        The validated :class:`LLMVerdict`.

    Raises:
        MalformedOutputError: empty, not JSON, or not valid against the schema; the message
            names the first problems (``confidence: Input should be less than or equal to 1``).

    >>> parse_verdict('```json\\n{"verdict": "INCORRECT", "confidence": 1, "rationale": "r", "suspected_errors": []}\\n```').confidence
    1.0
    >>> parse_verdict('{"verdict": "WRONG", "confidence": 2, "rationale": "r", "suspected_errors": []}')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stef.llm_judge.MalformedOutputError: not a valid verdict: verdict: Input should be 'CORRECT', ...; confidence: Input should be less than or equal to 1
    """
    text = _strip_fences(content or "")
    if not text:
        raise MalformedOutputError("empty answer")
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise MalformedOutputError(f"not JSON ({exc}): {text[:80]!r}") from None
    if not isinstance(payload, dict):
        raise MalformedOutputError(f"not a JSON object: {text[:80]!r}")
    try:
        return LLMVerdict.model_validate(payload)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in error['loc']) or '(root)'}: {error['msg']}" for error in exc.errors()[:3])
        raise MalformedOutputError(f"not a valid verdict: {problems}") from None


# --------------------------------------------------------------------------- prompt

SYSTEM_PROMPT = """You are the semantic judge of STEF, a monitor for Text-to-SQL agents (STEF paper, stage D).
You see a user's question (Q_u), the agent's enriched rewrite of it (Q_e, may be absent), the agent's SQL answer S and
evidence extracted from them by deterministic stages. There is NO database schema and NO reference SQL: judge only
whether S asks the database for what the question asks, as far as the text lets you tell.

Verdicts:
- CORRECT: S answers the question as asked; no semantic mismatch.
- LIKELY_CORRECT: S answers the question; only minor doubts that the text cannot settle.
- POTENTIALLY_INCORRECT: a plausible mismatch that may change the result.
- INCORRECT: S does not answer the question (missing or wrong filter value, wrong aggregation, wrong column or
  table, wrong ordering or top-k, a non-SELECT statement ...).
confidence is your certainty gamma in [0, 1] that the verdict is right.

The application rules (R_app) are authoritative: a column mapping means both names denote the same column; a benign
filter may be added without being asked and is not an error. Filters that Q_e adds and S applies are not extra.

Name each suspected error with a category and one of its subcategories (NL2SQL-BUGs taxonomy):
$taxonomy

Answer with one JSON object and nothing else:
{"verdict": "...", "confidence": 0.0-1.0, "rationale": "at most three sentences", "suspected_errors": [{"category": "...", "subcategory": "...", "evidence": "..."}]}"""
"""System message (``$taxonomy`` is filled from :data:`TAXONOMY`)."""

USER_TEMPLATE = Template("""## Question (Q_u)
$question

## Enriched question (Q_e)
$enriched_question

## Enrichment check (Q_e against Q_u)
$enrichment

## SQL answer (S), dialect $dialect
```sql
$sql
```

## Features extracted from S (columns normalised, R_app mappings applied)
$sql_spec

## Requirements extracted from Q_u
$question_spec

## Requirements extracted from Q_e
$enriched_spec

## Filter alignment: $alignment_status
$alignment

## Production normalisation rules applied
$normalization

## Application rules (R_app: $app_id)
Column mappings (synonym -> canonical column):
$column_mappings
Benign filters (may be added without being asked):
$benign_filters""")
"""User message; every ``$name`` is filled by :func:`render_messages`."""

REPAIR_TEMPLATE = Template("""Your previous answer cannot be used: $problem.
Answer again with exactly one JSON object that matches this JSON Schema, and nothing else:
$schema""")
"""The one repair request after a malformed answer."""


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _lines(items: Sequence[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "(none)"


def render_messages(judge_input: JudgeInput) -> list[dict[str, str]]:
    """The chat messages for one record: the system prompt and the templated user message.

    R_app is injected here: its column mappings and benign filters become part of the prompt
    (and therefore of the cache key).

    Args:
        judge_input: the evidence of stages A–C and E for one record.

    Returns:
        ``[{"role": "system", "content": ...}, {"role": "user", "content": ...}]``.
    """
    rules = judge_input.rules
    alignment = judge_input.alignment
    enrichment = getattr(judge_input, "enrichment", None)
    benign = [
        f"{f.column} {f.operator or '(any operator)'} {'(any value)' if f.value is None else repr(f.value)}" + (f" — {f.reason}" if f.reason else "")
        for f in rules.benign_filters
    ]
    values = {
        "question": judge_input.question.strip(),
        "enriched_question": (judge_input.enriched_question or "").strip() or "(none)",
        "enrichment": _compact(enrichment.model_dump(mode="json", exclude_defaults=True)) if enrichment is not None else "(no Q_e)",
        "dialect": judge_input.sql_spec.dialect or "generic",
        "sql": judge_input.sql.strip(),
        "sql_spec": _compact(judge_input.sql_spec.model_dump(mode="json", exclude_defaults=True)),
        "question_spec": _compact(judge_input.question_spec.model_dump(mode="json", exclude_defaults=True)),
        "enriched_spec": _compact(judge_input.enriched_spec.model_dump(mode="json", exclude_defaults=True)),
        "alignment_status": alignment.status.value,
        "alignment": "\n".join(
            f"{name}: {_compact(list(getattr(alignment, name)))}" for name in ("matched", "missing", "extra", "wrong", "benign_extra")
        ),
        "normalization": _lines(judge_input.normalization_rules_applied) + ("\n(GROUP BY structurally required)" if judge_input.grouping_required else ""),
        "app_id": rules.app_id,
        "column_mappings": _lines([f"{k} -> {v}" for k, v in sorted(rules.column_mappings.items())]),
        "benign_filters": _lines(benign),
    }
    taxonomy = "\n".join(f"- {category}: {', '.join(subs)}" for category, subs in TAXONOMY.items())
    return [
        {"role": "system", "content": Template(SYSTEM_PROMPT).substitute(taxonomy=taxonomy)},
        {"role": "user", "content": USER_TEMPLATE.substitute(values)},
    ]


def cache_key(model: str, messages: Sequence[Mapping[str, str]], prompt_version: str = PROMPT_VERSION) -> str:
    """Key of a verdict in the judge cache: sha256 of (model, prompt version, hash of the inputs).

    The inputs hash covers the rendered messages (so Q_u, Q_e, S, the specs, the alignment and
    the injected R_app rules) and the response schema.

    >>> cache_key("openai/gpt-4o-mini", [{"role": "user", "content": "q"}]) == cache_key("openai/gpt-4o-mini", [{"role": "user", "content": "q"}])
    True
    >>> cache_key("openai/gpt-4o-mini", [{"role": "user", "content": "q"}]) == cache_key("ollama/llama3", [{"role": "user", "content": "q"}])
    False
    """
    inputs_hash = hashlib.sha256((_compact(list(messages)) + _schema_text()).encode()).hexdigest()
    return hashlib.sha256(_compact([model, prompt_version, inputs_hash]).encode()).hexdigest()


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True, slots=True)
class JudgeSettings:
    """How the semantic verdict is given: ``--judge`` and its companions.

    Attributes:
        model: the litellm model string, or ``None`` for the symbolic judge.
        hybrid: symbolic first, the model only for records whose symbolic γ is below the rules'
            ``gamma_high`` (0.85 by default) or whose Φ is in the marginal band.
        api_base: base URL of an OpenAI-compatible endpoint (``None``: the provider's default).
        concurrency: requests in flight per batch.
        timeout_s: seconds per request.
        max_retries: retries after the first attempt (429 / 5xx / timeouts).
        backoff_s: first backoff wait in seconds.
        max_cost_usd: stop calling the model once this much was spent in the run (``None``: no limit).
    """

    model: str | None = None
    hybrid: bool = False
    api_base: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_RETRIES
    backoff_s: float = DEFAULT_BACKOFF_S
    max_cost_usd: float | None = None

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
        if timeout_s <= 0:
            raise JudgeConfigError(f"--timeout must be positive, got {timeout_s}")
        if max_retries < 0:
            raise JudgeConfigError(f"retries must be 0 or more, got {max_retries}")
        if max_cost_usd is not None and max_cost_usd < 0:
            raise JudgeConfigError(f"--max-cost-usd must be 0 or more, got {max_cost_usd}")
        base = (api_base or os.environ.get(API_BASE_ENV, "")).strip() or None
        common = {"api_base": base, "concurrency": concurrency, "timeout_s": timeout_s, "max_retries": max_retries,
                  "backoff_s": backoff_s, "max_cost_usd": max_cost_usd}
        if text == SYMBOLIC:
            return cls(**common)  # type: ignore[arg-type]
        hybrid = text.startswith(HYBRID_PREFIX)
        model = text[len(HYBRID_PREFIX):].strip() if hybrid else text
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

        >>> JudgeSettings.parse("openai/gpt-4o-mini").evaluator_version.endswith("+judge=openai/gpt-4o-mini;prompt=stef-judge-1")
        True
        >>> JudgeSettings().evaluator_version == EVALUATOR_VERSION
        True
        """
        if self.model is None:
            return EVALUATOR_VERSION
        return f"{EVALUATOR_VERSION}+judge={self.name};prompt={PROMPT_VERSION}"


def import_litellm() -> ModuleType:
    """Import litellm without network access (local cost map) and without its debug prints."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def preflight(settings: JudgeSettings) -> list[str]:
    """Check a model setting before any work: litellm knows the provider, the keys are set.

    Keys are only ever read from the environment. A missing ``*_API_KEY`` is an error (every
    call would fail); other missing variables (``AWS_…``, ``OLLAMA_API_BASE`` …) are returned as
    warnings because roles, profiles or defaults may supply them.

    Args:
        settings: the judge settings (symbolic: nothing to check).

    Returns:
        Warnings to show the user (may be empty).

    Raises:
        JudgeConfigError: unknown provider, or a required ``*_API_KEY`` is not in the environment.
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
    missing = list(litellm.validate_environment(model=settings.model, api_base=settings.api_base).get("missing_keys") or [])
    keys = [name for name in missing if name.endswith("_API_KEY")]
    if keys:
        hint = " (an OpenAI-compatible server that needs no key still needs a placeholder value, or use hosted_vllm/NAME)" if settings.api_base else ""
        raise JudgeConfigError(f"--judge {settings.model}: set {', '.join(keys)} in the environment; keys are read only from the environment{hint}")
    return [f"--judge {settings.model}: {name} is not set in the environment" for name in missing if name not in keys]


# --------------------------------------------------------------------------- cache, budget, outcome


@dataclass(frozen=True, slots=True)
class CachedVerdict:
    """One cached model answer (a row of ``judge_cache``).

    Attributes:
        key: :func:`cache_key`.
        model: the model string.
        prompt_version: :data:`PROMPT_VERSION` when it was made.
        response: the validated :class:`LLMVerdict` as a JSON-ready dict.
        cost_usd: what the call(s) behind it cost (``None``: litellm has no price for the model).
        tokens: tokens used by the call(s) behind it.
    """

    key: str
    model: str
    prompt_version: str
    response: dict[str, Any]
    cost_usd: float | None
    tokens: int | None


class JudgeCache(Protocol):
    """Persistent store of verdicts by :func:`cache_key` (the warehouse: :mod:`warehouse.judge_cache`)."""

    def get_many(self, keys: Sequence[str]) -> dict[str, CachedVerdict]:
        """The cached verdicts among ``keys`` (missing keys are absent)."""
        ...

    def put_many(self, entries: Sequence[CachedVerdict]) -> int:
        """Store new verdicts (an existing key is kept); return how many were new."""
        ...


class MemoryJudgeCache:
    """A :class:`JudgeCache` in a dict (tests, single runs).

    >>> cache = MemoryJudgeCache()
    >>> cache.put_many([CachedVerdict("k", "m", PROMPT_VERSION, {}, None, None)]), list(cache.get_many(["k", "x"]))
    (1, ['k'])
    """

    def __init__(self) -> None:
        self.entries: dict[str, CachedVerdict] = {}

    def get_many(self, keys: Sequence[str]) -> dict[str, CachedVerdict]:
        """The cached verdicts among ``keys``."""
        return {key: self.entries[key] for key in keys if key in self.entries}

    def put_many(self, entries: Sequence[CachedVerdict]) -> int:
        """Add entries whose key is new; return how many were added."""
        added = 0
        for entry in entries:
            if entry.key not in self.entries:
                self.entries[entry.key] = entry
                added += 1
        return added


class CostBudget:
    """Money spent on model calls in one run, against an optional limit (``--max-cost-usd``).

    Thread-safe; checked before the first request of each record, so requests already in flight
    may overshoot the limit by at most ``concurrency`` calls.

    >>> budget = CostBudget(0.01)
    >>> budget.add(0.004); budget.add(None); budget.exhausted
    False
    >>> budget.add(0.006); budget.exhausted, round(budget.spent_usd, 4)
    (True, 0.01)
    """

    def __init__(self, max_usd: float | None = None) -> None:
        self.max_usd = max_usd
        self.spent_usd = 0.0
        self._lock = threading.Lock()

    def add(self, cost_usd: float | None) -> None:
        """Count one call's cost (``None``, an unpriced model, counts as nothing)."""
        if cost_usd:
            with self._lock:
                self.spent_usd += cost_usd

    @property
    def exhausted(self) -> bool:
        """The limit is set and reached."""
        return self.max_usd is not None and self.spent_usd >= self.max_usd

    def reason(self) -> str:
        """The fallback reason once exhausted."""
        return f"cost budget reached: ${self.spent_usd:.4f} spent of --max-cost-usd ${self.max_usd:.4f}; symbolic judge used"


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
    """

    result: JudgeResult
    fallback_reason: str | None = None
    cost_usd: float | None = None
    tokens: int | None = None
    requests: int = 0
    spent_usd: float = 0.0
    cache_hit: bool = False
    latency_ms: float = 0.0


_UNPRICED_WARNED: set[str] = set()
_UNPRICED_LOCK = threading.Lock()


def _warn_unpriced(model: str) -> None:
    with _UNPRICED_LOCK:
        if model in _UNPRICED_WARNED:
            return
        _UNPRICED_WARNED.add(model)
    logger.warning("litellm has no price for model %s: cost_usd stays null for its verdicts (the budget cannot count them)", model)


def response_cost(response: Any, model: str) -> float | None:
    """Cost of one completion response with litellm's price table (``None`` when it has none).

    A model litellm has no price for gets ``None`` and one warning per process, never an error.
    """
    hidden = getattr(response, "_hidden_params", None)
    known = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if isinstance(known, int | float) and not isinstance(known, bool):
        return float(known)  # litellm priced the response already (same price table)
    litellm = import_litellm()
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:  # noqa: BLE001 - litellm raises several unrelated types for "no price"; the cost is then unknown
        _warn_unpriced(model)
        return None
    return float(cost) if cost is not None else None


def response_tokens(response: Any) -> int | None:
    """``usage.total_tokens`` of a response, when the server reported usage."""
    usage = getattr(response, "usage", None)
    total = getattr(usage, "total_tokens", None)
    return int(total) if isinstance(total, int) else None


# --------------------------------------------------------------------------- the judge

Completion = Callable[..., Awaitable[Any]]
"""An async completion function with ``litellm.acompletion``'s keyword arguments."""

_T = TypeVar("_T")


class _LoopThread:
    """One event loop in a daemon thread for every model call of the process.

    litellm keeps its async HTTP clients per process; running all batches (also those of parallel
    Prefect task threads) on one loop keeps those clients on the loop they were made on.
    """

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def run(cls, coro: Coroutine[Any, Any, _T]) -> _T:
        import asyncio  # not at module level: `stef evaluate` with the symbolic judge imports this module too

        with cls._lock:
            if cls._loop is None or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="stef-llm-judge", daemon=True).start()
                cls._loop = loop
            loop = cls._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()


class _Stop(Exception):
    """A record's model calls end here; ``reason`` is its fallback reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class _Tally:
    requests: int = 0
    cost_usd: float | None = None
    tokens: int | None = None
    priced: bool = True

    def add(self, cost: float | None, tokens: int | None) -> None:
        if cost is None:
            self.priced = False
        else:
            self.cost_usd = (self.cost_usd or 0.0) + cost
        if tokens is not None:
            self.tokens = (self.tokens or 0) + tokens

    @property
    def cost(self) -> float | None:
        return self.cost_usd if self.priced else None


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    head = name + (f" (HTTP {status})" if isinstance(status, int) else "")
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    for prefix in (f"litellm.{name}: ", f"{name}: "):  # litellm repeats the class name in its messages
        while text.startswith(prefix):
            text = text[len(prefix):]
    return f"{head}: {text[:200]}" if text else head


@dataclass
class LLMJudge:
    """A :class:`stef.judge.Judge` that asks a language model through litellm (STEF paper §2.D).

    Use :meth:`judge_many` for batches (concurrency, cache, budget, fallback reasons); the
    :meth:`judge` method of the ``Judge`` protocol judges one record without a cache.

    Attributes:
        model: any litellm model string (``openai/gpt-4o-mini``, ``anthropic/…``, ``ollama/…``).
        api_base: base URL of an OpenAI-compatible endpoint (``None``: the provider's default).
        concurrency: requests in flight per batch.
        timeout_s: seconds per request.
        max_retries: retries after the first attempt on 429 / 5xx / connection errors / timeouts.
        backoff_s: first backoff wait (doubles per retry, plus jitter, at most :data:`MAX_BACKOFF_S`).
        fallback: the judge used when the model cannot give a verdict.
        completion: the async completion function (default ``litellm.acompletion``).
        extra_params: more keyword arguments for every call (e.g. ``mock_response`` in tests).
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
    name: str = field(init=False)
    """The model string (stored as ``Evaluation.judge``)."""
    _disabled: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.name = self.model

    @classmethod
    def from_settings(cls, settings: JudgeSettings, **overrides: Any) -> LLMJudge:
        """The judge for ``settings`` (which must name a model).

        Raises:
            JudgeConfigError: ``settings`` is the symbolic judge.
        """
        if settings.model is None:
            raise JudgeConfigError("the symbolic judge calls no model; give --judge MODEL or hybrid:MODEL")
        params: dict[str, Any] = {"model": settings.model, "api_base": settings.api_base, "concurrency": settings.concurrency,
                                  "timeout_s": settings.timeout_s, "max_retries": settings.max_retries, "backoff_s": settings.backoff_s}
        return cls(**{**params, **overrides})

    def judge(self, judge_input: JudgeInput) -> JudgeResult:
        """Judge one record (the :class:`stef.judge.Judge` protocol); no cache, no budget.

        When the model cannot answer, the fallback verdict is returned with the reason at the
        start of its rationale.
        """
        outcome = self.judge_many([judge_input])[0]
        if outcome.fallback_reason is None:
            return outcome.result
        rationale = f"[LLM judge fell back: {outcome.fallback_reason}] {outcome.result.rationale}"
        return outcome.result.model_copy(update={"rationale": rationale[:MAX_RATIONALE_CHARS]})

    def judge_many(self, inputs: Sequence[JudgeInput], cache: JudgeCache | None = None, budget: CostBudget | None = None) -> list[JudgeOutcome]:
        """Judge a batch: cache lookup, concurrent model calls for the misses, cache write.

        Identical inputs in the batch are asked once. Only valid model answers are cached, so a
        record that fell back is asked again on the next run. A cache that cannot be read or
        written (a locked warehouse ...) is logged as a warning and skipped: it never costs a record.

        Args:
            inputs: the records' evidence.
            cache: verdict cache (``None``: none).
            budget: the run's cost budget (``None``: no limit).

        Returns:
            One :class:`JudgeOutcome` per input, same order; never raises for a model failure.
        """
        if not inputs:
            return []
        budget = budget or CostBudget()
        messages = [render_messages(item) for item in inputs]
        keys = [cache_key(self.model, m) for m in messages]
        first: dict[str, int] = {}
        for index, key in enumerate(keys):
            first.setdefault(key, index)
        cached: dict[str, CachedVerdict] = {}
        if cache is not None:
            try:
                cached = cache.get_many(list(first))
            except StefError as exc:  # a cache that cannot be read costs money, not records
                logger.warning("judge cache not read, asking the model for every record: %s", exc)
        todo = [index for key, index in first.items() if key not in cached]
        fresh: dict[str, JudgeOutcome] = {}
        new_entries: list[CachedVerdict] = []
        if todo:
            import_litellm()  # once, in this thread: the first import takes seconds and must not stall the loop
            results = _LoopThread.run(self._ask_all([(inputs[i], messages[i]) for i in todo], budget))
            for index, (outcome, verdict) in zip(todo, results, strict=True):
                fresh[keys[index]] = outcome
                if verdict is not None:
                    new_entries.append(CachedVerdict(keys[index], self.model, PROMPT_VERSION, verdict.model_dump(mode="json"), outcome.cost_usd, outcome.tokens))
        if cache is not None and new_entries:
            try:
                cache.put_many(new_entries)
            except StefError as exc:  # the verdicts are kept; only the next run pays for them again
                logger.warning("judge cache not written (%d verdicts): %s", len(new_entries), exc)
        outcomes: list[JudgeOutcome] = []
        for index, key in enumerate(keys):
            if key in cached:
                entry = cached[key]
                result = LLMVerdict.model_validate(entry.response).to_result(self.model)
                outcomes.append(JudgeOutcome(result, None, entry.cost_usd, entry.tokens, cache_hit=True))
            elif first[key] == index:
                outcomes.append(fresh[key])
            else:  # the same inputs as an earlier record of this batch: its verdict, asked once
                outcome = fresh[key]
                if outcome.fallback_reason is None:
                    outcomes.append(JudgeOutcome(outcome.result, None, outcome.cost_usd, outcome.tokens, cache_hit=True))
                else:
                    outcomes.append(JudgeOutcome(outcome.result, outcome.fallback_reason))
        return outcomes

    async def _ask_all(self, items: Sequence[tuple[JudgeInput, list[dict[str, str]]]], budget: CostBudget) -> list[tuple[JudgeOutcome, LLMVerdict | None]]:
        import asyncio

        semaphore = asyncio.Semaphore(self.concurrency)
        return list(await asyncio.gather(*(self._ask_one(item, messages, semaphore, budget) for item, messages in items)))

    async def _ask_one(self, judge_input: JudgeInput, messages: list[dict[str, str]], semaphore: asyncio.Semaphore,
                       budget: CostBudget) -> tuple[JudgeOutcome, LLMVerdict | None]:
        started = time.perf_counter()
        tally = _Tally()
        verdict: LLMVerdict | None = None
        reason: str | None = None
        try:
            response = await self._request(messages, semaphore, budget, tally, first=True)
            try:
                verdict = parse_verdict(_content(response))
            except MalformedOutputError as problem:
                repair = [*messages, {"role": "assistant", "content": _content(response) or ""},
                          {"role": "user", "content": REPAIR_TEMPLATE.substitute(problem=str(problem), schema=_schema_text())}]
                response = await self._request(repair, semaphore, budget, tally, first=False)
                try:
                    verdict = parse_verdict(_content(response))
                except MalformedOutputError as again:
                    reason = f"malformed model output after one repair request: {again}"
        except _Stop as stop:
            reason = stop.reason
        except Exception as exc:  # noqa: BLE001 - never lose a record: an unexpected error is a fallback with its reason
            reason = f"unexpected error: {_describe(exc)}"
        latency = round((time.perf_counter() - started) * 1000, 3)
        spent = tally.cost_usd or 0.0
        if verdict is not None:
            outcome = JudgeOutcome(verdict.to_result(self.model), None, tally.cost, tally.tokens, tally.requests, spent, latency_ms=latency)
            return outcome, verdict
        result = self.fallback.judge(judge_input)
        cost = tally.cost if tally.requests else None
        tokens = tally.tokens if tally.requests else None
        return JudgeOutcome(result, f"{self.model}: {reason}", cost, tokens, tally.requests, spent, latency_ms=latency), None

    async def _request(self, messages: list[dict[str, str]], semaphore: asyncio.Semaphore, budget: CostBudget,
                       tally: _Tally, *, first: bool) -> Any:
        """One completion with retries; raises :class:`_Stop` with the reason when it gives up."""
        import asyncio

        from tenacity import (
            AsyncRetrying,
            RetryError,
            retry_if_exception,
            stop_after_attempt,
            wait_exponential_jitter,
        )

        litellm = import_litellm()
        completion = self.completion or litellm.acompletion
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
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
        response: Any = None
        try:
            async for attempt in retrying:
                with attempt:
                    async with semaphore:
                        if self._disabled is not None:
                            raise _Stop(f"not asked: {self._disabled}")
                        if first and attempt.retry_state.attempt_number == 1 and budget.exhausted:
                            raise _Stop(budget.reason())
                        tally.requests += 1
                        async with asyncio.timeout(self.timeout_s + 1.0):
                            response = await completion(**params)
        except RetryError as exhausted:
            last = exhausted.last_attempt.exception()
            raise _Stop(f"{_describe(last) if last else 'failed'} after {tally.requests} request(s)") from None
        except _Stop:
            raise
        except Exception as exc:  # noqa: BLE001 - any non-retryable provider error ends in a fallback with its reason
            if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError, litellm.NotFoundError)):
                self._disabled = f"{_describe(exc)} (the model is not asked again in this run)"
            raise _Stop(f"{_describe(exc)} after {tally.requests} request(s)") from None
        cost = response_cost(response, self.model)
        tally.add(cost, response_tokens(response))
        budget.add(cost)
        return response


def _content(response: Any) -> str | None:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None


def _is_retryable(exc: BaseException, litellm: ModuleType) -> bool:
    """429, 408, 5xx, connection errors and timeouts are worth another attempt."""
    if isinstance(exc, _Stop):
        return False
    if isinstance(exc, TimeoutError | litellm.Timeout | litellm.RateLimitError | litellm.APIConnectionError
                  | litellm.InternalServerError | litellm.ServiceUnavailableError | litellm.BadGatewayError):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 429) or status >= 500)
