"""Stage B (SQL side): semantic features of the answer SQL S (STEF paper §2.B).

Walks the parsed sqlglot tree once per feature family with sqlglot's own traversal
(``find_all``, scope traversal) — never regexes over SQL — and returns a frozen
:class:`stef.models.SQLSpec`. Column names are normalised: unqualified, lower case, quotes
removed, R_app column mappings applied; table aliases are resolved to table names; values are
case- and whitespace-normalised.
"""

from __future__ import annotations

from functools import lru_cache
from typing import cast

from sqlglot import exp

from stef.models import FilterPredicate, SQLSpec
from stef.pipeline.rules import AppRules
from stef.pipeline.sql_evidence import (
    SCOPE_BREAKERS,
    _constant_projections,
    _date_part_subtraction,
    _entity_key_joins,
    _has_float_evidence,
    _joins_own_keys,
    _source_tables,
    _unguarded_null_keys,
    count_join_safety,
    date_literal_mismatch,
    keys_of_different_entities,
    padded_part_mismatch,
    unused_join_tables,
)
from stef.pipeline.sql_predicates import (
    _filter_from_predicate,
    _literal_text,
    _predicates,
    unparenthesised_alternatives,
)
from stef.pipeline.sql_trees import render
from stef.pipeline.values import COMPARISON_TYPES, column_name, normalize_value, parse_count

AGGREGATE_TYPES: tuple[type[exp.Expr], ...] = (exp.AggFunc,)
WINDOW_TYPES: tuple[type[exp.Expr], ...] = (exp.Window,)


ARITHMETIC_TYPES: dict[type[exp.Expr], str] = {
    exp.Div: "/",
    exp.Mul: "*",
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mod: "%",
}
SET_OPERATION_TYPES: dict[type[exp.Expr], str] = {
    exp.Union: "UNION",
    exp.Intersect: "INTERSECT",
    exp.Except: "EXCEPT",
}


RANKING_AGGREGATES = (exp.Count, exp.Sum, exp.Avg)


def _ungrouped_aggregate_order(select: exp.Select, dialect: str = "") -> str | None:
    """SQL of an ORDER BY aggregate of a SELECT without GROUP BY that projects plain columns
    (``SELECT name FROM t ORDER BY COUNT(*) DESC LIMIT 1``: one group, the whole table, so the
    ranking ranks nothing and the name comes from an arbitrary row)."""
    order = select.args.get("order")
    if order is None or select.args.get("group") is not None:
        return None
    if not any(p.find(exp.AggFunc) is None and p.find(exp.Column) is not None for p in select.expressions):
        return None
    for ordered in order.expressions:
        aggregate = ordered.this if isinstance(ordered.this, exp.AggFunc) else ordered.this.find(exp.AggFunc)
        if (
            aggregate is not None
            and aggregate.find_ancestor(exp.Select) is select
            and not isinstance(aggregate.parent, exp.Window)
        ):
            return render(ordered, dialect)[:300]
    return None


def ranking_measures(select: exp.Select, order: exp.Order, dialect: str = "") -> list[str]:
    """Projections of ``select`` (among two or more) that are a COUNT, SUM or AVG the ORDER BY
    ranks on, as written: ``SELECT citizenship, COUNT(*) ... ORDER BY COUNT(*) DESC LIMIT 1``
    returns the measure beside the entity ranked by it.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT c, COUNT(*) AS n FROM t GROUP BY c ORDER BY n DESC LIMIT 1")
    >>> ranking_measures(tree, tree.args["order"])
    ['COUNT(*) AS n']
    """
    if len(select.expressions) < 2:
        return []
    keys = [ordered.this for ordered in order.expressions]
    key_names = {key.name.lower() for key in keys if isinstance(key, exp.Column) and not key.table}
    found: list[str] = []
    for projection in select.expressions:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if not isinstance(inner, RANKING_AGGREGATES):
            continue
        if any(key == inner for key in keys) or (
            isinstance(projection, exp.Alias) and projection.alias.lower() in key_names
        ):
            found.append(render(projection, dialect)[:300])
    return found


def _node_kind(node_type: type[exp.Expr]) -> str | None:
    """The extractor's category of a node type (decided once per type: :func:`_node_class` caches it)."""
    if issubclass(node_type, exp.Window):
        return "window"
    if issubclass(node_type, AGGREGATE_TYPES):
        return "aggregate"
    if issubclass(node_type, exp.Column):
        return "column"
    if issubclass(node_type, exp.Table):
        return "table"
    if issubclass(node_type, exp.Literal):
        return "literal"
    if issubclass(node_type, exp.Join):
        return "join"
    if node_type in (exp.Where, exp.Having, exp.Qualify):
        return "clause"
    if issubclass(node_type, exp.Subquery):
        return "subquery"
    if issubclass(node_type, exp.CTE):
        return "cte"
    if node_type in SET_OPERATION_TYPES:
        return "set_operation"
    if node_type in ARITHMETIC_TYPES:
        return "arithmetic"
    if node_type in COMPARISON_TYPES or node_type is exp.Between:
        return "comparison"
    if issubclass(node_type, exp.Func) and not issubclass(node_type, (exp.AggFunc, exp.Connector, exp.Binary)):
        return "function"
    if issubclass(node_type, (exp.In, exp.Exists)):
        return "in_or_exists"
    return None


@lru_cache(maxsize=1024)
def _node_class(node_type: type[exp.Expr]) -> tuple[str | None, bool]:
    """:func:`_node_kind` of a node type, and whether it is one of :data:`SCOPE_BREAKERS`."""
    return _node_kind(node_type), issubclass(node_type, SCOPE_BREAKERS)


def extract_sql_spec(
    tree: exp.Expr, dialect: str = "", rules: AppRules | None = None, flags: tuple[str, ...] = ()
) -> SQLSpec:
    """Extract the semantic features of one parsed query.

    Args:
        tree: the answer statement from :func:`stef.pipeline.clean.parse_sql` (not mutated).
        dialect: dialect name used for rendering snippets.
        rules: R_app (column mappings, value normalisation); ``None`` = defaults.
        flags: cleaning/splitting flags to carry on.

    Returns:
        A frozen :class:`SQLSpec`.

    >>> import sqlglot
    >>> spec = extract_sql_spec(sqlglot.parse_one(
    ...     "SELECT T1.name, COUNT(*) FROM users AS T1 WHERE T1.Country = 'Italy ' GROUP BY T1.name ORDER BY 2 DESC LIMIT 3"))
    >>> spec.tables, spec.aggregations, spec.group_by, spec.limit
    (('users',), ('COUNT',), ('name',), 3)
    >>> spec.filters[0].column, spec.filters[0].operator, spec.filters[0].value
    ('country', '=', 'italy')
    """
    outer = tree
    while isinstance(outer, exp.Subquery):
        outer = outer.this
    outer_select = outer if isinstance(outer, exp.Select) else outer.find(exp.Select)

    projections: list[str] = []
    projection_columns: list[str] = []
    plain_projections = 0
    aggregate_projections = 0
    distinct = False
    if outer_select is not None:
        distinct = outer_select.args.get("distinct") is not None
        for projection in outer_select.expressions:
            inner = projection.this if isinstance(projection, exp.Alias) else projection
            projections.append(render(inner, dialect)[:300].lower())
            projection_columns.extend(column_name(c, rules) for c in inner.find_all(exp.Column))
            # an aggregate of this SELECT (not of a scalar subquery, not a window function)
            aggregate_projections += any(
                agg.find_ancestor(exp.Select) is outer_select and not isinstance(agg.parent, exp.Window)
                for agg in inner.find_all(exp.AggFunc)
            )
            if inner.find(exp.AggFunc) is None and inner.find(exp.Column) is not None:
                plain_projections += 1
        if any(isinstance(p, exp.Star) for p in outer_select.expressions):
            projection_columns.append("*")

    aggregations: list[str] = []
    windows: list[str] = []
    functions: list[str] = []
    arithmetic: list[str] = []
    literals: list[str] = []
    columns: list[str] = []
    tables: list[str] = []
    joins: list[str] = []
    join_conditions: list[str] = []
    filters: list[FilterPredicate] = []
    set_operations: list[str] = []
    subquery_count = 0
    cte_names: list[str] = []

    integer_divisions = 0
    null_comparisons = 0
    tautologies = 0
    date_mismatches: list[str] = []
    key_pairs: list[exp.EQ] = []
    precedence_slips: list[str] = []
    padded_mismatches: list[str] = []
    own_key_joins = 0
    table_names: dict[str, str] | None = None  # alias -> table of the SELECT of the last join seen
    table_names_of: exp.Expr | None = None
    column_nodes: list[exp.Column] = []
    table_nodes: list[exp.Table] = []
    one_scope = True  # no subquery, CTE, set operation, table function ... below the root
    for node in tree.walk():
        kind, breaks_scope = _node_class(type(node))  # type: ignore[arg-type]  # lru_cache wants Hashable; mypy rejects sqlglot's Expr class
        if breaks_scope and node is not tree:
            one_scope = False
        if kind is None:
            continue
        if kind == "window":
            function = node.this
            windows.append(function.key.upper() if isinstance(function, exp.Func) else "WINDOW")
        elif kind == "aggregate":
            if not isinstance(node.parent, exp.Window):
                aggregations.append(node.key.upper() if not isinstance(node, exp.Anonymous) else str(node.this).upper())
        elif kind == "column":
            column_nodes.append(cast(exp.Column, node))
            if node.name:
                columns.append(column_name(cast(exp.Column, node), rules))
        elif kind == "table":
            table_nodes.append(cast(exp.Table, node))
            if node.name:
                tables.append(node.name.lower())
        elif kind == "literal":
            literals.append(normalize_value(node.this, rules))
        elif kind == "join":
            join = cast(exp.Join, node)
            joins.append(" ".join(p for p in (join.side, join.kind) if p).upper() or "INNER")
            on = node.args.get("on")
            if on is not None:
                for predicate, negated in _predicates(on):
                    if (
                        isinstance(predicate, exp.EQ)
                        and isinstance(predicate.this, exp.Column)
                        and isinstance(predicate.expression, exp.Column)
                    ):
                        pair = sorted((column_name(predicate.this, rules), column_name(predicate.expression, rules)))
                        join_conditions.append(" = ".join(pair))
                        if keys_of_different_entities(*pair):
                            key_pairs.append(predicate)
                        if table_names is None or table_names_of is not node.parent:
                            table_names_of, table_names = node.parent, _source_tables(node.parent)
                        own_key_joins += _joins_own_keys(predicate, table_names)
                    else:
                        found = _filter_from_predicate(predicate, negated, "join", rules, dialect)
                        if found is not None:
                            filters.append(found)
        elif kind == "clause":
            clause_names: dict[type[exp.Expr], str] = {exp.Where: "where", exp.Having: "having", exp.Qualify: "qualify"}
            clause = clause_names[type(node)]
            precedence_slips.extend(unparenthesised_alternatives(node.this, dialect))
            for predicate, negated in _predicates(node.this):
                found = _filter_from_predicate(predicate, negated, clause, rules, dialect)
                if found is not None:
                    filters.append(found)
        elif kind == "subquery":
            subquery_count += 1
        elif kind == "cte":
            cte_names.append(node.alias_or_name.lower())
        elif kind == "set_operation":
            set_operations.append(SET_OPERATION_TYPES[type(node)])
        elif kind == "arithmetic":
            arithmetic.append(ARITHMETIC_TYPES[type(node)])
            if type(node) is exp.Div and not _has_float_evidence(node):
                integer_divisions += 1
            elif type(node) is exp.Sub and _date_part_subtraction(node):
                date_mismatches.append(render(node, dialect)[:300])
        elif kind == "function":
            functions.append(str(node.this).upper() if isinstance(node, exp.Anonymous) else node.key.upper())
        elif kind == "comparison":
            mismatch = date_literal_mismatch(node, dialect)
            if mismatch is not None:
                date_mismatches.append(mismatch)
            padded = padded_part_mismatch(node) if dialect in ("", "sqlite") else None
            if padded is not None:
                padded_mismatches.append(padded)
            if type(node) is exp.Between:
                continue
            left, right = node.this, node.expression
            if type(node) in (exp.EQ, exp.NEQ) and (isinstance(right, exp.Null) or isinstance(left, exp.Null)):
                null_comparisons += 1
            if _literal_text(left) is not None and _literal_text(right) is not None:
                tautologies += 1
        if kind == "in_or_exists" and isinstance(node, exp.In) and dialect in ("", "sqlite"):
            padded = padded_part_mismatch(node)
            if padded is not None:
                padded_mismatches.append(padded)
        if kind in ("in_or_exists", "function") and isinstance(node, (exp.In, exp.Exists)):
            if node.find(exp.Select) is not None and not any(
                isinstance(a, exp.Subquery) for a in node.iter_expressions()
            ):
                subquery_count += 1

    group_by: list[str] = []
    order_by: list[tuple[str, str]] = []
    limit: int | None = None
    unguarded: list[str] = []
    ranking: list[str] = []
    if isinstance(outer, exp.Query):
        query_for_modifiers = outer
        group = outer_select.args.get("group") if outer_select is not None else None
        if group is not None:
            for key in group.expressions:
                group_by.append(
                    column_name(key, rules) if isinstance(key, exp.Column) else render(key, dialect).lower()
                )
        order = query_for_modifiers.args.get("order")
        if order is not None:
            for ordered in order.expressions:
                direction = "DESC" if ordered.args.get("desc") else "ASC"
                key = ordered.this
                order_by.append(
                    (
                        column_name(key, rules) if isinstance(key, exp.Column) else render(key, dialect).lower(),
                        direction,
                    )
                )
        limit_node = query_for_modifiers.args.get("limit")
        if limit_node is None and outer_select is not None:
            limit_node = outer_select.args.get("limit")
        if order is not None and limit_node is not None and group is None:
            unguarded = _unguarded_null_keys(order, filters, rules)
        if order is not None and limit_node is not None and outer_select is not None:
            ranking = ranking_measures(outer_select, order, dialect)
        if limit_node is not None:
            limit_value = limit_node.expression if isinstance(limit_node, exp.Limit) else limit_node
            text = _literal_text(limit_value) if limit_value is not None else None
            if text is not None and text.startswith("-") and parse_count(text[1:]) is not None:
                limit = -int(text[1:])  # kept as written (LIMIT -1 means no limit in SQLite)
            elif parse_count(text) is not None:
                limit = parse_count(text)
        fetch = query_for_modifiers.args.get("fetch") if limit is None else None
        if fetch is not None:
            text = _literal_text(fetch.args.get("count")) if fetch.args.get("count") is not None else None
            limit = parse_count(text) if parse_count(text) is not None else limit

    statement_kinds = tuple(dict.fromkeys([tree.key.upper()]))
    return SQLSpec(
        dialect=dialect,
        statement_kinds=statement_kinds,
        projections=tuple(projections),
        projection_columns=tuple(dict.fromkeys(projection_columns)),
        plain_projections=plain_projections,
        aggregations=tuple(aggregations),
        window_functions=tuple(windows),
        filters=tuple(filters),
        group_by=tuple(group_by),
        order_by=tuple(order_by),
        limit=limit,
        distinct=distinct,
        tables=tuple(dict.fromkeys(t for t in tables if t not in cte_names)),
        joins=tuple(joins),
        join_conditions=tuple(join_conditions),
        subquery_count=subquery_count,
        cte_names=tuple(cte_names),
        set_operations=tuple(set_operations),
        columns=tuple(dict.fromkeys(columns)),
        functions=tuple(dict.fromkeys(functions)),
        arithmetic=tuple(arithmetic),
        literals=tuple(dict.fromkeys(literals)),
        unused_tables=unused_join_tables(tree, (column_nodes, table_nodes) if one_scope else False) if joins else (),
        integer_divisions=integer_divisions,
        null_comparisons=null_comparisons,
        tautologies=tautologies,
        precedence_slips=tuple(dict.fromkeys(precedence_slips)),
        ranking_measures=tuple(ranking),
        date_mismatches=tuple(date_mismatches),
        padded_part_mismatches=tuple(dict.fromkeys(padded_mismatches)),
        join_key_mismatches=_entity_key_joins(tree, key_pairs, dialect) if key_pairs else (),
        constant_projections=_constant_projections(outer_select, dialect)
        if outer is outer_select and outer_select is not None and len(projections) > 1
        else (),
        single_row_ordering=bool(
            outer is outer_select
            and projections
            and len(projections) == aggregate_projections
            and not group_by
            and order_by
        ),
        unguarded_null_order=tuple(unguarded),
        count_join_safety=count_join_safety(outer_select)
        if outer_select is not None and joins and "COUNT" in aggregations
        else "",
        own_key_joins=own_key_joins,
        ungrouped_aggregate_order=_ungrouped_aggregate_order(outer_select, dialect)
        if outer_select is not None and order_by and not group_by
        else None,
        ungrouped_mixed_projection=bool(
            outer_select is not None
            and aggregate_projections
            and plain_projections
            and not group_by
            and outer_select.args.get("group") is None
        ),
        flags=flags,
    )
