"""Tests of the observed catalogs (stef.pipeline.observed): facts of a query, learning what an app
uses, checking an answer against it, catalog files, the CLI and the nightly flow.
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from typer.testing import CliRunner

from flows.cli.main import app
from stef.models import EVALUATOR_VERSION, MIN_QUERIES, OBSERVED_VERSION_SUFFIX, AgentLogRecord, ObservedCatalogBook
from stef.pipeline.evaluate import evaluate, evaluate_many
from stef.pipeline.observed import (
    ObservedCatalogError,
    check_against_observed,
    learn_catalog,
    learn_catalogs,
    load_observed_catalogs,
    sql_facts,
)

JOIN = "SELECT T2.name FROM pets AS T1 JOIN owners AS T2 ON T1.pet_id = T2.pet_id WHERE T1.kind = 'cat'"
TRAFFIC = (
    [(JOIN, "sqlite")] * 8
    + [("SELECT name, age FROM owners WHERE age > 30", "sqlite")] * 4
    + [("SELECT COUNT(*) FROM pets", "sqlite")] * 3
)


@pytest.fixture(scope="module")
def catalog() -> Any:
    return learn_catalog("shop", TRAFFIC, "test traffic")


def test_facts_resolve_aliases_and_attribute_unqualified_columns_only_in_one_table_scopes() -> None:
    facts = sql_facts(
        sqlglot.parse_one(
            "SELECT name FROM pets AS p JOIN owners AS o ON p.pet_id = o.pet_id WHERE o.age > 3 AND kind = 'x'"
        )
    )
    assert facts.tables == frozenset({"pets", "owners"})
    assert facts.columns == frozenset(
        {("pets", "pet_id"), ("owners", "pet_id"), ("owners", "age")}
    )  # name and kind: which table?
    assert list(facts.joins) == ["owners.pet_id=pets.pet_id"]
    single = sql_facts(sqlglot.parse_one("SELECT name FROM pets WHERE kind IN ('cat', 'dog')"))
    assert single.columns == frozenset({("pets", "name"), ("pets", "kind")}) and single.values == (
        ("pets", "kind", "cat"),
        ("pets", "kind", "dog"),
    )


def test_learning_counts_answers(catalog: Any) -> None:
    assert (catalog.queries, catalog.tables) == (15, {"owners": 12, "pets": 11})
    assert catalog.joins == {"owners.pet_id=pets.pet_id": 8}
    assert catalog.columns["owners.age"] == 4 and catalog.values == {"pets.kind": {"cat": 8}}


@pytest.mark.parametrize(
    ("sql", "field", "expected"),
    [
        pytest.param(
            "SELECT T2.name FROM pets AS T1 JOIN owners AS T2 ON T1.pet_id = T2.owner_id",
            "unseen_joins",
            ("T1.pet_id = T2.owner_id (never seen in the 11 answers that read owners and pets)",),
            id="unseen_join_pair",
        ),
        pytest.param(
            "SELECT T2.name FROM pets AS T1 JOIN owners AS T2 ON T1.pet_id = T2.owner_id",
            "unseen_columns",
            ("owners.owner_id",),
            id="unseen_column",
        ),
        pytest.param("SELECT name FROM vets", "unseen_tables", ("vets",), id="unseen_table"),
    ],
)
def test_an_answer_is_compared_with_what_the_app_used(
    catalog: Any, sql: str, field: str, expected: tuple[str, ...]
) -> None:
    assert getattr(check_against_observed(sqlglot.parse_one(sql, read="sqlite"), catalog), field) == expected


def test_a_known_answer_has_no_finding_and_few_uses_prove_nothing(catalog: Any) -> None:
    report = check_against_observed(sqlglot.parse_one(JOIN, read="sqlite"), catalog)
    assert (report.unseen_tables, report.unseen_columns, report.unseen_joins) == ((), (), ())
    sparse = learn_catalog("shop", [(JOIN, "sqlite")] * 2)
    report = check_against_observed(
        sqlglot.parse_one("SELECT T2.x FROM pets AS T1 JOIN owners AS T2 ON T1.a = T2.b"), sparse
    )
    assert report.unseen_joins == () and report.unseen_columns == ()  # two answers are too few to tell


def test_catalogs_need_enough_answers_and_carry_the_evaluator_version(catalog: Any) -> None:
    book = ObservedCatalogBook({"shop": catalog, "tiny": learn_catalog("tiny", TRAFFIC[: MIN_QUERIES - 1])})
    assert book.for_app("shop") is catalog and book.for_app("tiny") is None and book.for_app(None) is None
    records = [
        AgentLogRecord(run_id="a", app_id="shop", question="Who owns a cat?", sql=JOIN, dialect="sqlite"),
        AgentLogRecord(
            run_id="b",
            app_id="shop",
            question="Who owns a cat?",
            sql=JOIN.replace("T2.pet_id", "T2.owner_id"),
            dialect="sqlite",
        ),
        AgentLogRecord(run_id="c", app_id="tiny", question="Who owns a cat?", sql=JOIN, dialect="sqlite"),
    ]
    good, bad, cold = evaluate_many(records, observed=book)
    assert {good.evaluator_version, bad.evaluator_version, cold.evaluator_version} == {
        EVALUATOR_VERSION + OBSERVED_VERSION_SUFFIX
    }
    assert good.observed_report is not None and cold.observed_report is None
    assert bad.observed_report is not None and bad.observed_report.unseen_joins
    assert any(
        e.subcategory == "Join Condition Mismatch" and "new to this app" in e.evidence for e in bad.suspected_errors
    )
    assert bad.p_correct is not None and good.p_correct is not None and bad.p_correct < good.p_correct
    assert "calib-observed" in (good.rationale or "")


def test_a_schema_and_an_observed_catalog_are_both_checked_and_weighed_together(catalog: Any) -> None:
    from stef.pipeline.schema import parse_ddl

    schema = parse_ddl(
        "CREATE TABLE pets (pet_id INT PRIMARY KEY, kind TEXT); CREATE TABLE owners (owner_id INT PRIMARY KEY, name TEXT, pet_id INT REFERENCES pets (pet_id))",
        "sqlite",
    )
    evaluation = evaluate(
        AgentLogRecord(run_id="s", question="Who owns a cat?", sql=JOIN, dialect="sqlite"),
        schema=schema,
        observed=catalog,
    )
    assert evaluation.schema_report is not None and evaluation.observed_report is not None
    assert "calib-schema-observed" in (evaluation.rationale or "")


def test_catalog_files_round_trip_and_bad_files_are_clear_errors(catalog: Any, tmp_path: Path) -> None:
    path = tmp_path / "observed.json"
    path.write_text(ObservedCatalogBook({"shop": catalog}).to_json(), encoding="utf-8")
    assert load_observed_catalogs(path).catalogs["shop"] == catalog
    path.write_text(json.dumps({"apps": {}}), encoding="utf-8")
    with pytest.raises(ObservedCatalogError, match="not an observed catalog file"):
        load_observed_catalogs(path)
    path.write_text(json.dumps({"format": "stef-observed-catalog", "apps": {"shop": {"queries": 3}}}), encoding="utf-8")
    with pytest.raises(ObservedCatalogError, match=r"app 'shop': field `app_id`"):
        load_observed_catalogs(path)


def test_learn_catalogs_groups_records_by_app() -> None:
    book = learn_catalogs(
        [
            {"app_id": "shop", "sql": JOIN},
            {"app_id": "../x", "sql": JOIN},
            {"app_id": None, "sql": JOIN},
            {"app_id": "zoo", "sql": "not sql"},
        ]
    )
    assert sorted(book.catalogs) == ["shop", "zoo"] and book.catalogs["zoo"].queries == 0


def test_stef_catalog_learn_with_nothing_to_learn_fails_and_writes_nothing(tmp_path: Path) -> None:
    logs = tmp_path / "day.jsonl"
    line = {"run_id": "r1", "question": "Who owns a cat?", "sql": JOIN, "dialect": "sqlite"}  # no app_id
    logs.write_text(json.dumps(line) + "\n", encoding="utf-8")
    catalog_file = tmp_path / "observed.json"
    runner = CliRunner()
    from_logs = runner.invoke(app, ["catalog", "learn", str(logs), "--out", str(catalog_file)])
    assert from_logs.exit_code == 2, from_logs.output
    assert f"error: nothing to learn from {logs}: no answer with an app_id and SQL; " in from_logs.stderr
    from warehouse import connect

    warehouse_file = tmp_path / "wh.duckdb"
    connect(warehouse_file).close()
    window = ["--start", "2026-11-01", "--end", "2026-11-07"]
    from_warehouse = runner.invoke(
        app, ["catalog", "learn", "--warehouse", str(warehouse_file), *window, "--out", str(catalog_file)]
    )
    assert from_warehouse.exit_code == 2, from_warehouse.output
    assert "nothing to learn from warehouse answers 2026-11-01 … 2026-11-07" in from_warehouse.stderr
    assert "(--start/--end choose other days)" in from_warehouse.stderr
    assert not catalog_file.exists()


def test_stef_catalog_learn_then_evaluate_with_it(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "2026-11-20").mkdir(parents=True)
    lines = [
        {"run_id": f"r{i}", "app_id": "shop", "question": "Who owns a cat?", "sql": sql, "dialect": "sqlite"}
        for i, (sql, _) in enumerate(TRAFFIC)
    ]
    (logs / "2026-11-20" / "day.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    catalog_file = tmp_path / "observed.json"
    runner = CliRunner()
    learned = runner.invoke(app, ["catalog", "learn", str(logs), "--out", str(catalog_file)])
    assert learned.exit_code == 0, learned.output
    assert "shop" in learned.output and load_observed_catalogs(catalog_file).catalogs["shop"].queries == len(TRAFFIC)
    source = tmp_path / "new.jsonl"
    source.write_text(
        json.dumps(
            {
                "run_id": "n",
                "app_id": "shop",
                "question": "Who owns a cat?",
                "sql": JOIN.replace("T2.pet_id", "T2.owner_id"),
                "dialect": "sqlite",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(app, ["evaluate", str(source), "--out", str(out), "--observed-catalog", str(catalog_file)])
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert row["evaluator_version"].endswith(OBSERVED_VERSION_SUFFIX) and row["observed_report"]["unseen_joins"]
    missing = runner.invoke(
        app, ["evaluate", str(source), "--out", str(out), "--observed-catalog", str(tmp_path / "none.json")]
    )
    assert missing.exit_code == 2 and "cannot read the observed catalog" in " ".join(missing.output.split())


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_the_nightly_flow_learns_the_catalogs_from_the_days_before_and_stores_each_version(tmp_path: Path) -> None:
    from flows.nightly import nightly
    from warehouse import connect

    logs = tmp_path / "logs"
    first = date(2026, 11, 20)
    for offset in range(2):
        day = first + timedelta(days=offset)
        (logs / day.isoformat()).mkdir(parents=True)
        lines = [
            {
                "run_id": f"d{offset}-{i}",
                "app_id": "shop",
                "question": "Who owns a cat?",
                "sql": sql,
                "dialect": "sqlite",
            }
            for i, (sql, _) in enumerate(TRAFFIC)
        ]
        (logs / day.isoformat() / "day.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8"
        )
    warehouse = tmp_path / "stef.duckdb"
    settings = {"logs_root": str(logs), "warehouse": str(warehouse), "learn_catalog": True}
    cold = nightly(log_date=first, **settings)
    warm = nightly(log_date=first + timedelta(days=1), **settings)
    assert cold.evaluator_version == warm.evaluator_version == EVALUATOR_VERSION + OBSERVED_VERSION_SUFFIX
    with connect(warehouse, read_only=True) as conn:
        versions = conn.execute(
            "SELECT app_id, version, learned_for, queries FROM observed_catalogs ORDER BY version"
        ).fetchall()
        reports = conn.execute(
            "SELECT log_date, count(*) FILTER (WHERE evidence->>'$.observed_report' IS NOT NULL AND evidence->>'$.observed_report' <> 'null') "
            "FROM evaluations GROUP BY log_date ORDER BY log_date"
        ).fetchall()
    assert versions == [("shop", 1, first + timedelta(days=1), len(TRAFFIC))]  # the first day had no answers before it
    assert reports == [(first, 0), (first + timedelta(days=1), len(TRAFFIC))]


def test_stef_catalog_learn_from_a_missing_warehouse_says_so(tmp_path: Path) -> None:
    """It said "IO Error: Cannot open database … in read-only mode: database does not exist"."""
    missing = tmp_path / "none.duckdb"
    result = CliRunner().invoke(
        app, ["catalog", "learn", "--warehouse", str(missing), "--out", str(tmp_path / "observed.json")]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: warehouse {missing} does not exist; run `stef nightly` or `stef backfill` first, or pass --warehouse\n"
    )
    assert list(tmp_path.iterdir()) == []
