"""Token-level matching of SQL literals against natural language and against each other.

Shared by NL extraction (is a hint relevant to the question?) and alignment (is a filter value
grounded in the question?). Works on natural-language text and on literal *values*, never on
SQL text.
"""

from __future__ import annotations

import re
from functools import lru_cache

STOPWORDS = frozenset(
    "a an the of in on at to for by with and or is are was were be been refers refer means mean that which who whose "
    "what how many much this those these its their his her it as from than into per each all any".split()
)

_TOKEN = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
_ALNUM = re.compile(r"[a-z0-9]+")
_ALNUM_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_WILDCARDS = str.maketrans({"%": " ", "_": " ", "*": " "})


@lru_cache(maxsize=16384)
def tokens(text: str) -> tuple[str, ...]:
    """Lower-case word and punctuation tokens of a text (cached).

    >>> tokens("New-York, 2012")
    ('new', '-', 'york', ',', '2012')
    """
    return tuple(_TOKEN.findall(text.lower()))


def contains_sequence(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    """Whether ``needle`` occurs contiguously in ``haystack`` (both token tuples).

    >>> contains_sequence(("a", "b", "c"), ("b", "c")), contains_sequence(("a", "b"), ())
    (True, False)
    """
    if not needle:
        return False
    width = len(needle)
    first = needle[0]
    if width == 1:
        return first in haystack
    start = 0
    while True:
        try:
            index = haystack.index(first, start)
        except ValueError:
            return False
        if haystack[index : index + width] == needle:
            return True
        start = index + 1


def is_grounded(value: str, text: str, like: bool = False) -> bool:
    """Whether a SQL literal is stated in the natural-language text.

    Token-level: the value's tokens appear contiguously in the text, or (for values of several
    words) every alphanumeric token appears somewhere. LIKE wildcards are ignored. Numbers
    compare numerically ("29.00" grounds 29).

    >>> is_grounded("alameda", "schools in Alameda County")
    True
    >>> is_grounded("tr018", "molecule TR010")
    False
    >>> is_grounded("%smith%", "players named Smith", like=True)
    True
    """
    probe = value.translate(_WILDCARDS) if like else value
    needle = tokens(probe.strip())
    if not needle:
        return True
    haystack = tokens(text)
    if contains_sequence(haystack, needle):
        return True
    words = [t for t in needle if t[0] in _ALNUM_CHARACTERS]  # word tokens (the others are one punctuation character)
    if len(words) >= 2 and all(w in haystack for w in words):
        return True
    try:
        number = float(value)
    except ValueError:
        return False
    for token in _ALNUM.findall(text.lower().replace(",", "")):
        try:
            if float(token) == number:
                return True
        except ValueError:
            continue
    return False


def values_match(requested: str, applied: str) -> bool:
    """Loose equality of two normalised values (LIKE wildcards and date prefixes tolerated).

    >>> values_match("2012", "2012-05-01")
    True
    >>> values_match("m", "f")
    False
    """
    if requested == applied:
        return True
    left = requested.strip("%").strip()
    right = applied.strip("%").strip()
    if not left or not right:
        return False
    if left == right:
        return True
    try:
        if float(left) == float(right):
            return True
    except ValueError:
        pass
    if stem(left) == stem(right):
        return True
    if len(left) == 4 and left.isdigit() and right.startswith(left):
        return True  # a year asked, a date or year-month applied
    if len(left) >= 3 and len(right) >= 3:
        left_tokens, right_tokens = tokens(left), tokens(right)
        return contains_sequence(right_tokens, left_tokens) or contains_sequence(left_tokens, right_tokens)
    return False


def stem(word: str) -> str:
    """A word without its plural ``s`` (words of 4+ letters): ``names`` → ``name``, ``gas`` stays."""
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def phrase_overlap(phrase: str, text: str) -> float:
    """Share of the phrase's content words (stopwords removed, plural ``s`` stripped) found in text.

    >>> phrase_overlap("male patients", "How many male patient are there?")
    1.0
    >>> phrase_overlap("the oldest user", "Which posts are new?")
    0.0
    """
    words = _content_stems(phrase)
    if not words:
        return 0.0
    haystack = _stemmed_words(text)
    return sum(1 for w in words if w in haystack) / len(words)


@lru_cache(maxsize=4096)
def _content_stems(phrase: str) -> tuple[str, ...]:
    return tuple(stem(w) for w in _ALNUM.findall(phrase.lower()) if w not in STOPWORDS)


@lru_cache(maxsize=4096)
def _stemmed_words(text: str) -> frozenset[str]:
    """Stems of every word of a text (one record's question is matched against each hint phrase)."""
    return frozenset(stem(w) for w in _ALNUM.findall(text.lower()))


def name_is_grounded(name: str, text: str) -> bool:
    """Whether an identifier (a column or table name) is named in the text, schema-free: a word of
    the text of 3+ letters (plural ``s`` stripped) occurs in the name, or a part of the name
    (split at ``_``) starts a word of the text; ``id`` counts when the text says ``id``/``ids``.

    >>> name_is_grounded("lifeexpectancy", "What are the life expectancies in Brazil?")
    True
    >>> name_is_grounded("song_name", "Show all the grades of the high schoolers")
    False
    >>> name_is_grounded("stuid", "List the ids of students")
    True
    """
    lowered = name.lower()
    words = _stemmed_words(text)
    if any(len(word) >= 3 and word in lowered for word in words if word not in STOPWORDS):
        return True
    parts = [part for part in lowered.replace("-", "_").split("_") if part]
    if any(len(part) >= 3 and any(word.startswith(part) for word in words) for part in parts):
        return True
    return "id" in lowered and ("id" in words or "ids" in _stemmed_words(text.replace("IDs", "ids")))
