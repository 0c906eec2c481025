"""What the answer SQL S does against the app's schema, when the team gave one (DESIGN.md §9).

:func:`check_against_schema` walks the parsed answer once per SELECT scope (sqlglot's scope
traversal resolves aliases, CTEs and derived tables) and reports, with the clause and the text as
written in S:

* tables the schema does not have (CTE names and derived tables are not tables);
* columns no source of their scope has (qualified: the named table lacks it; unqualified: no
  table of the scope, no derived table, no projection alias and no outer scope has it), and
  unqualified columns that two tables of the scope have (the database rejects them as ambiguous);
* join equalities between two tables on a pair of columns that is not a declared key pair
  (foreign key with the key it references, or two single-column primary keys), joins of two
  primary keys that no foreign key relates (``cards.id = sets.id``: two entities' own ids; kept
  apart, the schema's foreign keys show how the tables relate), and joins of columns whose
  types differ (text = integer);
* literals that do not fit the column they are compared with (a non-numeric string against a
  numeric column, a bare number against a date);
* SUM or AVG over a text column;
* ``IS NULL`` on a column declared ``NOT NULL`` or primary key (never true);
* COUNTs without DISTINCT over a join whose counted table fans out: some join reached from the
  counted table (or, for ``COUNT(*)``, from every table) goes to a column that is not its
  table's single-column primary key, so one row can meet several (``count_fanouts``); a COUNT
  whose every join from the counted table lands on a primary key counts each row once
  (``counts_checked`` counts both kinds).

Nothing is executed. The result is a frozen :class:`stef.models.SchemaReport`; the judge turns its items into
suspected errors, and the with-schema calibrator counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope

from stef.models import SchemaReport
from stef.pipeline.named_columns import named_columns_unused
from stef.pipeline.schema import ColumnSchema, DatabaseSchema, TableSchema, identifier_key
from stef.pipeline.sql_trees import render, tree_scopes

NUMERIC_FAMILIES = frozenset({"integer", "number"})
DATE_FAMILIES = frozenset({"date", "datetime"})
COMPARISON_TYPES: tuple[type[exp.Expr], ...] = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
"""Comparisons whose literal side is checked against the column's type."""


def _clause_of(node: exp.Expr, stop: exp.Expr) -> str:
    """The clause of the SELECT ``stop`` that holds ``node`` (``WHERE``, ``JOIN ON`` ...)."""
    current: exp.Expr | None = node
    while current is not None and current is not stop:
        parent = current.parent
        key = cast(str, current.arg_key)  # set on every node that has a parent
        if isinstance(parent, exp.Join) and key == "on":
            return "JOIN ON"
        if parent is stop:
            return {
                "where": "WHERE",
                "having": "HAVING",
                "group": "GROUP BY",
                "order": "ORDER BY",
                "expressions": "SELECT",
                "joins": "JOIN",
                "qualify": "QUALIFY",
                "from": "FROM",
                "from_": "FROM",
            }.get(key, key.upper().rstrip("_"))
        current = parent
    return "SELECT"


@dataclass
class _Resolver:
    """Column resolution within one scope, against the schema."""

    scope: Scope
    schema: DatabaseSchema

    def tables(self) -> dict[str, TableSchema | None]:
        """alias key -> schema table (``None``: a derived table, a CTE or an unknown table)."""
        found: dict[str, TableSchema | None] = {}
        for alias, (node, source) in self.scope.selected_sources.items():
            found[identifier_key(alias)] = (
                self.schema.table(node.name) if isinstance(node, exp.Table) and not isinstance(source, Scope) else None
            )
        return found

    def derived_outputs(self) -> dict[str, frozenset[str] | None]:
        """alias key -> output column keys of a derived table / CTE source (``None``: has a star)."""
        outputs: dict[str, frozenset[str] | None] = {}
        for alias, (_node, source) in self.scope.selected_sources.items():
            if isinstance(source, Scope):
                select = source.expression
                if isinstance(select, exp.Select) and not any(
                    isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
                    for e in select.expressions
                ):
                    outputs[identifier_key(alias)] = frozenset(identifier_key(name) for name in select.named_selects)
                elif isinstance(select, exp.SetOperation):
                    left = select.left if isinstance(select.left, exp.Select) else None
                    outputs[identifier_key(alias)] = (
                        frozenset(identifier_key(n) for n in left.named_selects) if left is not None else None
                    )
                else:
                    outputs[identifier_key(alias)] = None
        return outputs


def _outer_has_column(scope: Scope, schema: DatabaseSchema, name: str) -> bool:
    """Whether a scope enclosing ``scope`` can provide the unqualified column ``name`` (a
    correlated subquery), or does not know its columns."""
    parent = scope.parent
    while parent is not None:
        resolver = _Resolver(parent, schema)
        for table in resolver.tables().values():
            if table is None or not table.columns_known or table.column(name) is not None:
                return True
        parent = parent.parent
    return False


def _resolve(
    column: exp.Column,
    tables: dict[str, TableSchema | None],
    outputs: dict[str, frozenset[str] | None],
    aliases: frozenset[str],
) -> tuple[str, ColumnSchema | None, TableSchema | None, bool]:
    """``(state, column, table, resolved)`` where state is ``known`` / ``unknown`` / ``outer`` /
    ``unchecked`` (a derived table with a star, a table without known columns ...)."""
    name = identifier_key(column.name)
    qualifier = identifier_key(column.table) if column.table else ""
    if qualifier:
        if qualifier in outputs:
            names = outputs[qualifier]
            return ("known" if names is None or name in names else "unknown"), None, None, False
        if qualifier not in tables:
            return "outer", None, None, False  # a correlated reference to an enclosing scope
        table = tables[qualifier]
        if table is None or not table.columns_known:
            return "unchecked", None, None, False
        found = table.column(name)
        return ("known", found, table, True) if found is not None else ("unknown", None, table, False)
    candidates = [(t, t.column(name)) for t in tables.values() if t is not None]
    hits = [(t, c) for t, c in candidates if c is not None]
    if len(hits) >= 1:
        table, found = hits[0]
        return "known", found, table, len(hits) == 1
    if any(t is None or not t.columns_known for t in tables.values()) or any(
        names is None or name in names for names in outputs.values()
    ):
        return "unchecked", None, None, False
    if name in aliases:
        return "known", None, None, False
    return "unknown", None, None, False


def _literal_mismatch(column: ColumnSchema, literal: exp.Literal) -> str | None:
    """Why ``literal`` does not fit ``column``'s type, or ``None``."""
    if column.family in NUMERIC_FAMILIES and literal.is_string:
        text = literal.this.strip()
        try:
            float(text)
        except ValueError:
            return f"{column.name} is {column.family}"
        return None
    if column.family in DATE_FAMILIES and not literal.is_string:
        return f"{column.name} is a {column.family}, compared with the number {literal.this}"
    return None


_DOUBLE_QUOTED_STRINGS = frozenset({"", "sqlite"})
"""Dialects in which a double-quoted name that no table has is read as a string (SQLite's legacy
rule; the generic dialect, of an unknown engine, gets the benefit of the doubt). sqlglot's MySQL
reads ``"..."`` as a string already: a quoted name there is in backticks, always a name."""

_VALUE_POSITIONS = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Like,
    exp.ILike,
    exp.In,
    exp.Between,
    exp.If,
    exp.Case,
    exp.DPipe,
)
"""Expressions in which a string value stands where a column could: the operands of a comparison,
the values of a ``CASE`` (``THEN "yes"``) and the parts of a ``||`` concatenation."""


def _string_in_double_quotes(column: exp.Column, dialect: str) -> bool:
    """Whether ``column``, a name no table has, reads as a string literal: double-quoted (not in
    backticks or brackets), in a dialect that reads it so (:data:`_DOUBLE_QUOTED_STRINGS`), and
    where a string value stands (:data:`_VALUE_POSITIONS`: ``name = "Brazil"``, ``THEN "yes"``;
    ``AVG("lifeexpectancy")`` averages a string there, a misspelled column).

    >>> import sqlglot
    >>> tree = sqlglot.parse_one('SELECT AVG("x") FROM t WHERE name = "Brazil"', read="sqlite")
    >>> [(c.name, _string_in_double_quotes(c, "sqlite")) for c in tree.find_all(exp.Column)]
    [('x', False), ('name', False), ('Brazil', True)]
    >>> _string_in_double_quotes(tree.find_all(exp.Column).__next__(), "postgres")
    False
    """
    identifier = column.this
    if not (isinstance(identifier, exp.Identifier) and identifier.quoted) or dialect not in _DOUBLE_QUOTED_STRINGS:
        return False
    parent = column.parent
    return isinstance(parent, _VALUE_POSITIONS)


def check_against_schema(
    tree: exp.Expr,
    schema: DatabaseSchema,
    question: str = "",
    table_names: tuple[str, ...] | None = None,
    dialect: str = "",
) -> SchemaReport:
    """Check the answer S against ``schema`` (see the module docstring).

    Args:
        tree: the parsed answer statement (not modified).
        schema: the app's schema.
        question: Q_u and Q_e, for the columns the question names (``""``: not checked).
        table_names: the tables S reads, when the caller has them (``SQLSpec.tables``); else
            read from the tree.
        dialect: the dialect S was parsed in: evidence is written in it, as the agent wrote S
            (``""``: sqlglot's generic dialect).

    Returns:
        A :class:`SchemaReport`; empty when S cannot be scoped (the findings need sqlglot's
        scope analysis).

    >>> import sqlglot
    >>> from stef.pipeline.schema import parse_ddl
    >>> schema = parse_ddl("CREATE TABLE pets (pet_id INT PRIMARY KEY, kind TEXT, age INT);"
    ...                    "CREATE TABLE owners (id INT PRIMARY KEY, pet_id INT REFERENCES pets (pet_id), name TEXT)", "sqlite")
    >>> report = check_against_schema(sqlglot.parse_one(
    ...     "SELECT T2.name, SUM(T1.kind) FROM pets AS T1 JOIN owners AS T2 ON T1.age = T2.id WHERE T1.weight > 'heavy'"), schema)
    >>> report.unknown_columns, report.non_key_joins, report.text_aggregates
    (('WHERE T1.weight (pets has no column weight)',), ('JOIN ON T1.age = T2.id (not a declared key pair)',), ('SELECT SUM(T1.kind) (kind is text)',))
    """
    unknown_tables: list[str] = []
    unknown_columns: list[str] = []
    non_key: list[str] = []
    type_mismatch: list[str] = []
    literal_mismatch: list[str] = []
    text_aggregates: list[str] = []
    ambiguous: list[str] = []
    count_fanouts: list[str] = []
    non_null_order_keys: list[str] = []
    null_tests: list[str] = []
    primary_joins: list[str] = []
    tables_checked = columns_checked = joins_checked = counts_checked = 0
    try:
        scopes = tree_scopes(tree)
    except (SqlglotError, RecursionError):
        return SchemaReport()
    cte_names = {
        identifier_key(name) for scope in scopes for name in scope.cte_sources
    }  # every WITH name, from the scopes (no walk of the tree)
    seen_tables: set[int] = set()
    nested = len(scopes) > 1  # one scope: every node of the tree is its SELECT's own (no climb to the enclosing SELECT)
    for scope in scopes:
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        resolver = _Resolver(scope, schema)
        try:
            sources = dict(scope.selected_sources)
            tables = resolver.tables()
            outputs = resolver.derived_outputs()
        except SqlglotError:  # e.g. one alias used for two tables: sqlglot cannot scope the SELECT
            continue
        for node, source in sources.values():
            if isinstance(node, exp.Table) and not isinstance(source, Scope) and id(node) not in seen_tables:
                seen_tables.add(id(node))
                if identifier_key(node.name) in cte_names:
                    continue
                if schema.table(node.name) is None:
                    unknown_tables.append(
                        f"{_clause_of(node, select) if node.parent is not select else 'FROM'} {render(node, dialect)}"
                    )
                else:
                    tables_checked += 1
        aliases = frozenset(identifier_key(e.alias) for e in select.expressions if isinstance(e, exp.Alias))
        using_join = any(join.args.get("using") or join.args.get("method") for join in select.args.get("joins") or ())
        resolved: dict[int, tuple[ColumnSchema, TableSchema | None]] = {}
        for column in scope.columns:
            if isinstance(column.this, exp.Star) or (nested and _scope_select(column) is not select):
                continue  # sqlglot lists the columns of an IN (SELECT ...) subquery in the outer scope too
            state, found, table, unique = _resolve(column, tables, outputs, aliases)
            if (
                state == "known"
                and not column.table
                and not unique
                and not using_join
                and identifier_key(column.name) not in aliases
            ):
                owners = sorted(t.name for t in tables.values() if t is not None and t.column(column.name) is not None)
                ambiguous.append(f"{_clause_of(column, select)} {render(column, dialect)} (in {', '.join(owners)})")
            if (
                state == "unknown"
                and not column.table
                and (_string_in_double_quotes(column, dialect) or _outer_has_column(scope, schema, column.name))
            ):
                # a double-quoted name no table has is a string literal in SQLite and MySQL ("Brazil"); or a correlated reference
                state = "outer"
            if state == "unknown":
                owner = (
                    f"{table.name} has no column {column.name}"
                    if table is not None
                    else f"no table of this query has a column {column.name}"
                )
                unknown_columns.append(f"{_clause_of(column, select)} {render(column, dialect)} ({owner})")
            elif state == "known" and found is not None:
                columns_checked += 1
                if unique:
                    resolved[id(column)] = (found, table)
        equalities = _equalities(select, nested)
        for condition in equalities:
            left, right = condition.this, condition.expression
            if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
                continue
            a, b = resolved.get(id(left)), resolved.get(id(right))
            if a is None or b is None or a[1] is None or b[1] is None or a[1] is b[1]:
                continue
            joins_checked += 1
            if schema.has_keys and not schema.is_key_pair((a[1].name, a[0].name), (b[1].name, b[0].name)):
                non_key.append(
                    f"{_clause_of(condition, select)} {render(condition, dialect)} (not a declared key pair)"
                )
            elif schema.foreign_key_pairs and not schema.is_foreign_key_pair(
                (a[1].name, a[0].name), (b[1].name, b[0].name)
            ):
                primary_joins.append(
                    f"{_clause_of(condition, select)} {render(condition, dialect)} (two primary keys no foreign key relates)"
                )
            families = {a[0].family, b[0].family} - {"unknown"}
            if len(families) == 2 and not families <= NUMERIC_FAMILIES:
                type_mismatch.append(
                    f"{_clause_of(condition, select)} {render(condition, dialect)} ({a[0].family} = {b[0].family})"
                )
        # one walk of the SELECT for every node kind the checks below look at (each walk costs a pass over the tree)
        own_nodes = [
            node
            for node in select.find_all(*COMPARISON_TYPES, exp.Is, exp.Sum, exp.Avg, exp.Count)
            if not nested or _scope_select(node) is select
        ]
        for comparison in own_nodes:
            if type(comparison) not in COMPARISON_TYPES:
                continue
            column, literal = comparison.this, comparison.expression
            if isinstance(column, exp.Literal) and isinstance(literal, exp.Column):
                column, literal = literal, column
            if isinstance(column, exp.Column) and isinstance(literal, exp.Literal) and id(column) in resolved:
                found = resolved[id(column)][0]
                if found is not None and (why := _literal_mismatch(found, literal)) is not None:
                    literal_mismatch.append(f"{_clause_of(comparison, select)} {render(comparison, dialect)} ({why})")
        order = select.args.get("order")
        for ordered in order.expressions if order is not None else ():
            key = ordered.this
            if not isinstance(key, exp.Column):
                continue
            if id(key) in resolved:
                found = resolved[id(key)][0]
            else:  # an ORDER BY name that is also a projection: sqlglot's scope lists it with the outputs
                key_owners = [
                    t.column(key.name)
                    for alias, t in tables.items()
                    if t is not None and (not key.table or identifier_key(key.table) == alias)
                ]
                hits = [c for c in key_owners if c is not None]
                found = hits[0] if len(hits) == 1 else None
            if found is not None and found.not_null:
                non_null_order_keys.append(key.name.lower())
        fanouts, checked = _count_fanouts(
            select, resolved, [n for n in own_nodes if isinstance(n, exp.Count)], equalities, dialect
        )
        count_fanouts.extend(fanouts)
        counts_checked += checked
        outer_join = any(
            join.side for join in select.args.get("joins") or ()
        )  # an anti-join tests the outer side IS NULL
        for test in own_nodes if not outer_join else ():
            if (
                not isinstance(test, exp.Is)
                or not isinstance(test.expression, exp.Null)
                or isinstance(test.parent, exp.Not)
            ):
                continue
            column = test.this
            if (
                isinstance(column, exp.Column)
                and id(column) in resolved
                and (tested := resolved[id(column)][0]) is not None
                and tested.not_null
            ):
                null_tests.append(
                    f"{_clause_of(test, select)} {render(test, dialect)} ({tested.name} is NOT NULL or a primary key: never true)"
                )
        for aggregate in own_nodes:
            if not isinstance(aggregate, (exp.Sum, exp.Avg)):
                continue
            target = aggregate.this
            if isinstance(target, exp.Distinct) and target.expressions:
                target = target.expressions[0]
            if isinstance(target, exp.Column) and id(target) in resolved:
                found = resolved[id(target)][0]
                if found is not None and found.family == "text":
                    text_aggregates.append(
                        f"{_clause_of(aggregate, select)} {render(aggregate, dialect)} ({found.name} is text)"
                    )
    return SchemaReport(
        source=schema.source,
        named_columns_unused=named_columns_unused(tree, schema, question, table_names) if question else (),
        unknown_tables=tuple(dict.fromkeys(unknown_tables)),
        unknown_columns=tuple(dict.fromkeys(unknown_columns)),
        ambiguous_columns=tuple(dict.fromkeys(ambiguous)),
        non_key_joins=tuple(dict.fromkeys(non_key)),
        join_type_mismatches=tuple(dict.fromkeys(type_mismatch)),
        literal_type_mismatches=tuple(dict.fromkeys(literal_mismatch)),
        text_aggregates=tuple(dict.fromkeys(text_aggregates)),
        count_fanouts=tuple(dict.fromkeys(count_fanouts)),
        non_null_order_keys=tuple(dict.fromkeys(non_null_order_keys)),
        impossible_null_tests=tuple(dict.fromkeys(null_tests)),
        primary_key_joins=tuple(dict.fromkeys(primary_joins)),
        counts_checked=counts_checked,
        tables_checked=tables_checked,
        columns_checked=columns_checked,
        joins_checked=joins_checked,
    )


def _scope_select(node: exp.Expr) -> exp.Expr | None:
    """The nearest enclosing SELECT of ``node``."""
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        parent = parent.parent
    return parent


def _is_primary_key(column: ColumnSchema, table: TableSchema) -> bool:
    return len(table.primary_key) == 1 and identifier_key(table.primary_key[0]) == identifier_key(column.name)


def _count_fanouts(
    select: exp.Select,
    resolved: Mapping[int, tuple[ColumnSchema | None, TableSchema | None]],
    own_counts: list[exp.Count] | None = None,
    equalities: list[exp.EQ] | None = None,
    dialect: str = "",
) -> tuple[list[str], int]:
    """The COUNTs (without DISTINCT) of a joined SELECT that may count a row twice, and how many
    COUNTs could be judged (see the module docstring).

    The join graph has one node per table alias and one edge per equality of two resolved,
    qualified columns of different aliases; going from alias X to alias Y is safe when Y's
    column is Y's single-column primary key (each X row meets at most one Y row). A COUNT is
    judged only when every alias of the SELECT is in one connected graph.
    """
    joins = select.args.get("joins") or ()
    if not joins:
        return [], 0
    if own_counts is None:
        own_counts = [c for c in select.find_all(exp.Count) if _scope_select(c) is select]
    counts = [c for c in own_counts if not isinstance(c.this, exp.Distinct)]
    if not counts:
        return [], 0
    aliases: set[str] = set()
    for table in (select.args.get("from_") or select.args.get("from"), *joins):
        if table is not None and isinstance(table.this, exp.Table):
            aliases.add(identifier_key(table.this.alias_or_name))
        elif table is not None:
            return [], 0  # a derived table or a function source: rows not known from the schema
    edges: dict[str, list[tuple[str, bool]]] = {alias: [] for alias in aliases}
    for condition in equalities if equalities is not None else _equalities(select):
        left, right = condition.this, condition.expression
        if not (isinstance(left, exp.Column) and isinstance(right, exp.Column) and left.table and right.table):
            continue
        a, b = resolved.get(id(left)), resolved.get(id(right))
        la, ra = identifier_key(left.table), identifier_key(right.table)
        if (
            a is None
            or b is None
            or a[0] is None
            or b[0] is None
            or a[1] is None
            or b[1] is None
            or la == ra
            or la not in edges
            or ra not in edges
        ):
            continue
        edges[la].append((ra, _is_primary_key(b[0], b[1])))
        edges[ra].append((la, _is_primary_key(a[0], a[1])))

    def fans_out(root: str) -> str | None:
        """The first join where rows of ``root`` can meet several rows ("x -> y"), ``""`` when
        none can, ``None`` when the join graph does not connect every alias."""
        seen, stack, unsafe = {root}, [root], ""
        while stack:
            alias = stack.pop()
            for other, safe in edges[alias]:
                if other in seen:
                    continue
                seen.add(other)
                stack.append(other)
                if not safe and not unsafe:
                    unsafe = f"{alias} -> {other}"
        return None if seen != aliases else unsafe

    fanouts: list[str] = []
    checked = 0
    for count in counts:
        target = count.this
        if isinstance(target, exp.Column) and target.table and identifier_key(target.table) in edges:
            verdict = fans_out(identifier_key(target.table))
        elif isinstance(target, exp.Star) or target is None:
            verdicts = [fans_out(alias) for alias in sorted(aliases)]
            verdict = None if None in verdicts else ("" if "" in verdicts else verdicts[0])
        else:
            verdict = None
        if verdict is None:
            continue
        checked += 1
        if verdict:
            fanouts.append(
                f"{_clause_of(count, select)} {render(count, dialect)} (one {verdict.split(' -> ')[0]} row can join several {verdict.split(' -> ')[1]} rows)"
            )
    return fanouts, checked


def _equalities(select: exp.Select, nested: bool = True) -> list[exp.EQ]:
    """Column equalities of a SELECT's own JOIN ON and WHERE clauses (implicit joins), not of
    its subqueries (``nested=False``: the caller knows the SELECT has none)."""
    found: list[exp.EQ] = []
    places: list[exp.Expr] = [
        join.args["on"] for join in select.args.get("joins") or () if join.args.get("on") is not None
    ]
    where = select.args.get("where")
    if where is not None:
        places.append(where)
    for place in places:
        found.extend(eq for eq in place.find_all(exp.EQ) if not nested or _scope_select(eq) is select)
    return found
