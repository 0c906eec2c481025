"""Columns a question names that the answer SQL S does not use, found with the app's schema (DESIGN.md §9).

Column names and descriptions are split into words (``FirstName`` -> first, name); an index per
table maps each phrase of up to :data:`MAX_INDEXED_PHRASE` words to its columns, so a question's
n-grams are looked up instead of every column being compared with the question.
"""

from __future__ import annotations

import re
from functools import lru_cache

from sqlglot import exp

from stef.pipeline.matching import STOPWORDS, contains_sequence, stem
from stef.pipeline.schema import ColumnSchema, DatabaseSchema, TableSchema, identifier_key

_NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
"""Words of an identifier: snake_case and camelCase parts (``LifeExpectancy`` → life, expectancy)."""


def _name_words(name: str) -> tuple[str, ...]:
    return tuple(stem(w.lower()) for w in _NAME_WORD.findall(name) if w.lower() not in STOPWORDS)


MAX_INDEXED_PHRASE = 5
"""Longest column phrase (in words) looked up among the question's n-grams; longer ones (rare:
six-part names) are searched for word by word."""


@lru_cache(maxsize=4096)
def _content_words(question: str) -> tuple[str, ...]:
    """The question's content words in order (stopwords dropped, a plural ``s`` stripped)."""
    return tuple(stem(w) for w in re.findall(r"[a-z0-9]+", question.lower()) if w not in STOPWORDS)


def _ngrams(words: tuple[str, ...]) -> set[tuple[str, ...]]:
    """The runs of 2 to :data:`MAX_INDEXED_PHRASE` consecutive words: made once per record (not
    kept per question text, so a day of distinct questions costs what a benchmark of repeated
    ones does), then met with each table's phrase index."""
    return {
        words[start : start + width]
        for start in range(len(words))
        for width in range(2, min(MAX_INDEXED_PHRASE, len(words) - start) + 1)
    }


def named_columns_unused(
    tree: exp.Expr, schema: DatabaseSchema, question: str, table_names: tuple[str, ...] | None = None
) -> tuple[str, ...]:
    """Columns of the tables S reads that the question names word for word, which S never uses
    (Attribute Mismatch: "the song names of ..." answered with ``singer.name`` when the table
    has ``song_name``).

    A column counts as named when its name has two or more content words (snake_case or
    camelCase parts, stopwords dropped, a plural ``s`` stripped) that the question says in a
    row; one-word names are too common in prose to tell. Each item names the table and column.

    >>> import sqlglot
    >>> from stef.pipeline.schema import parse_ddl
    >>> schema = parse_ddl("CREATE TABLE singer (singer_id INT PRIMARY KEY, name TEXT, song_name TEXT, age INT)", "sqlite")
    >>> named_columns_unused(sqlglot.parse_one("SELECT name FROM singer WHERE age > 30"), schema, "List the song names of singers older than 30")
    ('the question names singer.song_name, S does not use it',)
    >>> named_columns_unused(sqlglot.parse_one("SELECT song_name FROM singer"), schema, "List the song names")
    ()
    """
    words = _content_words(question)
    if len(words) < 2:
        return ()
    grams = _ngrams(words)
    named: list[tuple[TableSchema, ColumnSchema, tuple[str, ...]]] = []
    seen_tables: set[str] = set()
    for name in table_names if table_names is not None else [node.name for node in tree.find_all(exp.Table)]:
        table = schema.table(name)
        if table is None or identifier_key(table.name) in seen_tables:
            continue
        seen_tables.add(identifier_key(table.name))
        by_phrase, longer = _phrase_index(table)
        hits = [entry for phrase in by_phrase.keys() & grams for entry in by_phrase[phrase]]
        hits.extend(entry for entry in longer if contains_sequence(words, entry[2]))
        named.extend(
            (table, column, phrase) for _, column, phrase in sorted(hits, key=lambda entry: entry[0])
        )  # in column order
    if not named:
        return ()
    used = {identifier_key(column.name) for column in tree.find_all(exp.Column)}
    # a phrase several columns share ("unemployment rate" of A12 and A13) is answered by any of them
    answered = {phrase for _, column, phrase in named if identifier_key(column.name) in used}
    found: list[str] = []
    used_letters: set[str] | None = None  # the used names' letters and digits, made when first needed
    for table, column, phrase in named:
        if identifier_key(column.name) in used or any(
            contains_sequence(other, phrase) or contains_sequence(phrase, other) for other in answered
        ):
            continue
        letters = "".join(w.lower() for w in _NAME_WORD.findall(column.name))
        if used_letters is None:
            used_letters = {"".join(ch for ch in name.lower() if ch.isalnum()) for name in used}
        if any(letters in name for name in used_letters):
            continue  # S uses a longer column holding this name (fastestLapSpeed for "fastest lap")
        found.append(
            f"the question names {table.name}.{column.name}{' (' + ' '.join(phrase) + ')' if phrase != _name_words(column.name) else ''}, S does not use it"
        )
    return tuple(dict.fromkeys(found))


PhraseEntry = tuple[tuple[int, int], ColumnSchema, tuple[str, ...]]
PhraseIndex = tuple[dict[tuple[str, ...], list[PhraseEntry]], list[PhraseEntry]]
_PHRASE_INDEXES: dict[int, tuple[TableSchema, PhraseIndex]] = {}
"""id(table) -> (the table, its :data:`PhraseIndex`): made once per table of a loaded schema."""


def _phrase_index(table: TableSchema) -> PhraseIndex:
    """The phrases naming the table's columns (:func:`_column_phrases`): phrase -> its entries
    ``((column position, phrase number), column, phrase)``, and the entries of phrases longer
    than :data:`MAX_INDEXED_PHRASE` words."""
    entry = _PHRASE_INDEXES.get(id(table))
    if entry is not None and entry[0] is table:
        return entry[1]
    by_phrase: dict[tuple[str, ...], list[PhraseEntry]] = {}
    longer: list[PhraseEntry] = []
    for position, column in enumerate(table.columns):
        for number, phrase in enumerate(_column_phrases(column)):
            item = ((position, number), column, phrase)
            if len(phrase) <= MAX_INDEXED_PHRASE:
                by_phrase.setdefault(phrase, []).append(item)
            else:
                longer.append(item)
    index = (by_phrase, longer)
    if len(_PHRASE_INDEXES) >= 4096:
        _PHRASE_INDEXES.clear()
    _PHRASE_INDEXES[id(table)] = (table, index)  # the entry holds the table: its id is not reused while it lives
    return index


@lru_cache(maxsize=65536)
def _column_phrases(column: ColumnSchema) -> tuple[tuple[str, ...], ...]:
    """The phrases that name a column: its name's content words, and its description's
    (numbers dropped) when that holds two to five content words; one word is too common."""
    phrases = []
    parts = _name_words(column.name)
    if len(parts) >= 2:
        phrases.append(parts)
    if column.description:  # (made once per column: the schema's columns are the same for every record)
        described = tuple(stem(w) for w in re.findall(r"[a-z]+", column.description.lower()) if w not in STOPWORDS)
        if 2 <= len(described) <= 5 and described != parts:
            phrases.append(described)
    return tuple(phrases)
