"""Stage B (language side): the phrase lexicons and text patterns of a question (STEF paper §2.B).

Word lists and phrases mapped to requested aggregations, orderings, comparisons, distinctness,
grouping and percentages; patterns for quoted values, numbers, dates, years, top-k counts and
capitalised names; the functions that find them in Q_u / Q_e (negation-aware, at word
boundaries).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

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
