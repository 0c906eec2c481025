"""Data types of stage D: what a judge sees for one record (:class:`JudgeInput`), the
:class:`Judge` protocol, and a check's findings (STEF paper §2.D).

The symbolic judge (:mod:`stef.pipeline.judge.symbolic`), its calibration
(:mod:`stef.pipeline.judge.calibrate`) and the LLM judge all import them from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from stef.models import (
    AlignmentResult,
    EnrichmentResult,
    JudgeResult,
    ObservedReport,
    QuestionSpec,
    SchemaReport,
    SQLSpec,
    SuspectedError,
)
from stef.pipeline.rules import AppRules
from stef.pipeline.schema import DatabaseSchema


@dataclass(frozen=True, slots=True)
class Requirements:
    """What Q_u and Q_e ask for together (Q_e refines Q_u): the fields of
    :class:`stef.models.QuestionSpec` that the symbolic checks read from :attr:`JudgeInput.wanted`."""

    aggregations: tuple[str, ...]
    top_k: int | None
    ordering: str | None
    superlative: bool
    distinct: bool
    percentage: bool
    average_comparison: bool
    count_asked: bool


@dataclass(frozen=True)
class JudgeInput:
    """Everything a judge sees for one record (no schema, no reference SQL).

    Attributes:
        question: Q_u.
        enriched_question: Q_e or ``None``.
        sql: the cleaned answer SQL text.
        sql_spec: the normalised SQL spec (after stage E).
        question_spec, enriched_spec: specs of Q_u and Q_e.
        alignment: the filter alignment of stage C.
        normalization_rules_applied: names of the stage-E rules that fired.
        grouping_required: stage E found the GROUP BY structurally required.
        rules: R_app.
        enrichment: the Q_u/Q_e comparison (``None`` without Q_e).
        schema_report: S against the app's schema, when one is given.
    """

    question: str
    enriched_question: str | None
    sql: str
    sql_spec: SQLSpec
    question_spec: QuestionSpec
    enriched_spec: QuestionSpec
    alignment: AlignmentResult
    normalization_rules_applied: tuple[str, ...]
    grouping_required: bool
    rules: AppRules
    enrichment: EnrichmentResult | None = None
    schema_report: SchemaReport | None = None
    """S checked against the app's schema (``None``: no schema; the judge is schema-free)."""
    schema: DatabaseSchema | None = None
    """The app's schema itself (an LLM judge is shown the tables S reads)."""
    observed_report: ObservedReport | None = None
    """S against the app's observed catalog (``None``: none given)."""
    app_id: str | None = None
    """The record's app (picks the app's deployment calibrator, if any)."""

    @cached_property
    def wanted(self) -> Requirements:
        """Q_u and Q_e requirements merged (Q_e refines Q_u); computed once per record."""
        return _merged(self)


class Judge(Protocol):
    """A semantic judge: ``judge(JudgeInput) -> JudgeResult``; ``name`` is stored with results."""

    name: str

    def judge(self, judge_input: JudgeInput) -> JudgeResult:
        """Return verdict, confidence γ ∈ [0, 1], rationale and suspected errors."""
        ...


Finding = tuple[SuspectedError, float]
Check = Callable[[JudgeInput], list[Finding]]


def _error(category: str, subcategory: str, evidence: str) -> SuspectedError:
    return SuspectedError(category=category, subcategory=subcategory, evidence=evidence)


def _merged(judge_input: JudgeInput) -> Requirements:
    """Q_u and Q_e requirements together (Q_e refines Q_u)."""
    q, e = judge_input.question_spec, judge_input.enriched_spec
    return Requirements(
        aggregations=tuple(dict.fromkeys((*q.aggregations, *e.aggregations))),
        top_k=e.top_k if e.top_k is not None else q.top_k,
        ordering=e.ordering or q.ordering,
        superlative=q.superlative or e.superlative,
        distinct=q.distinct or e.distinct,
        percentage=q.percentage or e.percentage,
        average_comparison=q.average_comparison or e.average_comparison,
        count_asked=q.count_asked or e.count_asked,
    )
