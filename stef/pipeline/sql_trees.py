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
    is copied first. ``dialect=""``: sqlglot's generic dialect (for trees it parsed).
    """
    text: str = _generator(dialect).generate(node, copy=node.find(*RENDER_COPIES) is not None)
    return text


@lru_cache(maxsize=64)
def _generator(dialect: str) -> Any:
    from sqlglot.dialects.dialect import Dialect

    return Dialect.get_or_raise(dialect or None).generator(
        comments=False
    )  # evidence never carries the agent's comments


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
