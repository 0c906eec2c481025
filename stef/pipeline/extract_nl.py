"""Stage B (language side): rule-based requirements from Q_u and Q_e (STEF paper §2.B).

Two kinds of text are read:

* the **question** (Q_u, and the question part of Q_e): phrase lexicons map words to requested
  aggregations ("how many" -> COUNT, "average" -> AVG ...), ordering ("highest" -> DESC),
  top-k ("top 5"), distinctness ("different"), grouping ("per", "for each"), percentages and
  comparison operators ("more than" -> ``>``); quoted strings, numbers, years and capitalised
  names become requested filter values.
* **hints** inside Q_e: agents (and BIRD's "evidence") write definitions such as
  ``male refers to gender = 'M'`` or ``rate = `A` / `B```. The right-hand side of each
  definition is parsed with sqlglot as an expression; its columns, (column, operator, value)
  bindings, aggregations and arithmetic become requirements on S.

The result is a frozen :class:`stef.models.QuestionSpec`. An LLM extractor returning the same
type may replace this module.
"""

from __future__ import annotations

import re
from collections import Counter

from stef.models import QuestionSpec
from stef.pipeline.hints import _is_relevant, _looks_like_sql, _rule_set_number, analysed_definitions
from stef.pipeline.matching import is_grounded
from stef.pipeline.question_phrases import (
    _ANY_DIGIT,
    _CAPITALISED,
    _DATE,
    _QUOTED,
    _YEAR,
    AGGREGATION_PHRASES,
    ASC_WORDS,
    COMPARISON_PHRASES,
    COUNT_WORDS,
    DESC_WORDS,
    DISTINCT_WORDS,
    GROUPING_PHRASES,
    LIST_WORDS,
    NUMBER_WORDS,
    PERCENT_WORDS,
    RATIO_WORDS,
    SORT_ASC_WORDS,
    SORT_DESC_WORDS,
    UNDIRECTED_SUPERLATIVES,
    _entity_runs,
    _has_phrase,
    _negated_op,
    _picks_one_of,
    _ranked_count_token,
    _top_k_token,
    _words,
    compared_number_ops,
)
from stef.pipeline.rules import AppRules
from stef.pipeline.values import normalize_value, parse_count

_AVERAGE_COMPARISON = re.compile(
    r"\b(?:above|below|over|under|(?:more|less|higher|lower|greater|fewer|bigger|smaller) than)[ -](?:the |an )?(?:overall )?average\b"
)


QUESTION_SPEC_MEMO_TEXTS = 8192
"""Question specs remembered per process (the memo starts over when full): a question answered
by several agents or agent versions, or asked again, is read once. A spec is a frozen value of
its text, dialect and the rules' column mappings and value normalisation."""
QUESTION_SPEC_MEMO_MAX_CHARS = 2_000
"""Only texts (with their reference) up to this many characters are remembered, so the memo holds
at most ~16M characters however long the questions (a BIRD question with its evidence: 250
characters at the median, 830 at most in the bundled logs)."""
_QUESTION_SPECS: dict[tuple[int, str, str, bool, str | None], QuestionSpec] = {}
"""(rule-set number, text, dialect, parse_hints, reference) -> the text's spec."""


def extract_question_spec(
    text: str | None,
    dialect: str = "",
    rules: AppRules | None = None,
    parse_hints: bool = True,
    reference: str | None = None,
) -> QuestionSpec:
    """Extract requested features from one natural-language text (Q_u or Q_e).

    Remembered per process (:data:`QUESTION_SPEC_MEMO_TEXTS` texts of at most
    :data:`QUESTION_SPEC_MEMO_MAX_CHARS`), keyed on the arguments and the
    rule set as :func:`stef.pipeline.hints.analysed_definitions` keys it (a rule set changed in
    place counts as a new one).

    Args:
        text: the question; ``None`` or blank gives an empty spec.
        dialect: dialect used to parse SQL-like hints (quoting rules).
        rules: R_app (column mappings, value normalisation).
        parse_hints: parse SQL-like definitions in the text (on for Q_e, cheap for Q_u too).
        reference: Q_u when ``text`` is Q_e. Values and definitions of Q_e that Q_u does not
            mention become *optional* (``optional_values``/``optional_bindings``): matched when
            S applies them, never reported missing. ``None``: everything is requested.

    Returns:
        A frozen :class:`QuestionSpec`.

    >>> spec = extract_question_spec("How many male patients were born after 1990?", "sqlite")
    >>> spec.aggregations, spec.count_asked, spec.comparison_ops, spec.years
    (('COUNT',), True, ('>',), ('1990',))
    >>> extract_question_spec("Which school has the highest score? highest refers to MAX(score)").ordering
    'DESC'
    """
    if text is None or not text.strip():
        return QuestionSpec()
    if len(text) + len(reference or "") > QUESTION_SPEC_MEMO_MAX_CHARS:
        return _question_spec(text, dialect, rules, parse_hints, reference)
    key = (_rule_set_number(rules), text, dialect, parse_hints, reference)
    spec = _QUESTION_SPECS.get(key)
    if spec is None:
        if len(_QUESTION_SPECS) >= QUESTION_SPEC_MEMO_TEXTS:
            _QUESTION_SPECS.clear()
        spec = _QUESTION_SPECS[key] = _question_spec(text, dialect, rules, parse_hints, reference)
    return spec


def _question_spec(
    text: str, dialect: str, rules: AppRules | None, parse_hints: bool, reference: str | None
) -> QuestionSpec:
    """:func:`extract_question_spec` of a non-blank text, not remembered."""
    lowered = " " + " ".join(text.lower().split()) + " "
    word_set = set(_words(text))

    aggregations = [name for phrase, name in AGGREGATION_PHRASES if phrase in lowered and _has_phrase(lowered, phrase)]
    ordering = None
    desc_hits = not DESC_WORDS.isdisjoint(word_set)
    asc_hits = not ASC_WORDS.isdisjoint(word_set)
    if desc_hits and not asc_hits:
        ordering = "DESC"
    elif asc_hits and not desc_hits:
        ordering = "ASC"
    elif (
        not desc_hits and not asc_hits
    ):  # a sort asked in words, not a superlative: "in descending order", "alphabetically"
        if not SORT_DESC_WORDS.isdisjoint(word_set) and SORT_ASC_WORDS.isdisjoint(word_set):
            ordering = "DESC"
        elif not SORT_ASC_WORDS.isdisjoint(word_set) and SORT_DESC_WORDS.isdisjoint(word_set):
            ordering = "ASC"
    top_k = None
    token = _top_k_token(text)
    if token is None:
        token = _ranked_count_token(text)
    if token is not None:
        top_k = parse_count(token) if token.isdigit() else NUMBER_WORDS.get(token)
    comparison_ops = tuple(
        dict.fromkeys(
            _negated_op(lowered, phrase, op)
            for phrase, op in COMPARISON_PHRASES
            if phrase in lowered and _has_phrase(lowered, phrase)
        )
    )

    filter_values: list[str] = []
    optional_values: list[str] = []
    # Each pattern runs only when the text holds the character it needs (a quote, a digit, a
    # slash): the same result, without scanning every question with every pattern.
    quoted = "'" in text or '"' in text or "“" in text
    has_digit = _ANY_DIGIT.search(text) is not None
    for groups in _QUOTED.findall(text) if quoted else ():
        value = next((g for g in groups if g), "").replace("''", "'")
        if value.strip() and len(value.split()) <= 6 and not value.rstrip().endswith("?"):
            filter_values.append(normalize_value(value, rules))
    prose = _QUOTED.sub(" ", text) if quoted else text
    if has_digit and "/" in prose:
        for date in _DATE.findall(prose):
            filter_values.append(normalize_value(date, rules))
        prose = _DATE.sub(" ", prose)
    compared_values: tuple[tuple[str, str], ...] = ()
    if has_digit or not word_set.isdisjoint(COUNT_WORDS):
        compared_values = tuple((normalize_value(n, rules), op) for n, op in compared_number_ops(prose))
        filter_values.extend(n for n, _ in compared_values)
    if reference is not None:
        optional_values = [v for v in filter_values if not is_grounded(v, reference)]
        filter_values = [v for v in filter_values if v not in optional_values]
    years = (
        tuple(dict.fromkeys(y for y in _YEAR.findall(text) if reference is None or y in reference)) if has_digit else ()
    )
    entities: list[str] = []
    for match_cap in _CAPITALISED.finditer(prose):  # quoted values are filter values already
        for tokens in _entity_runs(match_cap.group(1)):
            if not any(
                "_" in token for token in tokens
            ):  # snake_case names an identifier (a database, a table), not a value
                entities.append(normalize_value(" ".join(tokens).strip(" .,'"), rules))

    columns: list[str] = []
    bindings: list[tuple[str, str, str]] = []
    optional_bindings: list[tuple[str, str, str]] = []
    formulas: list[str] = []
    hint_values: list[str] = []
    null_conditions: list[tuple[str, str]] = []
    analysed = analysed_definitions(text, dialect, rules) if parse_hints and _looks_like_sql(text) else []
    definitions = [definition for definition, _ in analysed]
    if analysed:
        relevance = [_is_relevant(d, features.values, reference) for d, features in analysed]
        relevant_columns = Counter(
            column
            for (_, features), relevant in zip(analysed, relevance, strict=True)
            if relevant
            for column, _, _ in features.bindings
        )
        for (_definition, features), relevant in zip(analysed, relevance, strict=True):
            def_bindings: tuple[tuple[str, str, str], ...] | list[tuple[str, str, str]] = features.bindings
            hint_values.extend(features.values)
            if not relevant:
                optional_bindings.extend(def_bindings)
                continue
            alternatives = [b for b in def_bindings if relevant_columns[b[0]] > 1 and b[1] == "="]
            if alternatives:
                optional_bindings.extend(
                    alternatives
                )  # "inpatient (= '+') or outpatient (= '-')": a choice, not a filter
                def_bindings = [b for b in def_bindings if b not in alternatives]
            columns.extend(features.columns)
            bindings.extend(def_bindings)
            aggregations.extend(features.aggregations)
            formulas.extend(features.formulas)
            null_conditions.extend(features.null_conditions)
            if "MAX" in features.aggregations and ordering is None:
                ordering = "DESC"
            elif "MIN" in features.aggregations and ordering is None:
                ordering = "ASC"
    phrase_values = {normalize_value(d.phrase, rules).strip("'\" ") for d in definitions}
    filter_values = [v for v in filter_values if not any(v and v in p for p in phrase_values)]
    bound = {value for _, _, value in (*bindings, *optional_bindings)}
    optional_values.extend(v for v in filter_values if v in bound)
    filter_values = [v for v in filter_values if v not in bound]
    optional_values.extend(v for v in hint_values if v not in bound)

    known = set(columns) | {a.lower() for a in aggregations}
    entities = [
        e
        for e in entities
        if e and e not in known and e not in filter_values and (reference is None or is_grounded(e, reference))
    ]
    return QuestionSpec(
        aggregations=tuple(dict.fromkeys(aggregations)),
        entities=tuple(dict.fromkeys(entities)),
        filter_values=tuple(dict.fromkeys(v for v in filter_values if v)),
        column_mentions=tuple(dict.fromkeys(columns)),
        value_bindings=tuple(dict.fromkeys(bindings)),
        optional_bindings=tuple(dict.fromkeys(b for b in optional_bindings if b not in bindings)),
        optional_values=tuple(dict.fromkeys(v for v in optional_values if v)),
        formulas=tuple(dict.fromkeys(formulas)),
        top_k=top_k,
        ordering=ordering,
        superlative=desc_hits
        or asc_hits
        or not UNDIRECTED_SUPERLATIVES.isdisjoint(word_set)
        or _picks_one_of(lowered, word_set),
        distinct=bool(word_set & DISTINCT_WORDS),
        grouping=any(phrase in lowered for phrase in GROUPING_PHRASES),
        percentage=bool(word_set & PERCENT_WORDS) or ("%" in text and "'%" not in text),
        ratio=bool(word_set & RATIO_WORDS),
        count_asked=_has_phrase(lowered, "how many"),
        list_asked=bool(word_set & LIST_WORDS),
        comparison_ops=comparison_ops,
        compared_values=compared_values,
        years=years,
        null_conditions=tuple(dict.fromkeys(null_conditions)),
        average_comparison="average" in lowered and _AVERAGE_COMPARISON.search(lowered) is not None,
    )
