"""The observed catalog: what an app's own SQL traffic says about its database, when no schema is given.

Without a schema, STEF can still learn from the answers it has already seen for an app which
tables exist, which columns each table has, which column pairs join two tables and how often
each is used (DESIGN.md §9). :func:`learn_catalog` builds an :class:`ObservedCatalog` from SQL
texts; :func:`check_against_observed` compares one answer with it. Counts matter: a join pair
never seen in 500 answers that joined the same two tables is suspicious, one never seen in 5 is
not, so every finding needs :data:`MIN_TABLE_USES` uses of the tables involved.

Facts are read per SELECT scope with sqlglot's scope analysis: table aliases are resolved; an
unqualified column is attributed to a table only when its SELECT reads one table (without a
schema nothing else tells which table it belongs to). Names are casefolded.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope

from stef.config_files import read_config_text
from stef.errors import StefError, UnknownDialectError
from stef.models import (
    CATALOG_FORMAT,
    ObservedCatalog,
    ObservedCatalogBook,
    ObservedReport,
)
from stef.pipeline.clean import parse_sql
from stef.pipeline.dialects import resolve_dialect
from stef.pipeline.rules import is_rule_file_name
from stef.pipeline.sql_trees import render, tree_scopes

MIN_TABLE_USES = 5
"""Uses of a table (answers that read it) before its unseen columns or joins count as findings."""
MAX_VALUES_PER_COLUMN = 50
"""Distinct literal values kept per column (the most frequent)."""


class ObservedCatalogError(StefError):
    """An observed catalog file that cannot be read (the message names it)."""


def _pair_key(left: tuple[str, str], right: tuple[str, str]) -> str:
    """``"t1.c1=t2.c2"`` with the two sides in sorted order."""
    a, b = sorted([f"{left[0]}.{left[1]}", f"{right[0]}.{right[1]}"])
    return f"{a}={b}"


@dataclass(frozen=True, slots=True)
class SqlFacts:
    """What one answer reads: tables, ``(table, column)`` pairs, join pairs (:func:`_pair_key`)
    with their SQL text, and ``(table, column, value)`` literals compared with ``=`` / ``IN``."""

    tables: frozenset[str]
    columns: frozenset[tuple[str, str]]
    joins: dict[str, str]
    values: tuple[tuple[str, str, str], ...]


def sql_facts(tree: exp.Expr) -> SqlFacts:
    """The facts of a parsed answer (see the module docstring for how columns are attributed).

    >>> import sqlglot
    >>> facts = sql_facts(sqlglot.parse_one("SELECT T2.name FROM pets AS T1 JOIN owners AS T2 ON T1.id = T2.pet_id WHERE T1.kind = 'cat'"))
    >>> sorted(facts.tables), sorted(facts.joins), facts.values
    (['owners', 'pets'], ['owners.pet_id=pets.id'], (('pets', 'kind', 'cat'),))
    """
    tables: set[str] = set()
    columns: set[tuple[str, str]] = set()
    joins: dict[str, str] = {}
    values: list[tuple[str, str, str]] = []
    try:
        scopes = tree_scopes(tree)
    except (SqlglotError, RecursionError):
        return SqlFacts(frozenset(), frozenset(), {}, ())
    ctes = {name.casefold() for scope in scopes for name in scope.cte_sources}  # every WITH name, from the scopes
    for scope in scopes:
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        try:
            sources = dict(scope.selected_sources)
        except SqlglotError:
            continue
        alias: dict[str, str] = {}
        for name, (node, source) in sources.items():
            if isinstance(node, exp.Table) and not isinstance(source, Scope) and node.name.casefold() not in ctes:
                alias[name.casefold()] = node.name.casefold()
        tables.update(alias.values())
        single = next(iter(alias.values())) if len(alias) == 1 and len(sources) == 1 else None

        def owner(column: exp.Column, alias: dict[str, str] = alias, single: str | None = single) -> str | None:
            if column.table:
                return alias.get(column.table.casefold())
            return single

        for column in scope.columns:
            if isinstance(column.this, exp.Star) or _select_of(column) is not select:
                continue
            table = owner(column)
            if table is not None:
                columns.add((table, column.name.casefold()))
        for join in select.args.get("joins") or ():
            condition = join.args.get("on")
            for equality in condition.find_all(exp.EQ) if condition is not None else ():
                left, right = equality.this, equality.expression
                if isinstance(left, exp.Column) and isinstance(right, exp.Column):
                    a, b = owner(left), owner(right)
                    if a is not None and b is not None and a != b:
                        joins.setdefault(
                            _pair_key((a, left.name.casefold()), (b, right.name.casefold())), render(equality)
                        )
        where = select.args.get("where")
        for node in where.find_all(exp.EQ, exp.In) if where is not None else ():
            if _select_of(node) is not select or not isinstance(node.this, exp.Column):
                continue
            table = owner(node.this)
            literals = [node.expression] if isinstance(node, exp.EQ) else list(node.expressions)
            for literal in literals:
                if table is not None and isinstance(literal, exp.Literal) and literal.is_string:
                    values.append((table, node.this.name.casefold(), literal.this))
    return SqlFacts(frozenset(tables), frozenset(columns), joins, tuple(values))


def _select_of(node: exp.Expr) -> exp.Expr | None:
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        parent = parent.parent
    return parent


def learn_catalog(app_id: str, sql_texts: Iterable[tuple[str, str | None]], source: str = "") -> ObservedCatalog:
    """Learn an app's catalog from its answers' SQL.

    Args:
        app_id: the app.
        sql_texts: ``(sql, dialect)`` pairs (a dialect of ``None`` is the generic one); texts
            that do not parse, or hold no SELECT, are skipped.
        source: recorded in the catalog.

    Returns:
        The :class:`ObservedCatalog`.

    >>> catalog = learn_catalog("shop", [("SELECT name FROM pets WHERE kind = 'cat'", "sqlite")] * 3)
    >>> catalog.queries, catalog.tables, catalog.columns
    (3, {'pets': 3}, {'pets.kind': 3, 'pets.name': 3})
    """
    queries = 0
    tables: Counter[str] = Counter()
    columns: Counter[str] = Counter()
    joins: Counter[str] = Counter()
    values: dict[str, Counter[str]] = {}
    for sql, dialect in sql_texts:
        try:
            parsed = parse_sql(sql, resolve_dialect(dialect))
        except UnknownDialectError:
            continue
        if parsed.answer is None:
            continue
        facts = sql_facts(parsed.answer)
        if not facts.tables:
            continue
        queries += 1
        tables.update(facts.tables)
        columns.update(f"{t}.{c}" for t, c in facts.columns)
        joins.update(facts.joins.keys())
        for table, column, value in set(facts.values):
            values.setdefault(f"{table}.{column}", Counter())[value] += 1
    return ObservedCatalog(
        app_id=app_id,
        queries=queries,
        tables=dict(sorted(tables.items())),
        columns=dict(sorted(columns.items())),
        joins=dict(sorted(joins.items())),
        values={key: dict(counter.most_common(MAX_VALUES_PER_COLUMN)) for key, counter in sorted(values.items())},
        learned_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
        source=source,
    )


def check_against_observed(tree: exp.Expr, catalog: ObservedCatalog) -> ObservedReport:
    """Compare one answer with its app's observed catalog.

    Findings (each needs the tables involved used in :data:`MIN_TABLE_USES` answers or more):
    tables no answer read; columns of a table no answer used; join pairs no answer used while
    both tables were read that often.

    >>> import sqlglot
    >>> catalog = learn_catalog("shop", [("SELECT T2.name FROM pets AS T1 JOIN owners AS T2 ON T1.id = T2.pet_id", "sqlite")] * 10)
    >>> report = check_against_observed(sqlglot.parse_one("SELECT T2.name FROM pets AS T1 JOIN owners AS T2 ON T1.id = T2.id"), catalog)
    >>> report.unseen_joins, report.unseen_columns
    (('T1.id = T2.id (never seen in the 10 answers that read owners and pets)',), ('owners.id',))
    """
    facts = sql_facts(tree)
    unseen_tables = tuple(sorted(t for t in facts.tables if catalog.tables.get(t, 0) == 0))
    unseen_columns = tuple(
        sorted(
            f"{t}.{c}"
            for t, c in facts.columns
            if catalog.columns.get(f"{t}.{c}", 0) == 0 and catalog.tables.get(t, 0) >= MIN_TABLE_USES
        )
    )
    unseen_joins: list[str] = []
    for key, text in facts.joins.items():
        left, right = (side.split(".", 1)[0] for side in key.split("=", 1))
        uses = min(catalog.tables.get(left, 0), catalog.tables.get(right, 0))
        if catalog.joins.get(key, 0) == 0 and uses >= MIN_TABLE_USES:
            unseen_joins.append(
                f"{text} (never seen in the {uses} answers that read {' and '.join(sorted({left, right}))})"
            )
    return ObservedReport(
        source=catalog.source,
        queries=catalog.queries,
        unseen_tables=unseen_tables,
        unseen_columns=unseen_columns,
        unseen_joins=tuple(unseen_joins),
        tables_checked=len(facts.tables),
        joins_checked=len(facts.joins),
    )


def load_observed_catalogs(path: str | Path) -> ObservedCatalogBook:
    """Read an observed catalog file written by ``stef catalog learn``.

    Raises:
        ObservedCatalogError: the file cannot be read or is not such a file.
    """
    path = Path(path)
    try:
        payload = json.loads(read_config_text(path, max_bytes=256 * 1024 * 1024))
    except OSError as exc:
        raise ObservedCatalogError(f"{path}: cannot read the observed catalog ({exc.strerror or exc})") from exc
    except (ValueError, RecursionError) as exc:
        raise ObservedCatalogError(f"{path}: not an observed catalog file (not JSON: {str(exc)[:200]})") from exc
    if (
        not isinstance(payload, dict)
        or payload.get("format") != CATALOG_FORMAT
        or not isinstance(payload.get("apps"), dict)
    ):
        raise ObservedCatalogError(
            f'{path}: not an observed catalog file (expected {{"format": "{CATALOG_FORMAT}", "apps": {{...}}}}, see `stef catalog learn`)'
        )
    catalogs: dict[str, ObservedCatalog] = {}
    for app_id, document in payload["apps"].items():
        try:
            catalogs[app_id] = ObservedCatalog.model_validate(document)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ObservedCatalogError(
                f"{path}: app {app_id!r}: field `{'.'.join(str(p) for p in first['loc'])}`: {first['msg']}"
            ) from exc
    return ObservedCatalogBook(catalogs, str(path))


def learn_catalogs(records: Iterable[Mapping[str, Any]], source: str = "") -> ObservedCatalogBook:
    """Observed catalogs of every app of ``records`` (mappings with ``app_id``, ``sql`` and
    optionally ``dialect``, as log records); records without an app id that can name one are
    left out."""
    by_app: dict[str, list[tuple[str, str | None]]] = {}
    for record in records:
        app_id, sql = record.get("app_id"), record.get("sql")
        if isinstance(app_id, str) and is_rule_file_name(app_id) and isinstance(sql, str):
            dialect = record.get("dialect")
            by_app.setdefault(app_id, []).append((sql, dialect if isinstance(dialect, str) else None))
    return ObservedCatalogBook(
        {app: learn_catalog(app, texts, source) for app, texts in sorted(by_app.items())}, source
    )
