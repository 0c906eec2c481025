"""Stage B (SQL side): evidence of likely mistakes in the answer SQL S (STEF paper §2.B).

Date literals that do not match a date column's format, unpadded date parts, joins of keys of
different entities, COUNT over a fanning-out join, constant projections, NULL keys that sort
first, integer division without float evidence, joined tables that nothing uses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal, cast

from sqlglot import exp
from sqlglot.errors import SqlglotError

from stef.models import FilterPredicate
from stef.pipeline.rules import AppRules
from stef.pipeline.sql_predicates import _literal_text
from stef.pipeline.sql_trees import render, tree_scopes
from stef.pipeline.values import COMPARISON_TYPES, column_name

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


def date_literal_mismatch(node: exp.Expr, dialect: str = "") -> str | None:
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


def _strftime_format(node: exp.Expr) -> str | None:
    """The format of a ``STRFTIME(format, x)`` call (parsed as ``TimeToStr`` in SQLite, as an
    anonymous function in the generic dialect), else ``None``."""
    if isinstance(node, exp.TimeToStr):
        fmt = node.args.get("format")
    elif isinstance(node, exp.Anonymous) and str(node.this).upper() == "STRFTIME" and node.expressions:
        fmt = node.expressions[0]
    else:
        return None
    return fmt.this if isinstance(fmt, exp.Literal) and fmt.is_string else None


def padded_part_mismatch(node: exp.Expr) -> str | None:
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


def _source_tables(select: exp.Expr | None) -> dict[str, str]:
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
    (:func:`stef.pipeline.extract_sql.extract_sql_spec` also requires both entities to be tables of the query.)

    >>> keys_of_different_entities("client_id", "card_id"), keys_of_different_entities("driver_id", "driver_id")
    (True, False)
    >>> keys_of_different_entities("id", "client_id"), keys_of_different_entities("player_id", "home_player_id")
    (False, False)
    """
    left_entity, right_entity = key_entity(left), key_entity(right)
    if left_entity is None or right_entity is None:
        return False
    return left_entity not in right_entity and right_entity not in left_entity


def _entity_key_joins(tree: exp.Expr, candidates: list[exp.EQ], dialect: str = "") -> tuple[str, ...]:
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


DATE_PART_TYPES: tuple[type[exp.Expr], ...] = (exp.TimeToStr, exp.Year, exp.Month, exp.Day, exp.Extract)
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


def unused_join_tables(
    tree: exp.Expr, one_scope: tuple[Sequence[exp.Column], Sequence[exp.Table]] | Literal[False] | None = None
) -> tuple[str, ...]:
    """Tables joined in a SELECT whose columns are used only in join conditions.

    Uses sqlglot's scope traversal to resolve table aliases per SELECT. Only qualified columns
    can be attributed; a scope with unqualified columns and several tables is skipped. A tree
    that is one SELECT with qualified columns only (most answers with a join) is read without
    the traversal (:func:`_single_scope`): the same result at about 60 % of the cost.

    Args:
        tree: the answer statement.
        one_scope: what the caller's own walk of ``tree`` found: its columns and tables, in
            walk order, when no node of :data:`SCOPE_BREAKERS` is below the root; ``False``
            when one is; ``None`` (default): not known, found here (:func:`one_scope_nodes`).

    >>> import sqlglot
    >>> unused_join_tables(sqlglot.parse_one("SELECT T1.a FROM x AS T1 JOIN y AS T2 ON T1.id = T2.id"))
    ('y',)
    >>> unused_join_tables(sqlglot.parse_one("SELECT T1.a FROM x AS T1 JOIN y AS T2 ON T1.id = T2.id WHERE T1.b IN (SELECT z.c FROM z)"))
    ('y',)
    """
    nodes = one_scope_nodes(tree) if one_scope is None else one_scope or None
    single = _single_scope(tree, *nodes) if nodes is not None else None
    if single is not None:
        sources, columns = single
        return tuple(_unused_of_select(cast(exp.Select, tree), sources, columns))
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
            sources = {alias: node for alias, (node, _source) in scope.selected_sources.items()}
        except SqlglotError:
            continue
        unused.extend(_unused_of_select(select, sources, scope.columns))
    return tuple(unused)


SCOPE_BREAKERS: tuple[type[exp.Expr], ...] = (
    exp.Query,
    exp.CTE,
    exp.UDTF,
    exp.Lateral,
    exp.Pivot,
    exp.JoinHint,
    exp.Dot,
)
"""Nodes that below a tree's root may start or shape another scope of sqlglot's scope traversal
(subqueries, derived tables, set operations, CTEs, table functions, pivots) or hide columns
(struct access): :func:`unused_join_tables` leaves a tree holding one to sqlglot's scopes."""


def one_scope_nodes(tree: exp.Expr) -> tuple[list[exp.Column], list[exp.Table]] | None:
    """The columns and tables of ``tree`` in walk order (breadth first), or ``None`` when a node
    of :data:`SCOPE_BREAKERS` is below its root (one walk of the tree).

    >>> import sqlglot
    >>> [len(found) for found in one_scope_nodes(sqlglot.parse_one("SELECT a.x FROM a JOIN b ON a.id = b.id"))]
    [3, 2]
    >>> one_scope_nodes(sqlglot.parse_one("SELECT a.x FROM a WHERE a.y IN (SELECT b.y FROM b)")) is None
    True
    """
    columns: list[exp.Column] = []
    tables: list[exp.Table] = []
    for node in tree.find_all(exp.Column, exp.Table, *SCOPE_BREAKERS):
        if isinstance(node, exp.Column):
            columns.append(node)
        elif isinstance(node, exp.Table):
            tables.append(node)
        elif node is not tree:
            return None
    return columns, tables


def _single_scope(
    tree: exp.Expr, columns: Sequence[exp.Column], tables: Sequence[exp.Table]
) -> tuple[dict[str, exp.Expr], list[exp.Column]] | None:
    """The selected sources (alias -> table, in sqlglot's order) and the scope's columns of a tree
    with no node of :data:`SCOPE_BREAKERS` below its root (``columns`` and ``tables``: all of its
    columns and tables, in walk order), when sqlglot's scope traversal would see it as one scope
    whose columns are all qualified: a SELECT with joins, no SEMI/ANTI join, tables only as
    FROM/JOIN sources (so breadth-first order is sqlglot's depth-first order), every column
    qualified. ``None``: any other tree.

    Two sources of one name make sqlglot refuse the scope (``Alias already used``), and
    :func:`unused_join_tables` then skips it: no sources are returned for them.
    """
    if type(tree) is not exp.Select or not tree.args.get("joins"):
        return None
    if any(join.is_semi_or_anti_join for join in tree.args["joins"]):
        return None
    scope_columns: list[exp.Column] = []
    for column in columns:
        if type(column) is not exp.Column or not column.table:
            return None
        if not isinstance(column.this, exp.Star):  # "T1.*" is a star of the scope, not a column
            scope_columns.append(column)
    sources: dict[str, exp.Expr] = {}
    for table in tables:
        if (
            type(table) is not exp.Table
            or not isinstance(table.parent, (exp.From, exp.Join))
            or table.parent.parent is not tree
            or table.args.get("joins")
            or table.args.get("pivots")
        ):
            return None
        if table.alias_or_name in sources:
            return {}, scope_columns
        sources[table.alias_or_name] = table
    return sources, scope_columns


def _unused_of_select(select: exp.Select, sources: dict[str, exp.Expr], columns: list[exp.Column]) -> list[str]:
    """The unused joined tables of one SELECT with joins, given its selected sources (alias ->
    table or derived table) and its scope's columns (see :func:`unused_join_tables`)."""
    joins = select.args.get("joins") or []
    if len(sources) < 2:
        return []
    # the cheap test first: which tables have a column outside the join conditions
    used_outside_join: set[str] = set()
    # this SELECT's columns under one of its joins: a join nested in a join is in its subtree; a
    # join inside a subquery or derived table is another scope's, and so are its columns
    in_joins = {id(column) for join in joins for column in join.find_all(exp.Column)}
    for column in columns:
        if not column.table:
            return []  # an unqualified column cannot be attributed: the scope is skipped
        if id(column) not in in_joins:
            used_outside_join.add(column.table.lower())  # unquoted names are case-insensitive
    if any(isinstance(p, exp.Star) and not p.args.get("table") for p in select.expressions):
        return []
    candidates = [
        (alias, node)
        for alias, node in sources.items()
        if alias.lower() not in used_outside_join and isinstance(node, exp.Table)
    ]
    if candidates and not _counts_join_rows(select):
        return _unused_candidates(select, joins, candidates)
    return []


def _counts_join_rows(select: exp.Select) -> bool:
    """COUNT(*) or COUNT(x) of this SELECT (projected, in HAVING or ORDER BY; not COUNT(DISTINCT …),
    not in a subquery): it counts the join's rows, so every joined table shapes the answer."""
    return any(
        not isinstance(c.this, exp.Distinct) and c.find_ancestor(exp.Select) is select
        for c in select.find_all(exp.Count)
    )


def _unused_candidates(select: exp.Select, joins: list[exp.Join], candidates: list[tuple[str, exp.Table]]) -> list[str]:
    """The tables of ``candidates`` (alias, table: no column outside the join conditions) that are
    neither a bridge between two other tables (a link table) nor used as ``alias.*``."""
    partners: dict[str, set[str]] = {}
    for join in joins:
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
    unused: list[str] = []
    for alias, node in candidates:
        if len(partners.get(alias.lower(), ())) >= 2:
            continue  # a bridge (a link table) joining two others: the path goes through it
        if any(
            isinstance(star.parent, exp.Column) and star.parent.table.lower() == alias.lower()
            for star in select.find_all(exp.Star)
        ):
            continue  # "alias.*" uses the table
        unused.append(node.name.lower())
    return unused
