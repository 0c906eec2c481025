"""Boundary of the method: raw SQL text -> parsed statements or a typed failure (STYLE.md §2).

Agents log SQL in many shapes: wrapped in markdown code fences, preceded by prose ("Here is the
query:"), followed by comments, or as several statements. This module cleans the text once,
parses it once with sqlglot in the record's dialect, splits statements, flags every statement
that is not a query, and picks the answer: the last SELECT-like statement (DESIGN.md §2).
Later stages receive the parsed tree; nothing downstream parses SQL again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlglot import TokenType, exp
from sqlglot.errors import ParseError, SqlglotError

from stef.pipeline.dialects import _parser_pair, parse_statements, parser_message
from stef.pipeline.statement_safety import (
    CLIENT_COMMAND,
    NON_QUERY_STATEMENT_TYPES,
    QUERY_TYPES,
    _may_write,
    _write_kinds,
    embedded_writes,
    executable_comment_writes,
    hidden_statements,
    nested_comment_writes,
    without_into_clauses,
)

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

    answer: exp.Expr | None
    statements: tuple[exp.Expr, ...]
    dialect: str
    flags: tuple[str, ...]
    error: str | None = None
    error_message: str | None = None
    text: str = ""
    """The cleaned SQL text (fences and prose removed) that was parsed."""


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
        filled = [b for b in blocks if b[1].strip()]  # an empty fence holds no SQL: the SQL is elsewhere
        tagged = [b for b in blocks if b[0] in SQL_FENCE_LANGUAGES]
        # an SQL-tagged block, even empty, says where the SQL is not: never another block (an output)
        chosen = [b for b in tagged if b[1].strip()] if tagged else filled
        lines = text.replace("\r\n", "\n").split("\n")
        covered = {number for _, _, (first, end) in blocks for number in range(first, end)}
        discarded.extend(
            body for block in filled if block not in chosen for body in (block[1],)
        )  # other blocks: their text, without the fences
        kept: list[str] = []
        outside: list[str] = []  # the lines outside every block: the SQL when no block holds any
        for number, line in enumerate(lines):
            if number in covered:
                if kept:
                    outside.append("\n".join(kept))
                    kept = []
            else:
                kept.append(line)
        if kept:
            outside.append("\n".join(kept))
        if chosen:
            discarded.extend(outside)
            text = "\n".join(body.strip() for _, body, _ in chosen)
        else:  # "Here is the query:\n```\n```\nSELECT 1": the prose and the SQL around the empty fences
            text = "\n".join(outside)
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


def _parse_recovered(text: str, dialect: str) -> tuple[list[exp.Expr | None], str, str | None, tuple[str, ...]] | None:
    """The statements of a text the parser rejected, recovered: ``(statements, sql, prose, kinds)``.

    A text with trailing prose (:func:`_without_trailing_prose`) is cut before it first (``prose``
    the cut tail, else ``None``), so that a sentence never reads as SQL; then, in the SQL alone,
    MySQL's ``INTO OUTFILE`` / ``DUMPFILE`` / ``@var`` clauses sqlglot cannot parse are cut out
    (:func:`~stef.pipeline.statement_safety.without_into_clauses`): ``kinds`` names them, to be
    flagged, when what is left parses. ``None`` when nothing parses.
    """
    cut = _without_trailing_prose(text)
    sql, prose = (text, None) if cut is None else cut
    if cut is not None:
        try:
            return parse_statements(sql, dialect), sql, prose, ()
        except SqlglotError:
            pass
    into = without_into_clauses(sql, dialect)
    if into is not None and all(into.named):  # MySQL requires the file name: "INTO OUTFILE is off" is prose
        try:
            return parse_statements(into.text, dialect), into.text.strip(), prose, into.kinds
        except SqlglotError:
            pass
    statements = _each_statement(sql, dialect)
    return None if statements is None else (statements, sql, prose, ())


def _each_statement(text: str, dialect: str) -> list[exp.Expr | None] | None:
    """The statements of a text of several that the parser rejected as a whole, parsed one by one
    (split at the ``;`` tokens of the dialect's tokenizer): a statement sqlglot cannot parse
    (MySQL's ``SHUTDOWN``, ``FLUSH PRIVILEGES``, ``LOAD DATA INFILE …``) that
    :func:`~stef.pipeline.statement_safety.hidden_statements` reads as a write becomes an
    ``exp.Command`` of its kind, flagged as every non-SELECT statement is, and the others are
    scored. ``None`` when a statement neither parses nor reads as a write (the text stays a
    ``parse_error``), or when no statement needed it.

    >>> [type(s).__name__ for s in _each_statement("SELECT name FROM users; LOAD DATA INFILE '/etc/x' INTO TABLE t", "mysql")]
    ['Select', 'Command']
    >>> [type(s).__name__ for s in _each_statement("SELECT name FROM users; SHUTDOWN", "mysql")]
    ['Select', 'Command']
    >>> _each_statement("SELECT name FROM users; SELECT FROM WHERE", "mysql") is None
    True
    """
    try:
        tokens = _parser_pair(dialect)[0].tokenize(text)
    except (SqlglotError, RecursionError):
        return None
    pieces: list[str] = []
    start = 0
    for token in tokens:
        if token.token_type is TokenType.SEMICOLON:
            pieces.append(text[start : token.start])
            start = token.end + 1
    pieces.append(text[start:])
    statements: list[exp.Expr | None] = []
    commands = 0
    for piece in (p for p in pieces if p.strip()):
        try:
            parsed = parse_statements(piece, dialect)
        except SqlglotError:
            parsed = None
        if parsed is not None and not any(_bare_expression(statement) for statement in parsed):
            statements.extend(parsed)
            continue
        # without a dialect, a piece with MySQL's INTO OUTFILE is left to parse_sql_with_fallback's MySQL
        kinds = hidden_statements([piece], dialect, into_files=bool(dialect))
        if not kinds or kinds == ["UNCHECKED"]:
            return None
        statements.append(exp.Command(this=kinds[0], expression=exp.Literal.string(piece.strip())))
        commands += 1
    return statements if commands else None


def _bare_expression(statement: exp.Expr | None) -> bool:
    """Whether a parsed statement is neither a query nor a statement type but a bare expression
    (``SHUTDOWN`` parses as a column, ``FLUSH PRIVILEGES`` as an aliased one)."""
    return statement is not None and not isinstance(
        statement, (*QUERY_TYPES, *NON_QUERY_STATEMENT_TYPES, exp.Semicolon)
    )


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


def fenced_text_writes(text: str, dialect: str) -> list[str]:
    """Writes in the fenced blocks that a string literal or a quoted name of SQL holds.

    In the dialects that quote names with backticks, a fenced block after unfenced SQL reads as
    one quoted name (``SELECT name FROM users`` then a ```` ```sql ```` block with a ``DROP``: the
    block is the table's alias), and a fence may sit inside a string; the text is SQL as a whole,
    which is what the database runs, but a harness that takes the message's code blocks runs
    the block. Each such token's text is cut at its fence lines (:func:`_fenced_pieces`), and a
    piece that parses as SQL whole is checked as every statement is: its writes are returned. A
    block of output rows, a note or any text that is not SQL gives none.

    Returns:
        The kinds of the writes found (``"DROP"``), ``[]`` for a text without fence markers.

    >>> fenced_text_writes("SELECT name FROM users\\n\\n```sql\\nDROP TABLE users\\n```", "sqlite")
    ['DROP']
    >>> fenced_text_writes("SELECT a FROM t\\n\\n```\\naction\\n----\\nView profile\\nDelete account\\n```", "sqlite")
    []
    """
    if "```" not in text and "~~~" not in text:
        return []
    try:
        tokens = _parser_pair(dialect)[0].tokenize(text)
    except SqlglotError:
        return []
    kinds: list[str] = []
    for token in tokens:
        source = text[token.start : token.end + 1]
        if (token.token_type in _STRING_TOKENS or token.token_type is TokenType.IDENTIFIER) and (
            "```" in source or "~~~" in source
        ):
            for piece in _fenced_pieces(source):
                try:
                    statements = parse_statements(piece, dialect)
                except (SqlglotError, RecursionError):
                    continue
                kinds.extend(_write_kinds(statements, dialect))
    return kinds


def _fenced_pieces(source: str) -> list[str]:
    """The texts between the fence lines of ``source`` (a fence line's info string, ``sql``, and
    the text after a closing marker dropped), non-blank ones only."""
    pieces: list[str] = []
    current: list[str] = []
    for line in source.splitlines():
        found = [line.find(marker) for marker in ("```", "~~~") if marker in line]
        if not found:
            current.append(line)
            continue
        current.append(line[: min(found)])
        pieces.append("\n".join(current))
        current = []
    pieces.append("\n".join(current))
    return [piece for piece in pieces if piece.strip()]


def _whole_text_statements(text: str, dialect: str) -> list[exp.Expr] | None:
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
            resolved already (see :func:`stef.pipeline.dialects.resolve_dialect`).

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
        flags = tuple(f"non_select_statement: {kind} (in a fenced block)" for kind in fenced_text_writes(text, dialect))
    else:
        parts = split_message(sql_text)
        text, flags, discarded = parts.sql, parts.flags, parts.discarded
        if not text:
            return ParsedSQL(None, (), dialect, flags, "invalid_input", "SQL is empty")
        try:
            parsed = parse_statements(text, dialect)
        except SqlglotError as error:
            recovered = _parse_recovered(text, dialect)
            if recovered is None:
                return ParsedSQL(None, (), dialect, flags, "parse_error", parser_message(error))
            parsed, text, prose, into_kinds = recovered
            flags = (*flags, *(f"non_select_statement: {kind}" for kind in into_kinds))
            if prose is not None:
                flags, discarded = (*flags, "stripped prose after SQL"), (*discarded, prose)
        except RecursionError:
            return ParsedSQL(None, (), dialect, flags, "parse_error", "SQL nests too deeply for the parser")
        statements = tuple(s for s in parsed if s is not None and not isinstance(s, exp.Semicolon))
    if any(_bare_expression(statement) for statement in statements):  # a statement sqlglot misread?
        one_by_one = _each_statement(text, dialect)
        if one_by_one is not None:
            statements = tuple(s for s in one_by_one if s is not None and not isinstance(s, exp.Semicolon))
    if not statements:
        return ParsedSQL(
            None,
            (),
            dialect,
            (*flags, "only comments"),
            "invalid_input",
            "SQL holds no statement (only comments or semicolons)",
        )
    answer: exp.Expr | None = None
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
            command = str(statement.this) if isinstance(statement, exp.Command) else ""
            kind = (  # a client command's name is case-sensitive (psql's \g and \G differ)
                statement.key.upper()
                if not command
                else command
                if command.endswith(CLIENT_COMMAND)
                else command.upper()
            )
            statement_flags.append(f"non_select_statement: {kind}")
    if answer is not None and _may_write(text, dialect):  # every query of the text, not only the answer
        statement_flags.extend(
            f"non_select_statement: {kind}"
            for query in statements
            if isinstance(query, QUERY_TYPES)
            for kind in embedded_writes(query, dialect)
        )
    if len(statements) > 1:
        statement_flags.append(f"multiple_statements: {len(statements)}")
    statement_flags.extend(
        f"non_select_statement: {kind} (outside the SQL)"
        for kind in hidden_statements(discarded, dialect, into_files=True)
    )
    if "/*!" in text or "/*M!" in text:
        statement_flags.extend(
            f"non_select_statement: {kind} (in an executable comment)"
            for kind in executable_comment_writes(statements, dialect)
        )
    if not dialect and text.count("/*") > 1:
        statement_flags.extend(
            f"non_select_statement: {kind} (behind a nested comment)" for kind in nested_comment_writes(text)
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
    "parse_sql",
    "parse_sql_with_fallback",
    "split_message",
    "strip_markdown",
]
