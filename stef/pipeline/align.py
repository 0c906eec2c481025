"""Stage C: spec alignment and filter classification (STEF paper §2.C).

Requested filters come from the question specs (Q_u and Q_e): hint bindings
``(column, operator, value)``, quoted values, years and numbers stated with a comparison, and
capitalised names. Applied filters are the WHERE/HAVING/JOIN/QUALIFY predicates of S.

Each requested filter is *matched* (S filters on that value, on that column when one is
named), *wrong* (S filters that column on another value, or that value on another column) or
*missing*. An applied filter whose value is grounded in neither Q_u nor Q_e and matches no
request is *extra*; extras that R_app lists as benign are *benign_extra*. Filters without a
literal (``IS NULL``, ``col > (SELECT ...)``) are neither requested nor extra.

Classification:
    FULLY_APPLIED              nothing missing or wrong, no extra
    FULLY_APPLIED_WITH_EXTRAS  nothing missing or wrong, some extra
    PARTIALLY_APPLIED          some requested filters matched, some missing or wrong
    NOT_APPLIED                requested filters exist and none is matched
"""

from __future__ import annotations

import re

from stef.models import AlignmentResult, FilterPredicate, FilterStatus, QuestionSpec, SQLSpec
from stef.pipeline.matching import contains_sequence, is_grounded, stem, tokens, values_match
from stef.pipeline.rules import AppRules


def _is_benign(predicate: FilterPredicate, rules: AppRules | None) -> bool:
    if rules is None:
        return False
    for benign in rules.benign_filters:
        if rules.canonical_column(benign.column) != predicate.column:
            continue
        if benign.operator is not None and benign.operator.upper() != predicate.operator:
            continue
        if benign.value is not None:
            expected = str(benign.value).lower()
            if isinstance(benign.value, bool):
                expected = "1" if benign.value else "0"
            if predicate.value is None or not values_match(expected, predicate.value):
                continue
        return True
    return False


MAX_ALIGNED_FILTERS = 500
"""Only the first 500 filters with values are aligned (bounds the work on machine-made SQL)."""
NEGATION_WORDS = re.compile(
    r"\b(not|no|never|none|except|excluding|exclude|without|other than|non|isn't|aren't|doesn't|don't|didn't|wasn't|weren't|haven't|hasn't|neither|nor)\b|n't\b"
)
"""Words of a question that ask for a negated filter (natural language, not SQL)."""
NEGATIVE_OPERATORS = frozenset({"!=", "NOT IN", "NOT LIKE", "NOT BETWEEN", "IS NOT NULL", "NOT IS TRUE"})
DIRECTION = {">": ">", ">=": ">", "<": "<", "<=": "<"}
"""Comparison operators by direction; a filter compared the other way reverses the request."""


def _binding_match(operator: str, value: str, applied_operator: str, applied: str) -> bool:
    """Whether S's value fits a definition's ``column operator value``: for an equality on both
    sides the same value (case, spacing, a plural ``s`` and number formatting aside:
    ``websiteurl = 'http://a.com/u/1'`` is another value than the defined ``'http://a.com'``);
    :func:`values_match` otherwise (LIKE patterns, date prefixes).

    >>> _binding_match("=", "http://a.com", "=", "http://a.com/u/1"), _binding_match("=", "2012", "LIKE", "2012%"), _binding_match("=", "29", "=", "29.0")
    (False, True, True)
    """
    if operator == "=" and applied_operator == "=":
        if value == applied or stem(value) == stem(applied):
            return True
        try:
            return float(value) == float(applied)
        except ValueError:
            return False
    return values_match(value, applied)


def _binding_label(column: str, operator: str, value: str, bindings: list[tuple[str, str, str]]) -> str:
    """How a requested (column, operator, value) reads in evidence: a BETWEEN bound with its range
    (``atom_id BETWEEN 21 AND 25 (bound 25)``), anything else as ``column operator value``.

    >>> _binding_label("age", "BETWEEN", "25", [("age", "BETWEEN", "21"), ("age", "BETWEEN", "25")])
    'age BETWEEN 21 AND 25 (bound 25)'
    """
    if operator == "BETWEEN":
        bounds = [v for c, o, v in bindings if c == column and o == "BETWEEN"]
        if len(bounds) == 2:
            return f"{column} BETWEEN {bounds[0]} AND {bounds[1]} (bound {value})"
    return f"{column} {operator} {value}"


def _describe(predicate: FilterPredicate) -> str:
    return predicate.sql or f"{predicate.column} {predicate.operator} {predicate.value}"


def align_filters(
    sql_spec: SQLSpec,
    question: QuestionSpec,
    enriched: QuestionSpec,
    question_text: str,
    enriched_text: str | None,
    rules: AppRules | None = None,
) -> AlignmentResult:
    """Classify how the requested filters are applied by S.

    Args:
        sql_spec: features of S.
        question, enriched: specs of Q_u and Q_e (``QuestionSpec()`` when Q_e is absent).
        question_text, enriched_text: the raw texts, for grounding literal values.
        rules: R_app (benign filters).

    Returns:
        An :class:`AlignmentResult` with the status and the matched / missing / extra / wrong
        evidence as readable strings.
    """
    text = question_text + " " + (enriched_text or "")
    valued = [f for f in sql_spec.filters if f.values][:MAX_ALIGNED_FILTERS]
    applied_values = [(f, v) for f in valued for v in f.values]
    literal_pool = set(sql_spec.literals)
    used: set[int] = set()
    matched: list[str] = []
    missing: list[str] = []
    wrong: list[str] = []

    negation_asked = NEGATION_WORDS.search(question_text.lower()) is not None
    asked_ops = set(question.comparison_ops) | set(enriched.comparison_ops)
    stated_ops: dict[str, set[str]] = {}  # number -> the directions its own phrases state ("under age 30": <)
    for number, op in (*question.compared_values, *enriched.compared_values):
        stated_ops.setdefault(number, set()).add(op)

    def operator_conflict(
        requested: str | None, predicate: FilterPredicate, stated: set[str] | None = None
    ) -> str | None:
        applied = predicate.operator
        if applied in NEGATIVE_OPERATORS and not negation_asked and requested not in NEGATIVE_OPERATORS:
            return f"S negates it ({applied}) but the question asks for no negation"
        wanted = (
            {requested}
            if requested in DIRECTION
            else ({op for op in stated or () if op in DIRECTION} or {op for op in asked_ops if op in DIRECTION})
        )
        if applied in DIRECTION and wanted and all(DIRECTION[op] != DIRECTION[applied] for op in wanted):
            return f"S compares with {applied}, the question asks for {'/'.join(sorted(wanted))}"
        if requested in DIRECTION and applied in DIRECTION and requested != applied:
            return f"S compares with {applied}, the definition says {requested} (the bound itself is {'left out' if len(applied) == 1 else 'let in'})"
        return None

    def record_hit(
        requested: str | None, predicate: FilterPredicate, label: str, matched_as: str, stated: set[str] | None = None
    ) -> None:
        """A requested value S filters on: matched, or wrong when the operator disagrees (with the
        direction stated for that value, else with every direction the text states)."""
        used.add(id(predicate))
        conflict = operator_conflict(requested, predicate, stated)
        if conflict:
            wrong.append(f"{label}: {conflict} (operator)")
        else:
            matched.append(matched_as)

    bindings = list(dict.fromkeys((*question.value_bindings, *enriched.value_bindings)))
    bound_values = {value for _, _, value in bindings}
    for column, operator, value in bindings:
        label = _binding_label(column, operator, value, bindings)
        same_column = [f for f in valued if f.column == column]
        hit = next(
            (f for f in same_column if any(_binding_match(operator, value, f.operator, v) for v in f.values)), None
        )
        if hit is not None:
            record_hit(operator, hit, label, label)
            continue
        bound = next((f for f in same_column if _same_integer_bound(value, {operator}, f)), None)
        if bound is not None:  # "score >= 20" applied as score > 19
            record_hit(None, bound, label, f"{label} ({_describe(bound)}: the same bound on integers)")
            continue
        elsewhere = next((f for f, v in applied_values if values_match(value, v)), None)
        if elsewhere is not None:
            used.add(id(elsewhere))
            wrong.append(f"{label}: S filters {_describe(elsewhere)} (another column)")
        elif same_column:
            for f in same_column:
                used.add(id(f))
            wrong.append(f"{label}: S filters {', '.join(_describe(f) for f in same_column)} (another value)")
        elif any(values_match(value, literal) for literal in literal_pool):
            matched.append(f"{label} (used in an expression)")
        elif column in sql_spec.projection_columns:
            matched.append(f"{label} (answered through the projection)")
        else:
            missing.append(label)

    requested_values = [
        v
        for v in dict.fromkeys((*question.filter_values, *enriched.filter_values))
        if v not in bound_values and _is_filter_like(v, question, enriched)
    ]
    for value in requested_values:
        stated = stated_ops.get(value)
        hit = next((f for f, v in applied_values if values_match(value, v)), None)
        bound = (
            None
            if hit is not None
            else next((f for f in valued if _same_integer_bound(value, stated or asked_ops, f)), None)
        )
        if hit is not None:
            record_hit(None, hit, value, f"{hit.column} {hit.operator} {value}", stated)
        elif bound is not None:
            record_hit(None, bound, value, f"{value} ({_describe(bound)}: the same bound on integers)", stated)
        elif value in ("0", "1") and _asks_existence(value, asked_ops) and (sql_spec.joins or sql_spec.subquery_count):
            matched.append(f"{value} (at least one: a join or subquery of S)")
        elif any(values_match(value, literal) for literal in literal_pool):
            matched.append(f"{value} (used in an expression)")
        elif value.replace(".", "").isdigit() and any(value in column for column in sql_spec.columns):
            matched.append(f"{value} (part of a column name)")
        else:
            missing.append(value)

    optional = [
        *(value for _, _, value in (*question.optional_bindings, *enriched.optional_bindings)),
        *question.optional_values,
        *enriched.optional_values,
    ]
    for value in dict.fromkeys(optional):
        for f, v in applied_values:
            if id(f) not in used and values_match(value, v):
                used.add(id(f))
                matched.append(f"{f.column} = {value} (defined in Q_e)")

    entities = [
        e
        for e in dict.fromkeys((*question.entities, *enriched.entities))
        if e not in requested_values and not _common_noun(e, text)
    ]
    unmatched_entities: list[str] = []
    for entity in entities:
        hit = next(
            (
                f
                for f, v in applied_values
                if values_match(entity, v) or is_grounded(v, entity, like="LIKE" in f.operator)
            ),
            None,
        )
        if hit is not None:
            record_hit(None, hit, entity, f"{hit.column} {hit.operator} {entity}")
        elif any(
            values_match(entity, literal) or contains_sequence(tokens(literal), tokens(entity))
            for literal in literal_pool
            if len(literal) >= 2
        ):
            matched.append(f"{entity} (used in an expression)")  # CASE WHEN a3 = 'east Bohemia' ...
        elif not names_identifier(entity, sql_spec):
            unmatched_entities.append(entity)

    extra: list[str] = []
    benign: list[str] = []
    for predicate in valued:
        if id(predicate) in used:
            continue
        grounded = all(is_grounded(v, text, like="LIKE" in predicate.operator) for v in predicate.values)
        if grounded:
            matched.append(_describe(predicate))
            continue
        if _is_benign(predicate, rules):
            benign.append(_describe(predicate))
            extra.append(_describe(predicate))
            continue
        if unmatched_entities:
            wrong.append(f"{_describe(predicate)}: value not in the question (asked: {unmatched_entities[0]})")
            unmatched_entities.pop(0)
        else:
            extra.append(_describe(predicate))

    if not valued and not sql_spec.filters:
        # S filters nothing at all: a name the question restricts to was dropped, not just mapped
        missing.extend(f"{entity} (no filter in S)" for entity in unmatched_entities)

    if missing or wrong:
        status = FilterStatus.PARTIALLY_APPLIED if matched else FilterStatus.NOT_APPLIED
    elif extra:
        status = FilterStatus.FULLY_APPLIED_WITH_EXTRAS
    else:
        status = FilterStatus.FULLY_APPLIED
    return AlignmentResult(
        status=status,
        matched=tuple(dict.fromkeys(matched)),
        missing=tuple(dict.fromkeys(missing)),
        extra=tuple(dict.fromkeys(extra)),
        wrong=tuple(dict.fromkeys(wrong)),
        benign_extra=tuple(dict.fromkeys(benign)),
    )


_INTEGER_BOUNDS = {(">=", ">"): -1, (">", ">="): 1, ("<=", "<"): 1, ("<", "<="): -1}
"""Asked and applied operators that state the same bound on integers, and the shift of the
applied value: "two or more" (>= 2) is ``COUNT(*) > 1``, "more than 2" (> 2) is ``>= 3``."""


def _same_integer_bound(value: str, asked_ops: set[str], predicate: FilterPredicate) -> bool:
    """Whether ``predicate`` states the integer bound the question asks with another operator.

    >>> _same_integer_bound("2", {">="}, FilterPredicate(column="count(*)", operator=">", value="1", values=("1",)))
    True
    >>> _same_integer_bound("2", {">="}, FilterPredicate(column="count(*)", operator=">", value="2", values=("2",)))
    False
    """
    if len(predicate.values) != 1 or not value.lstrip("-").isdigit() or not predicate.values[0].lstrip("-").isdigit():
        return False
    applied = int(predicate.values[0])
    return any(
        (asked, predicate.operator) in _INTEGER_BOUNDS
        and applied == int(value) + _INTEGER_BOUNDS[(asked, predicate.operator)]
        for asked in asked_ops
    )


def _asks_existence(value: str, asked_ops: set[str]) -> bool:
    """Whether the number states existence: "at least one" (>= 1) or "more than zero" (> 0)."""
    return (value == "1" and ">=" in asked_ops) or (value == "0" and ">" in asked_ops)


def _common_noun(entity: str, text: str) -> bool:
    """A one-word capitalised name that the texts also write in lower case is a common noun
    capitalised at a sentence start ("Difference in no. of crimes ..." beside "the difference")."""
    if " " in entity or not entity:
        return False
    start = text.find(entity)
    while (
        start >= 0
    ):  # str.find and a boundary test: a pattern that starts with a lookbehind is tried at every position
        end = start + len(entity)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before in "_-") and not (after.isalnum() or after in "_-"):
            return True
        start = text.find(entity, start + 1)
    return False


def names_identifier(entity: str, sql_spec: SQLSpec) -> bool:
    """Whether a capitalised name of the question names a table or column S uses ("TV Channels"
    for ``TV_Channel``, "IDs" for ``document_id``): a schema reference, not a value to filter on.
    Every word of the name (2+ letters, a plural ``s`` dropped) is a part of an identifier of S
    (split at ``_``), or occurs in one (``fullname`` for "Full Name").

    >>> import sqlglot
    >>> from stef.pipeline.extract_sql import extract_sql_spec
    >>> spec = extract_sql_spec(sqlglot.parse_one("SELECT FullName, COUNT(*) FROM TV_Channel GROUP BY document_id"))
    >>> [names_identifier(e, spec) for e in ("tv channels", "ids", "full name", "france", "tv france")]
    [True, True, True, False, False]
    """
    words = list(_ENTITY_WORD.findall(entity.lower()))
    if not words:
        return False
    identifiers = [name.lower() for name in (*sql_spec.tables, *sql_spec.columns) if name]
    parts = {part for name in identifiers for part in re.split(r"[_\W]+", name) if part}
    for word in words:
        singular = word[:-1] if len(word) > 2 and word.endswith("s") else word
        if word in parts or singular in parts:
            continue
        if len(singular) >= 3 and any(singular in name for name in identifiers):
            continue
        return False
    return True


_ENTITY_WORD = re.compile(r"[a-z0-9]+")


def _is_filter_like(value: str, question: QuestionSpec, enriched: QuestionSpec) -> bool:
    """Numbers are requested filters only when a comparison or a year is stated."""
    try:
        float(value)
    except ValueError:
        return True
    if value in question.years or value in enriched.years:
        return True
    if (question.top_k is not None and str(question.top_k) == value) or (
        enriched.top_k is not None and str(enriched.top_k) == value
    ):
        return False
    return bool(question.comparison_ops or enriched.comparison_ops)
