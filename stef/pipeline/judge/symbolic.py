"""Stage D: the semantic verdict (STEF paper §2.D).

A :class:`Judge` turns the evidence of the earlier stages into one of four verdicts, a
confidence γ ∈ [0, 1] and a short rationale. :class:`SymbolicJudge` is deterministic, needs no
network and is the default; an LLM judge (litellm) implements the same protocol.

How the symbolic verdict follows from the evidence
--------------------------------------------------
Each check in :data:`CHECKS` looks for one kind of semantic error and reports
:class:`SuspectedError` items (NL2SQL-BUGs taxonomy names) with a severity weight. The weights
of all suspected errors are summed into W:

    W = 0            -> CORRECT      (weak findings, weight <= 0.25, only lower γ)
    0 < W < 1.0      -> LIKELY_CORRECT
    1.0 <= W < 2.0   -> POTENTIALLY_INCORRECT
    W >= 2.0         -> INCORRECT

γ grows with the amount of evidence the judge could check (hints in Q_e, requested filters)
and with the distance of W from the nearest verdict boundary; it is lower when the question
offered little to check against.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from stef.models import (
    AlignmentResult,
    EnrichmentResult,
    EnrichmentStatus,
    JudgeResult,
    ObservedReport,
    QuestionSpec,
    SchemaReport,
    SQLSpec,
    SuspectedError,
    Verdict,
)
from stef.pipeline.judge.calibrate import (
    DEFAULT_CALIBRATOR,
    OBSERVED_CALIBRATOR,
    SCHEMA_CALIBRATOR,
    SCHEMA_OBSERVED_CALIBRATOR,
    Calibrator,
    feature_vector,
    load_calibrator,
    schema_capped,
    verdict_from_probability,
)
from stef.pipeline.rules import AppRules
from stef.pipeline.schema import DatabaseSchema

INTEGER_DIVISION_DIALECTS = frozenset(
    {"sqlite", "postgres", "tsql", "redshift", "trino", "presto", "snowflake", "oracle", ""}
)
"""Dialects in which ``int / int`` truncates (or may, for the generic dialect)."""


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

    @cached_property
    def wanted(self) -> QuestionSpec:
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


def _merged(judge_input: JudgeInput) -> QuestionSpec:
    """Q_u and Q_e requirements together (Q_e refines Q_u)."""
    q, e = judge_input.question_spec, judge_input.enriched_spec
    return QuestionSpec(
        aggregations=tuple(dict.fromkeys((*q.aggregations, *e.aggregations))),
        column_mentions=tuple(dict.fromkeys((*q.column_mentions, *e.column_mentions))),
        formulas=tuple(dict.fromkeys((*q.formulas, *e.formulas))),
        top_k=e.top_k if e.top_k is not None else q.top_k,
        ordering=e.ordering or q.ordering,
        superlative=q.superlative or e.superlative,
        distinct=q.distinct or e.distinct,
        grouping=q.grouping or e.grouping,
        percentage=q.percentage or e.percentage,
        average_comparison=q.average_comparison or e.average_comparison,
        count_asked=q.count_asked or e.count_asked,
        comparison_ops=tuple(dict.fromkeys((*q.comparison_ops, *e.comparison_ops))),
    )


def check_filters(judge_input: JudgeInput) -> list[Finding]:
    """Missing, wrong and extra filters from the alignment (Condition/Value/Attribute errors)."""
    alignment = judge_input.alignment
    findings: list[Finding] = []
    for item in alignment.missing:
        findings.append(
            (
                _error(
                    "Condition-Related Errors", "Explicit Condition Missing", f"requested filter not applied: {item}"
                ),
                1.2,
            )
        )
    for item in alignment.wrong:
        if item.endswith("(operator)"):
            findings.append(
                (
                    _error(
                        "Operator-Related Errors",
                        "Comparison Operator Mismatch",
                        f"filter operator differs from the question: {item}",
                    ),
                    1.5,
                )
            )
        elif "another column" in item:
            findings.append(
                (_error("Attribute-Related Errors", "Attribute Mismatch", f"filter on the wrong column: {item}"), 1.2)
            )
        else:
            findings.append(
                (
                    _error("Value-Related Errors", "Value Mismatch", f"filter value differs from the question: {item}"),
                    2.0,
                )
            )
    benign = set(alignment.benign_extra)
    for item in alignment.extra:
        if item not in benign:
            findings.append(
                (
                    _error(
                        "Condition-Related Errors", "Explicit Condition Redundancy", f"filter not asked for: {item}"
                    ),
                    1.5,
                )
            )
    return findings


def check_hint_columns(judge_input: JudgeInput) -> list[Finding]:
    """Columns that Q_e's definitions name but S never uses (Attribute Mismatch/Missing)."""
    enriched = judge_input.enriched_spec
    used = set(judge_input.sql_spec.columns) | set(judge_input.sql_spec.tables)
    findings: list[Finding] = []
    for column in enriched.column_mentions:
        if column in used or column.replace(" ", "_") in used or column.replace("_", " ") in used:
            continue
        findings.append(
            (
                _error(
                    "Attribute-Related Errors", "Attribute Mismatch", f"Q_e names column `{column}`, S does not use it"
                ),
                0.7,
            )
        )
    return findings


def check_aggregations(judge_input: JudgeInput) -> list[Finding]:
    """Aggregation asked vs used ("how many" vs SUM, MAX vs ORDER BY ... LIMIT 1 ...)."""
    wanted = judge_input.wanted
    spec = judge_input.sql_spec
    used = set(spec.aggregations)
    findings: list[Finding] = []
    hint_aggs = set(judge_input.enriched_spec.aggregations) - set(judge_input.question_spec.aggregations)
    order_directions = {direction for _, direction in spec.order_by}
    for aggregation in sorted(hint_aggs):
        if aggregation in used:
            continue
        if aggregation == "MAX" and ("DESC" in order_directions and spec.limit is not None):
            continue
        if aggregation == "MIN" and ("ASC" in order_directions and spec.limit is not None):
            continue
        if aggregation == "AVG" and "/" in spec.arithmetic:
            continue
        if aggregation in {"COUNT", "SUM"} and used & {"COUNT", "SUM"}:
            continue
        findings.append(
            (
                _error(
                    "Function-Related Errors", "Aggregate Functions", f"Q_e asks for {aggregation}, S does not use it"
                ),
                0.8,
            )
        )
    measure_asked = wanted.count_asked or wanted.percentage or bool(set(wanted.aggregations) & {"COUNT", "SUM", "AVG"})
    if not measure_asked:
        for projection in spec.ranking_measures:
            findings.append(
                (
                    _error(
                        "Attribute-Related Errors",
                        "Attribute Redundancy",
                        f"S returns the ranking measure {projection}; the question asks only for what it ranks",
                    ),
                    1.0,
                )
            )
    if wanted.count_asked and not used & {"COUNT", "SUM"} and not spec.window_functions:
        findings.append(
            (
                _error(
                    "Function-Related Errors", "Aggregate Functions", "the question asks how many, S counts nothing"
                ),
                0.8,
            )
        )
    return findings


def check_formulas(judge_input: JudgeInput) -> list[Finding]:
    """Arithmetic defined in Q_e (ratios, percentages) that S does not implement."""
    wanted = judge_input.wanted
    spec = judge_input.sql_spec
    findings: list[Finding] = []
    if "/" in judge_input.enriched_spec.formulas and "/" not in spec.arithmetic:
        findings.append(
            (_error("Function-Related Errors", "Math Functions", "Q_e defines a division, S divides nothing"), 0.8)
        )
    if wanted.percentage and "/" in spec.arithmetic and not any(lit in {"100", "100.0"} for lit in spec.literals):
        findings.append(
            (
                _error(
                    "Function-Related Errors", "Math Functions", "a percentage is asked, S does not multiply by 100"
                ),
                0.6,
            )
        )
    if "/" in spec.arithmetic and spec.integer_divisions and spec.dialect in INTEGER_DIVISION_DIALECTS:
        findings.append(
            (
                _error(
                    "Function-Related Errors",
                    "Conversion Functions",
                    "integer division: no cast to a real type before '/'",
                ),
                0.6,
            )
        )
    return findings


def check_ordering(judge_input: JudgeInput) -> list[Finding]:
    """Sort direction vs "highest/lowest", top-k vs LIMIT, superlatives without ordering."""
    wanted = judge_input.wanted
    spec = judge_input.sql_spec
    findings: list[Finding] = []
    directions = [direction for _, direction in spec.order_by]
    if wanted.ordering and directions and spec.limit is not None and wanted.top_k is None:
        if all(d != wanted.ordering for d in directions) and not (set(spec.aggregations) & {"MAX", "MIN"}):
            findings.append(
                (
                    _error(
                        "Other Errors",
                        "ASC/DESC",
                        f"the question asks for {wanted.ordering} order, S sorts {directions[0]}",
                    ),
                    0.7,
                )
            )
    if wanted.top_k is not None and spec.limit is not None and spec.limit != wanted.top_k:
        findings.append(
            (
                _error(
                    "Clause-Related Errors", "Clause Missing", f"top {wanted.top_k} asked, S limits to {spec.limit}"
                ),
                1.5,
            )
        )
    if wanted.top_k is not None and spec.limit is None and not spec.window_functions:
        findings.append(
            (_error("Clause-Related Errors", "Clause Missing", f"top {wanted.top_k} asked, S has no LIMIT"), 0.8)
        )
    return findings


def check_distinct(judge_input: JudgeInput) -> list[Finding]:
    """DISTINCT asked ("different", "unique") but neither DISTINCT nor GROUP BY used."""
    wanted = judge_input.wanted
    spec = judge_input.sql_spec
    if (
        wanted.distinct
        and not spec.distinct
        and not spec.group_by
        and "DISTINCT" not in " ".join(spec.projections).upper()
    ):
        return [
            (_error("Other Errors", "DISTINCT", "the question asks for distinct values, S may return duplicates"), 1.0)
        ]
    return []


def check_structure(judge_input: JudgeInput) -> list[Finding]:
    """Join keys of different entities, joined tables that contribute nothing, ``= NULL`` comparisons, unrequested LIMIT/GROUP BY."""
    spec = judge_input.sql_spec
    wanted = judge_input.wanted
    findings: list[Finding] = []
    for condition in spec.join_key_mismatches:
        findings.append(
            (
                _error(
                    "Table-Related Errors",
                    "Join Condition Mismatch",
                    f"join equates keys of two different entities: {condition}",
                ),
                1.5,
            )
        )
    for column in spec.constant_projections:
        findings.append(
            (
                _error(
                    "Attribute-Related Errors",
                    "Attribute Redundancy",
                    f"projection {column} is fixed by an equality filter; it returns a value the question gave",
                ),
                0.8,
            )
        )
    for table in spec.unused_tables:
        findings.append(
            (
                _error(
                    "Table-Related Errors",
                    "Table Redundancy",
                    f"table {table} is joined but none of its columns is used",
                ),
                0.3,
            )
        )
    report = judge_input.schema_report
    if report is not None and report.count_fanouts:
        findings += [
            (_error("Other Errors", "DISTINCT", f"COUNT over a join without DISTINCT counts rows twice: {item}"), 0.25)
            for item in report.count_fanouts
        ]
    elif report is not None and report.counts_checked:
        pass  # every judged COUNT over a join lands on primary keys: no row is counted twice
    elif (
        spec.count_join_safety != "safe"
        and "COUNT" in spec.aggregations
        and spec.joins
        and not any("DISTINCT" in p.upper() for p in spec.projections)
        and not spec.distinct
    ):
        findings.append(
            (
                _error(
                    "Other Errors",
                    "DISTINCT",
                    "COUNT over a join without DISTINCT may count rows of the joined table twice",
                ),
                0.25,
            )
        )
    if spec.tautologies:
        findings.append(
            (
                _error(
                    "Operator-Related Errors",
                    "Logical Operator Mismatch",
                    "a predicate compares two constants (e.g. OR 1 = 1) and disables the filters",
                ),
                2.0,
            )
        )
    for key in sort_keys_only_sorted(judge_input.question, spec):
        findings.append(
            (
                _error(
                    "Attribute-Related Errors",
                    "Attribute Redundancy",
                    f"S also returns the sort key {key}; the question only sorts by it",
                ),
                1.0,
            )
        )
    if spec.ungrouped_aggregate_order is not None:
        findings.append(
            (
                _error(
                    "Clause-Related Errors",
                    "Clause Missing",
                    f"ORDER BY {spec.ungrouped_aggregate_order} with no GROUP BY: the whole table is one group, the ranking ranks nothing",
                ),
                1.5,
            )
        )
    for condition in spec.precedence_slips:
        findings.append(
            (
                _error(
                    "Operator-Related Errors",
                    "Logical Operator Mismatch",
                    f"AND binds tighter than OR, the other conditions hold for one alternative only: {condition}",
                ),
                1.5,
            )
        )
    if spec.null_comparisons:
        findings.append(
            (
                _error(
                    "Operator-Related Errors",
                    "Comparison Operator Mismatch",
                    "comparison with = NULL is never true; use IS NULL",
                ),
                1.5,
            )
        )
    if spec.limit is not None and wanted.top_k is None and not wanted.superlative and not wanted.ordering:
        findings.append(
            (
                _error(
                    "Clause-Related Errors",
                    "Clause Redundancy",
                    f"LIMIT {spec.limit} without a superlative or top-k in the question",
                ),
                0.6,
            )
        )
    return findings


_SORTING_BEFORE = re.compile(r"\b(?:order|ordered|sort|sorted|rank|ranked|arrange|arranged)\b[^,.;]*$")
"""An ordering phrase still open before a word ("in ascending order of ", "sorted by their ")."""


def sort_keys_only_sorted(question: str, spec: SQLSpec) -> list[str]:
    """ORDER BY columns that S also projects (beside other projections) while the question names
    them only inside an ordering phrase: "the names of teachers in ascending order of age"
    answered with ``SELECT name, age ... ORDER BY age`` returns a column nobody asked for.

    >>> from stef.pipeline.extract_sql import extract_sql_spec
    >>> import sqlglot
    >>> spec = extract_sql_spec(sqlglot.parse_one("SELECT name, age FROM teacher ORDER BY age"))
    >>> sort_keys_only_sorted("List the names of teachers in ascending order of age.", spec)
    ['age']
    >>> sort_keys_only_sorted("List the name and age of teachers in ascending order of age.", spec)
    []
    """
    if len(spec.projections) < 2 or not spec.order_by:
        return []
    lowered = question.lower()
    found: list[str] = []
    for key, _direction in spec.order_by:
        if key not in spec.projection_columns or not re.fullmatch(r"[a-z0-9_]+", key):
            continue
        word = key.rsplit("_", 1)[-1]
        mentions = [m.start() for m in re.finditer(rf"\b{re.escape(word)}", lowered)] if len(word) >= 3 else []
        if mentions and all(_SORTING_BEFORE.search(lowered[max(0, at - 40) : at]) for at in mentions):
            found.append(key)
    return found


def check_dates(judge_input: JudgeInput) -> list[Finding]:
    """A raw date column compared with a bare year or partial date, or minus an extracted
    date part; a STRFTIME part compared with a value it never equals (Date/Time Functions; see
    :attr:`stef.models.SQLSpec.date_mismatches` and ``padded_part_mismatches``)."""
    return [
        *(
            (
                _error(
                    "Function-Related Errors",
                    "Date/Time Functions",
                    f"date column used as a year or month without extraction: {expression}",
                ),
                1.5,
            )
            for expression in judge_input.sql_spec.date_mismatches
        ),
        *(
            (
                _error(
                    "Function-Related Errors",
                    "Date/Time Functions",
                    f"STRFTIME gives zero-padded text, never equal to this value: {expression}",
                ),
                1.5,
            )
            for expression in judge_input.sql_spec.padded_part_mismatches
        ),
    ]


def check_null_handling(judge_input: JudgeInput) -> list[Finding]:
    """Implicit NULL handling: a hint's ``x IS [NOT] NULL`` that S omits; ``ORDER BY x … LIMIT``
    that puts rows with unknown x first (weak: often harmless when x has no NULLs)."""
    spec = judge_input.sql_spec
    applied = {(f.column, f.operator) for f in spec.filters}
    findings: list[Finding] = []
    for column, operator in judge_input.enriched_spec.null_conditions:
        if (column, operator) not in applied:
            findings.append(
                (
                    _error(
                        "Condition-Related Errors",
                        "Implicit Condition Missing",
                        f"Q_e requires {column} {operator}, S does not filter it",
                    ),
                    1.2,
                )
            )
    non_null = set(judge_input.schema_report.non_null_order_keys) if judge_input.schema_report is not None else set()
    for column in spec.unguarded_null_order:
        if column.lower() in non_null:
            continue  # the schema says it cannot be NULL
        findings.append(
            (
                _error(
                    "Condition-Related Errors",
                    "Implicit Condition Missing",
                    f"ORDER BY {column} … LIMIT puts NULL {column} first; no IS NOT NULL filter",
                ),
                0.25,
            )
        )
    return findings


def check_subqueries(judge_input: JudgeInput) -> list[Finding]:
    """Question structure that one flat SELECT cannot express (Subquery Missing): ranking a
    single aggregated row, or comparing with an average computed nowhere."""
    spec = judge_input.sql_spec
    findings: list[Finding] = []
    if spec.single_row_ordering:
        findings.append(
            (
                _error(
                    "Subquery-Related Errors",
                    "Subquery Missing",
                    "ORDER BY on a query that aggregates to one row has no effect (nor has its LIMIT); the ranking needs a subquery",
                ),
                1.5,
            )
        )
    nested = spec.subquery_count or spec.cte_names or spec.window_functions
    if judge_input.wanted.average_comparison and not nested:
        findings.append(
            (
                _error(
                    "Subquery-Related Errors",
                    "Subquery Missing",
                    "the question compares with an average, S computes no average to compare with (no subquery, CTE or window)",
                ),
                0.8,
            )
        )
    return findings


def check_statements(judge_input: JudgeInput) -> list[Finding]:
    """Non-SELECT statements logged with the answer (DROP, DELETE ...): never a clean answer."""
    flagged = [f.split(": ", 1)[1] for f in judge_input.sql_spec.flags if f.startswith("non_select_statement")]
    if flagged:
        return [(_error("Other Errors", "Other", f"S also runs non-SELECT statement(s): {', '.join(flagged)}"), 3.0)]
    return []


def check_enrichment(judge_input: JudgeInput) -> list[Finding]:
    """Q_e contradicts Q_u (another year, threshold or top-k): S built on Q_e is suspect."""
    enrichment = judge_input.enrichment
    if enrichment is None or enrichment.status is not EnrichmentStatus.CONTRADICTS:
        return []
    return [
        (_error("Condition-Related Errors", "Explicit Condition Mismatch", f"Q_e contradicts Q_u: {item}"), 0.8)
        for item in enrichment.contradictions
    ]


SCHEMA_FINDINGS: tuple[tuple[str, str, str, str, float], ...] = (
    ("unknown_tables", "Table-Related Errors", "Table Mismatch", "S reads a table the schema does not have", 3.0),
    (
        "unknown_columns",
        "Attribute-Related Errors",
        "Attribute Mismatch",
        "S uses a column the schema does not have",
        2.5,
    ),
    (
        "ambiguous_columns",
        "Attribute-Related Errors",
        "Attribute Mismatch",
        "unqualified column that several joined tables have (ambiguous)",
        2.5,
    ),
    (
        "non_key_joins",
        "Table-Related Errors",
        "Join Condition Mismatch",
        "join on columns that are not a declared key pair",
        1.5,
    ),
    (
        "join_type_mismatches",
        "Table-Related Errors",
        "Join Condition Mismatch",
        "join of columns of different types",
        1.0,
    ),
    ("primary_key_joins", "Table-Related Errors", "Join Condition Mismatch", "join of two primary keys", 1.5),
    (
        "literal_type_mismatches",
        "Value-Related Errors",
        "Value Mismatch",
        "literal that does not fit the column's type",
        1.2,
    ),
    ("text_aggregates", "Function-Related Errors", "Aggregate Functions", "SUM or AVG over a text column", 1.2),
    (
        "named_columns_unused",
        "Attribute-Related Errors",
        "Attribute Mismatch",
        "column named by the question left out",
        0.8,
    ),
    (
        "impossible_null_tests",
        "Condition-Related Errors",
        "Explicit Condition Mismatch",
        "IS NULL that can never hold",
        1.5,
    ),
)
"""(:class:`SchemaReport` field, category, subcategory, evidence prefix, weight) of the schema findings."""


def check_schema(judge_input: JudgeInput) -> list[Finding]:
    """S against the app's schema (only when one is given): unknown tables and columns, joins on
    non-key or type-mismatched pairs, literals that do not fit their column, SUM/AVG over text."""
    report = judge_input.schema_report
    if report is None:
        return []
    return [
        (_error(category, subcategory, f"{prefix}: {item}"), weight)
        for field, category, subcategory, prefix, weight in SCHEMA_FINDINGS
        for item in getattr(report, field)
    ]


def check_observed(judge_input: JudgeInput) -> list[Finding]:
    """S against the app's observed catalog (only when one is given and no schema): tables,
    columns and join pairs none of the app's earlier answers used."""
    report = judge_input.observed_report
    if report is None:
        return []
    findings: list[Finding] = []
    findings += [
        (_error("Table-Related Errors", "Table Mismatch", f"no earlier answer of this app reads table {t}"), 1.0)
        for t in report.unseen_tables
    ]
    findings += [
        (
            _error("Attribute-Related Errors", "Attribute Mismatch", f"no earlier answer of this app uses column {c}"),
            0.5,
        )
        for c in report.unseen_columns
    ]
    findings += [
        (_error("Table-Related Errors", "Join Condition Mismatch", f"join pair new to this app: {j}"), 1.0)
        for j in report.unseen_joins
    ]
    return findings


CHECKS: tuple[Check, ...] = (
    check_statements,
    check_schema,
    check_observed,
    check_enrichment,
    check_filters,
    check_hint_columns,
    check_aggregations,
    check_formulas,
    check_ordering,
    check_distinct,
    check_structure,
    check_dates,
    check_null_handling,
    check_subqueries,
)
"""The symbolic checks, in the order their findings are reported."""

VERDICT_THRESHOLDS: tuple[tuple[float, Verdict], ...] = (
    (2.0, Verdict.INCORRECT),
    (1.0, Verdict.POTENTIALLY_INCORRECT),
    (1e-9, Verdict.LIKELY_CORRECT),
)
"""(minimum summed weight W, verdict), first match wins; W = 0 is CORRECT."""
WEAK_WEIGHT = 0.25
"""Findings of this weight or less are weak evidence (e.g. COUNT over a join without
DISTINCT): they are reported and lower γ by :data:`WEAK_PENALTY` each, but
do not change the verdict."""
WEAK_PENALTY = 0.08


class SymbolicJudge:
    """Deterministic rule-based judge (the default; no network, no model).

    >>> SymbolicJudge().name
    'symbolic'
    """

    name = "symbolic"

    def __init__(
        self,
        checks: tuple[Check, ...] = CHECKS,
        calibrator: Calibrator | str | None = DEFAULT_CALIBRATOR,
        schema_calibrator: Calibrator | str | None = SCHEMA_CALIBRATOR,
        observed_calibrator: Calibrator | str | None = OBSERVED_CALIBRATOR,
        schema_observed_calibrator: Calibrator | str | None = SCHEMA_OBSERVED_CALIBRATOR,
    ) -> None:
        """Args:
        checks: the checks to run, in order.
        calibrator: a :class:`stef.pipeline.judge.calibrate.Calibrator`, the name of an artifact in
            ``stef/pipeline/judge/calibrators/``, or ``None`` for the uncalibrated rule mapping of W.
        schema_calibrator: the same for records checked against a schema (its features
            include the schema findings); ``None``: use ``calibrator`` for them too.
        observed_calibrator: the same for records compared with an observed catalog.
        schema_observed_calibrator: the same for records checked against both.
        """
        self.checks = checks
        self._calibrator = calibrator
        self._schema_calibrator = schema_calibrator
        self._observed_calibrator = observed_calibrator
        self._schema_observed_calibrator = schema_observed_calibrator

    @property
    def calibrator(self) -> Calibrator | None:
        """The calibrator of schema-free records (an artifact name is loaded on first use)."""
        if isinstance(self._calibrator, str):
            self._calibrator = load_calibrator(self._calibrator)
        return self._calibrator

    @property
    def schema_calibrator(self) -> Calibrator | None:
        """The calibrator of records checked against a schema (``None``: :attr:`calibrator`)."""
        if isinstance(self._schema_calibrator, str):
            self._schema_calibrator = load_calibrator(self._schema_calibrator)
        return self._schema_calibrator if self._schema_calibrator is not None else self.calibrator

    @property
    def observed_calibrator(self) -> Calibrator | None:
        """The calibrator of records compared with an observed catalog (``None``: :attr:`calibrator`)."""
        if isinstance(self._observed_calibrator, str):
            self._observed_calibrator = load_calibrator(self._observed_calibrator)
        return self._observed_calibrator if self._observed_calibrator is not None else self.calibrator

    @property
    def schema_observed_calibrator(self) -> Calibrator | None:
        """The calibrator of records checked against a schema and an observed catalog (``None``: :attr:`schema_calibrator`)."""
        if isinstance(self._schema_observed_calibrator, str):
            self._schema_observed_calibrator = load_calibrator(self._schema_observed_calibrator)
        return (
            self._schema_observed_calibrator if self._schema_observed_calibrator is not None else self.schema_calibrator
        )

    def calibrator_for(self, judge_input: JudgeInput) -> Calibrator | None:
        """The calibrator that judges ``judge_input``, by what it was checked against: a schema,
        an observed catalog, both, or neither."""
        if self._calibrator is None:
            return None
        if judge_input.schema_report is not None:
            return (
                self.schema_observed_calibrator if judge_input.observed_report is not None else self.schema_calibrator
            )
        return self.observed_calibrator if judge_input.observed_report is not None else self.calibrator

    def findings(self, judge_input: JudgeInput) -> list[Finding]:
        """Every check's findings (suspected error, weight), in check order."""
        found: list[Finding] = []
        for check in self.checks:
            found.extend(check(judge_input))
        return found

    def judge(self, judge_input: JudgeInput) -> JudgeResult:
        """Run every check, sum the weights, map to a verdict and a confidence γ.

        Returns:
            :class:`JudgeResult` with ``suspected_errors`` in check order.
        """
        findings = self.findings(judge_input)
        errors = tuple(error for error, _ in findings)
        calibrator = self.calibrator_for(judge_input)
        if calibrator is not None:
            probability = round(
                schema_capped(calibrator.probability(feature_vector(judge_input, findings)), judge_input), 4
            )
            verdict, confidence = verdict_from_probability(probability)
            detail = "; ".join(e.evidence for e in errors[:6]) or "no semantic mismatch found"
            rationale = f"{verdict.value} (calibrated P(correct)={probability:.2f}, {calibrator.version}): {detail}"
            return JudgeResult(
                verdict=verdict,
                confidence=confidence,
                rationale=rationale[:2000],
                judge=self.name,
                suspected_errors=errors,
                p_correct=probability,
            )
        weight = sum(w for _, w in findings if w > WEAK_WEIGHT)
        weak = sum(1 for _, w in findings if w <= WEAK_WEIGHT)
        verdict = Verdict.CORRECT
        for threshold, candidate in VERDICT_THRESHOLDS:
            if weight >= threshold:
                verdict = candidate
                break
        confidence = _confidence(judge_input, weight, verdict, weak)
        if errors:
            rationale = f"{verdict.value} (W={weight:.2f}): " + "; ".join(e.evidence for e in errors[:6])
        else:
            checked = _evidence_count(judge_input)
            rationale = f"CORRECT: no semantic mismatch found across {checked} checked requirement(s)"
        return JudgeResult(
            verdict=verdict, confidence=confidence, rationale=rationale[:2000], judge=self.name, suspected_errors=errors
        )


def _evidence_count(judge_input: JudgeInput) -> int:
    alignment = judge_input.alignment
    enriched = judge_input.enriched_spec
    return len(alignment.matched) + len(enriched.column_mentions) + len(enriched.aggregations) + len(enriched.formulas)


def structural_complexity(spec: SQLSpec) -> int:
    """Constructs a schema-free judge checks least reliably (STEF paper §6, limitations):
    tables beyond two, subqueries, set operations and window functions, one point each."""
    return max(0, len(spec.tables) - 2) + spec.subquery_count + len(spec.set_operations) + len(spec.window_functions)


def _confidence(judge_input: JudgeInput, weight: float, verdict: Verdict, weak: int = 0) -> float:
    """γ: more checked evidence and a W far from the verdict boundaries mean more confidence;
    structural complexity and weak findings lower the confidence in a CORRECT verdict."""
    evidence = _evidence_count(judge_input)
    richness = min(evidence, 6) / 6.0
    if verdict is Verdict.CORRECT:
        doubt = 0.1 * structural_complexity(judge_input.sql_spec) + WEAK_PENALTY * weak
        return round(max(0.66, 0.78 + 0.2 * richness - doubt), 3)
    if verdict is Verdict.LIKELY_CORRECT:
        return round(0.86 - 0.1 * weight, 3)
    if verdict is Verdict.POTENTIALLY_INCORRECT:
        return round(0.7 + 0.05 * richness, 3)
    return round(min(0.95, 0.75 + 0.05 * (weight - 2.0)), 3)
