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

import copy
import itertools
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.models import QuestionSpec
from stef.pipeline.clean import parse_statements
from stef.pipeline.values import COMPARISON_TYPES, FLIPPED, column_name, normalize_value, parse_count
from stef.pipeline.matching import STOPWORDS, is_grounded, phrase_overlap
from stef.pipeline.rules import AppRules

AGGREGATION_PHRASES: tuple[tuple[str, str], ...] = (
    ("how many", "COUNT"),
    ("number of", "COUNT"),
    ("count", "COUNT"),
    ("total number", "COUNT"),
    ("average", "AVG"),
    ("avg", "AVG"),
    ("total", "SUM"),
    ("sum", "SUM"),
    ("in all", "SUM"),
    ("maximum", "MAX"),
    ("max", "MAX"),
    ("minimum", "MIN"),
    ("min", "MIN"),
)
DESC_WORDS = frozenset(
    "highest most largest biggest greatest maximum max top best longest heaviest tallest latest newest "
    "richest largest-scale more majority fastest".split()
)
ASC_WORDS = frozenset(
    "lowest least smallest fewest minimum min worst shortest lightest earliest first bottom slowest".split()
)
SORT_DESC_WORDS = frozenset("descending decreasing descendingly".split())
SORT_ASC_WORDS = frozenset("ascending increasing alphabetical alphabetically ascendingly".split())
"""Words that ask for a sort order without a superlative ("list them in descending order")."""
UNDIRECTED_SUPERLATIVES = frozenset("youngest oldest eldest".split())
"""Superlatives whose sort direction depends on the column (``ORDER BY age`` or ``ORDER BY birthday DESC``)."""
COMPARATIVE_WORDS = frozenset(
    "older younger higher lower larger smaller bigger more less greater fewer longer shorter heavier lighter faster slower "
    "earlier later better worse taller richer cheaper".split()
)
"""Comparatives that, in a question choosing between named options, ask for the one that ranks first."""
DISTINCT_WORDS = frozenset({"different", "distinct", "unique", "various"})
GROUPING_PHRASES = ("for each", "per ", "each ", "by each", "grouped by", "in each", "breakdown")
PERCENT_WORDS = frozenset({"percentage", "percent", "%", "proportion"})
RATIO_WORDS = frozenset({"ratio", "rate", "times", "proportion", "fraction"})
LIST_WORDS = frozenset(
    {"list", "name", "names", "show", "which", "what", "who", "give", "provide", "state", "indicate"}
)
COMPARISON_PHRASES: tuple[tuple[str, str], ...] = (
    ("more than or equal to", ">="),
    ("greater than or equal to", ">="),
    ("less than or equal to", "<="),
    ("at least", ">="),
    ("no less than", ">="),
    ("not less than", ">="),
    ("at most", "<="),
    ("no more than", "<="),
    ("not more than", "<="),
    ("or more", ">="),
    ("or less", "<="),
    ("more than", ">"),
    ("greater than", ">"),
    ("higher than", ">"),
    ("over", ">"),
    ("above", ">"),
    ("exceed", ">"),
    ("exceeds", ">"),
    ("exceeding", ">"),
    ("exceeded", ">"),
    ("older than", ">"),
    ("younger than", "<"),
    ("larger than", ">"),
    ("bigger than", ">"),
    ("smaller than", "<"),
    ("less than", "<"),
    ("fewer than", "<"),
    ("lower than", "<"),
    ("below", "<"),
    ("under", "<"),
    ("between", "BETWEEN"),
    ("after", ">"),
    ("later than", ">"),
    ("since", ">="),
    ("before", "<"),
    ("earlier than", "<"),
)
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
NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "twenty": 20,
}
COUNT_WORDS = {**NUMBER_WORDS, "once": 1, "twice": 2, "thrice": 3}
"""Numbers written as words in a comparison ("at least two", "more than once")."""
STOP_CAPITALISED = frozenset(
    "What Which Who Whom Whose When Where Why How List Please Give Name Show Find State Indicate Provide Among Calculate Identify "
    "Is Are Was Were Do Does Did In Of For The A An And Or On At By From To Tell Count Compute Describe Mention Sort Rank Return "
    "Based Between Consider Determine Out If It Its This That These Those Also I There Here Let Now So "
    "Order Only Group Display Each Report Retrieve Output Then Include Select Get Arrange Use Note".split()
)

# Patterns that must hold at a word boundary check it *after* their first character
# ("'(?<![\w']')" rather than "(?<![\w'])'"): the same matches, but a pattern that starts with a
# character (class) lets the regex engine skip to the positions holding one, where a pattern that
# starts with an assertion is tried at every position of the text.
_QUOTED = re.compile(r"'(?<![\w']')([^']{1,200}?)'(?![\w'])|\"([^\"]{1,200})\"|“([^”]{1,200})”")
"""A quoted value: '...' (not an apostrophe inside a word), "..." or “...”."""
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)*(?![\w])")
_DATE = re.compile(r"(?<![\w/])(\d{4}/\d{1,2}/\d{1,2}|\d{1,2}/\d{1,2}/\d{4})(?![\w/])")
_YEAR = re.compile(r"((?:1(?<!\w1)[89]|2(?<!\w2)0)\d\d)\b")
r"""A year 1800-2099 as a whole word (``\b(1[89]\d\d|20\d\d)\b``, its start checked after the first digit)."""
_TOP_K = re.compile(
    r"\b(?:top|first|best|highest|lowest|last|bottom|worst)\s+(\d+|one|two|three|four|five|six|seven|eight|nine|ten|twenty)\b",
    re.IGNORECASE,
)
_CAPITALISED = re.compile(r"([A-Z](?<!\w[A-Z])[\w'.-]*(?:\s+(?:(?:of|de|la|the|and)\s+)?[A-Z][\w'.-]*)*)")
"""A run of capitalised words starting a word ("Golden State Warriors", "Bank of America")."""
_WORD = re.compile(r"[a-z0-9%]+")
_ANY_DIGIT = re.compile(r"\d")
_TOP_K_WORD = re.compile("top|first|best|highest|lowest|last|bottom|worst", re.IGNORECASE)
"""The words :data:`_TOP_K` starts with, matched as it matches them (it runs only on texts holding one)."""
_TOP_K_WORDS = ("top", "first", "best", "highest", "lowest", "last", "bottom", "worst")
_TOP_K_LOWER = re.compile(_TOP_K.pattern)
""":data:`_TOP_K` without IGNORECASE, for lower-cased ASCII text (where both match alike, and
this one runs several times faster)."""


def _entity_runs(run: str) -> list[list[str]]:
    """The entities of one run of capitalised words: split where a sentence ends inside the run
    (a word ending in ``.`` followed by a sentence-opening word: "TV Channel. List"), each part
    without its leading sentence-opening words (:data:`STOP_CAPITALISED`).

    >>> _entity_runs("TV Channel. List"), _entity_runs("Only"), _entity_runs("St. Louis Cardinals")
    ([['TV', 'Channel']], [], [['St.', 'Louis', 'Cardinals']])
    """
    words = [_without_possessive(token) for token in run.strip(" .,'").split()]
    parts: list[list[str]] = [[]]
    for index, word in enumerate(words):
        parts[-1].append(word)
        if word.endswith(".") and index + 1 < len(words) and words[index + 1] in STOP_CAPITALISED:
            parts[-1][-1] = word.rstrip(".")
            parts.append([])
    out = []
    for part in parts:
        while part and part[0] in STOP_CAPITALISED:
            part = part[1:]
        if part:
            out.append(part)
    return out


def quoted_values(text: str) -> list[str]:
    """Strings quoted in a text, as written (case kept; SQL-style doubled quotes undone).

    >>> quoted_values("atoms of “c” element; label = '+' means it; don't")
    ['c', '+']
    """
    out = []
    for groups in _QUOTED.findall(text):
        value = next((g for g in groups if g), "").replace("''", "'")
        if value.strip():
            out.append(value)
    return out


def compared_numbers(text: str) -> list[str]:
    """Numbers stated right after a comparison phrase ("more than 50", "after 1990").

    A number elsewhere (an id in a name, "80%" of something, "top 5") is not a requested
    filter value by itself.

    >>> compared_numbers("users with more than 1,000 posts in the league 1. Bundesliga after 1990")
    ['1000', '1990']
    >>> compared_numbers("teachers who teach at least two courses, visited more than once, or 3 or more times")
    ['2', '3', '1']
    """
    return list(dict.fromkeys(number for number, _, _ in _compared_occurrences(text)))


def compared_number_ops(text: str) -> tuple[tuple[str, str], ...]:
    """Each compared number (:func:`compared_numbers`) with the operator its own phrase states,
    negated when a negation stands a few words before that phrase: the direction the question
    asks for that number, where :attr:`QuestionSpec.comparison_ops` only lists every direction
    of the text. Of the phrases that read one written number, the most specific decides
    (:data:`COMPARISON_PHRASES` order: "no more than" before "more than"); a number written
    twice may get two directions ("before 2003 and after 2003").

    >>> compared_number_ops("cities with more than one employee under age 30")
    (('1', '>'), ('30', '<'))
    >>> compared_number_ops("dogs whose owner has not spent more than 1000, born after 2010")
    (('1000', '<='), ('2010', '>'))
    >>> compared_number_ops("no more than 5 or more than or equal to 7, founded before 2003 and after 2003")
    (('5', '<='), ('7', '>='), ('2003', '<'), ('2003', '>'))
    """
    by_position: dict[int, tuple[str, str]] = {}
    for number, op, position in _compared_occurrences(text):
        by_position.setdefault(position, (number, op))
    return tuple(dict.fromkeys(pair for _, pair in sorted(by_position.items())))  # in text order


def _compared_occurrences(text: str) -> list[tuple[str, str, int]]:
    """``(number, operator, offset of the number)`` per occurrence of a comparison phrase that
    reads a number, in :data:`COMPARISON_PHRASES` order (the operator negated after "not",
    "never", "n't")."""
    lowered = text.lower()
    found: list[tuple[str, str, int]] = []
    for phrase, op in COMPARISON_PHRASES:
        if phrase not in lowered:
            continue
        for end in _phrase_ends(lowered, phrase):
            start = end - len(phrase)
            stated = (
                _NEGATED_OPS.get(op, op)
                if not phrase.startswith(("not ", "no ")) and _negated_before(lowered, start)
                else op
            )
            if phrase.startswith("or "):  # "two or more": the number stands before the phrase
                before = lowered[max(0, start - 30) : start].split()
                if before:
                    value = (
                        before[-1].replace(",", "") if _NUMBER.fullmatch(before[-1]) else COUNT_WORDS.get(before[-1])
                    )
                    if value is not None:
                        found.append((str(value), stated, lowered.rfind(before[-1], 0, start)))
                continue
            window = lowered[end : end + 40]
            number = _NUMBER.search(window)
            spelled = next(
                (
                    (i, COUNT_WORDS[w.strip(".,;?")])
                    for i, w in enumerate(window.split()[:3])
                    if w.strip(".,;?") in COUNT_WORDS
                ),
                None,
            )
            digits_first = number is not None and (spelled is None or window[: number.start()].count(" ") <= spelled[0])
            if (
                digits_first
                and number
                and window[: number.start()].count(" ") <= 4
                and not window[number.end() :].startswith("%")
            ):
                found.append((number.group(0).replace(",", ""), stated, end + number.start()))
            elif spelled is not None:
                word = window.split()[spelled[0]]
                found.append((str(spelled[1]), stated, end + window.find(word)))
    return found


def _top_k_token(text: str) -> str | None:
    """The count of a top-k request ("top 5", "first three"), lower-cased; ``None`` when there is none.

    An ASCII text is lower-cased and matched without IGNORECASE, after a substring test for the
    eight words: the same matches as :data:`_TOP_K`, which is slow on every text. Other texts go
    through :data:`_TOP_K` itself (IGNORECASE also folds ``ſ``, ``ı``, ``İ`` and the Kelvin sign).

    >>> _top_k_token("List the TOP 3 schools"), _top_k_token("the first two"), _top_k_token("topics")
    ('3', 'two', None)
    """
    if text.isascii():
        lowered = text.lower()
        if not any(word in lowered for word in _TOP_K_WORDS):
            return None
        match = _TOP_K_LOWER.search(lowered)
        return match.group(1) if match else None
    match = _TOP_K.search(text) if _TOP_K_WORD.search(text) else None
    return match.group(1).lower() if match else None


_SUPERLATIVES = (
    "highest",
    "lowest",
    "largest",
    "smallest",
    "biggest",
    "most",
    "least",
    "latest",
    "earliest",
    "newest",
    "oldest",
    "youngest",
    "longest",
    "shortest",
    "greatest",
    "cheapest",
    "fastest",
    "slowest",
    "heaviest",
    "lightest",
)
_COUNT = r"(\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten|twenty)"
_RANKED_COUNT = re.compile(
    rf"\b{_COUNT}\s+(?:{'|'.join(_SUPERLATIVES)})\b|\b(?:latest|earliest|newest|oldest|youngest|largest|smallest|biggest|most recent)\s+{_COUNT}\b(?!\s*%)"
)
"""A count beside a superlative: "the 5 largest", "the two most common", "the latest 10"."""


_NEGATED_OPS = {">": "<=", "<": ">=", ">=": "<", "<=": ">"}


def _negated_op(lowered: str, phrase: str, op: str) -> str:
    """``op``, or its negation when every occurrence of the phrase follows a negation a few
    words before ("do not have more than 3" asks for ``<= 3``; "not more than" is a phrase of its own).

    >>> _negated_op(" cars that do not have more than 3 cylinders ", "more than", ">"), _negated_op(" more than 3 ", "more than", ">")
    ('<=', '>')
    """
    if op not in _NEGATED_OPS or phrase.startswith(("not ", "no ")):
        return op
    ends = list(_phrase_ends(lowered, phrase))
    if ends and all(_negated_before(lowered, end - len(phrase)) for end in ends):
        return _NEGATED_OPS[op]
    return op


def _negated_before(lowered: str, start: int) -> bool:
    """Whether a negation stands up to two words before offset ``start`` (:data:`_NEGATION_BEFORE`)."""
    return _NEGATION_BEFORE.search(lowered[max(0, start - 24) : start]) is not None


_NEGATION_BEFORE = re.compile(r"(?:\bnot|n't|\bnever)(?:\s+\w+){0,2}\s+$")
"""A negation up to two words before a comparison phrase ("do not have more than")."""


def _picks_one_of(lowered: str, word_set: set[str]) -> bool:
    """Whether the question asks which of named options ranks first, with a comparative: "Which
    player is older, Aaron Lennon or Abdelaziz Barrada?", "Between DC and Marvel, which publisher
    has published more?" (``ORDER BY ... LIMIT 1`` answers it like a superlative).

    >>> _picks_one_of(" which player is older, a or b? ", {"which", "player", "is", "older", "a", "or", "b"})
    True
    >>> _picks_one_of(" list players older than 30 ", {"list", "players", "older", "than", "30"})
    False
    """
    if COMPARATIVE_WORDS.isdisjoint(word_set) or not ({"which", "who", "whose"} & word_set):
        return False
    return " or " in lowered or "between " in lowered


def _ranked_count_token(text: str) -> str | None:
    """The count of a ranking stated with a superlative (see :data:`_RANKED_COUNT`), lower-cased.

    >>> _ranked_count_token("the 5 largest countries"), _ranked_count_token("the latest 10 comments"), _ranked_count_token("the largest country")
    ('5', '10', None)
    >>> _ranked_count_token("teams that in 2010 most often won") is None
    True
    """
    lowered = text.lower()
    if not any(word in lowered for word in _SUPERLATIVES):
        return None
    match = _RANKED_COUNT.search(lowered)
    return (match.group(1) or match.group(2)) if match else None


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _phrase_ends(lowered: str, phrase: str) -> Iterator[int]:
    """End offsets of the occurrences of ``phrase`` in ``lowered`` with no letter a-z right
    before or after them, left to right and not overlapping.

    The same occurrences as ``re.finditer(rf"(?<![a-z]){re.escape(phrase)}(?![a-z])", lowered)``,
    found with ``str.find`` (a pattern that starts with an assertion is tried at every position).

    >>> list(_phrase_ends(" over the overall total; moreover over", "over"))
    [5, 38]
    """
    phrase = phrase.strip()
    if not phrase:  # the pattern then matches the empty string wherever no letter is on either side
        yield from (match.end() for match in re.finditer(r"(?<![a-z])(?![a-z])", lowered))
        return
    size = len(phrase)
    start = lowered.find(phrase)
    while start >= 0:
        end = start + size
        if (start == 0 or not "a" <= lowered[start - 1] <= "z") and (
            end == len(lowered) or not "a" <= lowered[end] <= "z"
        ):
            yield end
            start = lowered.find(phrase, end)
        else:
            start = lowered.find(phrase, start + 1)


def _has_phrase(lowered: str, phrase: str) -> bool:
    """``phrase`` occurs in ``lowered`` as words (no letter a-z right before or after it)."""
    return next(_phrase_ends(lowered, phrase), None) is not None


MAX_HINT_WORDS = 40
"""Hint clauses longer than this many words are not parsed (they are prose)."""
MAX_LEADING_WORDS = 3
"""At most this many leading prose words are trimmed from a hint's right-hand side."""


@lru_cache(maxsize=8192)
def _parse_hint_expression(text: str, dialect: str) -> exp.Expression | None:
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
    expression: exp.Expression


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


def _comparison_sides(node: exp.Expression) -> tuple[exp.Expression, list[exp.Literal], bool]:
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


def _without_possessive(token: str) -> str:
    """A capitalised word without its ``'s`` (possessive or contraction): "Kyle's" -> "Kyle",
    "There's" -> "There" (then a stop word).

    >>> _without_possessive("Kyle's"), _without_possessive("What’s"), _without_possessive("O'Neil")
    ('Kyle', 'What', "O'Neil")
    """
    for suffix in ("'s", "’s"):
        if token.endswith(suffix) and len(token) > len(suffix):
            return token[: -len(suffix)]
    return token


def _is_placeholder(column: exp.Column) -> bool:
    """A one-letter unquoted, unqualified name in a hint stands for the value, not a column
    ("Hematoclit is normal refers to 29 < N < 52")."""
    return len(column.name) == 1 and not column.table and not column.this.quoted


def _hint_features(expression: exp.Expression, rules: AppRules | None) -> HintFeatures:
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


_AVERAGE_COMPARISON = re.compile(
    r"\b(?:above|below|over|under|(?:more|less|higher|lower|greater|fewer|bigger|smaller) than)[ -](?:the |an )?(?:overall )?average\b"
)


def extract_question_spec(
    text: str | None,
    dialect: str = "",
    rules: AppRules | None = None,
    parse_hints: bool = True,
    reference: str | None = None,
) -> QuestionSpec:
    """Extract requested features from one natural-language text (Q_u or Q_e).

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
            def_bindings = features.bindings
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
        ordering=ordering,  # type: ignore[arg-type]
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
