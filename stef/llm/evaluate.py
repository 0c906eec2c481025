"""The STEF pipeline with an LLM judge for a whole batch (STEF paper §2.D, §3).

:func:`stef.pipeline.evaluate.evaluate` judges one record at a time. A language model wants the opposite:
many requests in flight, a cache lookup per batch and one budget per run. :class:`LLMEvaluator`
therefore runs the pipeline in three steps, each record through stages A–E once:

1. :func:`stef.pipeline.evaluate.evaluate_many_prepared`: stages A–E and the symbolic verdict for every
   record, keeping each record's :class:`stef.pipeline.evaluate.Prepared` stages (records that cannot be
   evaluated keep their typed status);
2. one :meth:`stef.llm.judge.LLMJudge.judge_many` call for the records that go to the model
   (all of them, or in hybrid mode those the symbolic judge hedged on: a LIKELY_CORRECT or
   POTENTIALLY_INCORRECT verdict, p_correct in [0.35, 0.65));
3. :func:`stef.pipeline.evaluate.finish` of each prepared record with the model's verdict, so every rule
   applied after the judge (Φ, the non-SELECT override) holds as in :func:`stef.pipeline.evaluate.evaluate`.

Every evaluation then carries ``judge`` (the model string, or ``symbolic``),
``judge_fallback_reason`` (``None`` unless the model could not answer), ``cost_usd`` and
``tokens``; :attr:`LLMEvaluator.stats` sums a run (requests, cache hits, fallbacks, spend).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from stef.llm.budget import CostBudget
from stef.llm.judge import LLMJudge
from stef.llm.models import JudgeCache, JudgeConfigError, JudgeOutcome
from stef.llm.settings import JudgeSettings
from stef.llm.usage import USAGE_FLAG
from stef.models import AgentLogRecord, Evaluation, EvaluationStatus, ObservedCatalogBook, Verdict
from stef.pipeline.evaluate import Prepared, evaluate_many, evaluate_many_prepared, finish
from stef.pipeline.judge.models import Judge
from stef.pipeline.rules import RuleBook

HEDGED_VERDICTS = frozenset({Verdict.LIKELY_CORRECT, Verdict.POTENTIALLY_INCORRECT})
"""Symbolic verdicts that ``hybrid:MODEL`` sends to the model: p_correct in [0.35, 0.65), where
the symbolic judge hedges (the paper routes its marginal answers to a closer look)."""


@dataclass(slots=True)
class JudgeRunStats:
    """Totals of the judge over one run (what ``stef evaluate`` prints).

    Attributes:
        judge: the ``--judge`` setting.
        records: records that reached the verdict stage (status ``evaluated``).
        escalated: of those, records sent to the model (hybrid: the hedged verdicts; else all).
        model_verdicts: verdicts given by the model (fresh or cached).
        cache_hits: verdicts taken from the cache (or from an identical record of the batch).
        requests: HTTP requests made.
        fallbacks: escalated records that got the symbolic verdict instead, by reason class.
        spent_usd: money spent on requests in this run.
        cost_usd: sum of ``cost_usd`` over the run's evaluations (cached verdicts count what they cost when made).
        tokens: sum of ``tokens`` over the run's evaluations.
        unpriced: model verdicts without a cost because litellm has no price for the model.
        usage_untrusted: escalated records whose reported usage or cost was not trusted (their
            cost and tokens are unknown; flag :data:`stef.llm.usage.USAGE_FLAG`).
        breaker: what the run's circuit breaker did (:meth:`stef.llm.breaker.CircuitBreaker.summary`;
            ``None`` while it stayed closed).
    """

    judge: str
    records: int = 0
    escalated: int = 0
    model_verdicts: int = 0
    cache_hits: int = 0
    requests: int = 0
    fallbacks: Counter[str] = field(default_factory=Counter)
    spent_usd: float = 0.0
    cost_usd: float = 0.0
    tokens: int = 0
    unpriced: int = 0
    usage_untrusted: int = 0
    breaker: str | None = None

    @property
    def escalated_share(self) -> float | None:
        """escalated / records (``None`` without records)."""
        return self.escalated / self.records if self.records else None

    @property
    def fallback_count(self) -> int:
        """Escalated records that fell back to the symbolic judge."""
        return sum(self.fallbacks.values())

    def add(self, outcome: JudgeOutcome, evaluation: Evaluation) -> None:
        """Count one escalated record."""
        self.escalated += 1
        self.requests += outcome.requests
        self.spent_usd += outcome.spent_usd
        untrusted = any(flag.startswith(USAGE_FLAG) for flag in outcome.flags)
        self.usage_untrusted += int(untrusted)
        if outcome.fallback_reason is not None:
            self.fallbacks[outcome.fallback_kind or "other"] += 1
        else:
            self.model_verdicts += 1
            self.cache_hits += int(outcome.cache_hit)
            self.unpriced += int(outcome.cost_usd is None and not untrusted)
        self.cost_usd += evaluation.cost_usd or 0.0
        self.tokens += evaluation.tokens or 0

    def summary(self) -> str:
        """One line for logs.

        >>> JudgeRunStats("openai/gpt-4o-mini", records=4, escalated=4, model_verdicts=4, requests=4).summary()
        'judge openai/gpt-4o-mini: 4 records, 4 to the model (100.0%), 4 model verdicts, 0 cache hits, 4 requests, 0 fallbacks, spent $0.0000, tokens 0'
        """
        share = f"{self.escalated_share:.1%}" if self.escalated_share is not None else "–"
        untrusted = f", {self.usage_untrusted} with untrusted usage" if self.usage_untrusted else ""
        breaker = f"; {self.breaker}" if self.breaker else ""
        return (
            f"judge {self.judge}: {self.records} records, {self.escalated} to the model ({share}), {self.model_verdicts} model verdicts, "
            f"{self.cache_hits} cache hits, {self.requests} requests, {self.fallback_count} fallbacks, "
            f"spent ${self.spent_usd:.4f}, tokens {self.tokens}{untrusted}{breaker}"
        )


class LLMEvaluator:
    """Evaluates batches of records with an LLM judge (or hybrid), with cache and budget.

    One instance serves a whole run: the budget (``max_cost_usd``) and :attr:`stats` span every
    batch given to :meth:`evaluate_many`.

    Args:
        settings: the judge settings (must name a model).
        cache: the verdict cache (``None``: none; a rerun then asks the model again).
        observed: observed catalogs learned for this run (``None``: those of the settings' file, if any).
        judge: the LLM judge (default: built from ``settings``).
        symbolic: the symbolic judge (hybrid's first opinion and the fallback).

    Raises:
        JudgeConfigError: ``settings`` is the symbolic judge.
    """

    def __init__(
        self,
        settings: JudgeSettings,
        cache: JudgeCache | None = None,
        judge: LLMJudge | None = None,
        symbolic: Judge | None = None,
        observed: ObservedCatalogBook | None = None,
    ) -> None:
        if settings.model is None:
            raise JudgeConfigError(
                "LLMEvaluator needs a model; use stef.pipeline.evaluate.evaluate_many for the symbolic judge"
            )
        self.settings = settings
        self.cache = cache
        self.symbolic = symbolic or settings.symbolic_judge()
        self.judge = judge or LLMJudge.from_settings(settings, fallback=self.symbolic)
        self.budget = CostBudget(settings.max_cost_usd)
        self.stats = JudgeRunStats(judge=settings.name)
        self.schemas = settings.schemas()
        self.observed = observed if observed is not None else settings.observed()

    @property
    def name(self) -> str:
        """The ``--judge`` setting (``MODEL`` or ``hybrid:MODEL``)."""
        return self.settings.name

    def _escalate(self, evaluation: Evaluation, rulebook: RuleBook, record: AgentLogRecord) -> bool:
        if not self.settings.hybrid:
            return True
        return evaluation.verdict in HEDGED_VERDICTS

    def evaluate_many(
        self, records: Iterable[AgentLogRecord], rulebook: RuleBook | None = None, default_dialect: str | None = None
    ) -> list[Evaluation]:
        """Evaluate a batch; one bad record or one failed model call never stops it.

        Args:
            records: the batch.
            rulebook: resolves each record's ``app_id`` to its rules (``None``: bundled rules).
            default_dialect: dialect for records that name none.

        Returns:
            One :class:`Evaluation` per record, same order, all with
            :attr:`JudgeSettings.evaluator_version`.

        Raises:
            RulesError: an invalid rule file (a configuration error, as in ``evaluate_many``).
            SchemaError: an app's schema file cannot be read.
        """
        rulebook = rulebook or RuleBook()
        version = self.settings.evaluator_version
        batch = list(records)
        first: list[Evaluation] = []
        pending: list[tuple[int, Prepared]] = []
        for evaluation, prepared in evaluate_many_prepared(
            batch,
            rulebook=rulebook,
            judge=self.symbolic,
            default_dialect=default_dialect,
            schemas=self.schemas,
            observed=self.observed,
        ):
            first.append(evaluation.model_copy(update={"evaluator_version": version}))
            if evaluation.status is EvaluationStatus.EVALUATED and prepared is not None:
                self.stats.records += 1
                if self._escalate(evaluation, rulebook, prepared.record):
                    pending.append((len(first) - 1, prepared))
        outcomes = self.judge.judge_many(
            [prepared.judge_input for _, prepared in pending], cache=self.cache, budget=self.budget
        )
        out = list(first)
        for (index, prepared), outcome in zip(pending, outcomes, strict=True):
            symbolic = first[index]
            flags = (*symbolic.flags, *(flag for flag in outcome.flags if flag not in symbolic.flags))
            if outcome.fallback_reason is None:
                duration = (symbolic.duration_ms or 0.0) + outcome.latency_ms
                out[index] = finish(prepared, outcome.result, version).model_copy(
                    update={
                        "cost_usd": outcome.cost_usd,
                        "tokens": outcome.tokens,
                        "duration_ms": round(duration, 3),
                        "flags": flags,
                    }
                )
            else:
                out[index] = symbolic.model_copy(
                    update={
                        "judge_fallback_reason": outcome.fallback_reason,
                        "cost_usd": outcome.cost_usd,
                        "tokens": outcome.tokens,
                        "flags": flags,
                    }
                )
            self.stats.add(outcome, out[index])
        self.stats.breaker = self.judge.breaker.summary()
        return out


def evaluate_with_judge(
    records: Sequence[AgentLogRecord],
    settings: JudgeSettings,
    rulebook: RuleBook | None = None,
    cache: JudgeCache | None = None,
) -> tuple[list[Evaluation], JudgeRunStats]:
    """Evaluate ``records`` with the judge of ``settings`` (symbolic, a model, or hybrid).

    Args:
        records: the records.
        settings: the judge settings.
        rulebook: resolves ``app_id`` to rules (``None``: bundled rules).
        cache: verdict cache for model verdicts.

    Returns:
        The evaluations (same order) and the run's :class:`JudgeRunStats`.

    >>> r = AgentLogRecord(run_id="r1", question="How many users live in 'Rome'?", sql="SELECT COUNT(*) FROM users WHERE city = 'Rome'")
    >>> evaluations, stats = evaluate_with_judge([r], JudgeSettings())
    >>> evaluations[0].judge, stats.records, stats.escalated
    ('symbolic', 1, 0)
    """
    if settings.is_symbolic:
        evaluations = evaluate_many(
            records,
            rulebook=rulebook,
            judge=settings.symbolic_judge(),
            schemas=settings.schemas(),
            observed=settings.observed(),
        )
        stats = JudgeRunStats(
            judge=settings.name, records=sum(e.status is EvaluationStatus.EVALUATED for e in evaluations)
        )
        return evaluations, stats
    evaluator = LLMEvaluator(settings, cache=cache)
    return evaluator.evaluate_many(records, rulebook), evaluator.stats
