"""Stage B (SQL side): semantic features of the answer SQL S (STEF paper §2.B).

Walks the parsed sqlglot tree once per feature family with sqlglot's own traversal
(``find_all``, scope traversal) — never regexes over SQL — and returns a frozen
:class:`stef.models.SQLSpec`. Column names are normalised: unqualified, lower case, quotes
removed, R_app column mappings applied; table aliases are resolved to table names; values are
case- and whitespace-normalised.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from stef.models import FilterPredicate, SQLSpec
from stef.pipeline.rules import AppRules

AGGREGATE_TYPES: tuple[type[exp.Expression], ...] = (exp.AggFunc,)
WINDOW_TYPES: tuple[type[exp.Expression], ...] = (exp.Window,)
COMPARISON_TYPES: dict[type[exp.Expression], str] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.Like: "LIKE",
    exp.ILike: "LIKE",
    exp.Glob: "LIKE",
    exp.NullSafeEQ: "=",
    exp.NullSafeNEQ: "!=",
}
FLIPPED = {"=": "=", "!=": "!=", ">": "<", ">=": "<=", "<": ">", "<=": ">=", "LIKE": "LIKE"}
NEGATED = {
    "=": "!=",
    "!=": "=",
    ">": "<=",
    ">=": "<",
    "<": ">=",
    "<=": ">",
    "LIKE": "NOT LIKE",
    "IN": "NOT IN",
    "IS NULL": "IS NOT NULL",
    "BETWEEN": "NOT BETWEEN",
}
ARITHMETIC_TYPES: dict[type[exp.Expression], str] = {
    exp.Div: "/",
    exp.Mul: "*",
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mod: "%",
}
SET_OPERATION_TYPES: dict[type[exp.Expression], str] = {
    exp.Union: "UNION",
    exp.Intersect: "INTERSECT",
    exp.Except: "EXCEPT",
}


MAX_COUNT_DIGITS = 18
"""Longest run of digits read as a LIMIT, FETCH or top-k count (beyond it the text is not a
usable count; ``int()`` of 4,301+ digits would raise)."""


def parse_count(text: str | None) -> int | None:
    """A non-negative count written with decimal digits of any script (``"10"``, ``"٣"``), else
    ``None`` (``"²"`` is a digit but not a decimal one, ``"-3"``, a thousand digits, ``None``).

    >>> parse_count("10"), parse_count("٣"), parse_count("²"), parse_count("1" * 5000)
    (10, 3, None, None)
    """
    if not text or len(text) > MAX_COUNT_DIGITS or not text.isdecimal():
        return None
    return int(text)


RENDER_COPIES: tuple[type[exp.Expression], ...] = (
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
Found by rendering both dev files' SQL transpiled to seven dialects (tests/test_evidence.py)."""


def render(node: exp.Expression, dialect: str = "") -> str:
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
    return _generator(dialect).generate(node, copy=node.find(*RENDER_COPIES) is not None)


@lru_cache(maxsize=64)
def _generator(dialect: str) -> Any:
    from sqlglot.dialects.dialect import Dialect

    return Dialect.get_or_raise(dialect or None).generator(
        comments=False
    )  # evidence never carries the agent's comments


def normalize_value(value: str, rules: AppRules | None = None) -> str:
    """Case/whitespace-normalise a literal value, then apply R_app value aliases.

    >>> normalize_value("  New   York ")
    'new york'
    >>> normalize_value("2.50")
    '2.5'
    """
    if rules is None or (
        not rules.value_normalization.get("value_aliases")
        and rules.value_normalization.get("lowercase", True)
        and rules.value_normalization.get("collapse_whitespace", True)
    ):
        return _default_normalized(value)
    options = rules.value_normalization
    text = value
    if options.get("collapse_whitespace", True):
        text = " ".join(text.split())
    if options.get("lowercase", True):
        text = text.lower()
    text = _canonical_date(_canonical_number(text))
    aliases = options.get("value_aliases") or {}
    return aliases.get(text, text)


_YMD = re.compile(r"^(\d{4})[/.-](\d{1,2})[/.-](\d{1,2})$")
_MDY = re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{4})$")


def _canonical_date(text: str) -> str:
    """``2012/8/25`` and ``8/25/2012`` (US order) -> ``2012-08-25``; anything else unchanged.

    >>> _canonical_date("2012/8/25"), _canonical_date("1/10/2019"), _canonical_date("2019-01-10 00:00")
    ('2012-08-25', '2019-01-10', '2019-01-10 00:00')
    """
    match = _YMD.match(text)
    if match:
        year, month, day = match.groups()
    else:
        match = _MDY.match(text)
        if not match:
            return text
        month, day, year = match.groups()
    if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):
        return text
    return f"{year}-{int(month):02d}-{int(day):02d}"


@lru_cache(maxsize=65536)
def _default_normalized(value: str) -> str:
    """:func:`normalize_value` under the default options (cached: literals repeat a lot)."""
    return _canonical_date(_canonical_number(" ".join(value.split()).lower()))


def _canonical_number(text: str) -> str:
    try:
        number = float(text)
    except ValueError:
        return text
    if number != number or number in (float("inf"), float("-inf")):
        return text
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return repr(number)


def column_name(column: exp.Column | exp.Identifier | str, rules: AppRules | None = None) -> str:
    """Normalised column name: unqualified, lower case, whitespace collapsed, R_app mapping applied."""
    name = column if isinstance(column, str) else column.name
    name = " ".join(name.split()).lower()
    return rules.canonical_column(name) if rules is not None else name


def _literal_text(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Literal):
        return node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return f"-{node.this.this}"
    if isinstance(node, exp.Boolean):
        return "1" if node.this else "0"
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return _literal_text(node.this)
    if isinstance(node, exp.Paren):
        return _literal_text(node.this)
    return None


def _quoted_name_value(node: exp.Expression, other: exp.Expression) -> str | None:
    """The text of a double-quoted name compared with a column (``Citizenship != "France"``).

    In SQLite a double-quoted token that names no column is a string literal, and agents write
    string values that way; sqlglot's identifier-quoting dialects read it as a column. An
    unqualified quoted name on the value side of a comparison with a column is taken as a
    candidate value unless the query uses that name as a column elsewhere (a self-join on
    ``"a" = "b"``). Dialects that quote strings with ``"`` (MySQL) already parse it as a literal.

    >>> import sqlglot
    >>> _quoted_name_value(*(lambda c: (c.expression, c.this))(sqlglot.parse_one('SELECT a FROM t WHERE "c" = "France"').find(sqlglot.exp.EQ)))
    'France'
    >>> _quoted_name_value(*(lambda c: (c.expression, c.this))(sqlglot.parse_one('SELECT b FROM t WHERE "c" = "b"').find(sqlglot.exp.EQ))) is None
    True
    """
    if not (
        isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier) and node.this.quoted
    ):
        return None
    if not isinstance(other, exp.Column) and _first_column(other) is None:
        return None
    name = node.name
    if not name.strip():
        return None
    root = node.root()
    for column in root.find_all(exp.Column):
        if column is not node and column is not other and column.name == name:
            return None
    return name


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


def unparenthesised_alternatives(condition: exp.Expression, dialect: str = "") -> list[str]:
    """ORs of a filter with an unparenthesised AND on one side whose other side tests a column
    of that AND: ``sex = 'M' AND alb < 3.5 OR alb >= 5.5`` reads ``(sex = 'M' AND alb < 3.5) OR
    alb >= 5.5`` (AND binds tighter), so ``sex = 'M'`` holds for one alternative only. Returns
    the SQL of each such OR; subqueries are not entered.

    >>> import sqlglot
    >>> unparenthesised_alternatives(sqlglot.parse_one("SELECT 1 FROM t WHERE sex = 'M' AND alb < 3.5 OR alb >= 5.5").args["where"].this)
    ["sex = 'M' AND alb < 3.5 OR alb >= 5.5"]
    >>> unparenthesised_alternatives(sqlglot.parse_one("SELECT 1 FROM t WHERE sex = 'M' AND (alb < 3.5 OR alb >= 5.5)").args["where"].this)
    []
    """
    found: list[str] = []
    stack = [condition]
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.Paren, exp.Not)):
            stack.append(node.this)
        elif isinstance(node, exp.Connector):
            left, right = node.this, node.expression
            stack.extend((left, right))
            if isinstance(node, exp.Or):
                for side, other in ((left, right), (right, left)):
                    if isinstance(side, exp.And) and not isinstance(other, exp.And):
                        names = {c.name.lower() for c in other.find_all(exp.Column)}
                        if names and names & {c.name.lower() for c in side.find_all(exp.Column)}:
                            found.append(render(node, dialect)[:300])
                            break
    return found


def _first_column(node: exp.Expression) -> exp.Column | None:
    if isinstance(node, exp.Column):
        return node
    return next(iter(node.find_all(exp.Column)), None)


def _predicates(condition: exp.Expression) -> list[tuple[exp.Expression, bool]]:
    """Flatten AND/OR/NOT into (predicate, negated) pairs without copying."""
    out: list[tuple[exp.Expression, bool]] = []
    stack: list[tuple[exp.Expression, bool]] = [(condition, False)]
    while stack:
        node, negated = stack.pop()
        if isinstance(node, exp.Paren):
            stack.append((node.this, negated))
        elif isinstance(node, exp.Connector):
            stack.append((node.right, negated))
            stack.append((node.left, negated))
        elif isinstance(node, exp.Not):
            stack.append((node.this, not negated))
        else:
            out.append((node, negated))
    return out


def _filter_from_predicate(
    node: exp.Expression, negated: bool, clause: str, rules: AppRules | None, dialect: str
) -> FilterPredicate | None:
    operator: str | None = None
    left: exp.Expression | None = None
    values: list[str] = []
    quoted_raw: list[str] = []
    for node_type, symbol in COMPARISON_TYPES.items():
        if type(node) is node_type:
            operator = symbol
            left, right = node.this, node.expression
            left_value, right_value = _literal_text(left), _literal_text(right)
            if left_value is not None and right_value is None:
                left, right = right, left
                operator = FLIPPED[symbol]
                right_value = left_value
            elif left_value is None and right_value is None:
                right_value = _quoted_name_value(right, left)
                if right_value is not None:
                    quoted_raw.append(right_value)
            if right_value is not None:
                values = [normalize_value(right_value, rules)]
            break
    if operator is None:
        if isinstance(node, exp.In):
            operator, left = "IN", node.this
            texts = [_literal_text(e) for e in node.expressions]
            if all(text is None for text in texts):
                texts = [_quoted_name_value(e, node.this) for e in node.expressions]
                quoted_raw.extend(text for text in texts if text is not None)
            values = [normalize_value(v, rules) for v in texts if v is not None]
        elif isinstance(node, exp.Between):
            operator, left = "BETWEEN", node.this
            values = [
                normalize_value(v, rules)
                for v in (_literal_text(node.args.get("low")), _literal_text(node.args.get("high")))
                if v is not None
            ]
        elif isinstance(node, exp.Is):
            left = node.this
            operator = "IS NULL" if isinstance(node.expression, exp.Null) else "IS"
        elif isinstance(node, exp.Column):
            left, operator = node, "IS TRUE"
        else:
            return None
    if left is None:
        return None
    column = _first_column(left)
    if column is None and not (isinstance(left, exp.Count) and isinstance(left.this, exp.Star)):
        return None
    if negated:
        operator = NEGATED.get(operator, f"NOT {operator}")
    raw_values = (*(n.this for n in node.find_all(exp.Literal) if n.is_string), *quoted_raw)
    return FilterPredicate(
        column=column_name(column, rules) if column is not None else "count(*)",  # HAVING COUNT(*) > 1
        raw_values=raw_values,
        operator=operator,
        value=values[0] if len(values) == 1 else None,
        values=tuple(values),
        clause=clause,  # type: ignore[arg-type]
        negated=negated,
        sql=render(node, dialect)[:500],
    )


@lru_cache(maxsize=1024)
def _node_kind(node_type: type[exp.Expression]) -> str | None:
    """The extractor's category of a node type (decided once per type, then a dict lookup)."""
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


def extract_sql_spec(
    tree: exp.Expression, dialect: str = "", rules: AppRules | None = None, flags: tuple[str, ...] = ()
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
    table_names_of: exp.Expression | None = None
    for node in tree.walk():
        kind = _node_kind(type(node))
        if kind is None:
            continue
        if kind == "window":
            function = node.this
            windows.append(function.key.upper() if isinstance(function, exp.Func) else "WINDOW")
        elif kind == "aggregate":
            if not isinstance(node.parent, exp.Window):
                aggregations.append(node.key.upper() if not isinstance(node, exp.Anonymous) else str(node.this).upper())
        elif kind == "column":
            if node.name:
                columns.append(column_name(node, rules))
        elif kind == "table":
            if node.name:
                tables.append(node.name.lower())
        elif kind == "literal":
            literals.append(normalize_value(node.this, rules))
        elif kind == "join":
            joins.append(" ".join(p for p in (node.side, node.kind) if p).upper() or "INNER")
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
            clause = {exp.Where: "where", exp.Having: "having", exp.Qualify: "qualify"}[type(node)]
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
        unused_tables=unused_join_tables(tree) if joins else (),
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


DATE_COLUMN_PATTERN = re.compile(
    r"(?:^|_)(?:date|dob|birthday|birthdate|timestamp|datetime)$|_at$"
    r"|^(?:open|opened|close|closed|creation|created|birth|start|end|release|hire|order|ship|due|expiry|expiration|transaction"
    r"|payment|modified|updated|last|lastedit|lastaccess|exam|examination|test|admission|discharge|event|report|publish"
    r"|published|issue|signup|registration|join|joined|delivery|effective|received|sent)date$"
)
"""Column names that hold dates or timestamps by convention: ``date`` as the last word
(``birth_date``, ``Examination Date``), ``dob``, ``*_at``, or a known event word glued to
``date`` (``opendate``, ``creationdate``). ``candidate``, ``update`` or ``date_year`` do not
count. Schema-free: the name is the only evidence of the type."""
_CAMEL_DATE = re.compile(r"[a-z](?:Date|DateTime|Timestamp)$")
_YEAR = re.compile(r"[12]\d{3}")
_YEAR_MONTH = re.compile(r"[12]\d{3}-\d{2}")


def is_date_column(column: exp.Column) -> bool:
    """Whether a column's name marks it as a date or timestamp (see :data:`DATE_COLUMN_PATTERN`).

    >>> import sqlglot
    >>> [is_date_column(sqlglot.parse_one(c)) for c in ("T1.OpenDate", "dob", "created_at", "birth_date", "opendate", "t.date")]
    [True, True, True, True, True, True]
    >>> [is_date_column(sqlglot.parse_one(c)) for c in ("updated", "candidate", "mandate", "date_year", "dates_count", "validate")]
    [False, False, False, False, False, False]
    """
    name = column.name
    return bool(_CAMEL_DATE.search(name) or DATE_COLUMN_PATTERN.search(name.lower().replace(" ", "_")))


def date_literal_mismatch(node: exp.Expression, dialect: str = "") -> str | None:
    """SQL of a comparison that matches a raw date column against a bare year or partial date.

    A date column compared, without a date function, with ``1980`` (an integer never equals a
    date string; in SQLite every integer sorts before every text), ``= '2008-08'`` (no full
    date equals a partial one) or ``BETWEEN … AND '2008-10'`` (drops the last period) means a
    year/month extraction (``STRFTIME``, ``YEAR``, ``EXTRACT``) is missing (NL2SQL-BUGs:
    Date/Time Functions). Returns ``None`` for anything else.

    >>> import sqlglot
    >>> date_literal_mismatch(sqlglot.parse_one("dob > 1980"))
    'dob > 1980'
    >>> date_literal_mismatch(sqlglot.parse_one("STRFTIME('%Y', dob) > '1980'")) is None
    True
    >>> date_literal_mismatch(sqlglot.parse_one("d.date BETWEEN '2008-08' AND '2008-10'"))
    "d.date BETWEEN '2008-08' AND '2008-10'"
    """
    if isinstance(node, exp.Between):
        column, high = node.this, node.args.get("high")
        if isinstance(column, exp.Column) and isinstance(high, exp.Literal) and is_date_column(column):
            if _YEAR.fullmatch(high.this) or (high.is_string and _YEAR_MONTH.fullmatch(high.this)):
                return render(node, dialect)[:300]
        return None
    left, right = node.this, node.expression
    if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
        left, right = right, left
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Literal) and is_date_column(left)):
        return None
    if not right.is_string and _YEAR.fullmatch(right.this):
        return render(node, dialect)[:300]
    if type(node) is exp.EQ and right.is_string and (_YEAR.fullmatch(right.this) or _YEAR_MONTH.fullmatch(right.this)):
        return render(node, dialect)[:300]
    return None


_PADDED_WIDTH = {"%Y": 4, "%m": 2, "%d": 2, "%H": 2, "%M": 2, "%S": 2, "%j": 3}
"""Width of what SQLite's STRFTIME gives for a format made of one field: zero-padded text."""


def _strftime_format(node: exp.Expression) -> str | None:
    """The format of a ``STRFTIME(format, x)`` call (parsed as ``TimeToStr`` in SQLite, as an
    anonymous function in the generic dialect), else ``None``."""
    if isinstance(node, exp.TimeToStr):
        fmt = node.args.get("format")
    elif isinstance(node, exp.Anonymous) and str(node.this).upper() == "STRFTIME" and node.expressions:
        fmt = node.expressions[0]
    else:
        return None
    return fmt.this if isinstance(fmt, exp.Literal) and fmt.is_string else None


def padded_part_mismatch(node: exp.Expression) -> str | None:
    """SQL of a comparison (or IN) of ``STRFTIME('%m', x)`` and the like with a value it can never
    equal: STRFTIME returns zero-padded *text* (``'09'``), so ``= '9'`` never holds, nor does
    ``= 9`` in SQLite (text never equals an integer). Returns ``None`` for anything else.

    >>> import sqlglot
    >>> padded_part_mismatch(sqlglot.parse_one("STRFTIME('%m', d) IN ('9', '10')", read="sqlite"))
    "STRFTIME('%m', d) IN ('9', '10')"
    >>> padded_part_mismatch(sqlglot.parse_one("STRFTIME('%Y', d) = 1990", read="sqlite"))
    "STRFTIME('%Y', d) = 1990"
    >>> padded_part_mismatch(sqlglot.parse_one("STRFTIME('%m', d) = '09'", read="sqlite")) is None
    True
    >>> padded_part_mismatch(sqlglot.parse_one("STRFTIME('%d', d) > 5"))
    "STRFTIME('%d', d) > 5"
    """
    if isinstance(node, exp.In):
        part, values = node.this, list(node.expressions)
    elif type(node) in COMPARISON_TYPES:
        part, values = node.this, [node.expression]
        if _strftime_format(part) is None:
            part, values = node.expression, [node.this]
    else:
        return None
    fmt = _strftime_format(part)
    width = _PADDED_WIDTH.get(fmt) if fmt is not None else None
    if width is None:
        return None
    for value in values:
        if isinstance(value, exp.Literal) and (
            not value.is_string or (value.this.isdigit() and len(value.this) != width)
        ):
            return node.sql(dialect="sqlite", comments=False)[
                :300
            ]  # as SQLite writes it (rare: the copy costs nothing)
    return None


_KEY_NAME = re.compile(r"^(?:link_to_)(?P<linked>.+)$|^(?P<entity>.+?)_(?:id|code|key)$")


def key_entity(name: str) -> str | None:
    """The entity a key column names by convention, or ``None`` if the name is not key-like.

    >>> [key_entity(n) for n in ("client_id", "link_to_event", "country_code", "id", "name", "valid", "zipcode")]
    ['client', 'event', 'country', None, None, None, None]
    """
    match = _KEY_NAME.match(name.lower().replace(" ", "_"))
    if match is None:
        return None
    entity = match.group("linked") or match.group("entity")
    return entity.rstrip("_") or None


def _own_key(column: str, table: str) -> bool:
    """Whether ``column`` is, by name, the key of ``table`` itself: ``id``, or ``<entity>_id``
    (``_code``, ``_key``) whose entity is the table's name (``client_id`` of ``client``/``clients``)."""
    name = column.lower()
    if name == "id":
        return True
    entity = key_entity(name)
    return entity is not None and table in (entity, f"{entity}s", f"{entity}es")


def _source_tables(select: exp.Expression | None) -> dict[str, str]:
    """alias -> table name of the tables a SELECT reads in its FROM and JOINs (no walk of the tree)."""
    if not isinstance(select, exp.Select):
        return {}
    found: dict[str, str] = {}
    for source in (select.args.get("from_") or select.args.get("from"), *(select.args.get("joins") or ())):
        if source is not None and isinstance(source.this, exp.Table):
            found[source.this.alias_or_name.lower()] = source.this.name.lower()
    return found


def _joins_own_keys(condition: exp.EQ, table_names: dict[str, str]) -> int:
    """1 when a join equality pairs the own keys of two different tables by name (``t1.id =
    t2.id``, ``client.client_id = card.card_id``): two entities' ids, equal only by accident
    unless one table extends the other; 0 otherwise."""
    left, right = condition.this, condition.expression
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column) and left.table and right.table):
        return 0
    a, b = table_names.get(left.table.lower()), table_names.get(right.table.lower())
    return int(bool(a and b and a != b and _own_key(left.name, a) and _own_key(right.name, b)))


def count_join_safety(select: exp.Select) -> str:
    """Whether the non-DISTINCT COUNTs of a joined SELECT count each row once, judged from the
    key names alone (schema-free counterpart of the schema's fan-out check):
    ``"safe"`` when every join from the counted table (for ``COUNT(*)``: from some table) lands
    on the other table's own key (``id``, ``<table>_id``), ``"fanout"`` when one lands on a
    column that refers back to the counted table's key (its rows meet several rows), ``""``
    when the names do not tell.

    >>> import sqlglot
    >>> count_join_safety(sqlglot.parse_one("SELECT COUNT(m.name) FROM model AS m JOIN maker AS k ON m.maker_id = k.id"))
    'safe'
    >>> count_join_safety(sqlglot.parse_one("SELECT COUNT(k.id) FROM model AS m JOIN maker AS k ON m.maker_id = k.id"))
    'fanout'
    >>> count_join_safety(sqlglot.parse_one("SELECT COUNT(*) FROM a JOIN b ON a.x = b.y"))
    ''
    """
    joins = select.args.get("joins") or ()
    counts = [
        c
        for c in select.find_all(exp.Count)
        if c.find_ancestor(exp.Select) is select and not isinstance(c.this, exp.Distinct)
    ]
    if not joins or not counts:
        return ""
    tables: dict[str, str] = {}
    for source in (select.args.get("from_") or select.args.get("from"), *joins):
        if source is None or not isinstance(source.this, exp.Table):
            return ""
        tables[source.this.alias_or_name.lower()] = source.this.name.lower()
    edges: dict[str, list[tuple[str, str]]] = {alias: [] for alias in tables}
    for join in joins:
        on = join.args.get("on")
        for condition in on.find_all(exp.EQ) if on is not None else ():
            left, right = condition.this, condition.expression
            if not (isinstance(left, exp.Column) and isinstance(right, exp.Column) and left.table and right.table):
                continue
            la, ra = left.table.lower(), right.table.lower()
            if la == ra or la not in tables or ra not in tables:
                continue
            for (xa, x_col), (ya, y_col) in (((la, left.name), (ra, right.name)), ((ra, right.name), (la, left.name))):
                if _own_key(y_col, tables[ya]):
                    state = "safe"
                elif _own_key(x_col, tables[xa]):
                    state = "fanout"  # X's own key meets a column of Y that refers to it: one X row, several Y rows
                else:
                    state = ""
                edges[xa].append((ya, state))

    def from_root(root: str) -> str:
        seen, stack, states = {root}, [root], set()
        while stack:
            alias = stack.pop()
            for other, state in edges[alias]:
                if other not in seen:
                    seen.add(other)
                    stack.append(other)
                    states.add(state)
        if seen != set(tables) or "" in states:
            return ""
        return "fanout" if "fanout" in states else "safe"

    verdicts: list[str] = []
    for count in counts:
        target = count.this
        if isinstance(target, exp.Column) and target.table and target.table.lower() in tables:
            verdicts.append(from_root(target.table.lower()))
        elif isinstance(target, exp.Star):
            roots = [from_root(alias) for alias in tables]
            verdicts.append(
                "safe" if "safe" in roots else ("fanout" if roots and all(r == "fanout" for r in roots) else "")
            )
        else:
            verdicts.append("")
    if "fanout" in verdicts:
        return "fanout"
    return "safe" if verdicts and all(v == "safe" for v in verdicts) else ""


def keys_of_different_entities(left: str, right: str) -> bool:
    """Whether a join equality pairs the keys of two different entities (``client_id = card_id``).

    Schema-free: only names that follow the ``<entity>_id`` / ``<entity>_code`` / ``<entity>_key`` /
    ``link_to_<entity>`` conventions count, a bare ``id`` never does, and one entity name
    containing the other (``player_id`` / ``home_player_id``) is taken as the same entity.
    (:func:`extract_sql_spec` also requires both entities to be tables of the query.)

    >>> keys_of_different_entities("client_id", "card_id"), keys_of_different_entities("driver_id", "driver_id")
    (True, False)
    >>> keys_of_different_entities("id", "client_id"), keys_of_different_entities("player_id", "home_player_id")
    (False, False)
    """
    left_entity, right_entity = key_entity(left), key_entity(right)
    if left_entity is None or right_entity is None:
        return False
    return left_entity not in right_entity and right_entity not in left_entity


def _entity_key_joins(tree: exp.Expression, candidates: list[exp.EQ], dialect: str = "") -> tuple[str, ...]:
    """SQL of the join equalities that pair keys of two different entities *of this query*:
    both entities name a table the query reads (``client_id`` ~ ``client``/``clients``) and the
    two columns come from different tables. Role-named keys (``manager_id = employee_id``,
    ``sender_id = user_id``) and self-joins are not flagged."""
    aliases = {table.alias_or_name.lower(): table.name.lower() for table in tree.find_all(exp.Table)}
    tables = set(aliases.values())

    def names_a_table(entity: str) -> bool:
        return any(t in (entity, f"{entity}s", f"{entity}es") or entity == f"{t}s" for t in tables)

    found: list[str] = []
    for predicate in candidates:
        left, right = predicate.this, predicate.expression
        left_table, right_table = aliases.get(left.table.lower()), aliases.get(right.table.lower())
        if left_table is not None and left_table == right_table:
            continue
        left_entity, right_entity = key_entity(left.name), key_entity(right.name)
        if left_entity and right_entity and names_a_table(left_entity) and names_a_table(right_entity):
            found.append(render(predicate, dialect)[:300])
    return tuple(found)


DATE_PART_TYPES: tuple[type[exp.Expression], ...] = (exp.TimeToStr, exp.Year, exp.Month, exp.Day, exp.Extract)
"""sqlglot nodes that extract a part of a date (``STRFTIME('%Y', d)`` parses to TimeToStr)."""


def _date_part_subtraction(node: exp.Sub) -> bool:
    """A raw date column minus an extracted date part, or the reverse (``birthday - STRFTIME('%Y', d)``):
    a full date and a year do not subtract to anything meaningful."""
    left, right = node.this, node.expression
    return any(
        isinstance(a, exp.Column) and is_date_column(a) and isinstance(b, DATE_PART_TYPES)
        for a, b in ((left, right), (right, left))
    )


def _constant_projections(select: exp.Select, dialect: str = "") -> tuple[str, ...]:
    """Plain-column projections of ``select`` that its WHERE fixes with ``column = literal``
    (not under OR/NOT): ``SELECT name, county … WHERE county = 'Alameda'``."""
    where = select.args.get("where")
    if where is None:
        return ()
    fixed: set[tuple[str, str]] = set()
    condition = where.this
    conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    for predicate in conjuncts:
        if (
            isinstance(predicate, exp.EQ)
            and isinstance(predicate.this, exp.Column)
            and _literal_text(predicate.expression) is not None
        ):
            fixed.add((predicate.this.table, predicate.this.name))
    if not fixed:
        return ()
    return tuple(
        render(projection, dialect)
        for projection in (p.unalias() for p in select.expressions)
        if isinstance(projection, exp.Column) and (projection.table, projection.name) in fixed
    )


def _unguarded_null_keys(order: exp.Order, filters: list[FilterPredicate], rules: AppRules | None) -> list[str]:
    """Plain-column ORDER BY keys that put NULLs first (the parser sets ``nulls_first`` from
    the dialect's NULL ordering or an explicit NULLS FIRST) with no IS [NOT] NULL filter:
    ``ORDER BY x LIMIT 1`` for "the lowest x" returns a row whose x is unknown."""
    guarded = {f.column for f in filters if f.operator in ("IS NULL", "IS NOT NULL")}
    keys: list[str] = []
    for ordered in order.expressions:
        key = ordered.this
        if ordered.args.get("nulls_first") and isinstance(key, exp.Column):
            name = column_name(key, rules)
            if name not in guarded:
                keys.append(name)
    return keys


FLOAT_TYPES = frozenset({"REAL", "FLOAT", "DOUBLE", "DECIMAL", "NUMERIC", "DOUBLE PRECISION", "FLOAT64", "BIGDECIMAL"})


def _has_float_evidence(division: exp.Div) -> bool:
    """A cast to a float type, a float literal or a float function on either side of ``/``."""
    for node in division.walk():
        if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.this.name.upper() in FLOAT_TYPES | {"DOUBLE"}:
            return True
        if isinstance(node, exp.Cast) and node.to.is_type(*exp.DataType.REAL_TYPES):
            return True
        if isinstance(node, exp.Literal) and not node.is_string and ("." in node.this or "e" in node.this.lower()):
            return True
        if isinstance(node, exp.Avg):
            return True
    return False


_LAST_SCOPES = threading.local()


def tree_scopes(tree: exp.Expression) -> list[Scope]:
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
        return cached[1]
    scopes = traverse_scope(tree)
    _LAST_SCOPES.entry = (tree, scopes)
    return scopes


def unused_join_tables(tree: exp.Expression) -> tuple[str, ...]:
    """Tables joined in a SELECT whose columns are used only in join conditions.

    Uses sqlglot's scope traversal to resolve table aliases per SELECT. Only qualified columns
    can be attributed; a scope with unqualified columns and several tables is skipped.

    >>> import sqlglot
    >>> unused_join_tables(sqlglot.parse_one("SELECT T1.a FROM x AS T1 JOIN y AS T2 ON T1.id = T2.id"))
    ('y',)
    """
    unused: list[str] = []
    try:
        scopes = tree_scopes(tree)
    except SqlglotError:
        return ()
    for scope in scopes:
        select = scope.expression
        if not isinstance(select, exp.Select) or not select.args.get("joins"):
            continue
        try:
            sources = dict(scope.selected_sources)
        except SqlglotError:
            continue
        if len(sources) < 2:
            continue
        if any(
            not isinstance(c.this, exp.Distinct) and c.find_ancestor(exp.Select) is select
            for c in select.find_all(exp.Count)
        ):
            continue  # COUNT(*) or COUNT(x) (projected, in HAVING or ORDER BY) counts the join's rows: every table shapes it
        used_outside_join: set[str] = set()
        partners: dict[str, set[str]] = {}
        for join in select.args.get("joins") or ():
            for condition in join.find_all(exp.EQ):
                left, right = condition.this, condition.expression
                if (
                    isinstance(left, exp.Column)
                    and isinstance(right, exp.Column)
                    and left.table
                    and right.table
                    and left.table.lower() != right.table.lower()
                ):
                    partners.setdefault(left.table.lower(), set()).add(right.table.lower())
                    partners.setdefault(right.table.lower(), set()).add(left.table.lower())
        unqualified = False
        # columns with a JOIN between them and this SELECT (one pass instead of an ancestor walk per column)
        in_joins = {id(column) for join in select.find_all(exp.Join) for column in join.find_all(exp.Column)}
        for column in scope.columns:
            in_join_on = id(column) in in_joins
            if not column.table:
                unqualified = True
                continue
            if not in_join_on:
                used_outside_join.add(column.table.lower())  # unquoted names are case-insensitive
        if unqualified or any(isinstance(p, exp.Star) and not p.args.get("table") for p in select.expressions):
            continue
        for alias, (node, _source) in sources.items():
            if alias.lower() not in used_outside_join and isinstance(node, exp.Table):
                if len(partners.get(alias.lower(), ())) >= 2:
                    continue  # a bridge (a link table) joining two others: the path goes through it
                if any(
                    isinstance(star.parent, exp.Column) and star.parent.table.lower() == alias.lower()
                    for star in select.find_all(exp.Star)
                ):
                    continue  # "alias.*" uses the table
                unused.append(node.name.lower())
    return tuple(unused)
