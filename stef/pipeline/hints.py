"""Stage B (language side): definitions written as hints in Q_e and what they require of S (STEF paper §2.B).

Agents (and BIRD's "evidence") write definitions such as ``male refers to gender = 'M'`` or
``rate = `A` / `B```. Each clause of the hint text is split off, the right-hand side of each
definition is parsed with sqlglot as an expression, and its columns, (column, operator, value)
bindings, aggregations and arithmetic become :class:`HintFeatures` (memoised per rule set).
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.pipeline.dialects import parse_statements
from stef.pipeline.matching import STOPWORDS, is_grounded, phrase_overlap
from stef.pipeline.rules import AppRules
from stef.pipeline.values import COMPARISON_TYPES, FLIPPED, column_name, normalize_value

HINT_MARKERS = (
    " refers to ",
    " refer to ",
    " stands for ",
    " means ",
    " mean ",
    " indicates ",
    " represents ",
    " is computed as ",
    " can be computed by ",
    " is calculated as ",
    " is defined as ",
    " is ",
    " are ",
)
"""Definition markers inside Q_e hints; the text after the first marker is parsed as SQL."""
HINT_FUNCTION_ALIASES: dict[str, tuple[str, str]] = {
    "DIVIDE": ("/", ""),
    "MULTIPLY": ("*", ""),
    "SUBTRACT": ("-", ""),
    "ADD": ("+", ""),
    "DIVISION": ("/", ""),
}
"""Pseudo-functions used in hints (``DIVIDE(a, b)``) and the arithmetic they stand for."""


MAX_HINT_WORDS = 40
"""Hint clauses longer than this many words are not parsed (they are prose)."""
MAX_LEADING_WORDS = 3
"""At most this many leading prose words are trimmed from a hint's right-hand side."""


@lru_cache(maxsize=8192)
def _parse_hint_expression(text: str, dialect: str) -> exp.Expr | None:
    """Parse a hint right-hand side as a SQL expression.

    Tries the whole text first, then spans with up to :data:`MAX_LEADING_WORDS` leading and
    any number of trailing prose words removed ("the Date value = '201208' in table t"). A
    trimmed span is accepted only when it holds SQL structure (an operator, function or
    literal), so a stray prose word is never taken for a column.
    """
    words = [_quote_hyphenated(w, dialect) for w in text.strip().rstrip(".;,").split()]
    if not words or len(words) > MAX_HINT_WORDS:
        return None
    prose_tail = 0
    while prose_tail < len(words) - 1 and _is_prose_word(words[len(words) - 1 - prose_tail]):
        prose_tail += 1
    for start in range(min(MAX_LEADING_WORDS, len(words) - 1) + 1):
        if start and not _is_prose_word(words[start - 1]):
            break  # only prose words are trimmed from the front
        lowest_end = max(start + 1, len(words) - prose_tail)
        for end in range(len(words), lowest_end - 1, -1):
            candidate = " ".join(words[start:end])
            try:
                statements = parse_statements(f"SELECT {candidate}", dialect)
            except (SqlglotError, RecursionError, ValueError):
                continue
            parsed = statements[0] if len(statements) == 1 else None
            # A FROM is kept ("name FROM badges": the hint names the column and its table). The
            # check for it read the arg key "from", which sqlglot renamed "from_": it never fired
            # with the sqlglot this method was calibrated on, and dropping it keeps every version alike.
            if not isinstance(parsed, exp.Select) or not parsed.expressions:
                continue
            projections = parsed.expressions
            if any(isinstance(p, exp.Alias) for p in projections):
                continue  # "male refers" parsed as column + alias: prose, not SQL
            whole = start == 0 and end == len(words)
            structured = any(not isinstance(p, exp.Column) for p in projections) or any(
                p.this.args.get("quoted") for p in projections if isinstance(p, exp.Column)
            )
            prose_columns = any(
                c.name.lower() in PROSE_WORDS and not c.this.args.get("quoted") for c in parsed.find_all(exp.Column)
            )
            if (whole or structured) and not prose_columns:
                return parsed
    return None


PROSE_WORDS = STOPWORDS | frozenset(
    "what which who where when why how there here not no yes do does did has have had".split()
)
"""English words that are never taken for a column name in a hint."""
_HINT_WHERE = re.compile(r"\s+where\s+", re.IGNORECASE)
_SPACED_OPERATOR = re.compile(r"([<>!])\s+=")
"""Hints write ``> =`` / ``! =``; SQL needs ``>=`` / ``!=``."""
_HYPHENATED = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)+$")


@lru_cache(maxsize=1024)
def _identifier_quote(dialect: str) -> str:
    from sqlglot.dialects.dialect import Dialect

    quotes = Dialect.get_or_raise(dialect or None).tokenizer_class.IDENTIFIERS
    first = quotes[0]
    return first if isinstance(first, str) else first[0]


def _quote_hyphenated(word: str, dialect: str) -> str:
    """``T-BIL`` / ``non-carcinogenic`` in hints are one name, not a subtraction."""
    stripped = word.rstrip(",;:)")
    if _HYPHENATED.match(stripped):
        quote = _identifier_quote(dialect)
        closing = {"[": "]"}.get(quote, quote)
        return f"{quote}{stripped}{closing}{word[len(stripped) :]}"
    return word


def _is_prose_word(word: str) -> bool:
    """A plain word (letters only, not upper-case) that can be trimmed around a hint's SQL."""
    return word.isalpha() and not word.isupper()


_SQL_CHARACTERS = re.compile(r"[=<>`'\"()*/_]")


_BARE_COLUMN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*")
"""One identifier a hint names after "refers to": snake_case or camelCase (a plain word is as
likely a noun of the prose: "customers refer to clients")."""


def _looks_like_sql(text: str) -> bool:
    return _SQL_CHARACTERS.search(text) is not None or any(w.isupper() and len(w) > 1 for w in text.split())


_CLAUSE_BREAK = re.compile(r"[;\n]|[.?!](?<=[A-Za-z0-9)'\"`][.?!])(?<!\b[Nn]o\.)(?<!\bvs\.)(?<!\bNo\.)\s+")
"""Where hint text breaks into clauses: semicolons, sentence ends (not the abbreviations "no.",
"vs."), new lines."""


def hint_clauses(text: str) -> list[str]:
    """Split hint text into definition clauses (on ``;``, sentence ends, and commas that start
    a new definition).

    >>> hint_clauses("male refers to gender = 'M'; rate = `A` / `B`.")
    ["male refers to gender = 'M'", 'rate = `A` / `B`']
    >>> hint_clauses("element = 'o' means Oxygen, element = 's' means Sulfur")
    ["element = 'o' means Oxygen", "element = 's' means Sulfur"]
    >>> hint_clauses("Total no. of crimes in 1996 = A16. A3 refers to region")
    ['Total no. of crimes in 1996 = A16', 'A3 refers to region']
    """
    text = _SPACED_OPERATOR.sub(lambda m: m.group(1) + "=", text)
    clauses: list[str] = []
    for part in _CLAUSE_BREAK.split(text):
        pieces = _split_top_level_commas(part)
        current = pieces[0]
        for piece in pieces[1:]:
            if _is_definition(piece) and _is_definition(current):
                clauses.append(current)
                current = piece
            else:
                current = f"{current}, {piece}"
        clauses.append(current)
    return [c.strip().rstrip(".").strip() for c in clauses if c.strip().rstrip(".").strip()]


def _split_top_level_commas(text: str) -> list[str]:
    """Split on ", " outside parentheses ("DIVIDE(SUM(a), COUNT(b))" stays whole)."""
    if ", " not in text:
        return [text]
    if "(" not in text:
        return text.split(", ")  # no parentheses: every ", " is at the top level
    pieces: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0 and text[index + 1 : index + 2] == " ":
            pieces.append(text[start:index])
            start = index + 2
    pieces.append(text[start:])
    return pieces


def _is_definition(text: str) -> bool:
    lowered = f" {text.lower()} "
    return "=" in text or any(marker in lowered for marker in HINT_MARKERS[:-2])


@dataclass(frozen=True, slots=True)
class HintDefinition:
    """One SQL-like definition in a hint: ``<phrase> refers to <expression>``.

    Attributes:
        phrase: the natural-language side ("male"), ``""`` for a bare expression.
        expression: the parsed ``SELECT <expr>`` (sqlglot tree).
    """

    phrase: str
    expression: exp.Expr


def hint_definitions(text: str, dialect: str = "") -> list[HintDefinition]:
    """Parse the SQL-like definitions of a hint text with sqlglot.

    Returns:
        One :class:`HintDefinition` per clause whose SQL side parses.

    >>> [(d.phrase, d.expression.sql("sqlite")) for d in hint_definitions("male refers to gender = 'M'; rate = `A` / `B`", "sqlite")]
    [('male', "SELECT gender = 'M'"), ('rate', 'SELECT "A" / "B"')]
    """
    return [definition for clause in hint_clauses(text) for definition in _clause_definitions(clause, dialect)]


@lru_cache(maxsize=8192)
def _clause_definitions(full_clause: str, dialect: str) -> tuple[HintDefinition, ...]:
    """The definitions of one hint clause (cached: agents and BIRD-style evidence repeat the same
    clauses across questions; in NL2SQL-BUGs' dev split 2,292 clauses hold 1,112 distinct ones).
    The trees are shared between records and never modified."""
    parsed: list[HintDefinition] = []
    # "rate = DIVIDE(SUM(x), COUNT(y)) where label = '+'": a definition and its condition
    clause, *conditions = _HINT_WHERE.split(full_clause, maxsplit=1)
    padded = f" {clause} "
    lowered = padded.lower()
    right: str | None = None
    phrase = ""
    for marker in HINT_MARKERS:
        position = lowered.find(marker)
        if position >= 0:
            candidate = padded[position + len(marker) :]
            before = padded[:position]
            if marker in (" is ", " are ") and not _looks_like_sql(candidate):
                continue
            if not _looks_like_sql(candidate) and _looks_like_sql(before):
                right, phrase = before, candidate  # "element = 'cl' means Chlorine"
            else:
                right, phrase = candidate, before
            break
    if right is None and "=" in clause:
        left, _, rest = clause.partition("=")
        rest_expression = _parse_hint_expression(rest.strip(), dialect)
        if rest_expression is not None and any(
            not isinstance(p, (exp.Literal, exp.Neg)) for p in rest_expression.expressions
        ):
            right, phrase = rest, left  # "eligible free rate = `a` / `b`": a named formula
        else:
            right = clause
    named_column = (
        right is not None
        and marker in (" refers to ", " refer to ")
        and _BARE_COLUMN.fullmatch(right.strip().rstrip(".")) is not None
    )
    if named_column and right is not None:
        right = right.strip().rstrip(".")  # "flavor text refers to flavorText": a column, named bare
    for part in ([right] if right is not None and (named_column or _looks_like_sql(right)) else []) + conditions:
        expression = _parse_hint_expression(part.strip(), dialect) if part.strip() else None
        if expression is not None:
            parsed.append(HintDefinition(phrase.strip(), expression))
    return tuple(parsed)


def _is_relevant(definition: HintDefinition, values: Sequence[str], reference: str | None) -> bool:
    """A definition applies to the question when its phrase or one of its values is in it."""
    if reference is None:
        return True
    if definition.phrase and phrase_overlap(definition.phrase, reference) > 0.5:
        return True
    if any(is_grounded(v, reference) for v in values if len(v) > 2):
        return True
    return not definition.phrase and not values


@dataclass(frozen=True, slots=True)
class HintFeatures:
    """What one parsed hint definition requires of S.

    Attributes:
        columns: normalised column names it names.
        bindings: (column, operator, value) comparisons with literals.
        aggregations: upper-case aggregate names (``COUNT`` ...).
        formulas: arithmetic operators / named formulas (``/``, ``*`` ...).
        values: normalised string literals.
        null_conditions: (column, ``IS NULL`` | ``IS NOT NULL``) pairs.
    """

    columns: tuple[str, ...]
    bindings: tuple[tuple[str, str, str], ...]
    aggregations: tuple[str, ...]
    formulas: tuple[str, ...]
    values: tuple[str, ...]
    null_conditions: tuple[tuple[str, str], ...]


def _comparison_sides(node: exp.Expr) -> tuple[exp.Expr, list[exp.Literal], bool]:
    """(compared expression, literals it is compared with, sides swapped) of a comparison.

    The literals are those on the other side (right side, IN list, BETWEEN bounds), never the
    ones inside the compared expression: ``STRFTIME('%Y', date) = '2010'`` gives ``'2010'``;
    ``5 < x`` gives ``x`` compared with ``5``, swapped.
    """
    if isinstance(node, exp.Between):
        sides = [node.args.get("low"), node.args.get("high")]
        if any(side is None or side.find(exp.Literal) is None or side.find(exp.Column) is not None for side in sides):
            return (
                node.this,
                [],
                False,
            )  # a bound that is no value ("crimes between 2 regions = ..."): prose, not a range
        return node.this, [lit for side in sides if side is not None for lit in side.find_all(exp.Literal)], False
    if isinstance(node, exp.In):
        return node.this, [lit for side in node.expressions for lit in side.find_all(exp.Literal)], False
    left, right = node.this, node.expression
    swapped = left.find(exp.Column) is None and right.find(exp.Column) is not None
    if swapped:
        left, right = right, left
    return left, list(right.find_all(exp.Literal)), swapped


def _is_placeholder(column: exp.Column) -> bool:
    """A one-letter unquoted, unqualified name in a hint stands for the value, not a column
    ("Hematoclit is normal refers to 29 < N < 52")."""
    return len(column.name) == 1 and not column.table and not column.this.quoted


def _hint_features(expression: exp.Expr, rules: AppRules | None) -> HintFeatures:
    columns: list[str] = []
    bindings: list[tuple[str, str, str]] = []
    aggregations: list[str] = []
    formulas: list[str] = []
    values: list[str] = []
    null_conditions: list[tuple[str, str]] = []
    for node in expression.walk():
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null) and isinstance(node.this, exp.Column):
            parent = node.parent
            while isinstance(parent, exp.Paren):
                parent = parent.parent
            if node.find_ancestor(exp.Or) is None:  # "x IS NULL OR y = 1" requires neither side alone
                negated = isinstance(parent, exp.Not)
                null_conditions.append((column_name(node.this, rules), "IS NOT NULL" if negated else "IS NULL"))
        if isinstance(node, exp.Column) and node.name:
            name = column_name(node, rules)
            if name not in {"null", "true", "false"} and not _is_placeholder(node):
                columns.append(name)
        elif isinstance(node, exp.AggFunc):
            aggregations.append(node.key.upper())
        elif isinstance(node, exp.Anonymous):
            name = str(node.this).upper()
            if name in HINT_FUNCTION_ALIASES:
                formulas.append(HINT_FUNCTION_ALIASES[name][0])
        elif isinstance(node, exp.Div):
            formulas.append("/")
        elif isinstance(node, exp.Mul):
            formulas.append("*")
        elif isinstance(node, exp.Sub):
            formulas.append("-")
        elif isinstance(node, exp.Literal) and node.is_string:
            values.append(normalize_value(node.this, rules))
        if type(node) in COMPARISON_TYPES or isinstance(node, (exp.In, exp.Between)):
            left, literal_nodes, swapped = _comparison_sides(node)
            column = left if isinstance(left, exp.Column) else left.find(exp.Column)
            if column is not None and literal_nodes and not _is_placeholder(column):
                operator = COMPARISON_TYPES.get(type(node), "IN" if isinstance(node, exp.In) else "BETWEEN")
                operator = FLIPPED[operator] if swapped else operator
                for literal in literal_nodes:
                    bindings.append((column_name(column, rules), operator, normalize_value(literal.this, rules)))
    return HintFeatures(
        tuple(columns), tuple(bindings), tuple(aggregations), tuple(formulas), tuple(values), tuple(null_conditions)
    )


_RULE_SETS: dict[int, tuple[AppRules | None, dict[str, Any], dict[str, Any], int]] = {}
"""Rule sets seen, by identity: (the rules, copies of their column mappings and value
normalisation, the number that keys their clauses in :data:`_ANALYSED`). The entry holds the
rules, so an id is never reused while it lives."""
_ANALYSED: dict[tuple[int, str, str], tuple[tuple[HintDefinition, HintFeatures], ...]] = {}
"""(rule-set number, clause, dialect) -> the clause's definitions with their features."""
_RULE_SET_NUMBERS = itertools.count(1)
FEATURE_MEMO_CLAUSES = 8192
"""Clauses remembered over all rule sets (the memo starts over when full)."""
FEATURE_MEMO_RULE_SETS = 64
"""Rule sets remembered (the memo starts over when more are seen)."""


def _rule_set_number(rules: AppRules | None) -> int:
    """The number that keys this rule set's clauses; a new one when the rule set is new or its
    column mappings or value normalisation changed in place since it was seen."""
    entry = _RULE_SETS.get(id(rules))
    if rules is None:
        mappings: dict[str, Any] = {}
        normalization: dict[str, Any] = {}
    else:
        mappings, normalization = rules.column_mappings, rules.value_normalization
    if entry is not None and entry[0] is rules and entry[1] == mappings and entry[2] == normalization:
        return entry[3]
    if len(_RULE_SETS) >= FEATURE_MEMO_RULE_SETS:
        _RULE_SETS.clear()
        _ANALYSED.clear()
    number = next(_RULE_SET_NUMBERS)  # atomic: threads never share a number
    _RULE_SETS[id(rules)] = (rules, copy.deepcopy(mappings), copy.deepcopy(normalization), number)
    return number


def analysed_definitions(text: str, dialect: str, rules: AppRules | None) -> list[tuple[HintDefinition, HintFeatures]]:
    """The definitions of a hint text (:func:`hint_definitions`) with what each requires of S.

    Both are remembered per clause and rule set: hints repeat across the questions of an
    application (BIRD-style evidence: 2,292 clauses in NL2SQL-BUGs' dev split, 1,112 distinct).
    What a clause requires depends on the rules' column mappings and value normalisation only;
    a rule set whose dicts are changed in place counts as a new one.

    Returns:
        ``(definition, features)`` pairs in text order.

    >>> [(d.phrase, f.bindings) for d, f in analysed_definitions("male refers to gender = 'M'", "sqlite", None)]
    [('male', (('gender', '=', 'm'),))]
    """
    number = _rule_set_number(rules)
    analysed: list[tuple[HintDefinition, HintFeatures]] = []
    for clause in hint_clauses(text):
        key = (number, clause, dialect)
        found = _ANALYSED.get(key)
        if found is None:
            if len(_ANALYSED) >= FEATURE_MEMO_CLAUSES:
                _ANALYSED.clear()
            found = _ANALYSED[key] = tuple(
                (d, _hint_features(d.expression, rules)) for d in _clause_definitions(clause, dialect)
            )
        analysed.extend(found)
    return analysed
