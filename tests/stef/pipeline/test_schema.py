"""Tests of reading schemas (stef.pipeline.schema): DDL and JSON catalogs, their errors, the schema
book, the schema evaluator version and the ``stef evaluate --schema-dir`` / ``stef catalog`` commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from typer.testing import CliRunner

from flows.cli.main import app
from stef.models import EVALUATOR_VERSION, AgentLogRecord, EvaluationStatus
from stef.pipeline.evaluate import evaluate_many
from stef.pipeline.schema import SCHEMA_VERSION_SUFFIX, SchemaError, parse_catalog, parse_ddl
from stef.pipeline.schema_book import SchemaBook, load_schema_file
from stef.pipeline.schema_checks import check_against_schema
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
    "text",
    [
        "CREATE TABLE t (a INT CHECK (a?))",
        "CREATE TABLE t (a INT DEFAULT x?)",
        "CREATE TABLE t (a INT);\nCREATE VIEW v AS SELECT a FROM t JOIN u ON t.a = u.a?",
    ],
    ids=["check", "default", "view"],
)
def test_a_ddl_the_parser_faults_on_is_a_schema_error(tmp_path: Path, text: str) -> None:
    """sqlglot's PostgreSQL parser raises a TypeError on a stray ``?`` (its JSON operator) in some
    places: the schema file crashed the command with a traceback instead of naming the file."""
    path = tmp_path / "broken.sql"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SchemaError, match=r"broken\.sql: the parser failed on this SQL \(TypeError: "):
        load_schema_file(path, "postgres")


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


POSTGRES_ORDERS = "CREATE TABLE orders (id SERIAL PRIMARY KEY, tags TEXT[], amount NUMERIC(10, 2));"
"""A Postgres DDL that SQLite's parser refuses (``TEXT[]``) and sqlglot's generic dialect reads."""
TSQL_ORDERS = "CREATE TABLE [orders] ([id] INT PRIMARY KEY, [amount] DECIMAL(10, 2));"
"""A T-SQL DDL that neither Postgres's parser nor the generic one reads (bracket-quoted names)."""


def _orders_record(run_id: str, dialect: str | None) -> AgentLogRecord:
    return AgentLogRecord(
        run_id=run_id,
        app_id="shop",
        question="What is the total amount of the orders?",
        sql="SELECT SUM(amount) FROM orders",
        dialect=dialect,
    )


def test_a_record_in_another_dialect_than_its_apps_schema_is_judged_against_it(tmp_path: Path) -> None:
    (tmp_path / "shop.sql").write_text(POSTGRES_ORDERS, encoding="utf-8")
    records = [_orders_record("pg", "postgres"), _orders_record("lite", "sqlite"), _orders_record("pg2", "postgres")]
    evaluations = evaluate_many(records, schemas=SchemaBook(tmp_path))
    assert [e.status for e in evaluations] == [EvaluationStatus.EVALUATED] * 3
    for evaluation in evaluations:  # SQLite's parser refuses TEXT[]: the record is judged against the generic reading
        assert evaluation.schema_report is not None and evaluation.schema_report.unknown_tables == ()


def test_a_schema_no_dialect_of_the_record_reads_makes_that_record_invalid_not_the_batch(tmp_path: Path) -> None:
    (tmp_path / "shop.sql").write_text(TSQL_ORDERS, encoding="utf-8")
    records = [_orders_record("ms", "tsql"), _orders_record("pg", "postgres"), _orders_record("ms2", "tsql")]
    book = SchemaBook(tmp_path)
    evaluations = evaluate_many(records, schemas=book)
    assert [e.status for e in evaluations] == [
        EvaluationStatus.EVALUATED,
        EvaluationStatus.INVALID_INPUT,
        EvaluationStatus.EVALUATED,
    ]
    reason = evaluations[1].status_reason or ""
    assert "record's dialect postgres" in reason and "shop.sql: line 1" in reason and "default_dialect" in reason
    assert evaluations[0].schema_report is not None and evaluations[2].schema_report is not None
    assert {e.evaluator_version for e in evaluations} == {EVALUATOR_VERSION + SCHEMA_VERSION_SUFFIX}
    with pytest.raises(SchemaError, match=r"shop\.sql: line 1") as first:
        book.for_app("shop", "postgres")  # the failed reading is remembered: a new error each time
    with pytest.raises(SchemaError) as second:
        book.for_app("shop", "postgres")
    assert first.value is not second.value and str(first.value) == str(second.value)


def test_a_schema_file_no_dialect_can_read_stops_the_run_whatever_the_records_dialect(tmp_path: Path) -> None:
    """Only a parse failure depends on the dialect: a file that is missing, not text, or declares a
    table twice is a configuration error for every record, never one record's `invalid_input`."""
    from stef.pipeline.rules import RuleBook

    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "shop.json").write_text(json.dumps({"app_id": "shop", "schema": "gone.sql"}), "utf-8")
    with pytest.raises(SchemaError, match=r"gone\.sql: the schema file named by the rules does not exist"):
        evaluate_many(
            [_orders_record("pg", "postgres")],
            rulebook=RuleBook(rules_dirs=(tmp_path / "rules",)),
            schemas=SchemaBook(tmp_path),
        )
    (tmp_path / "shop.sql").write_text(POSTGRES_ORDERS + "\n" + POSTGRES_ORDERS, encoding="utf-8")
    with pytest.raises(SchemaError, match="declares table 'orders' twice"):
        evaluate_many([_orders_record("lite", "sqlite")], schemas=SchemaBook(tmp_path))
    (tmp_path / "shop.sql").write_bytes(b"\xff\xfe CREATE TABLE")
    with pytest.raises(SchemaError, match=r"not a UTF-8 text file|not SQL|UTF-16"):
        evaluate_many([_orders_record("lite", "sqlite")], schemas=SchemaBook(tmp_path))


def test_a_schema_the_apps_own_dialect_cannot_read_stops_the_run(tmp_path: Path) -> None:
    from stef.pipeline.rules import RuleBook

    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "shop.json").write_text(
        json.dumps({"app_id": "shop", "default_dialect": "postgres"}), encoding="utf-8"
    )
    (tmp_path / "shop.sql").write_text(TSQL_ORDERS, encoding="utf-8")
    book, rules = SchemaBook(tmp_path), RuleBook(rules_dirs=(tmp_path / "rules",))
    for dialect in (None, "postgres", "mysql"):  # the app's dialect, given or by default, or another one
        with pytest.raises(SchemaError, match=r"shop\.sql: line 1"):
            evaluate_many([_orders_record("a", dialect)], rulebook=rules, schemas=book)
    with pytest.raises(SchemaError, match=r"shop\.sql: line 1"):  # no dialect anywhere: the generic one
        evaluate_many([_orders_record("a", None)], schemas=SchemaBook(tmp_path))
    [evaluation] = evaluate_many([_orders_record("a", "tsql")], rulebook=rules, schemas=book)
    assert evaluation.status is EvaluationStatus.EVALUATED and evaluation.schema_report is not None


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


PG_DUMP = REPO_ROOT / "tests" / "fixtures" / "schemas" / "pg_dump_shop.sql"


def test_a_pg_dump_schema_gives_the_keys_its_alter_table_statements_declare() -> None:
    """``pg_dump --schema-only`` declares primary and foreign keys in ``ALTER TABLE ... ADD
    CONSTRAINT`` after the tables; they were skipped, so the schema had no key and no join was checked."""
    schema = parse_ddl(PG_DUMP.read_text(encoding="utf-8"), "postgres", str(PG_DUMP))
    customers, orders = schema.table("customers"), schema.table("public.orders")
    assert customers is not None and orders is not None
    assert (customers.primary_key, orders.primary_key) == (("id",), ("id",))
    assert [(k.columns, k.ref_table, k.ref_columns) for k in orders.foreign_keys] == [
        (("customer_id",), "customers", ("id",))
    ]
    assert customers.column("name") is not None and customers.column("name").description == "Full legal name"  # type: ignore[union-attr]
    assert schema.is_foreign_key_pair(("orders", "customer_id"), ("customers", "id"))
    report = check_against_schema(
        sqlglot.parse_one("SELECT c.name FROM orders AS o JOIN customers AS c ON o.total = c.id", read="postgres"),
        schema,
        dialect="postgres",
    )
    assert report.non_key_joins == ("JOIN ON o.total = c.id (not a declared key pair)",)
    keyed = check_against_schema(
        sqlglot.parse_one(
            "SELECT c.name FROM orders AS o JOIN customers AS c ON o.customer_id = c.id", read="postgres"
        ),
        schema,
        dialect="postgres",
    )
    assert keyed.non_key_joins == ()


@pytest.mark.parametrize(
    ("dialect", "ddl"),
    [
        pytest.param(
            "postgres",
            "CREATE TABLE u (id INT, CONSTRAINT u_pk PRIMARY KEY (id));"
            "CREATE TABLE t (a INT, b INT, CONSTRAINT t_fk FOREIGN KEY (a) REFERENCES u (id), CONSTRAINT t_pk PRIMARY KEY (a, b))",
            id="postgres_named",
        ),
        pytest.param(
            "tsql",
            "CREATE TABLE [dbo].[u] ([id] INT NOT NULL, CONSTRAINT [PK_u] PRIMARY KEY CLUSTERED ([id] ASC));"
            "CREATE TABLE [dbo].[t] ([a] INT NOT NULL, [b] INT NOT NULL,"
            " CONSTRAINT [FK_t_u] FOREIGN KEY ([a]) REFERENCES [dbo].[u] ([id]),"
            " CONSTRAINT [PK_t] PRIMARY KEY NONCLUSTERED ([a] ASC, [b] DESC))",
            id="sql_server_clustered",
        ),
        pytest.param(
            "mysql",
            "CREATE TABLE u (id INT NOT NULL, PRIMARY KEY (id), KEY idx (id)) ENGINE=InnoDB;"
            "CREATE TABLE t (a INT, b INT, PRIMARY KEY (a, b), CONSTRAINT t_fk FOREIGN KEY (a) REFERENCES u (id))",
            id="mysql",
        ),
        pytest.param(
            "postgres",
            "CREATE TABLE u (id INT); CREATE TABLE t (a INT, b INT);"
            "ALTER TABLE ONLY u ADD CONSTRAINT u_pk PRIMARY KEY (id);"
            "ALTER TABLE t ADD PRIMARY KEY (a, b), ADD CONSTRAINT t_fk FOREIGN KEY (a) REFERENCES u (id)",
            id="alter_table",
        ),
    ],
)
def test_named_and_altered_key_constraints_declare_keys(dialect: str, ddl: str) -> None:
    schema = parse_ddl(ddl, dialect)
    u, t = schema.table("u"), schema.table("t")
    assert u is not None and t is not None
    assert u.primary_key == ("id",)
    assert t.primary_key == ("a", "b")
    assert [(k.columns, k.ref_table, k.ref_columns) for k in t.foreign_keys] == [(("a",), "u", ("id",))]
    assert schema.is_key_pair(("t", "a"), ("u", "id"))
    assert u.column("id").not_null  # type: ignore[union-attr]  # a primary key column holds no NULL


def test_ddl_statements_apply_in_order() -> None:
    schema = parse_ddl(
        "CREATE TABLE t (a INT, b TEXT, c TEXT);"
        "CREATE TABLE IF NOT EXISTS t (z INT);"  # t exists: skipped, as the database skips it
        "ALTER TABLE t ADD COLUMN d DATE;"
        "ALTER TABLE t DROP COLUMN c;"
        "ALTER TABLE t RENAME COLUMN b TO label;"
        "ALTER TABLE t ALTER COLUMN a TYPE BIGINT;"
        "ALTER TABLE t ALTER COLUMN label SET NOT NULL;"
        "CREATE TABLE old (x INT); DROP TABLE IF EXISTS old;"
        "CREATE TABLE w (x INT); CREATE OR REPLACE TABLE w (y TEXT);"
        "CREATE TABLE r (x INT); ALTER TABLE r RENAME TO renamed;",
        "postgres",
    )
    t = schema.table("t")
    assert t is not None
    assert [(c.name, c.type, c.family, c.not_null) for c in t.columns] == [
        ("a", "BIGINT", "integer", False),
        ("label", "TEXT", "text", True),
        ("d", "DATE", "date", False),
    ]
    assert schema.table("old") is None and schema.table("r") is None
    assert [c.name for c in schema.table("w").columns] == ["y"]  # type: ignore[union-attr]
    assert [table.name for table in schema.tables] == ["t", "w", "renamed"]


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        pytest.param("CREATE TABLE t (a INT); CREATE TABLE T (b INT)", "declares table 'T' twice;", id="same_name"),
        pytest.param(
            "CREATE TABLE sales.t (a INT); CREATE TABLE archive.t (b INT)",
            r"declares table 't' twice \(sales\.t and archive\.t\)",
            id="two_schemas",
        ),
    ],
)
def test_a_table_declared_twice_is_a_clear_error(tmp_path: Path, ddl: str, message: str) -> None:
    """The second declaration silently replaced the first: checks ran against one of two tables."""
    path = tmp_path / "shop.sql"
    path.write_text(ddl, encoding="utf-8")
    with pytest.raises(SchemaError, match=rf"shop\.sql: {message}"):
        load_schema_file(path, "postgres")


def test_a_sql_server_script_with_go_batch_separators_gives_its_tables_and_keys() -> None:
    """SSMS's "Generate Scripts" ends each statement with a ``GO`` line instead of ``;`` (CRLF line ends):
    sqlglot read the whole file as one command and the schema declared no table. A ``'GO'`` literal
    (the Note column's default) stays text."""
    path = REPO_ROOT / "tests" / "fixtures" / "schemas" / "ssms_shop.sql"
    schema = load_schema_file(path, "tsql")
    customers, orders = schema.table("Customers"), schema.table("dbo.Orders")
    assert customers is not None and orders is not None
    assert [c.name for c in customers.columns] == ["CustomerID", "Name"]
    assert [c.name for c in orders.columns] == ["OrderID", "CustomerID", "Total", "Note"]
    assert customers.primary_key == ("CustomerID",)
    assert [(k.columns, k.ref_table, k.ref_columns) for k in orders.foreign_keys] == [
        (("CustomerID",), "Customers", ("CustomerID",))
    ]
    assert schema.is_foreign_key_pair(("orders", "customerid"), ("customers", "customerid"))


TSQL_DDL = "CREATE TABLE [schools] ([county] NVARCHAR(100), [id] INT);\nGO\n"
SCHOOLS_RECORD = {
    "run_id": "p1",
    "app_id": "app",
    "question": "How many schools are in Alameda?",
    "sql": "SELECT COUNT(*) FROM schools WHERE county = 'Alameda'",
}


def _evaluate_cli(tmp_path: Path, records: list[dict[str, Any]], *options: str) -> tuple[Any, list[dict[str, Any]]]:
    source = tmp_path / "day.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    out.unlink(missing_ok=True)
    result = CliRunner().invoke(app, ["evaluate", str(source), "--out", str(out), *options])
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] if out.exists() else []
    return result, rows


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_dialect_option_reads_the_app_schema_when_the_records_dialect_does_not(
    tmp_path: Path, workers: str
) -> None:
    """``--dialect tsql`` names the database's dialect: a record that names another (an agent
    writing Postgres-flavoured SQL) is judged against the T-SQL file read in T-SQL. ``stef
    evaluate`` filled ``--dialect`` into the records that name none but did not pass it on as the
    app's dialect, so the file was retried in the generic dialect and the record was invalid_input."""
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "app.sql").write_text(TSQL_DDL, encoding="utf-8")
    records = [{**SCHOOLS_RECORD, "dialect": "postgres"}, {**SCHOOLS_RECORD, "run_id": "p2"}]
    options = ("--schema-dir", str(tmp_path / "schemas"), "--dialect", "tsql", "--workers", workers)
    result, rows = _evaluate_cli(tmp_path, records, *options)
    assert result.exit_code == 0, result.output
    assert [(r["run_id"], r["status"], r["dialect"]) for r in rows] == [
        ("p1", "evaluated", "postgres"),
        ("p2", "evaluated", "tsql"),
    ]
    assert all(r["schema_report"] is not None for r in rows)


def test_a_schema_or_rules_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Windows editors (and SSMS) save UTF-8 with a byte-order mark: the DDL failed at line 1
    ("Invalid expression") and stopped the run, a rules file was "not valid JSON"."""
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "app.sql").write_text("CREATE TABLE schools (county TEXT, id INT);\n", encoding="utf-8-sig")
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"app_id": "app", "default_dialect": "sqlite"}), encoding="utf-8-sig")
    assert (tmp_path / "schemas" / "app.sql").read_bytes().startswith(b"\xef\xbb\xbf")
    options = ("--schema-dir", str(tmp_path / "schemas"), "--rules", str(rules), "--workers", "1")
    result, rows = _evaluate_cli(tmp_path, [SCHOOLS_RECORD], *options)
    assert result.exit_code == 0, result.output
    assert [(r["status"], r["dialect"]) for r in rows] == [("evaluated", "sqlite")]
    assert rows[0]["schema_report"] is not None


def test_a_ddl_file_that_the_generic_dialect_cannot_read_names_the_dialect_to_give(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "app.sql").write_text(TSQL_DDL, encoding="utf-8")
    result, rows = _evaluate_cli(
        tmp_path, [SCHOOLS_RECORD], "--schema-dir", str(tmp_path / "schemas"), "--workers", "1"
    )
    assert result.exit_code == 2 and rows == []
    assert result.stderr.startswith(f"error: {tmp_path / 'schemas' / 'app.sql'}: line 1: ")
    assert result.stderr.endswith(
        " (read in sqlglot's generic dialect: give the database's dialect as the rules' default_dialect, "
        "stef evaluate's --dialect or the records' dialect)\n"
    )


def test_the_rules_dialect_of_an_app_wins_over_the_runs_for_its_schema_file(tmp_path: Path) -> None:
    """``--dialect sqlite`` is the records' default; the app's rules say its database is Postgres:
    its DDL (a Postgres array type) is read in Postgres. The run's dialect stopped the run."""
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "shop.sql").write_text("CREATE TABLE orders (id INT, total NUMERIC, tags TEXT[]);\n")
    rules = tmp_path / "shop.json"
    rules.write_text(json.dumps({"app_id": "shop", "default_dialect": "postgres"}), encoding="utf-8")
    record = {"run_id": "o1", "app_id": "shop", "question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders"}
    options = (
        "--schema-dir",
        str(tmp_path / "schemas"),
        "--rules",
        str(rules),
        "--dialect",
        "sqlite",
        "--workers",
        "1",
    )
    result, rows = _evaluate_cli(tmp_path, [record], *options)
    assert result.exit_code == 0, result.output
    assert [(r["status"], r["dialect"]) for r in rows] == [("evaluated", "sqlite")]
    assert rows[0]["schema_report"] is not None


SQLITE_TABLE_FORMS = """
CREATE TABLE orders (id INTEGER PRIMARY KEY, amount REAL, status TEXT DEFAULT 'new (unpaid)') WITHOUT ROWID;
CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, note) STRICT;
CREATE TABLE visits (user_id, "day", -- when
  FOREIGN KEY (user_id) REFERENCES users (id));
CREATE TABLE IF NOT EXISTS "tags" (tag TEXT, PRIMARY KEY (tag)) STRICT, WITHOUT ROWID;
"""


def test_sqlite_tables_without_rowid_strict_or_untyped_columns_are_read() -> None:
    """``WITHOUT ROWID`` (which sqlglot reads as an opaque command: the table was missing) and columns
    without a type (dropped: every query naming them was INCORRECT for an unknown column) are
    read as SQLite declares them."""
    schema = parse_ddl(SQLITE_TABLE_FORMS, "sqlite", "shop.sql")
    columns = {t.name: [(c.name, c.type, c.family) for c in t.columns] for t in schema.tables}
    assert columns == {
        "orders": [("id", "INT", "integer"), ("amount", "DOUBLE", "number"), ("status", "TEXT", "text")],
        "users": [("id", "INT", "integer"), ("name", "TEXT", "text"), ("note", None, "unknown")],
        "visits": [("user_id", None, "unknown"), ("day", None, "unknown")],
        "tags": [("tag", "TEXT", "text")],
    }
    assert schema.table("orders").primary_key == ("id",) and schema.table("tags").primary_key == ("tag",)
    assert schema.is_foreign_key_pair(("visits", "user_id"), ("users", "id"))
    assert schema.table("visits").column("day").description == "when"


def test_answers_on_sqlite_table_forms_are_not_flagged_for_unknown_names(tmp_path: Path) -> None:
    (tmp_path / "shop.sql").write_text(SQLITE_TABLE_FORMS, encoding="utf-8")
    queries = {
        "shipped": ("How many orders have status shipped?", "SELECT count(*) FROM orders WHERE status = 'shipped'"),
        "note": ("What is the note of user Bob?", "SELECT note FROM users WHERE name = 'Bob'"),
        "visits": ("On which days did user 3 visit?", 'SELECT "day" FROM visits WHERE user_id = 3'),
        "tags": ("List every tag.", "SELECT tag FROM tags"),
    }
    records = [
        AgentLogRecord(run_id=key, app_id="shop", question=question, sql=sql, dialect="sqlite")
        for key, (question, sql) in queries.items()
    ]
    for evaluation in evaluate_many(records, schemas=SchemaBook(tmp_path)):
        report = evaluation.schema_report
        assert evaluation.status is EvaluationStatus.EVALUATED and report is not None, evaluation.run_id
        assert (report.unknown_tables, report.unknown_columns) == ((), ()), evaluation.run_id
