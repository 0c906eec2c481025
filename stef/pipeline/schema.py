"""Database schemas a team gives STEF: DDL files and JSON catalogs -> :class:`DatabaseSchema`.

A schema is optional (the STEF method is schema-free); when an app has one, the judge checks
what only a schema can tell (unknown tables and columns, joins on pairs that are not keys,
literals that do not fit a column's type ...). Two file kinds are read, one per app:

* ``<app_id>.sql``: DDL in the app's dialect (``pg_dump --schema-only``, ``sqlite3 .schema``),
  parsed with sqlglot. ``CREATE TABLE`` statements give tables, columns, types, primary and
  foreign keys (named ``CONSTRAINT`` clauses too; a column may have no type, as SQLite allows, and
  table options sqlglot does not read, such as SQLite's ``WITHOUT ROWID``, are left off); a ``--``
  comment after a column, a ``COMMENT '...'``
  clause or a ``COMMENT ON COLUMN`` statement gives the column's description; ``CREATE VIEW``
  names a table whose columns are not known. Statements apply in order: ``ALTER TABLE`` adds key
  constraints (``pg_dump`` declares keys that way) and adds, drops, renames or retypes columns,
  ``DROP TABLE`` removes a table, and a table declared twice is an error (tables are matched by
  name). Other statements (indexes, sequences, inserts, settings) are skipped.
* ``<app_id>.json``: a catalog, in the format of :class:`CatalogDocument` (its JSON Schema:
  :func:`catalog_json_schema`), or the campaign catalog format ``{table: [columns]}``, or a dbt
  ``catalog.json`` (``nodes`` / ``sources`` with ``metadata.name`` and ``columns``).

Identifiers are matched case-insensitively (casefolded), as SQLite and unquoted identifiers of
most dialects are; the names as written are kept for evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from stef.errors import StefError
from stef.pipeline.dialects import parse_sql_text

TypeFamily = Literal["text", "integer", "number", "date", "datetime", "time", "boolean", "binary", "unknown"]
"""Coarse type of a column, enough to tell a literal or a join partner that does not fit."""

_FAMILY_OF_NAME: dict[str, TypeFamily] = {
    "DATE": "date",
    "DATE32": "date",
    "DATETIME": "datetime",
    "DATETIME2": "datetime",
    "DATETIME64": "datetime",
    "TIMESTAMP": "datetime",
    "TIMESTAMPTZ": "datetime",
    "TIMESTAMPLTZ": "datetime",
    "TIMESTAMPNTZ": "datetime",
    "SMALLDATETIME": "datetime",
    "TIME": "time",
    "TIMETZ": "time",
    "BOOLEAN": "boolean",
    "BIT": "boolean",
}


def type_family(data_type: exp.DataType | str | None) -> TypeFamily:
    """The :data:`TypeFamily` of a sqlglot data type or a type name (``"VARCHAR(20)"``).

    >>> type_family("VARCHAR(20)"), type_family("NUMERIC"), type_family("int"), type_family("date"), type_family(None)
    ('text', 'number', 'integer', 'date', 'unknown')
    """
    if data_type is None:
        return "unknown"
    if isinstance(data_type, str):
        try:
            data_type = exp.DataType.build(data_type, udt=True)
        except (SqlglotError, ValueError):
            return "unknown"
    kind = data_type.this
    if kind in exp.DataType.TEXT_TYPES:
        return "text"
    if kind in exp.DataType.INTEGER_TYPES:
        return "integer"
    if kind in exp.DataType.REAL_TYPES or kind in exp.DataType.NUMERIC_TYPES:
        return "number"
    if kind in exp.DataType.BINARY_TYPES:
        return "binary"
    return _FAMILY_OF_NAME.get(getattr(kind, "name", str(kind)), "unknown")


@lru_cache(maxsize=65536)
def identifier_key(name: str) -> str:
    """How schema and SQL identifiers are compared: casefolded, surrounding quotes and spaces off
    (cached: a query's and a schema's names repeat across records).

    >>> identifier_key('"CDSCode"'), identifier_key("`Free Meal Count (K-12)`")
    ('cdscode', 'free meal count (k-12)')
    """
    text = name.strip()
    if (len(text) >= 2 and text[0] == text[-1] and text[0] in "\"`'") or (text[:1], text[-1:]) == ("[", "]"):
        text = text[1:-1]
    return text.casefold()


SCHEMA_VERSION_SUFFIX = "+schema"
"""Appended to the evaluator version of a run given ``--schema-dir`` (its rows never mix with
schema-free ones: a backfill with a schema re-scores days scored without one)."""


class SchemaError(StefError):
    """A schema file that cannot be read: the message names the file, the line where known, and the problem."""


class DDLParseError(SchemaError):
    """A DDL file that sqlglot cannot parse in the dialect it was read in (another dialect may)."""


@dataclass(frozen=True, slots=True)
class ColumnSchema:
    """One column: its name as written, its type as written and its :data:`TypeFamily`, its
    description, and whether it cannot hold NULL (``NOT NULL`` or the table's primary key)."""

    name: str
    type: str | None = None
    family: TypeFamily = "unknown"
    description: str | None = None
    not_null: bool = False


@dataclass(frozen=True, slots=True)
class ForeignKey:
    """``columns`` of a table reference ``ref_columns`` of ``ref_table`` (names as written)."""

    columns: tuple[str, ...]
    ref_table: str
    ref_columns: tuple[str, ...]


@dataclass(frozen=True)
class TableSchema:
    """One table (or view): columns in order, primary key, foreign keys, description.

    ``columns_known`` is ``False`` for a view or a catalog entry without columns: no column of
    it is ever reported unknown.
    """

    name: str
    columns: tuple[ColumnSchema, ...] = ()
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    description: str | None = None
    columns_known: bool = True

    @cached_property
    def by_key(self) -> dict[str, ColumnSchema]:
        """:func:`identifier_key` of each column name -> its column."""
        return {identifier_key(column.name): column for column in self.columns}

    def column(self, name: str) -> ColumnSchema | None:
        """The column called ``name`` (any case), or ``None``."""
        return self.by_key.get(identifier_key(name))


@dataclass(frozen=True)
class DatabaseSchema:
    """The schema of one app's database.

    Attributes:
        tables: in file order.
        source: the file it was read from (named in evidence and errors).
        dialect: the dialect its DDL was read in (``""``: generic; catalogs: as declared).
    """

    tables: tuple[TableSchema, ...]
    source: str = ""
    dialect: str = ""

    @cached_property
    def by_key(self) -> dict[str, TableSchema]:
        """:func:`identifier_key` of each table name -> its table (the last of duplicate names)."""
        return {identifier_key(table.name): table for table in self.tables}

    def table(self, name: str) -> TableSchema | None:
        """The table called ``name`` (any case; a ``schema.table`` name is looked up by its last part too), or ``None``."""
        key = identifier_key(name)
        return self.by_key.get(key) or self.by_key.get(key.rsplit(".", 1)[-1])

    @cached_property
    def foreign_key_pairs(self) -> frozenset[frozenset[tuple[str, str]]]:
        """Each foreign key column with the column it references, as
        ``frozenset({(table key, column key), (table key, column key)})``."""
        pairs: set[frozenset[tuple[str, str]]] = set()
        for table in self.tables:
            for key in table.foreign_keys:
                target = self.table(key.ref_table)
                ref_columns = key.ref_columns or (target.primary_key if target is not None else ())
                for column, ref_column in zip(key.columns, ref_columns, strict=False):
                    pairs.add(
                        frozenset(
                            {
                                (identifier_key(table.name), identifier_key(column)),
                                (identifier_key(target.name if target else key.ref_table), identifier_key(ref_column)),
                            }
                        )
                    )
        return frozenset(pairs)

    def is_foreign_key_pair(self, left: tuple[str, str], right: tuple[str, str]) -> bool:
        """Whether ``(table, column)`` = ``(table, column)`` joins a foreign key with what it references."""
        return (
            frozenset(
                {
                    (identifier_key(left[0]), identifier_key(left[1])),
                    (identifier_key(right[0]), identifier_key(right[1])),
                }
            )
            in self.foreign_key_pairs
        )

    @cached_property
    def key_pairs(self) -> frozenset[frozenset[tuple[str, str]]]:
        """Declared join keys: each foreign key column with the column it references, and every
        pair of single-column primary keys (a one-to-one join of two entity tables), as
        ``frozenset({(table key, column key), (table key, column key)})``."""
        pairs: set[frozenset[tuple[str, str]]] = set(self.foreign_key_pairs)
        primary = [
            (identifier_key(t.name), identifier_key(t.primary_key[0])) for t in self.tables if len(t.primary_key) == 1
        ]
        for index, first in enumerate(primary):
            for second in primary[index + 1 :]:
                pairs.add(frozenset({first, second}))
        return frozenset(pairs)

    @cached_property
    def has_keys(self) -> bool:
        """Whether the schema declares any primary or foreign key (else joins cannot be judged)."""
        return any(t.primary_key or t.foreign_keys for t in self.tables)

    def is_key_pair(self, left: tuple[str, str], right: tuple[str, str]) -> bool:
        """Whether ``(table, column)`` = ``(table, column)`` joins on declared keys (any case)."""
        a = (identifier_key(left[0]), identifier_key(left[1]))
        b = (identifier_key(right[0]), identifier_key(right[1]))
        return frozenset({a, b}) in self.key_pairs

    @cached_property
    def mapping(self) -> dict[str, dict[str, str]]:
        """``{table: {column: type}}`` with casefolded names, for sqlglot's ``MappingSchema``
        (tables whose columns are not known are left out)."""
        return {
            identifier_key(t.name): {identifier_key(c.name): (c.type or "UNKNOWN") for c in t.columns}
            for t in self.tables
            if t.columns_known and t.columns
        }


# --------------------------------------------------------------------------- DDL


def _comment_text(comments: Iterable[str] | None) -> str | None:
    text = " ".join(c.strip() for c in comments or () if c and c.strip())
    return text or None


def _identifier_names(nodes: Iterable[exp.Expr]) -> tuple[str, ...]:
    return tuple(node.name for node in nodes)


def _column_from_def(definition: exp.ColumnDef) -> tuple[ColumnSchema, bool, ForeignKey | None]:
    """The column, whether it is a primary key by itself, and its inline ``REFERENCES``."""
    kind = definition.args.get("kind")
    # a "-- comment" lands on the last node before it: the column, its type or a constraint
    description = _comment_text(comment for node in definition.walk() for comment in node.comments or ())
    primary = not_null = False
    reference: ForeignKey | None = None
    for constraint in definition.args.get("constraints") or ():
        inner = constraint.args.get("kind")
        if isinstance(inner, exp.PrimaryKeyColumnConstraint):
            primary = True
        elif isinstance(inner, exp.NotNullColumnConstraint) and not inner.args.get("allow_null"):
            not_null = True
        elif isinstance(inner, exp.CommentColumnConstraint):
            description = inner.name or description
        elif isinstance(inner, exp.Reference):
            target = inner.this
            table = target.this if isinstance(target, exp.Schema) else target
            columns = _identifier_names(target.expressions) if isinstance(target, exp.Schema) else ()
            reference = ForeignKey(
                (definition.name,), table.name if isinstance(table, exp.Table) else str(table), columns
            )
    column = ColumnSchema(
        definition.name, kind.sql() if kind is not None else None, type_family(kind), description, not_null or primary
    )
    return column, primary, reference


def _key_column_names(nodes: Iterable[exp.Expr]) -> tuple[str, ...]:
    """Column names of a key's column list (``id``, ``[id] ASC``, ``"id"``)."""
    return tuple(node.this.name if isinstance(node, exp.Ordered) else node.name for node in nodes)


def _key_constraint(item: exp.Expr) -> tuple[tuple[str, ...] | None, list[ForeignKey]]:
    """A table-level key constraint of ``CREATE TABLE`` or ``ALTER TABLE ... ADD``: its primary key
    columns (``None``: it declares no primary key) and its foreign keys.

    Reads ``PRIMARY KEY (a, b)``, ``FOREIGN KEY (a) REFERENCES t (b)``, both also named
    (``CONSTRAINT name ...``, as ``pg_dump`` and SQL Server scripts write them), and SQL Server's
    ``PRIMARY KEY CLUSTERED ([a] ASC)``. Anything else (``UNIQUE``, ``CHECK``, indexes) declares no key.
    """
    nodes = list(item.expressions) if isinstance(item, exp.Constraint) else [item]
    primary: tuple[str, ...] | None = None
    foreign: list[ForeignKey] = []
    for node in nodes:
        if isinstance(node, exp.PrimaryKey):
            primary = _key_column_names(node.expressions)
        elif isinstance(node, exp.PrimaryKeyColumnConstraint):  # SQL Server: PRIMARY KEY CLUSTERED (...)
            for sibling in nodes:
                if isinstance(sibling, (exp.ClusteredColumnConstraint, exp.NonClusteredColumnConstraint)):
                    listed = sibling.this if isinstance(sibling.this, list) else [sibling.this]
                    primary = _key_column_names(entry for entry in listed if isinstance(entry, exp.Expr))
        elif isinstance(node, exp.ForeignKey):
            reference_node = node.args.get("reference")
            schema = reference_node.this if isinstance(reference_node, exp.Reference) else None
            if isinstance(schema, exp.Schema) and isinstance(schema.this, exp.Table):
                foreign.append(
                    ForeignKey(
                        _key_column_names(node.expressions), schema.this.name, _key_column_names(schema.expressions)
                    )
                )
            elif isinstance(schema, exp.Table):
                foreign.append(ForeignKey(_key_column_names(node.expressions), schema.name, ()))
    return primary, foreign


def _table_from_create(create: exp.Create) -> TableSchema | None:
    target = create.this
    if create.kind == "VIEW":
        table = target.this if isinstance(target, exp.Schema) else target
        return (
            TableSchema(name=table.name, description=_comment_text(create.comments), columns_known=False)
            if isinstance(table, exp.Table)
            else None
        )
    if create.kind != "TABLE" or not isinstance(target, exp.Schema) or not isinstance(target.this, exp.Table):
        return None
    columns: list[ColumnSchema] = []
    primary: list[str] = []
    foreign: list[ForeignKey] = []
    for item in target.expressions:
        if isinstance(item, exp.Identifier):  # a column without a type (SQLite: "CREATE TABLE t (a, b)")
            columns.append(ColumnSchema(item.name, None, type_family(None), _comment_text(item.comments), False))
        elif isinstance(item, exp.ColumnDef):
            column, is_primary, reference = _column_from_def(item)
            columns.append(column)
            if is_primary:
                primary.append(column.name)
            if reference is not None:
                foreign.append(reference)
        else:
            declared, references = _key_constraint(item)
            if declared is not None:
                primary = list(declared)
            foreign.extend(references)
    properties = create.args.get("properties")
    description = _comment_text(create.comments)
    if properties is not None:
        for prop in properties.expressions:
            if isinstance(prop, exp.SchemaCommentProperty):
                description = prop.name or description
    keys = {identifier_key(name) for name in primary}
    columns = [replace(c, not_null=True) if identifier_key(c.name) in keys and not c.not_null else c for c in columns]
    return TableSchema(target.this.name, tuple(columns), tuple(primary), tuple(foreign), description)


def _qualified_name(target: exp.Expr | None) -> str:
    """``schema.table`` of a ``CREATE`` target as written (for messages)."""
    table = target.this if isinstance(target, exp.Schema) else target
    return ".".join(part.name for part in table.parts) if isinstance(table, exp.Table) else ""


def _altered_table(table: TableSchema, actions: Iterable[exp.Expr]) -> TableSchema:
    """``table`` after the actions of an ``ALTER TABLE`` statement, in order.

    Read: ``ADD [CONSTRAINT name] PRIMARY KEY / FOREIGN KEY`` (how ``pg_dump`` declares keys),
    ``ADD COLUMN``, ``DROP COLUMN``, ``RENAME COLUMN``, ``RENAME TO``, ``ALTER COLUMN ... TYPE`` and
    ``SET NOT NULL``. Other actions (defaults, owners, ``UNIQUE`` / ``CHECK`` constraints) change
    nothing STEF checks and are skipped.
    """
    for action in actions:
        if isinstance(action, exp.AddConstraint):
            for item in action.expressions:
                primary, foreign = _key_constraint(item)
                if primary is not None:
                    keys = {identifier_key(name) for name in primary}
                    table = replace(
                        table,
                        primary_key=primary,
                        columns=tuple(
                            replace(c, not_null=True) if identifier_key(c.name) in keys else c for c in table.columns
                        ),
                    )
                if foreign:
                    table = replace(table, foreign_keys=table.foreign_keys + tuple(foreign))
        elif isinstance(action, exp.ColumnDef):
            if table.column(action.name) is None:
                column, is_primary, reference = _column_from_def(action)
                table = replace(
                    table,
                    columns=(*table.columns, column),
                    primary_key=(column.name,) if is_primary else table.primary_key,
                    foreign_keys=table.foreign_keys + ((reference,) if reference is not None else ()),
                )
        elif isinstance(action, exp.Drop) and str(action.args.get("kind") or "").upper() == "COLUMN":
            gone = {
                identifier_key(node.name) for node in action.args.get("tables") or [action.this] if node is not None
            }
            table = replace(table, columns=tuple(c for c in table.columns if identifier_key(c.name) not in gone))
        elif isinstance(action, exp.RenameColumn):
            old, new = identifier_key(action.this.name), action.args["to"].name
            table = replace(
                table,
                columns=tuple(replace(c, name=new) if identifier_key(c.name) == old else c for c in table.columns),
            )
        elif isinstance(action, exp.AlterRename) and isinstance(action.this, exp.Table):
            table = replace(table, name=action.this.name)
        elif isinstance(action, exp.AlterColumn):
            name, dtype = identifier_key(action.this.name), action.args.get("dtype")
            table = replace(
                table,
                columns=tuple(
                    (
                        replace(c, type=dtype.sql(), family=type_family(dtype))
                        if isinstance(dtype, exp.DataType)
                        else replace(c, not_null=True)
                        if action.args.get("allow_null") is False
                        else c
                    )
                    if identifier_key(c.name) == name
                    else c
                    for c in table.columns
                ),
            )
    return table


def _line_of(text: str, error: ParseError) -> str:
    details = getattr(error, "errors", None) or [{}]
    line = details[0].get("line")
    description = details[0].get("description") or str(error).splitlines()[0]
    return f"line {line}: {description}" if line else description


def _batches_as_statements(text: str, dialect: str) -> str:
    """``text`` with each ``GO`` batch separator of SQL Server's client tools (sqlcmd, the scripts
    SSMS generates: ``GO`` alone on its line, optionally ``GO <count>``) turned into ``;``.

    ``GO`` is no SQL: sqlglot's T-SQL tokenizer reads it as a command that runs to the next ``;``,
    so a generated script (statements without ``;``, one ``GO`` after each) parsed as one opaque
    command and declared no table. Found with the dialect's own tokenizer (a ``GO`` inside a
    comment or a string is no token); dialects without that command, and text the tokenizer
    refuses, are returned unchanged.

    >>> _batches_as_statements("CREATE TABLE t (a INT)\\nGO\\nCREATE TABLE u (b INT)\\ngo 2\\n", "tsql")
    'CREATE TABLE t (a INT)\\n; \\nCREATE TABLE u (b INT)\\n;   \\n'
    """
    from sqlglot import TokenType
    from sqlglot.dialects.dialect import Dialect

    try:
        instance = Dialect.get_or_raise(dialect or None)
        if instance.tokenizer_class.KEYWORDS.get("GO") is not TokenType.COMMAND:
            return text
        tokens = instance.tokenize(text)
    except (SqlglotError, ValueError):
        return text
    pieces: list[str] = []
    done = 0
    for index, token in enumerate(tokens):
        line_start = text.rfind("\n", 0, token.start) + 1
        if (
            token.token_type is not TokenType.COMMAND
            or token.text.upper() != "GO"
            or text[line_start : token.start].strip()
        ):
            continue
        end = token.end + 1
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if following is not None and following.token_type is TokenType.NUMBER and following.line == token.line:
            end = following.end + 1  # GO 2: the batch's repeat count
        pieces.append(text[done : token.start] + ";" + " " * (end - token.start - 1))
        done = end
    return "".join(pieces) + text[done:]


def _create_table_of_command(command: exp.Command, dialect: str) -> exp.Create | None:
    """The ``CREATE TABLE`` statement sqlglot read as an opaque command because of table options after
    its column list that it does not know (SQLite's ``WITHOUT ROWID``), read again without them:
    the statement through the parenthesis that closes its column list, found with the dialect's
    tokenizer (a parenthesis in a string, a quoted name or a comment is no token). ``None`` for
    another command, or one that still does not read as a ``CREATE TABLE``.

    >>> import sqlglot
    >>> command = sqlglot.parse_one("CREATE TABLE t (a INT, b TEXT DEFAULT ')') WITHOUT ROWID", read="sqlite")
    >>> type(command).__name__, _create_table_of_command(command, "sqlite").sql("sqlite")
    ('Command', "CREATE TABLE t (a INTEGER, b TEXT DEFAULT ')')")
    """
    from sqlglot import TokenType
    from sqlglot.dialects.dialect import Dialect

    rest = command.expression  # the text after CREATE (a Literal in older sqlglot releases)
    rest = rest.this if isinstance(rest, exp.Literal) else rest
    if str(command.this).upper() != "CREATE" or not isinstance(rest, str):
        return None
    text = f"CREATE {rest.lstrip()}"
    try:
        tokens = Dialect.get_or_raise(dialect or None).tokenize(text)
    except (SqlglotError, ValueError):
        return None
    depth = 0
    for token in tokens:
        if token.token_type is TokenType.L_PAREN:
            depth += 1
        elif token.token_type is TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                try:
                    statements = parse_sql_text(text[: token.end + 1], dialect)
                except (SqlglotError, RecursionError):
                    return None
                statement = statements[0] if len(statements) == 1 else None
                return statement if isinstance(statement, exp.Create) and statement.kind == "TABLE" else None
    return None


def parse_ddl(text: str, dialect: str = "", source: str = "schema.sql") -> DatabaseSchema:
    """Read DDL text into a :class:`DatabaseSchema` (see the module docstring for what is read).

    Args:
        text: one or more DDL statements.
        dialect: sqlglot dialect of the DDL (``""``: generic).
        source: the file name, for evidence and errors.

    Raises:
        SchemaError: the DDL does not parse (:class:`DDLParseError`, ``"<source>: line N: <parser message>"``), it
            declares no table, or it declares one table name twice (without ``DROP TABLE`` or
            ``CREATE OR REPLACE`` between; ``IF NOT EXISTS`` keeps the first).

    >>> schema = parse_ddl('''CREATE TABLE pets (pet_id INT PRIMARY KEY, kind TEXT -- cat or dog
    ... ); CREATE TABLE owners (id INT PRIMARY KEY, pet_id INT REFERENCES pets (pet_id));''', "sqlite")
    >>> [(c.name, c.family, c.description) for c in schema.table("PETS").columns]
    [('pet_id', 'integer', None), ('kind', 'text', 'cat or dog')]
    >>> schema.is_key_pair(("owners", "pet_id"), ("pets", "PET_ID")), schema.is_key_pair(("owners", "id"), ("pets", "kind"))
    (True, False)
    """
    text = _batches_as_statements(text, dialect)  # same length and lines: parser positions stay right
    try:
        statements = parse_sql_text(text, dialect)
    except ParseError as exc:
        raise DDLParseError(f"{source}: {_line_of(text, exc)}") from exc
    except (SqlglotError, RecursionError) as exc:
        raise DDLParseError(
            f"{source}: not readable DDL ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from exc
    declared: dict[str, tuple[str, TableSchema]] = {}  # table key -> (qualified name as written, table)
    comments: dict[tuple[str, str], str] = {}
    for statement in statements:
        if isinstance(statement, exp.Command):
            statement = _create_table_of_command(statement, dialect) or statement
        if isinstance(statement, exp.Create):
            table = _table_from_create(statement)
            if table is None:
                continue
            key, qualified = identifier_key(table.name), _qualified_name(statement.this)
            if key in declared and not statement.args.get("replace"):
                if statement.args.get("exists"):  # CREATE ... IF NOT EXISTS: the first declaration stands
                    continue
                first = declared[key][0]
                raise SchemaError(
                    f"{source}: declares table {table.name!r} twice"
                    + (f" ({first} and {qualified})" if identifier_key(first) != identifier_key(qualified) else "")
                    + "; STEF matches tables by name, so an app's schema names each table once"
                    + " (drop it first or use CREATE OR REPLACE to redeclare it)"
                )
            declared[key] = (qualified, table)
        elif isinstance(statement, exp.Drop) and str(statement.args.get("kind") or "").upper() in {"TABLE", "VIEW"}:
            for dropped in statement.args.get("tables") or [statement.this]:
                if isinstance(dropped, exp.Table):
                    declared.pop(identifier_key(dropped.name), None)
        elif isinstance(statement, exp.Alter) and str(statement.args.get("kind") or "").upper() == "TABLE":
            target = statement.this
            entry = declared.get(identifier_key(target.name)) if isinstance(target, exp.Table) else None
            if entry is not None:
                altered = _altered_table(entry[1], statement.args.get("actions") or ())
                del declared[identifier_key(entry[1].name)]
                declared[identifier_key(altered.name)] = (entry[0], altered)
        elif isinstance(statement, exp.Comment) and str(statement.args.get("kind") or "").upper() == "COLUMN":
            target = statement.this
            if isinstance(target, exp.Column):
                comments[(identifier_key(target.table), identifier_key(target.name))] = statement.expression.name
    tables = [table for _, table in declared.values()]
    if not tables:
        raise SchemaError(f"{source}: declares no table (expected CREATE TABLE statements)")
    if comments:
        tables = [
            TableSchema(
                t.name,
                tuple(
                    ColumnSchema(
                        c.name,
                        c.type,
                        c.family,
                        comments.get((identifier_key(t.name), identifier_key(c.name)), c.description),
                        c.not_null,
                    )
                    for c in t.columns
                ),
                t.primary_key,
                t.foreign_keys,
                t.description,
                t.columns_known,
            )
            for t in tables
        ]
    return DatabaseSchema(tuple(tables), source, dialect)


# --------------------------------------------------------------------------- JSON catalogs


class CatalogColumn(BaseModel):
    """A column of a :class:`CatalogDocument` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str | None = Field(
        default=None, description="SQL type as the database declares it (VARCHAR(20), INTEGER, DATE ...)."
    )
    description: str | None = Field(default=None, description="What the column holds, in words.")
    primary_key: bool = Field(default=False, description="The column is (part of) the table's primary key.")
    references: str | None = Field(default=None, description="`table.column` this column refers to (a foreign key).")
    nullable: bool = Field(
        default=True, description="False: the column cannot hold NULL (NOT NULL); a primary key column never can."
    )


class CatalogTable(BaseModel):
    """A table of a :class:`CatalogDocument`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str | None = None
    columns: dict[str, CatalogColumn | str | None] = Field(
        default_factory=dict, description="Column name -> column (or just its type as a string)."
    )


class CatalogDocument(BaseModel):
    """STEF's JSON catalog of one app's database (``<app_id>.json`` in ``--schema-dir``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dialect: str | None = Field(default=None, description="sqlglot dialect of the database (informative).")
    tables: dict[str, CatalogTable] = Field(description="Table name -> table.")


def catalog_json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`CatalogDocument` (documented in the README)."""
    return CatalogDocument.model_json_schema()


def _from_catalog(document: CatalogDocument, source: str) -> DatabaseSchema:
    tables: list[TableSchema] = []
    for name, table in document.tables.items():
        columns: list[ColumnSchema] = []
        primary: list[str] = []
        foreign: list[ForeignKey] = []
        for column_name, column in table.columns.items():
            if not isinstance(column, CatalogColumn):
                column = CatalogColumn(type=column)
            columns.append(
                ColumnSchema(
                    column_name,
                    column.type,
                    type_family(column.type),
                    column.description,
                    column.primary_key or not column.nullable,
                )
            )
            if column.primary_key:
                primary.append(column_name)
            if column.references:
                ref_table, _, ref_column = column.references.rpartition(".")
                if not ref_table:
                    raise SchemaError(
                        f"{source}: tables.{name}.columns.{column_name}.references must be `table.column`, got {column.references!r}"
                    )
                foreign.append(ForeignKey((column_name,), ref_table, (ref_column,)))
        tables.append(
            TableSchema(
                name, tuple(columns), tuple(primary), tuple(foreign), table.description, columns_known=bool(columns)
            )
        )
    if not tables:
        raise SchemaError(f"{source}: the catalog names no table")
    return DatabaseSchema(tuple(tables), source, document.dialect or "")


def _from_dbt(payload: Mapping[str, Any], source: str) -> DatabaseSchema:
    tables: list[TableSchema] = []
    for section in ("nodes", "sources"):
        for node in (payload.get(section) or {}).values():
            if not isinstance(node, Mapping):
                continue
            metadata = node.get("metadata") or {}
            name = metadata.get("name")
            if not isinstance(name, str) or not name:
                continue
            columns = []
            for column_name, column in (node.get("columns") or {}).items():
                column = column if isinstance(column, Mapping) else {}
                kind = column.get("type") if isinstance(column.get("type"), str) else None
                comment = column.get("comment") if isinstance(column.get("comment"), str) else None
                columns.append(ColumnSchema(str(column.get("name") or column_name), kind, type_family(kind), comment))
            comment = metadata.get("comment") if isinstance(metadata.get("comment"), str) else None
            tables.append(TableSchema(name, tuple(columns), description=comment, columns_known=bool(columns)))
    if not tables:
        raise SchemaError(f"{source}: a dbt catalog without nodes or sources")
    return DatabaseSchema(tuple(tables), source, "")


def parse_catalog(payload: Any, source: str = "catalog.json") -> DatabaseSchema:
    """Read a decoded JSON catalog (any of the three formats of the module docstring).

    Raises:
        SchemaError: the document fits none of them (the message names the first problem).

    >>> parse_catalog({"city": ["city_name", "population"]}).table("City").column("POPULATION").name
    'population'
    """
    if isinstance(payload, Mapping) and ("nodes" in payload or "sources" in payload) and "tables" not in payload:
        return _from_dbt(payload, source)
    if isinstance(payload, Mapping) and "tables" in payload:
        try:
            return _from_catalog(CatalogDocument.model_validate(payload), source)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise SchemaError(f"{source}: field `{where}`: {first['msg']}") from exc
    if (
        isinstance(payload, Mapping)
        and payload
        and all(isinstance(v, list) and all(isinstance(c, str) for c in v) for v in payload.values())
    ):
        return DatabaseSchema(
            tuple(
                TableSchema(str(t), tuple(ColumnSchema(c) for c in cols), columns_known=bool(cols))
                for t, cols in payload.items()
            ),
            source,
        )
    raise SchemaError(
        f'{source}: not a catalog: expected {{"tables": {{...}}}} (see `stef catalog json-schema`), {{table: [columns]}} or a dbt catalog.json'
    )
