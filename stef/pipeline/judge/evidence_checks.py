"""Symbolic checks of stage D on the evidence around S (STEF paper §2.D).

Date literals and date parts, NULL handling, subqueries, non-query statements, the Q_u / Q_e
comparison, the app's schema and its observed catalog, each as ``check(JudgeInput) -> findings``
with NL2SQL-BUGs taxonomy names and a severity weight.
"""

from __future__ import annotations

from stef.models import (
    EnrichmentStatus,
)
from stef.pipeline.judge.models import Finding, JudgeInput, _error


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
"""(:class:`stef.models.SchemaReport` field, category, subcategory, evidence prefix, weight) of the schema findings."""


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
