"""Boundary of the method: raw SQL text -> parsed statements or a typed failure (STYLE.md §2).

Agents log SQL in many shapes: wrapped in markdown code fences, preceded by prose ("Here is the
query:"), followed by comments, or as several statements. This module cleans the text once,
parses it once with sqlglot in the record's dialect, splits statements, flags every statement
that is not a query, and picks the answer: the last SELECT-like statement (DESIGN.md §2).
Later stages receive the parsed tree; nothing downstream parses SQL again.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.parser import Parser
from sqlglot.tokens import Tokenizer, TokenType

from stef.errors import UnknownDialectError

QUERY_TYPES: tuple[type[exp.Expression], ...] = (exp.Select, exp.SetOperation, exp.Subquery, exp.Values)
"""Statement node types that count as a read-only query answer."""


def _statement_types() -> tuple[type[exp.Expression], ...]:
    names = (
        "Drop",
        "Delete",
        "Insert",
        "Update",
        "Create",
        "Alter",
        "Merge",
        "Command",
        "TruncateTable",
        "Grant",
        "Revoke",
        "Use",
        "Set",
        "Pragma",
        "Transaction",
        "Commit",
        "Rollback",
        "Copy",
        "Describe",
        "Analyze",
        "Cache",
        "Uncache",
        "LoadData",
        "Refresh",
        "Attach",
        "Detach",
        "Install",
        "Kill",
        "Export",
        "Execute",
        "ExecuteSql",
        "Comment",
        "Lock",
        "Show",
        "Declare",
        "Cluster",
        "Undrop",
        "Put",
        "Get",
        "StoredProcedure",
        "Return",
        "Summarize",
    )
    return tuple(getattr(exp, n) for n in names if isinstance(getattr(exp, n, None), type))


NON_QUERY_STATEMENT_TYPES: tuple[type[exp.Expression], ...] = _statement_types()
"""Statement node types that are real statements but not queries (DDL, DML, session commands)."""

STATEMENT_START_WORDS = frozenset(
    {
        "SELECT",
        "WITH",
        "INSERT",
        "UPDATE",
        "DELETE",
        "DROP",
        "CREATE",
        "ALTER",
        "TRUNCATE",
        "MERGE",
        "REPLACE",
        "GRANT",
        "REVOKE",
        "VALUES",
        "(SELECT",
        "EXPLAIN",
        "PRAGMA",
    }
)
"""First words that start a SQL statement: used to find where prose before the SQL ends."""

MAX_SQL_CHARS = 200_000
"""SQL longer than this is not parsed (status ``too_large``): 200,000 characters, far beyond
any generated query, and parsed in well under the per-record time cap."""

_FENCE = re.compile(r"(`{3,}|~{3,})[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n?(.*?)\1", re.DOTALL)
"""A markdown code fence in a message (backticks or tildes; the language tag, the body). Run
on the message around the SQL, never on SQL: :func:`parse_sql` first tries the whole text as SQL."""
SQL_FENCE_LANGUAGES = frozenset(
    {"", "sql", "sqlite", "postgres", "postgresql", "mysql", "tsql", "bigquery", "snowflake", "hive", "spark", "duckdb"}
)
"""Fence language tags taken as SQL (the other fences are used only when no fence has one of these)."""
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True, slots=True)
class ParsedSQL:
    """Result of cleaning and parsing one SQL text.

    Attributes:
        answer: the answer statement (last query statement), or ``None`` on failure.
        statements: every parsed statement, in order.
        dialect: the dialect name used to parse (``""`` for sqlglot's generic dialect).
        flags: human-readable warnings (``"stripped markdown fence"``, ``"non_select_statement: DROP"`` ...).
        error: the failure status name (``parse_error``, ``non_select``, ``too_large``,
            ``invalid_input``) or ``None`` on success.
        error_message: the reason for ``error`` (the parser's message for ``parse_error``).
    """

    answer: exp.Expression | None
    statements: tuple[exp.Expression, ...]
    dialect: str
    flags: tuple[str, ...]
    error: str | None = None
    error_message: str | None = None
    text: str = ""
    """The cleaned SQL text (fences and prose removed) that was parsed."""


@lru_cache(maxsize=64)
def dialect_instance(name: str) -> Dialect:
    """A reusable dialect instance (looking a dialect up by name on every parse costs time)."""
    return Dialect.get_or_raise(name or None)


_THREAD_PARSERS = threading.local()


def parse_statements(text: str, dialect: str) -> list[exp.Expression | None]:
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
        sqlglot.errors.SqlglotError: the text does not tokenize or parse.

    >>> [tree.sql() for tree in parse_statements("SELECT 1; SELECT 2", "sqlite")]
    ['SELECT 1', 'SELECT 2']
    """
    tokenizer, parser = _parser_pair(dialect)
    return parser.parse(tokenizer.tokenize(text), text)


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
    """Normalise a dialect name to one sqlglot knows (``""`` = generic dialect); cached (sqlglot
    builds a dialect object on every lookup).

    Raises:
        UnknownDialectError: sqlglot has no dialect of that name.

    >>> resolve_dialect("SQLite")
    'sqlite'
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
        key = name.strip().lower()
        try:
            Dialect.get_or_raise(key)
        except (ValueError, KeyError) as exc:
            known = ", ".join(sorted(d for d in Dialect.classes if d))
            raise UnknownDialectError(f"unknown SQL dialect {name!r}; known dialects: {known}") from exc
    if len(_RESOLVED_DIALECTS) < 1024:  # names as records spell them; unknown names are never kept
        _RESOLVED_DIALECTS[name] = key
    return key


_RESOLVED_DIALECTS: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class MessageParts:
    """A message split into the SQL it carries and what is left out of it.

    Attributes:
        sql: the SQL text (fence bodies, or the text after the prose).
        flags: what was stripped (``"stripped markdown fence"`` ...).
        discarded: the other parts of the message (prose, other code blocks), each checked by
            :func:`parse_sql` for statements hidden outside the SQL.
    """

    sql: str
    flags: tuple[str, ...]
    discarded: tuple[str, ...]


@lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def _code_blocks(text: str) -> list[tuple[str, str, tuple[int, int]]]:
    """``(language, body, (first line, end line))`` of the message's code blocks, as CommonMark
    reads them (markdown-it-py): fences of three or more backticks or tildes, closed by a fence
    line of their own (a closing marker inside a line closes nothing), and indented blocks."""
    blocks: list[tuple[str, str, tuple[int, int]]] = []
    for token in _markdown().parse(text):
        if token.type in ("fence", "code_block") and token.map is not None:
            info = token.info.strip().split()
            blocks.append((info[0].lower() if info else "", token.content, (token.map[0], token.map[1])))
    return blocks


def split_message(text: str) -> MessageParts:
    """Take the SQL out of the message's code blocks and drop prose before the first statement,
    keeping what was dropped.

    This works on the *message* around the SQL (markdown and prose), not on SQL itself:
    :func:`parse_sql` calls it only for text that is not SQL as a whole. Code blocks are read as
    CommonMark does (:func:`_code_blocks`); the SQL-tagged ones are the SQL (all of them, in
    order), else every block; every other line of the message is kept as discarded.

    >>> parts = split_message("Here you go:\\n```sql\\nSELECT 1\\n```\\nHope it helps")
    >>> parts.sql, parts.flags, parts.discarded
    ('SELECT 1', ('stripped markdown fence',), ('Here you go:', 'Hope it helps'))
    >>> split_message("The query is:\\nSELECT a FROM t").sql
    'SELECT a FROM t'
    """
    flags: list[str] = []
    discarded: list[str] = []
    blocks = (
        _code_blocks(text) if ("```" in text or "~~~" in text or "\n    " in text or text.startswith("    ")) else []
    )
    if blocks:
        chosen = [b for b in blocks if b[0] in SQL_FENCE_LANGUAGES] or blocks
        lines = text.replace("\r\n", "\n").split("\n")
        covered = {number for _, _, (first, end) in blocks for number in range(first, end)}
        discarded.extend(
            body for block in blocks if block not in chosen for body in (block[1],)
        )  # other blocks: their text, without the fences
        kept: list[str] = []
        for number, line in enumerate(lines):
            if number in covered:
                if kept:
                    discarded.append("\n".join(kept))
                    kept = []
            else:
                kept.append(line)
        if kept:
            discarded.append("\n".join(kept))
        text = "\n".join(body.strip() for _, body, _ in chosen)
        flags.append("stripped markdown fence")
    stripped = text.strip()
    lines = stripped.splitlines()
    if lines and not _starts_statement(lines[0]):
        for index, line in enumerate(lines):
            if _starts_statement(line) or _starts_statement(line.split(":", 1)[-1]):
                tail = line if _starts_statement(line) else line.split(":", 1)[-1]
                discarded.append(
                    "\n".join(lines[:index]) + ("\n" + line.split(":", 1)[0] + ":" if tail is not line else "")
                )
                stripped = "\n".join([tail.strip(), *lines[index + 1 :]]).strip()
                flags.append("stripped prose before SQL")
                break
    return MessageParts(stripped, tuple(flags), tuple(part.strip() for part in discarded if part.strip()))


def strip_markdown(text: str) -> tuple[str, tuple[str, ...]]:
    """``(sql_text, flags)`` of :func:`split_message` (what was discarded is not returned).

    >>> strip_markdown("Here you go:\\n```sql\\nSELECT 1\\n```\\nHope it helps")
    ('SELECT 1', ('stripped markdown fence',))
    >>> strip_markdown("The query is:\\nSELECT a FROM t")
    ('SELECT a FROM t', ('stripped prose before SQL',))
    """
    parts = split_message(text)
    return parts.sql, parts.flags


def _without_trailing_prose(text: str) -> tuple[str, str] | None:
    """Cut the text before the first line that reads as prose ("This query returns ..."):
    ``(head, tail)``, the tail being the prose line and everything after it.

    A prose line starts with a capitalised word that is not a SQL keyword and has at least four
    words; the cut is made only after at least one line. ``None`` when there is no such line.
    """
    lines = text.splitlines()
    for index, line in enumerate(lines[1:], start=1):
        words = line.strip().split()
        if (
            len(words) >= 4
            and words[0][:1].isupper()
            and not words[0].isupper()
            and words[0].upper() not in PROSE_EXEMPT_WORDS
        ):
            head = "\n".join(lines[:index]).strip()
            return (head, "\n".join(lines[index:])) if head else None
    return None


PROSE_EXEMPT_WORDS = frozenset(
    {
        "SELECT",
        "FROM",
        "WHERE",
        "AND",
        "OR",
        "GROUP",
        "ORDER",
        "HAVING",
        "LIMIT",
        "JOIN",
        "INNER",
        "LEFT",
        "RIGHT",
        "FULL",
        "ON",
        "UNION",
        "WITH",
        "CASE",
        "WHEN",
        "THEN",
        "ELSE",
        "END",
        "AS",
        "NOT",
        "IN",
    }
)
"""Capitalised SQL words ("Select", "From") that never start a prose line."""


def _starts_statement(line: str) -> bool:
    words = line.strip().split(None, 1)
    if not words:
        return False
    first = words[0].upper().rstrip(";")
    return first in STATEMENT_START_WORDS or first.startswith(("(SELECT", "--", "/*"))


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


WRITE_TYPES: tuple[type[exp.Expression], ...] = tuple(
    t
    for t in (exp.Insert, exp.Delete, exp.Update, exp.Merge, exp.Create, exp.Drop, getattr(exp, "TruncateTable", None))
    if isinstance(t, type)
)
"""Write statements that can hide inside a query (a data-modifying CTE)."""
WRITE_WORDS = (
    "INSERT",
    "INTO",
    "DELETE",
    "UPDATE",
    "MERGE",
    "CREATE",
    "DROP",
    "TRUNCATE",
    "REPLACE",
    "UPSERT",
    "OVERWRITE",
)
"""Keywords a write needs (SELECT INTO needs INTO); a dialect's own spellings are added from its
tokenizer (:func:`_write_words`). A query whose text holds none of them has no write in its
tree, which is then not walked for :func:`embedded_writes`."""
_WRITE_TOKEN_NAMES = frozenset(
    {"INSERT", "DELETE", "UPDATE", "MERGE", "CREATE", "DROP", "REPLACE", "INTO", "TRUNCATE", "OVERWRITE"}
)


@lru_cache(maxsize=64)
def _write_words(dialect: str) -> tuple[str, ...]:
    """:data:`WRITE_WORDS` plus every keyword the dialect's tokenizer maps to a write token
    (Teradata's ``DEL``, ``INS``, ``UPD``)."""
    keywords = dialect_instance(dialect).tokenizer_class.KEYWORDS
    own = sorted(
        word for word, token in keywords.items() if token.name in _WRITE_TOKEN_NAMES and word not in WRITE_WORDS
    )
    return (*WRITE_WORDS, *own)


def _may_write(text: str, dialect: str) -> bool:
    """Pre-check before walking the tree: does the text hold a write keyword of the dialect
    anywhere (case-insensitive)? A superset test: the tree, not this, decides what is flagged."""
    upper = text.upper()
    return any(word in upper for word in _write_words(dialect))


def embedded_writes(query: exp.Expression) -> list[str]:
    """Writes inside a query statement: ``SELECT ... INTO t`` and data-modifying CTEs.

    >>> import sqlglot
    >>> embedded_writes(sqlglot.parse_one("SELECT * INTO backup FROM users"))
    ['SELECT INTO']
    >>> embedded_writes(sqlglot.parse_one("WITH d AS (DELETE FROM users RETURNING *) SELECT COUNT(*) FROM d", read="postgres"))
    ['DELETE (inside the query)']
    """
    writes: list[str] = []
    into: list[str] = []
    for node in query.walk():  # one walk for both kinds
        if isinstance(node, WRITE_TYPES):
            writes.append(f"{node.key.upper()} (inside the query)")
        elif isinstance(node, exp.Select) and node.args.get("into") is not None:
            into.append("SELECT INTO")
    return writes + into


_STRING_TOKENS = frozenset(
    t for name, t in TokenType.__members__.items() if name.endswith("STRING") and "LINESTRING" not in name
)
"""Token types of string literals (a fence marker inside one is SQL text)."""


def _fence_marker_in_code(text: str, dialect: str) -> bool:
    """Whether a markdown fence marker (three backticks or tildes) stands in the text outside
    its string literals and comments, read with the dialect's tokenizer (a text the tokenizer
    rejects counts as markdown)."""
    if "```" not in text and "~~~" not in text:
        return False
    try:
        tokens = _parser_pair(dialect)[0].tokenize(text)
    except SqlglotError:
        return True
    for token in tokens:
        if (
            token.token_type not in _STRING_TOKENS and token.token_type is not TokenType.IDENTIFIER
        ):  # quoted names hold text too
            source = text[token.start : token.end + 1]
            if "```" in source or "~~~" in source:
                return True
    return False


def _whole_text_statements(text: str, dialect: str) -> list[exp.Expression] | None:
    """The statements of ``text`` when it is SQL as a whole, else ``None`` (it is a message:
    markdown, prose).

    SQL as a whole: it starts like a statement (a statement keyword or a comment, so that prose
    such as "Execute this query: ..." is a message, as sqlglot would parse it as EXECUTE), holds
    no fence marker outside its string literals and comments, and parses into statements only
    (bare expressions, such as ``Note that`` parsed as an alias, mean "not SQL").

    Raises:
        RecursionError: the text nests too deeply for the parser.
    """
    head = text.lstrip(" \t\r\n;")
    strict = _starts_statement(head.split("\n", 1)[0])
    first = head.split(None, 1)[0].upper().rstrip(";") if head.split() else ""
    if not (strict or first in EXTENDED_START_WORDS) or _fence_marker_in_code(text, dialect):
        return None
    try:
        parsed = parse_statements(text, dialect)
    except SqlglotError:
        return None
    statements = [s for s in parsed if s is not None and not isinstance(s, exp.Semicolon)]
    if any(not isinstance(s, (*QUERY_TYPES, *NON_QUERY_STATEMENT_TYPES)) for s in statements):
        return None
    if not strict and any(isinstance(s, exp.Command) for s in statements):
        return None  # "Set the limit to 10. SELECT …" parses as one Command: a message, not SQL
    return statements


EXTENDED_START_WORDS = frozenset(
    {
        "BEGIN",
        "START",
        "COMMIT",
        "ROLLBACK",
        "SAVEPOINT",
        "RELEASE",
        "SET",
        "VACUUM",
        "ATTACH",
        "DETACH",
        "CALL",
        "DO",
        "LOAD",
        "RENAME",
        "GRANT",
        "REVOKE",
        "COPY",
        "USE",
        "LOCK",
        "UNLOCK",
        "KILL",
        "SHOW",
        "DESCRIBE",
        "DECLARE",
        "ANALYZE",
        "REINDEX",
        "CHECKPOINT",
        "EXEC",
        "EXECUTE",
        "COMMENT",
        "UPSERT",
        "INSTALL",
        "UNDROP",
    }
)
"""Further first words of a text that is SQL as a whole (``BEGIN; DROP …``, ``VACUUM; …``) when
it parses into real statements (sqlglot's Command fallback would also read prose that starts so)."""


HIDDEN_WRITE_TYPES: tuple[type[exp.Expression], ...] = tuple(
    t
    for t in (
        exp.Drop,
        exp.Delete,
        exp.Insert,
        exp.Update,
        exp.Merge,
        exp.Create,
        exp.Alter,
        exp.Copy,
        *(
            getattr(exp, name, None)
            for name in (
                "TruncateTable",
                "Grant",
                "Revoke",
                "Attach",
                "Detach",
                "Install",
                "Kill",
                "Execute",
                "ExecuteSql",
                "Comment",
                "Put",
                "Undrop",
            )
        ),
    )
    if isinstance(t, type)
)
"""Statements looked for in the parts of a message left out of its SQL (prose, other code
blocks). sqlglot's ``Command`` fallback is not among them: prose such as "Drop the filter" parses
as one."""
HIDDEN_START_WORDS = frozenset(
    {
        "DROP",
        "DELETE",
        "INSERT",
        "UPDATE",
        "MERGE",
        "CREATE",
        "ALTER",
        "TRUNCATE",
        "REPLACE",
        "GRANT",
        "REVOKE",
        "COPY",
        "UPSERT",
        "WITH",
        "SELECT",
        "ATTACH",
        "DETACH",
        "INSTALL",
        "KILL",
        "EXEC",
        "EXECUTE",
        "COMMENT",
        "PUT",
        "UNDROP",
    }
)
"""First words of a line that may start a hidden write (``WITH`` and ``SELECT``: a
data-modifying CTE, ``SELECT ... INTO``), besides the dialect's own write keywords."""
MAX_HIDDEN_CANDIDATES = 64
"""Lines left out of the SQL that are parsed as possible statements, per record; past this many
the rest is reported unchecked (and the record counts as holding a non-SELECT statement)."""


def _complete_write(statement: exp.Expression) -> bool:
    """Whether a parsed write is a whole statement, not prose that happens to parse ("Update the
    table" parses as an UPDATE without SET)."""
    if isinstance(statement, exp.Update):
        return bool(statement.args.get("expressions"))
    if isinstance(statement, exp.Insert):
        return statement.expression is not None
    if isinstance(statement, exp.Copy):
        return bool(statement.args.get("files"))
    return True  # DROP, CREATE, ALTER ... parsed as themselves (not as sqlglot's Command fallback)


def _write_kinds(statements: list[exp.Expression | None]) -> list[str]:
    kinds: list[str] = []
    for statement in statements:
        if statement is None or isinstance(statement, exp.Semicolon):
            continue
        if isinstance(statement, HIDDEN_WRITE_TYPES) and _complete_write(statement):
            kinds.append(statement.key.upper())
        elif isinstance(statement, QUERY_TYPES):
            kinds.extend(embedded_writes(statement))
    return kinds


_NEXT_WORD_STATEMENTS: dict[str, frozenset[str]] = {
    "DROP": frozenset(
        {
            "TABLE",
            "VIEW",
            "INDEX",
            "DATABASE",
            "SCHEMA",
            "COLUMN",
            "TRIGGER",
            "PROCEDURE",
            "FUNCTION",
            "USER",
            "ROLE",
            "SEQUENCE",
            "EXTENSION",
            "TEMP",
            "TEMPORARY",
            "IF",
            "MATERIALIZED",
            "TYPE",
        }
    ),
    "CREATE": frozenset(
        {
            "TABLE",
            "VIEW",
            "INDEX",
            "DATABASE",
            "SCHEMA",
            "TRIGGER",
            "PROCEDURE",
            "FUNCTION",
            "USER",
            "ROLE",
            "SEQUENCE",
            "EXTENSION",
            "TEMP",
            "TEMPORARY",
            "OR",
            "UNIQUE",
            "MATERIALIZED",
            "VIRTUAL",
            "TYPE",
        }
    ),
    "ALTER": frozenset(
        {"TABLE", "VIEW", "INDEX", "DATABASE", "SCHEMA", "USER", "ROLE", "SEQUENCE", "SYSTEM", "SESSION"}
    ),
    "TRUNCATE": frozenset({"TABLE"}),
    "RENAME": frozenset({"TABLE", "COLUMN", "USER"}),
    "UNDROP": frozenset({"TABLE", "SCHEMA", "DATABASE"}),
    "COMMENT": frozenset({"ON"}),
    "DELETE": frozenset({"FROM"}),
    "INSERT": frozenset({"INTO", "OVERWRITE", "IGNORE", "OR"}),
    "REPLACE": frozenset({"INTO"}),
    "UPSERT": frozenset({"INTO"}),
    "MERGE": frozenset({"INTO"}),
    "ATTACH": frozenset({"DATABASE", "PARTITION"}),
    "DETACH": frozenset({"DATABASE", "PARTITION"}),
    "LOAD": frozenset({"DATA", "EXTENSION"}),
    "GRANT": frozenset({"ALL", "SELECT", "INSERT", "UPDATE", "DELETE", "USAGE", "EXECUTE", "CREATE"}),
    "REVOKE": frozenset({"ALL", "SELECT", "INSERT", "UPDATE", "DELETE", "USAGE", "EXECUTE", "CREATE"}),
    "EXECUTE": frozenset({"IMMEDIATE", "PROCEDURE"}),
    "EXEC": frozenset({"IMMEDIATE", "PROCEDURE"}),
    "INSTALL": frozenset({"PLUGIN", "EXTENSION"}),
}
"""Write keywords that start a statement when the next word is one of these (``DROP TABLE``,
``DELETE FROM``): prose such as "Drop the filter" or "Delete the rows" has another word there."""
_CALL_STATEMENTS = frozenset({"CALL", "EXEC", "EXECUTE", "DO"})
"""Keywords that run a procedure or a code block: a statement when followed by a name and ``(``,
a string or a dollar-quoted block."""
_ASSIGNMENT_STATEMENTS = frozenset({"SET", "PRAGMA"})
"""Keywords that change a setting: a statement when an ``=`` (or ``:=``) follows within three words."""
_ALONE_STATEMENTS = frozenset({"VACUUM", "CHECKPOINT", "REINDEX"})
"""Keywords that are a whole statement by themselves (``VACUUM;``)."""


_LOOSE_WRITE_TYPES: tuple[type[exp.Expression], ...] = tuple(
    t for t in (getattr(exp, n, None) for n in ("Execute", "ExecuteSql", "Comment")) if isinstance(t, type)
)
"""Statements sqlglot also reads out of prose ("Execute the query below", "Comment on this"):
in a message part they count only when :func:`_looks_like_statement` agrees."""


def _tokens_of(part: str, dialect: str) -> list[tuple[str, str, int, int]]:
    """``(upper-case text, token type name, start, end)`` of a message part, with the dialect's
    tokenizer (comments and whitespace dropped, a string or quoted name one token); a line the
    tokenizer rejects (prose with a stray quote) is split into plain words instead."""
    tokenizer = _parser_pair(dialect)[0]
    try:
        return [(t.text.upper(), t.token_type.name, t.start, t.end + 1) for t in tokenizer.tokenize(part)]
    except (SqlglotError, RecursionError):
        pass
    found: list[tuple[str, str, int, int]] = []
    offset = 0
    for line in part.splitlines(keepends=True):
        try:
            found += [
                (t.text.upper(), t.token_type.name, offset + t.start, offset + t.end + 1)
                for t in tokenizer.tokenize(line)
            ]
        except (SqlglotError, RecursionError):
            position = 0
            for word in line.split():
                position = line.index(word, position)
                found.append((word.upper().strip(";,.:!?()"), "VAR", offset + position, offset + position + len(word)))
                position += len(word)
        offset += len(line)
    return found


def _looks_like_statement(tokens: list[tuple[str, str, int, int]], index: int, part: str) -> bool:
    """Whether the write keyword at ``index`` of ``part`` starts a statement by the words after it."""
    word = tokens[index][0]
    after = tokens[index + 1 : index + 5]
    following = [text for text, _, _, _ in after]
    if tokens[index][1] == "COMMAND" or (after and after[0][1] == "STRING" and word not in _CALL_STATEMENTS):
        # the tokenizer kept the rest of the statement as one raw string: read its words instead
        end = next((t[2] for t in tokens[index + 1 :] if t[1] == "SEMICOLON"), len(part))
        following = [w.upper().strip("();,") for w in part[tokens[index][3] : end].split()[:4]]
    if word == "COMMENT":  # COMMENT ON TABLE … IS …; "Comment on this query" is prose
        return following[:1] == ["ON"] and len(following) > 1 and following[1] in _NEXT_WORD_STATEMENTS["DROP"]
    if word in _NEXT_WORD_STATEMENTS and following and following[0] in _NEXT_WORD_STATEMENTS[word]:
        return True
    if word == "UPDATE" and "SET" in following[1:4]:
        return True
    if word in _ASSIGNMENT_STATEMENTS and any(text in ("=", ":=") for text in following[:3]):
        return True
    if word in _CALL_STATEMENTS:
        # judged on the raw text after the keyword: the tokenizer keeps a command's arguments as one string
        end = next((t[2] for t in tokens[index + 1 :] if t[1] == "SEMICOLON"), len(part))
        return _runs_code(part[tokens[index][3] : end])
    if word in _ALONE_STATEMENTS and (not following or following[0] in (";", "INTO", "FULL", "ANALYZE")):
        return True
    return False


def _runs_code(arguments: str) -> bool:
    """Whether the arguments of CALL / EXEC / EXECUTE / DO name code to run: a string or a
    dollar-quoted block, ``IMMEDIATE``, or a name followed by ``(`` ("the query below" is none)."""
    text = arguments.strip()
    if not text:
        return False
    if text[0] in "'\"$":
        return True
    name = text.split(None, 1)[0]
    if name.upper() == "IMMEDIATE":
        return True
    head = text.split("(", 1)[0]
    return (
        "(" in text
        and head.strip() != ""
        and " " not in head.strip()
        and all(c.isalnum() or c in '_.[]`"' for c in head.strip())
    )


def hidden_statements(parts: tuple[str, ...] | list[str], dialect: str) -> list[str]:
    """Non-SELECT statements in the parts of a message that are not its SQL (prose, other code blocks).

    A message may carry a statement outside its code block (``DROP TABLE t;`` before the fence,
    after a line of prose, behind a comment or a list marker) that a harness which runs the
    message's SQL lines would run too. Each part is read with the dialect's tokenizer (so
    comments never hide a keyword and a keyword inside a string is no keyword); at every write
    keyword the text up to the next ``;`` is parsed, and a complete write statement is reported
    with its kind; one that does not parse is still reported when the words after the keyword
    make it a statement (``DROP TABLE``, ``DELETE FROM``, ``UPDATE … SET``, ``SET x = …``,
    ``CALL p(…)``, ``VACUUM;``), so text that no parser reads cannot hide it either.

    Args:
        parts: :attr:`MessageParts.discarded`, and the prose cut after the SQL.
        dialect: a resolved sqlglot dialect name.

    Returns:
        Statement kinds in order (``"DROP"``, ``"DELETE (inside the query)"`` ...); ``"UNCHECKED"``
        once more than :data:`MAX_HIDDEN_CANDIDATES` keywords were tried.

    >>> hidden_statements(["Run this first:\\nDROP TABLE schools;", "Hope it helps"], "sqlite")
    ['DROP']
    >>> hidden_statements(["1. /* tidy up */ DROP/**/TABLE schools; 2. VACUUM;"], "sqlite")
    ['DROP', 'VACUUM']
    >>> hidden_statements(["Drop the filter on year, then update the table."], "sqlite")
    []
    """
    words = (
        HIDDEN_START_WORDS
        | set(_write_words(dialect))
        | set(_NEXT_WORD_STATEMENTS)
        | _CALL_STATEMENTS
        | _ASSIGNMENT_STATEMENTS
        | _ALONE_STATEMENTS
    )
    kinds: list[str] = []
    tried = 0
    for part in parts:
        tokens = _tokens_of(part, dialect)
        index = 0
        while index < len(tokens):
            word, kind, begin, _ = tokens[index]
            if word not in words or "STRING" in kind:
                index += 1
                continue
            tried += 1
            if tried > MAX_HIDDEN_CANDIDATES:
                return [*kinds, "UNCHECKED"]
            stop = next((j for j in range(index + 1, len(tokens)) if tokens[j][0] == ";"), len(tokens))
            end = tokens[stop - 1][3] if stop > index else len(part)
            try:
                statements = parse_statements(part[begin:end], dialect)
            except (SqlglotError, RecursionError):
                statements = []
            loose = [s for s in statements if isinstance(s, _LOOSE_WRITE_TYPES)]
            found = [] if loose and not _looks_like_statement(tokens, index, part) else _write_kinds(statements)
            if not found and _looks_like_statement(tokens, index, part):
                found = [word]
            kinds.extend(found)
            index = stop if found else index + 1
    return kinds


def executable_comment_writes(statements: tuple[exp.Expression, ...], dialect: str) -> list[str]:
    """Write statements inside MySQL/MariaDB executable comments (``/*! ... */``,
    ``/*!50001 ... */``, MariaDB's ``/*M! ... */``): those servers run the comment's text,
    sqlglot keeps it as a comment.

    Returns:
        Statement kinds, as :func:`hidden_statements`.

    >>> import sqlglot
    >>> executable_comment_writes(tuple(sqlglot.parse("SELECT 1 /*!50001 ; DROP TABLE t */", read="mysql")), "mysql")
    ['DROP']
    """
    kinds: list[str] = []
    for statement in statements:
        for node in statement.walk():
            for comment in node.comments or ():
                if not comment.startswith(("!", "M!")):
                    continue
                body = comment.split("!", 1)[1].lstrip("0123456789")
                try:
                    kinds.extend(_write_kinds(parse_statements(body, dialect)))
                except (SqlglotError, RecursionError):
                    kinds.append("UNPARSED")
    return kinds


def parse_sql(sql_text: str, dialect: str | None = None) -> ParsedSQL:
    """Clean, parse and split one SQL text; never raises for bad SQL.

    A text that parses as SQL as a whole is taken as it is, comments and all (a code fence
    inside a comment or a string literal is SQL text, not markdown). Only a text that does not
    is read as a message (:func:`split_message`: code fences, prose before and after the SQL),
    and the parts left out of its SQL are searched for hidden write statements
    (:func:`hidden_statements`), flagged like the statements of the SQL itself.

    Args:
        sql_text: the SQL as logged (may hold fences, prose, comments, several statements).
        dialect: a sqlglot dialect name, or ``None``/``""`` for the generic dialect. Must be
            resolved already (see :func:`resolve_dialect`).

    Returns:
        A :class:`ParsedSQL`; ``error`` is set for empty text (``invalid_input``), text over
        :data:`MAX_SQL_CHARS` (``too_large``), text the parser rejects (``parse_error``) and
        text with no query statement (``non_select``).

    >>> parsed = parse_sql("SELECT name FROM users; DROP TABLE users", "sqlite")
    >>> parsed.answer.sql(), parsed.flags
    ('SELECT name FROM users', ('non_select_statement: DROP', 'multiple_statements: 2'))
    >>> parse_sql("DROP TABLE t; -- ```sql\\nSELECT 1 -- ```", "sqlite").flags
    ('non_select_statement: DROP', 'multiple_statements: 2')
    >>> parse_sql("DROP TABLE t;\\n```sql\\nSELECT 1\\n```", "sqlite").flags
    ('stripped markdown fence', 'non_select_statement: DROP (outside the SQL)')
    """
    dialect = dialect or ""
    if len(sql_text) > MAX_SQL_CHARS:
        return ParsedSQL(
            None, (), dialect, (), "too_large", f"SQL is {len(sql_text)} characters, over the {MAX_SQL_CHARS} cap"
        )
    if "\x00" in sql_text:
        return ParsedSQL(None, (), dialect, (), "invalid_input", "SQL contains NUL bytes (binary data, not SQL text)")
    text = sql_text.strip()
    if not text:
        return ParsedSQL(None, (), dialect, (), "invalid_input", "SQL is empty")
    try:
        whole = _whole_text_statements(text, dialect)
    except RecursionError:
        return ParsedSQL(None, (), dialect, (), "parse_error", "SQL nests too deeply for the parser")
    flags: tuple[str, ...] = ()
    discarded: tuple[str, ...] = ()
    if whole is not None:
        statements = tuple(whole)
    else:
        parts = split_message(sql_text)
        text, flags, discarded = parts.sql, parts.flags, parts.discarded
        if not text:
            return ParsedSQL(None, (), dialect, flags, "invalid_input", "SQL is empty")
        try:
            parsed = parse_statements(text, dialect)
        except SqlglotError as error:
            cut = _without_trailing_prose(text)
            if cut is None:
                return ParsedSQL(None, (), dialect, flags, "parse_error", parser_message(error))
            try:
                parsed = parse_statements(cut[0], dialect)
            except SqlglotError:
                return ParsedSQL(None, (), dialect, flags, "parse_error", parser_message(error))
            text, flags, discarded = cut[0], (*flags, "stripped prose after SQL"), (*discarded, cut[1])
        except RecursionError:
            return ParsedSQL(None, (), dialect, flags, "parse_error", "SQL nests too deeply for the parser")
        statements = tuple(s for s in parsed if s is not None and not isinstance(s, exp.Semicolon))
    if not statements:
        return ParsedSQL(
            None,
            (),
            dialect,
            (*flags, "only comments"),
            "invalid_input",
            "SQL holds no statement (only comments or semicolons)",
        )
    answer: exp.Expression | None = None
    statement_flags: list[str] = []
    for statement in statements:
        if isinstance(statement, QUERY_TYPES):
            if (
                isinstance(statement, exp.Select) and not statement.expressions
            ):  # "SELECT", "SELECT FROM t": sqlglot accepts it, no database does
                return ParsedSQL(
                    None,
                    statements,
                    dialect,
                    flags,
                    "parse_error",
                    f"a SELECT without a projection: {statement.sql(dialect=dialect or None)[:80]!r}",
                )
            answer = statement
        elif not isinstance(statement, NON_QUERY_STATEMENT_TYPES):
            shown = statement.sql(dialect=dialect or None)[:80]
            return ParsedSQL(
                None,
                statements,
                dialect,
                flags,
                "parse_error",
                f"not a SQL statement (parsed as the bare expression {shown!r})",
            )
        else:
            kind = statement.key.upper() if not isinstance(statement, exp.Command) else str(statement.this).upper()
            statement_flags.append(f"non_select_statement: {kind}")
    if answer is not None and _may_write(text, dialect):  # every query of the text, not only the answer
        statement_flags.extend(
            f"non_select_statement: {kind}"
            for query in statements
            if isinstance(query, QUERY_TYPES)
            for kind in embedded_writes(query)
        )
    if len(statements) > 1:
        statement_flags.append(f"multiple_statements: {len(statements)}")
    statement_flags.extend(
        f"non_select_statement: {kind} (outside the SQL)" for kind in hidden_statements(discarded, dialect)
    )
    if "/*!" in text or "/*M!" in text:
        statement_flags.extend(
            f"non_select_statement: {kind} (in an executable comment)"
            for kind in executable_comment_writes(statements, dialect)
        )
    all_flags = (*flags, *statement_flags)
    if answer is None:
        kinds = ", ".join(f.split(": ", 1)[1] for f in statement_flags if f.startswith("non_select"))
        return ParsedSQL(None, statements, dialect, all_flags, "non_select", f"no SELECT statement; found {kinds}")
    return ParsedSQL(answer, statements, dialect, all_flags, text=text)


FALLBACK_DIALECTS = ("mysql", "tsql", "postgres", "bigquery", "snowflake")
"""Dialects tried, in order, when SQL logged without a dialect fails in the generic one."""


def parse_sql_with_fallback(sql_text: str, dialect: str = "") -> ParsedSQL:
    """:func:`parse_sql`, and for the generic dialect only, a retry in common dialects.

    A record with no dialect that uses ``SELECT TOP 10`` (T-SQL) would otherwise be a
    ``parse_error``; the first dialect of :data:`FALLBACK_DIALECTS` that parses it is used and
    the flag ``dialect_inferred: <name>`` says so. The original parser message is kept when no
    dialect parses it.

    >>> parsed = parse_sql_with_fallback("SELECT TOP 3 name FROM t")
    >>> parsed.dialect, parsed.flags
    ('tsql', ('dialect_inferred: tsql',))
    """
    parsed = parse_sql(sql_text, dialect)
    if dialect or parsed.error != "parse_error":
        return parsed
    for candidate in FALLBACK_DIALECTS:
        retry = parse_sql(sql_text, candidate)
        if retry.error is None or retry.error == "non_select":
            return ParsedSQL(
                retry.answer,
                retry.statements,
                candidate,
                (*retry.flags, f"dialect_inferred: {candidate}"),
                retry.error,
                retry.error_message,
                retry.text,
            )
    return parsed


__all__ = [
    "MessageParts",
    "ParseError",
    "ParsedSQL",
    "hidden_statements",
    "parse_sql",
    "parse_sql_with_fallback",
    "parser_message",
    "resolve_dialect",
    "split_message",
    "strip_markdown",
]
