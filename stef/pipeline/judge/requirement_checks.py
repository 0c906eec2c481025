"""Symbolic checks of stage D: does S do what Q_u / Q_e ask (STEF paper §2.D)?

Filters, columns named by hints, aggregations, hint formulas, ordering and top-k, DISTINCT and the
structure of S (grouping, joins, set operations, ...), each as ``check(JudgeInput) -> findings``
with NL2SQL-BUGs taxonomy names and a severity weight.
"""

from __future__ import annotations

import re

from stef.models import (
    SQLSpec,
)
from stef.pipeline.judge.models import Finding, JudgeInput, _error

INTEGER_DIVISION_DIALECTS = frozenset(
    {"sqlite", "postgres", "tsql", "redshift", "trino", "presto", "snowflake", "oracle", ""}
)
"""Dialects in which ``int / int`` truncates (or may, for the generic dialect)."""


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
