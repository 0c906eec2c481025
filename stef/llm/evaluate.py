"""The STEF pipeline with an LLM judge for a whole batch (STEF paper §2.D, §3).

:func:`stef.pipeline.evaluate.evaluate` judges one record at a time. A language model wants the opposite:
many requests in flight, a cache lookup per batch and one budget per run. :class:`LLMEvaluator`
therefore runs the pipeline in three steps, each record through stages A–E, the symbolic judge
and :func:`stef.pipeline.evaluate.finish` once:

1. :func:`stef.pipeline.evaluate.judge_many_prepared`: stages A–E and the symbolic verdict for every
   record, keeping each record's :class:`stef.pipeline.evaluate.Prepared` stages (records that cannot be
   evaluated keep their typed status);
2. one :meth:`stef.llm.judge.LLMJudge.start_many` call for the records that go to the model
   (all of them, or in hybrid mode those the symbolic judge hedged on: a LIKELY_CORRECT or
   POTENTIALLY_INCORRECT verdict, p_correct in [0.35, 0.65)); their requests join the run's
   request pool at once (:class:`stef.llm.pool.RequestSlots`), so the next batch can be prepared
   and queued while this one waits (:meth:`LLMEvaluator.submit`, :meth:`LLMEvaluator.evaluate_batches`);
3. :func:`stef.pipeline.evaluate.finish` of each prepared record with the verdict it keeps (the
   model's, or the symbolic one when the model was not asked or could not answer), so every rule
   applied after the judge (Φ, the non-SELECT override) holds as in :func:`stef.pipeline.evaluate.evaluate`.

Every evaluation then carries ``judge`` (the model string, or ``symbolic``),
``judge_fallback_reason`` (``None`` unless the model could not answer), ``cost_usd`` and
``tokens``; :attr:`LLMEvaluator.stats` sums a run (requests, cache hits, fallbacks, spend).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from stef.display import one_line
from stef.llm.budget import run_budget
from stef.llm.judge import LLMJudge, PendingJudgements
from stef.llm.models import JudgeCache, JudgeConfigError, JudgeOutcome
from stef.llm.settings import JudgeSettings
from stef.llm.usage import USAGE_FLAG
from stef.models import AgentLogRecord, Evaluation, EvaluationStatus, JudgeResult, ObservedCatalogBook, Verdict
from stef.pipeline.evaluate import Judged, evaluate_many, finish, internal_error, judge_many_prepared, overridden
from stef.pipeline.judge.models import Judge
from stef.pipeline.rules import RuleBook

FIRST_PART = 50
"""Records of a run's first batch that :meth:`LLMEvaluator.submit` prepares before queueing their
requests (then the rest of the batch): the run's first requests start after 50 records, not after
the whole batch. Later batches are queued in one part (one cache read each) while the pool is busy."""

FIRST_REQUESTS_WAIT_S = 1.0
"""Seconds :meth:`LLMEvaluator.submit` waits at most, after queueing a run's first requests, before
it prepares the rest of the batch (:func:`first_requests_target` says for how many slots taken in
all; :meth:`stef.llm.pool.RequestSlots.wait_entered`). The symbolic stages hold the interpreter in
bursts of milliseconds, and the event loop's thread starts each request in several steps that each
wait for it, litellm's first requests of a process (its HTTP clients made) most of all: preparing
450 more records at once delayed the first request by 0.3-0.6 s of a 1,000-record run (issue 20).
A loop slower than the cap is waited for no longer."""


def first_requests_target(asked: int, limit: int) -> int:
    """Slots taken in all that :meth:`LLMEvaluator.submit` waits for after queueing a run's first
    ``asked`` requests on a pool of ``limit`` slots.

    ``limit + 1`` (every slot taken, then one again: the first answer came back, so litellm has
    built and sent the first requests) when at least ``limit`` requests are queued beyond the
    slots, so that ``limit - 1`` still wait while the rest of the batch is prepared and no slot
    idles; else ``min(limit, asked)`` (the slots taken). On a 1,000-record run at 16 slots and
    200 ms (5 alternating runs each): the first request 0.1 s after its slot instead of 0.5 s
    (0.3-0.7), the 17th slot 0.3 s after the first instead of 0.6-1.0 s, and the whole run 18.9 s
    with the answer waited for against 19.6 s without (medians).

    >>> first_requests_target(50, 16), first_requests_target(20, 16), first_requests_target(5, 16)
    (17, 16, 5)
    """
    return limit + 1 if asked >= 2 * limit else min(limit, asked)


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
        """One line for logs, control characters made visible (:func:`stef.display.one_line`): the
        breaker's line quotes the server's error text.

        >>> JudgeRunStats("openai/gpt-4o-mini", records=4, escalated=4, model_verdicts=4, requests=4).summary()
        'judge openai/gpt-4o-mini: 4 records, 4 to the model (100.0%), 4 model verdicts, 0 cache hits, 4 requests, 0 fallbacks, spent $0.0000, tokens 0'
        """
        share = f"{self.escalated_share:.1%}" if self.escalated_share is not None else "–"
        untrusted = f", {self.usage_untrusted} with untrusted usage" if self.usage_untrusted else ""
        breaker = f"; {self.breaker}" if self.breaker else ""
        return one_line(
            f"judge {self.judge}: {self.records} records, {self.escalated} to the model ({share}), {self.model_verdicts} model verdicts, "
            f"{self.cache_hits} cache hits, {self.requests} requests, {self.fallback_count} fallbacks, "
            f"spent ${self.spent_usd:.4f}, tokens {self.tokens}{untrusted}{breaker}"
        )


class LLMEvaluator:
    """Evaluates batches of records with an LLM judge (or hybrid), with cache and budget.

    One instance serves a whole run: the budget (``max_cost_usd``) and :attr:`stats` span every
    batch given to :meth:`evaluate_many`; with ``settings.run_key`` the budget is the run's, shared
    with the other evaluators of the run in this process (:func:`stef.llm.budget.run_budget`).

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
        self.budget = run_budget(
            settings.max_cost_usd,
            settings.run_key,
            settings.budget_shares,
            settings.backfill_max_cost_usd,
            settings.backfill_spent_usd,
        )
        self.stats = JudgeRunStats(judge=settings.name)
        self.schemas = settings.schemas()
        self.observed = observed if observed is not None else settings.observed()
        self._submitted = False

    @property
    def name(self) -> str:
        """The ``--judge`` setting (``MODEL`` or ``hybrid:MODEL``)."""
        return self.settings.name

    def _escalate(self, judged: Judged) -> bool:
        """Whether a judged record goes to the model: every one, or in hybrid mode those whose
        symbolic verdict (as :func:`finish` stores it) is hedged."""
        if not self.settings.hybrid:
            return True
        assert judged.prepared is not None and judged.result is not None
        return overridden(judged.prepared, judged.result).verdict in HEDGED_VERDICTS

    def submit(
        self, records: Iterable[AgentLogRecord], rulebook: RuleBook | None = None, default_dialect: str | None = None
    ) -> PendingBatch:
        """Start a batch and return at once: stages A–E and the symbolic verdict of every record
        run now, in this thread; the model's requests are queued on the run's request pool.

        Submit the next batch before collecting this one (:meth:`PendingBatch.evaluations`) and
        the pool never runs dry between batches (:meth:`evaluate_batches` does so).

        Args: as :meth:`evaluate_many`.

        Returns:
            The :class:`PendingBatch`; collect it in the thread that submitted it (the cache is
            written there).

        Raises:
            RulesError: an invalid rule file (a configuration error, as in ``evaluate_many``).
            SchemaError: an app's schema file cannot be read.
        """
        rulebook = rulebook or RuleBook()
        batch = list(records)
        judged: list[Judged] = []
        escalated: list[int] = []
        judgements = self.judge.start_many([], cache=self.cache, budget=self.budget)
        bounds = [0, FIRST_PART, len(batch)] if not self._submitted and len(batch) > FIRST_PART else [0, len(batch)]
        slots = self.judge.pool
        first_requests = not self._submitted and slots.entered == 0  # the run's pool has started nothing yet
        self._submitted = True
        for start, end in pairwise(bounds):
            part = judge_many_prepared(
                batch[start:end],
                rulebook=rulebook,
                judge=self.symbolic,
                default_dialect=default_dialect,
                schemas=self.schemas,
                observed=self.observed,
                finished=False,
            )
            asked: list[Judged] = []
            for index, item in enumerate(part, start=len(judged)):
                if item.prepared is not None and item.result is not None:
                    self.stats.records += 1
                    if self._escalate(item):
                        escalated.append(index)
                        asked.append(item)
            judged.extend(part)
            if asked:
                judgements.add(
                    [item.prepared.judge_input for item in asked if item.prepared is not None],
                    fallbacks=[item.result for item in asked if item.result is not None],
                )
                if first_requests and judgements.asked:
                    first_requests = False
                    slots.wait_entered(first_requests_target(len(judgements.asked), slots.limit), FIRST_REQUESTS_WAIT_S)
        return PendingBatch(self, judged, escalated, judgements)

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
        return self.submit(records, rulebook, default_dialect).evaluations()

    def evaluate_batches(
        self,
        batches: Iterable[Sequence[AgentLogRecord]],
        rulebook: RuleBook | None = None,
        default_dialect: str | None = None,
        ahead: int = 1,
    ) -> Iterator[list[Evaluation]]:
        """Evaluate batches in order, each as :meth:`evaluate_many` would, with the model's requests
        of consecutive batches overlapping: ``ahead`` more batches are submitted before one is
        collected, so the run's request pool stays full across batch boundaries and the symbolic
        stages of the next batch run while this one's requests are in flight.

        Args:
            batches: the batches (e.g. :data:`stef.models.BATCH_SIZE` records each).
            rulebook, default_dialect: as :meth:`evaluate_many`.
            ahead: batches submitted beyond the one being collected (0: one batch at a time).

        Yields:
            The evaluations of each batch (one per record, same order), batch after batch.

        Raises:
            RulesError, SchemaError: as :meth:`evaluate_many`; the batches still waiting are cancelled.
        """
        rulebook = rulebook or RuleBook()
        waiting: deque[PendingBatch] = deque()
        try:
            for batch in batches:
                waiting.append(self.submit(batch, rulebook, default_dialect))
                while len(waiting) > ahead:
                    yield waiting.popleft().evaluations()
            while waiting:
                yield waiting.popleft().evaluations()
        finally:
            for pending in waiting:
                pending.cancel()


class PendingBatch:
    """A batch of :meth:`LLMEvaluator.submit`: judged symbolically, its model requests queued.

    :meth:`evaluations` waits for the model, finishes every record once with the verdict it keeps
    and adds the batch to the evaluator's :attr:`LLMEvaluator.stats`.
    """

    def __init__(
        self, evaluator: LLMEvaluator, judged: list[Judged], escalated: list[int], judgements: PendingJudgements
    ) -> None:
        self.evaluator = evaluator
        self.judged = judged
        self.escalated = escalated
        self.judgements = judgements
        self._evaluations: list[Evaluation] | None = None

    def cancel(self) -> None:
        """Give up the batch's model requests not yet made (a run that stops on an error)."""
        if self._evaluations is None:
            self.judgements.cancel()

    def evaluations(self) -> list[Evaluation]:
        """One :class:`Evaluation` per record of the batch, same order (computed once).

        A record that went to the model carries its verdict, or the symbolic one with
        ``judge_fallback_reason``; a record whose verdict cannot be finished (an unexpected
        error) gets the ``internal_error`` status. Never raises for a model failure.
        """
        if self._evaluations is None:
            self._evaluations = self._collect()
        return self._evaluations

    def _collect(self) -> list[Evaluation]:
        evaluator = self.evaluator
        version = evaluator.settings.evaluator_version
        outcomes = self.judgements.outcomes()
        by_index = dict(zip(self.escalated, outcomes, strict=True))
        out: list[Evaluation] = []
        for index, item in enumerate(self.judged):
            if item.evaluation is not None:  # a record that could not be judged: its typed status
                out.append(item.evaluation.model_copy(update={"evaluator_version": version}))
                continue
            assert item.prepared is not None and item.result is not None
            outcome = by_index.get(index)
            if outcome is None:
                out.append(_finished(item, item.result, version, item.duration_ms))
                continue
            flags = (*item.prepared.flags, *(flag for flag in outcome.flags if flag not in item.prepared.flags))
            if outcome.fallback_reason is None:
                duration = round((item.duration_ms or 0.0) + outcome.latency_ms, 3)
                update: dict[str, object] = {"cost_usd": outcome.cost_usd, "tokens": outcome.tokens, "flags": flags}
                evaluation = _finished(item, outcome.result, version, duration, update)
            else:
                update = {
                    "judge_fallback_reason": outcome.fallback_reason,
                    "cost_usd": outcome.cost_usd,
                    "tokens": outcome.tokens,
                    "flags": flags,
                }
                evaluation = _finished(item, item.result, version, item.duration_ms, update)
            out.append(evaluation)
            evaluator.stats.add(outcome, evaluation)
        evaluator.stats.breaker = evaluator.judge.breaker.summary()
        return out


def _finished(
    item: Judged,
    result: JudgeResult,
    version: str,
    duration_ms: float | None,
    update: dict[str, object] | None = None,
) -> Evaluation:
    """:func:`finish` of a judged record with ``result`` and the model's figures (``update``);
    an unexpected error becomes the record's ``internal_error`` evaluation."""
    assert item.prepared is not None
    try:
        evaluation = finish(item.prepared, result, version, duration_ms)
        return evaluation.model_copy(update=update) if update else evaluation
    except Exception as exc:
        return internal_error(item.prepared.record, exc).model_copy(update={"evaluator_version": version})


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
