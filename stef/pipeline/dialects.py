"""SQL dialects and sqlglot's parsing of SQL text in one of them.

A dialect name from a record, a rule file or the CLI is resolved once to sqlglot's name
(:func:`resolve_dialect`, :class:`stef.errors.UnknownDialectError` otherwise); each thread keeps
one tokenizer and parser per dialect (:func:`parse_statements`); :func:`parser_message` gives a
parser error's text as it is stored.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

from sqlglot import exp
from sqlglot.dialects import DIALECT_MODULE_NAMES
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.parser import Parser
from sqlglot.tokens import Tokenizer

from stef.errors import UnknownDialectError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@lru_cache(maxsize=64)
def dialect_instance(name: str) -> Dialect:
    """A reusable dialect instance (looking a dialect up by name on every parse costs time)."""
    return Dialect.get_or_raise(name or None)


_THREAD_PARSERS = threading.local()


def parse_statements(text: str, dialect: str) -> list[exp.Expr | None]:
    """``sqlglot.parse(text, read=dialect)``, with a tokenizer and parser reused per thread and dialect.

    sqlglot builds a new tokenizer and parser for every ``sqlglot.parse`` call, about 15 % of
    parsing a typical query; both reset their state at the start of each call, so one pair per
    thread (they are not thread-safe) serves every record.

    Args:
        text: SQL text (one or more statements).
        dialect: a resolved sqlglot dialect name (``""``: the generic dialect).

    Returns:
        One tree per statement (``None`` for an empty statement), as ``sqlglot.parse``.

    Raises:
        sqlglot.errors.SqlglotError: the text does not tokenize or parse (a fault of the parser
            itself on it too: :func:`parser_fault`).

    >>> [tree.sql() for tree in parse_statements("SELECT 1; SELECT 2", "sqlite")]
    ['SELECT 1', 'SELECT 2']
    """
    tokenizer, parser = _parser_pair(dialect)
    try:
        return parser.parse(tokenizer.tokenize(text), text)
    except PARSER_FAULTS as fault:
        raise parser_fault(fault) from fault


def parse_sql_text(text: str, dialect: str) -> list[exp.Expr | None]:
    """``sqlglot.parse(text, read=dialect)`` with a fault of the parser raised as a ``ParseError``
    (:func:`parser_fault`): the parse of text that is not an agent's answer (a schema's DDL, a
    campaign's gold and answers), with sqlglot's own tokenizer and parser.

    Raises:
        sqlglot.errors.SqlglotError: the text does not tokenize or parse.
    """
    import sqlglot

    try:
        return sqlglot.parse(text, read=dialect or None)
    except PARSER_FAULTS as fault:
        raise parser_fault(fault) from fault


PARSER_FAULTS: tuple[type[Exception], ...] = (
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    KeyError,
    AssertionError,
)
"""Exceptions sqlglot's tokenizer or parser raises on some malformed text instead of a
``ParseError`` (sqlglot 30: ``SELECT a? FROM t`` in PostgreSQL, a stray ``?`` after an ``ON``
condition: ``TypeError: … Expr object expected; got None``). None of sqlglot's own errors is one
of them."""


def parser_fault(fault: Exception) -> ParseError:
    """A ``ParseError`` for a fault of the parser on a text (:data:`PARSER_FAULTS`): the text is
    one the parser cannot read, so the record gets ``parse_error`` with this reason, not
    ``internal_error``.

    >>> str(parser_fault(TypeError("Expr object expected; got None")))
    'the parser failed on this SQL (TypeError: Expr object expected; got None)'
    """
    return ParseError(
        f"the parser failed on this SQL ({type(fault).__name__}: {str(fault).splitlines()[0] if str(fault) else ''})"
    )


def _parser_pair(dialect: str) -> tuple[Tokenizer, Parser]:
    """This thread's tokenizer and parser of ``dialect`` (see :func:`parse_statements`)."""
    pairs: dict[str, tuple[Tokenizer, Parser]] | None = getattr(_THREAD_PARSERS, "by_dialect", None)
    if pairs is None:
        pairs = _THREAD_PARSERS.by_dialect = {}
    pair = pairs.get(dialect)
    if pair is None:
        instance = dialect_instance(dialect)
        pair = pairs[dialect] = (instance.tokenizer(), instance.parser())
    return pair


@lru_cache(maxsize=256)
def resolve_dialect(name: str | None) -> str:
    """Normalise a dialect name to one sqlglot knows (``""`` = generic dialect; the other names of
    :data:`DIALECT_ALIASES` too); cached (sqlglot builds a dialect object on every lookup).

    Raises:
        UnknownDialectError: sqlglot has no dialect of that name.

    >>> resolve_dialect("SQLite"), resolve_dialect("postgresql"), resolve_dialect("MSSQL")
    ('sqlite', 'postgres', 'tsql')
    >>> resolve_dialect(None)
    ''
    """
    if name is None:
        return ""
    cached = _RESOLVED_DIALECTS.get(name)
    if cached is not None:
        return cached
    if not name.strip() or name.strip().lower() in {"generic", "sqlglot", "ansi"}:
        key = ""
    else:
        key = _alias_key(name)
        try:
            Dialect.get_or_raise(key)
        except (ValueError, KeyError) as exc:
            known = ", ".join(sorted(d for d in Dialect.classes if d))
            raise UnknownDialectError(f"unknown SQL dialect {name!r}; known dialects: {known}") from exc
    if len(_RESOLVED_DIALECTS) < 1024:  # names as records spell them; unknown names are never kept
        _RESOLVED_DIALECTS[name] = key
    return key


_RESOLVED_DIALECTS: dict[str, str] = {}

DIALECT_ALIASES: dict[str, str] = {
    "postgresql": "postgres",
    "pgsql": "postgres",
    "mssql": "tsql",
    "sqlserver": "tsql",
    "mariadb": "mysql",
    "sqlite3": "sqlite",
    "awsathena": "athena",
    "sparksql": "spark",
    "googlesql": "bigquery",
}
"""Other names of sqlglot dialects that agents log, keyed without spaces, ``_`` and ``-``
(:func:`_alias_key`): SQLAlchemy's ``engine.dialect.name`` (``postgresql``, ``mssql``, ``mariadb``,
PyAthena's ``awsathena``), Python's ``sqlite3`` module, the products' own names (``SQL Server``,
``T-SQL``, ``Spark SQL``, ``GoogleSQL``). Every record of an agent that logged ``postgresql`` got
``invalid_input`` (unknown SQL dialect)."""


_BUILT_IN_DIALECTS = frozenset(DIALECT_MODULE_NAMES)
"""sqlglot's own dialect names, from the list of its dialect modules (``Dialect.classes`` would
import every one of them to list them: 0.1 s of each worker's start; the ``Dialects`` enum lacks
some, e.g. ``singlestore``). A plugin's dialect is not in it; its name is kept as written, so
``Dialect.get_or_raise`` still finds it."""


def _alias_key(name: str) -> str:
    """The sqlglot dialect key of a logged dialect name: lower case, a SQLAlchemy driver suffix
    dropped (``postgresql+psycopg2``), then :data:`DIALECT_ALIASES` looked up without spaces, ``_``
    and ``-`` (a name sqlglot knows as written is kept, and so is one it does not know: its error
    names it).

    >>> _alias_key("PostgreSQL+psycopg2"), _alias_key("SQL Server"), _alias_key("t-sql"), _alias_key("spark2")
    ('postgres', 'tsql', 'tsql', 'spark2')
    >>> _alias_key("+ item"), _alias_key("nosuch+driver")  # unknown: kept, so its error names it
    ('+ item', 'nosuch+driver')
    """
    key = name.strip().lower()
    base, plus, _ = key.partition("+")
    for candidate in (key, base) if plus else (key,):  # the driver suffix goes only from a known name
        if candidate in _BUILT_IN_DIALECTS:
            return candidate
        compact = "".join(ch for ch in candidate if ch not in " _-")
        known = DIALECT_ALIASES.get(compact, compact if compact in _BUILT_IN_DIALECTS else None)
        if known is not None:
            return known
    return key


def parser_message(error: SqlglotError) -> str:
    """A one-line, colour-free parser message (sqlglot underlines the token with ANSI codes)."""
    details = getattr(error, "errors", None)
    if details:
        first = details[0]
        description = first.get("description") or "syntax error"
        highlight = first.get("highlight")
        where = f" at line {first.get('line')}, column {first.get('col')}"
        near = f" near {highlight!r}" if highlight else ""
        return f"{description}{where}{near}"
    return _ANSI.sub("", str(error)).splitlines()[0] if str(error) else type(error).__name__
