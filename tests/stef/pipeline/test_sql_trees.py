"""Tests of stef.pipeline.sql_trees: evidence rendering in the tree's dialect, and the SQLite
generator's CAST handler, which must write every cast exactly as sqlglot's SQLite generator does.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.generators.sqlite import SQLiteGenerator

from stef.pipeline.sql_trees import _generator, render


def _sqlglot_sqlite(node: exp.Expr) -> str:
    """What sqlglot's own SQLite generator (a new one, its class's dispatch table) writes, or the
    error it raises."""
    try:
        return Dialect.get_or_raise("sqlite").generator(comments=False).generate(node, copy=True)
    except Exception as error:  # compared, not hidden: both sides must fail alike
        return f"error: {type(error).__name__}"


def _stef_sqlite(node: exp.Expr) -> str:
    try:
        return render(node, "sqlite")
    except Exception as error:
        return f"error: {type(error).__name__}"


def test_only_the_cached_sqlite_generator_gets_the_cast_handler() -> None:
    assert _generator("sqlite")._dispatch[exp.Cast] is not SQLiteGenerator.cast_sql
    fresh = Dialect.get_or_raise("sqlite").generator(comments=False)
    assert type(fresh) is SQLiteGenerator and fresh._dispatch[exp.Cast] is SQLiteGenerator.cast_sql  # sqlglot's own
    for dialect in ("", "postgres", "mysql", "duckdb"):
        generator = _generator(dialect)
        assert generator._dispatch[exp.Cast] is type(generator).cast_sql


def test_a_cast_to_every_type_kind_renders_as_sqlglots_sqlite_generator() -> None:
    casts = [exp.Cast(this=exp.column("x", table="t"), to=exp.DataType(this=kind)) for kind in exp.DataType.Type]
    casts += [
        sqlglot.parse_one(f"SELECT CAST(t.x AS {name})", read="sqlite").find(exp.Cast)
        for name in (
            "DATE",
            "date",
            "DATETIME(6)",
            "TIMESTAMP",
            "TIMESTAMP WITH TIME ZONE",
            "TIME",
            "REAL",
            "INTEGER",
            "TEXT",
            "VARCHAR(9)",
            "DECIMAL(10, 2)",
            "my_type",
            '"date"',
            "BLOB",
        )
    ]
    casts.append(exp.Cast(this=exp.column("x"), to=exp.DataType(this=exp.DataType.Type.USERDEFINED, kind="date")))
    casts += [
        exp.Cast(this=exp.column("x"), to=to) for to in (exp.to_identifier("date"), exp.column("d"))
    ]  # no DataType
    casts += [exp.TryCast(this=exp.column("x"), to=exp.DataType.build("date")), exp.cast(exp.column("x"), "DATE")]
    mismatches = [
        (repr(cast), _stef_sqlite(cast), _sqlglot_sqlite(cast))
        for cast in casts
        if cast is not None and _stef_sqlite(cast) != _sqlglot_sqlite(cast)
    ]
    assert len(casts) > len(exp.DataType.Type) + 10
    assert mismatches == []


def test_every_bundled_answer_renders_as_sqlglots_sqlite_generator() -> None:
    """Each projection and each CAST of the bundled demo answers (BIRD, SQLite)."""
    from tests.support.demo_records import demo_source_records

    projections = casts = 0
    mismatches: list[str] = []
    for row in demo_source_records():
        try:
            tree = sqlglot.parse_one(row["sql"], read="sqlite")
        except sqlglot.errors.SqlglotError:
            continue  # an answer that is not SQLite (its records are parse errors)
        found = list(tree.find_all(exp.Cast))
        projections, casts = projections + len(tree.expressions), casts + len(found)
        for node in [*found, *tree.expressions]:
            if _stef_sqlite(node) != _sqlglot_sqlite(node):
                mismatches.append(f"{_stef_sqlite(node)} != {_sqlglot_sqlite(node)}")
    assert projections > 300 and casts > 20
    assert mismatches == []
