"""Rendering a sqlglot node back to SQL text and the (cached) scopes of a tree, shared by the stages.

:func:`render` prints a node in the record's dialect without mutating it; :func:`tree_scopes`
is sqlglot's scope traversal of one tree, computed once and reused by the checks that need
per-SELECT facts (schema checks, observed catalog, stage B evidence).
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

RENDER_COPIES: tuple[type[exp.Expr], ...] = (
    exp.Query,
    exp.Subquery,
    exp.Values,
    exp.Lateral,
    exp.Unnest,
    exp.Pivot,
    exp.ConcatWs,
    exp.Struct,
    exp.ArrayAgg,
    exp.IgnoreNulls,
    exp.RespectNulls,
    exp.TsOrDsToDate,
    exp.TsOrDsToTimestamp,
)
"""Nodes whose SQL generation rewrites the tree in place in some dialect even when the tree was
parsed in it (a T-SQL ``SELECT TOP 1`` loses its limit node, MySQL's ``FULL OUTER JOIN`` becomes
a UNION, MySQL's ``DATE_FORMAT`` and T-SQL's ``YEAR`` drop the date conversion the parser put
under them, ``CONCAT_WS`` gains a flag ...): a sub-tree holding one is copied before :func:`render`.
Found by rendering both dev files' SQL transpiled to seven dialects (tests/stef/pipeline/test_extract_sql.py)."""


def render(node: exp.Expr, dialect: str = "") -> str:
    """SQL text of a sub-tree for evidence, in the dialect S was parsed in, leaving the tree as
    parsed.

    The tree's own dialect writes it back as the agent wrote it (SQLite's ``IIF`` stays ``IIF``
    and its ``/`` stays ``/``); another dialect's generator rewrites foreign constructs *in
    place* when not copying (sqlglot's generic one wraps a SQLite division's divisor in
    ``NULLIF`` and re-parents an ``IIF`` under a new ``CASE``), which would change the tree every
    later stage reads. A copy of the nodes costs more than parsing them, so only a sub-tree with
    a node of :data:`RENDER_COPIES` (subqueries, UNNEST, ...: rewritten even in their own dialect)
    is copied first. ``dialect=""``: sqlglot's generic dialect (for trees it parsed). A tree the
    dialect's generator fails on (its Snowflake transforms build scopes, and a malformed set
    operation has none: ``OptimizeError``) is written by the generic one from a copy.
    """
    try:
        text: str = _generator(dialect).generate(node, copy=node.find(*RENDER_COPIES) is not None)
    except SqlglotError:
        if not dialect:
            raise
        text = _generator("").generate(node, copy=True)
    return text


@lru_cache(maxsize=64)
def _generator(dialect: str) -> Any:
    from sqlglot.dialects.dialect import Dialect

    generator = Dialect.get_or_raise(dialect or None).generator(
        comments=False
    )  # evidence never carries the agent's comments
    return with_fast_sqlite_casts(generator)


SQLITE_CAST_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "DATE": ("date",),
    "DATETIME": ("datetime", "timestamp", "timestampntz"),
    "TIME": ("time",),
}
"""sqlglot's SQLite generator writes ``CAST(x AS <type>)`` as ``<FUNCTION>(x)`` for these types
(``SQLiteGenerator.cast_sql``), every other cast as the generic ``CAST``."""


def with_fast_sqlite_casts(generator: Any) -> Any:
    """``generator``, and where it is sqlglot's SQLite generator, one that renders each CAST as
    it does but about 60 µs faster.

    ``SQLiteGenerator.cast_sql`` asks ``is_type("date")`` and four more type names of every CAST,
    and each of them parses the name again (``DataType.build``): a CAST costs as much to render as
    a whole short query, and SQLite answers (BIRD's ``CAST(x AS REAL)``) are full of them.
    The handler put in this generator's dispatch table (its own copy, so no other generator
    changes) compares the parsed type's kind with the kinds of those names, built once, and
    leaves any cast it cannot decide that way (a type that is not a plain ``DataType``) to
    ``cast_sql``. It is installed only where that table holds ``SQLiteGenerator.cast_sql`` and
    the handler renders a cast to every type kind of the installed sqlglot as ``cast_sql`` does
    (the same text, or the same error; about 10 ms, once per process); any other generator is
    returned unchanged. Tested against ``cast_sql`` for every type kind and on every CAST and
    projection of the bundled demo answers (tests/stef/pipeline/test_sql_trees.py).
    """
    try:
        from sqlglot.generator import Generator
        from sqlglot.generators.sqlite import SQLiteGenerator
    except ImportError:  # another sqlglot layout: keep its own rendering
        return generator
    dispatch = getattr(generator, "_dispatch", None)
    if (
        type(generator) is not SQLiteGenerator
        or not isinstance(dispatch, dict)
        or dispatch.get(exp.Cast) is not SQLiteGenerator.cast_sql
    ):
        return generator
    functions = {
        exp.DataType.build(name).this: function for function, names in SQLITE_CAST_FUNCTIONS.items() for name in names
    }
    generic_cast_sql = Generator.cast_sql
    sqlite_cast_sql = SQLiteGenerator.cast_sql

    def cast_sql(self: Any, expression: exp.Cast) -> str:
        to = expression.args.get("to")
        if type(to) is exp.DataType and isinstance(to.this, exp.DataType.Type):
            function = functions.get(to.this)
            if function is not None:
                return str(self.func(function, expression.this))
            return str(generic_cast_sql(self, expression))
        return str(sqlite_cast_sql(self, expression))

    samples = [exp.Cast(this=exp.column("x", table="t"), to=exp.DataType(this=kind)) for kind in exp.DataType.Type]
    samples += [
        exp.Cast(this=exp.column("x"), to=exp.DataType.build(name), format=exp.Literal.string("YYYY"))
        for name in ("date", "timestamp", "varchar(9)")
    ]

    def outcome(render_cast: Any, sample: exp.Cast) -> str:
        try:
            return str(render_cast(generator, sample))
        except Exception as error:  # compared, not hidden: both renderings must fail alike
            return f"error: {type(error).__name__}"

    if any(outcome(cast_sql, sample) != outcome(sqlite_cast_sql, sample) for sample in samples):
        return generator  # sqlglot changed how SQLite writes casts: keep its own rendering
    generator._dispatch = {**dispatch, exp.Cast: cast_sql}
    return generator


_LAST_SCOPES = threading.local()


def tree_scopes(tree: exp.Expr) -> list[Scope]:
    """``sqlglot.optimizer.scope.traverse_scope(tree)``, traversed once per tree.

    Stage B, the schema checks and the observed-catalog checks all read the same answer's
    scopes; the last tree's scopes are kept per thread (with the tree itself, so its id cannot
    be reused), and sqlglot's scopes cache their columns and sources, so each is resolved once
    for all three. Trees are never modified after parsing (every stage reads them only).

    Raises:
        sqlglot.errors.SqlglotError, RecursionError: as ``traverse_scope`` (not cached).

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT a FROM (SELECT a FROM t) AS d")
    >>> len(tree_scopes(tree)), tree_scopes(tree) is tree_scopes(tree)
    (2, True)
    """
    cached = getattr(_LAST_SCOPES, "entry", None)
    if cached is not None and cached[0] is tree:
        remembered: list[Scope] = cached[1]
        return remembered
    scopes: list[Scope] = traverse_scope(tree)
    _LAST_SCOPES.entry = (tree, scopes)
    return scopes
