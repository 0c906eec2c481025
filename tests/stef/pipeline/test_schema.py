"""Tests of reading schemas (stef.pipeline.schema): DDL and JSON catalogs, their errors, the schema
book, the schema evaluator version and the ``stef evaluate --schema-dir`` / ``stef catalog`` commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from stef.models import EVALUATOR_VERSION, AgentLogRecord, EvaluationStatus
from stef.pipeline.evaluate import evaluate_many
from stef.pipeline.schema import SCHEMA_VERSION_SUFFIX, SchemaError, parse_catalog, parse_ddl
from stef.pipeline.schema_book import SchemaBook, load_schema_file
from tests.stef.pipeline.schemas import PETS_DDL
from tests.support.checkout import REPO_ROOT

DEMO_SCHEMAS = REPO_ROOT / "flows" / "demo_data" / "schemas"


def test_ddl_gives_tables_columns_types_keys_and_descriptions(pets: Any) -> None:
    table = pets.table("PETS")
    assert [(c.name, c.family, c.description) for c in table.columns] == [
        ("pet_id", "integer", "the pet"),
        ("kind", "text", "cat or dog"),
        ("age", "integer", None),
        ("born", "date", None),
    ]
    assert table.primary_key == ("pet_id",)
    assert pets.table("owners").foreign_keys[0].ref_table == "pets"
    assert pets.is_key_pair(("owners", "pet_id"), ("pets", "pet_id"))
    assert pets.is_key_pair(("pets", "pet_id"), ("owners", "owner_id"))  # two single-column primary keys
    assert not pets.is_key_pair(("owners", "name"), ("pets", "kind"))


@pytest.mark.parametrize(
    ("ddl", "dialect", "table", "column", "description"),
    [
        pytest.param(
            "CREATE TABLE t (a INT COMMENT 'the a', b TEXT REFERENCES u (x)); CREATE TABLE u (x TEXT)",
            "mysql",
            "t",
            "a",
            "the a",
            id="mysql_comment_clause",
        ),
        pytest.param(
            "CREATE TABLE t (a INT, b TEXT); COMMENT ON COLUMN t.a IS 'the a'",
            "postgres",
            "t",
            "a",
            "the a",
            id="postgres_comment_on",
        ),
        pytest.param(
            'CREATE TABLE "Mixed" ("CDSCode" TEXT NOT NULL -- school code\n)',
            "sqlite",
            "mixed",
            "cdscode",
            "school code",
            id="quoted_mixed_case",
        ),
    ],
)
def test_ddl_descriptions_come_from_comments_in_any_dialect(
    ddl: str, dialect: str, table: str, column: str, description: str
) -> None:
    schema = parse_ddl(ddl, dialect)
    found = schema.table(table)
    assert found is not None and found.column(column) is not None
    assert found.column(column).description == description


def test_inline_references_and_views() -> None:
    schema = parse_ddl(
        "CREATE TABLE u (x INT PRIMARY KEY); CREATE TABLE t (a INT, b INT REFERENCES u (x)); CREATE VIEW v AS SELECT a FROM t",
        "sqlite",
    )
    assert schema.is_key_pair(("t", "b"), ("u", "x"))
    view = schema.table("v")
    assert view is not None and not view.columns_known


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "CREATE TABLE t (a INT,\n  b TEXT,\n  PRIMARY KEY (a)\n",
            r"broken\.sql: line \d+: Expecting \)",
            id="unclosed_parenthesis",
        ),
        pytest.param("SELECT 1;", r"broken\.sql: declares no table", id="no_table"),
    ],
)
def test_a_broken_ddl_file_names_the_file_and_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "broken.sql"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SchemaError, match=message):
        load_schema_file(path, "sqlite")


@pytest.mark.parametrize(
    ("payload", "table", "column", "family"),
    [
        pytest.param(
            {
                "dialect": "postgres",
                "tables": {"orders": {"columns": {"id": {"type": "INTEGER", "primary_key": True}, "placed": "DATE"}}},
            },
            "orders",
            "placed",
            "date",
            id="stef_catalog",
        ),
        pytest.param({"city": ["city_name", "population"]}, "city", "population", "unknown", id="campaign_catalog"),
        pytest.param(
            {
                "nodes": {
                    "model.shop.orders": {
                        "metadata": {"name": "orders"},
                        "columns": {"ID": {"name": "id", "type": "bigint"}},
                    }
                }
            },
            "orders",
            "id",
            "integer",
            id="dbt_catalog",
        ),
    ],
)
def test_json_catalogs_in_three_formats(payload: dict[str, Any], table: str, column: str, family: str) -> None:
    schema = parse_catalog(payload, "c.json")
    found = schema.table(table)
    assert found is not None and found.column(column) is not None and found.column(column).family == family


def test_a_catalog_that_fits_no_format_is_a_clear_error() -> None:
    with pytest.raises(SchemaError, match=r"c\.json: field `tables\.t\.columns`"):
        parse_catalog({"tables": {"t": {"columns": ["a"]}}}, "c.json")
    with pytest.raises(SchemaError, match="not a catalog"):
        parse_catalog([1, 2], "c.json")


def test_schema_book_reads_each_app_once_and_apps_without_a_file_are_schema_free(tmp_path: Path) -> None:
    (tmp_path / "pets.sql").write_text(PETS_DDL, encoding="utf-8")
    book = SchemaBook(tmp_path)
    assert book.for_app("pets", "sqlite") is book.for_app("pets", "sqlite")
    assert book.for_app("birds") is None and book.for_app("../etc/passwd") is None
    with pytest.raises(SchemaError, match="schema folder does not exist"):
        SchemaBook(tmp_path / "missing")
    with pytest.raises(SchemaError, match=r"pets\.sql: is a file, not a folder"):
        SchemaBook(tmp_path / "pets.sql")  # a schema file given where its folder belongs
    assert book.evaluator_version(EVALUATOR_VERSION) == EVALUATOR_VERSION + SCHEMA_VERSION_SUFFIX


@pytest.mark.parametrize("path", sorted(DEMO_SCHEMAS.glob("*.sql")), ids=lambda p: p.stem)
def test_bundled_demo_schemas_parse(path: Path) -> None:
    schema = load_schema_file(path, "sqlite")
    assert schema.tables and schema.key_pairs


def test_a_run_with_schemas_carries_the_schema_evaluator_version(tmp_path: Path) -> None:
    (tmp_path / "pets.sql").write_text(PETS_DDL, encoding="utf-8")
    records = [
        AgentLogRecord(
            run_id="a",
            app_id="pets",
            question="How many cats?",
            sql="SELECT COUNT(*) FROM pets WHERE kind = 'cat'",
            dialect="sqlite",
        ),
        AgentLogRecord(
            run_id="b", app_id="birds", question="How many owls?", sql="SELECT COUNT(*) FROM birds", dialect="sqlite"
        ),
        AgentLogRecord(run_id="c", app_id="pets", question="", sql="SELECT 1"),
    ]
    evaluations = evaluate_many(records, schemas=SchemaBook(tmp_path))
    assert {e.evaluator_version for e in evaluations} == {EVALUATOR_VERSION + SCHEMA_VERSION_SUFFIX}
    assert evaluations[0].schema_report is not None and evaluations[1].schema_report is None
    assert evaluations[2].status is EvaluationStatus.INVALID_INPUT


def test_a_rule_file_can_name_the_schema(tmp_path: Path) -> None:
    from stef.pipeline.rules import RuleBook

    (tmp_path / "shop.json").write_text(json.dumps({"app_id": "shop", "schema": "petshop.sql"}), encoding="utf-8")
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "petshop.sql").write_text(PETS_DDL, encoding="utf-8")
    record = AgentLogRecord(
        run_id="a", app_id="shop", question="How many cats?", sql="SELECT COUNT(*) FROM cats", dialect="sqlite"
    )
    [evaluation] = evaluate_many([record], rulebook=RuleBook(rules_dirs=(tmp_path,)), schemas=SchemaBook(schemas))
    assert evaluation.schema_report is not None and evaluation.schema_report.unknown_tables == ("FROM cats",)


def test_stef_evaluate_with_a_schema_dir_writes_p_correct_and_the_schema_report(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "pets.sql").write_text(PETS_DDL, encoding="utf-8")
    source = tmp_path / "day.jsonl"
    source.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {
                    "run_id": "a",
                    "app_id": "pets",
                    "question": "How many cats?",
                    "sql": "SELECT COUNT(*) FROM pets WHERE kind = 'cat'",
                    "dialect": "sqlite",
                },
                {
                    "run_id": "b",
                    "app_id": "pets",
                    "question": "How many cats?",
                    "sql": "SELECT COUNT(*) FROM cats",
                    "dialect": "sqlite",
                },
            ]
        ),
        encoding="utf-8",
    )
    out = tmp_path / "scores.jsonl"
    for workers in ("1", "2"):
        result = CliRunner().invoke(
            app,
            [
                "evaluate",
                str(source),
                "--out",
                str(out),
                "--schema-dir",
                str(tmp_path / "schemas"),
                "--workers",
                workers,
            ],
        )
        assert result.exit_code == 0, result.output
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        assert [r["evaluator_version"] for r in rows] == [EVALUATOR_VERSION + SCHEMA_VERSION_SUFFIX] * 2
        assert (
            rows[1]["schema_report"]["unknown_tables"] == ["FROM cats"] and rows[1]["p_correct"] < rows[0]["p_correct"]
        )
        assert "mean P(correct)" in result.output
    missing = CliRunner().invoke(
        app, ["evaluate", str(source), "--out", str(out), "--schema-dir", str(tmp_path / "nope")]
    )
    assert missing.exit_code == 2 and "schema folder does not exist" in " ".join(missing.output.split())


def test_catalog_commands() -> None:
    runner = CliRunner()
    schema = runner.invoke(app, ["catalog", "json-schema"])
    assert schema.exit_code == 0 and json.loads(schema.output)["title"] == "CatalogDocument"
    shown = runner.invoke(app, ["catalog", "show", str(DEMO_SCHEMAS / "california_schools.sql"), "--dialect", "sqlite"])
    assert shown.exit_code == 0 and "satscores" in shown.output
