"""Campaign protocol (DESIGN.md §7, seeds/003, issue 6): gold audit, six outcome classes, read-only execution.

Reference: Python's ``sqlite3`` on the bundled GeoQuery database (flows/campaign_data/).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from stef.campaign.protocol import (
    CampaignRunLog,
    CampaignSettings,
    CanonicalCatalog,
    GoldQuestion,
    Tariff,
    audit_gold,
    calibration_report,
    classify_run,
    evidence_documents,
    json_schemas,
    load_catalog,
    read_jsonl,
    results_match,
    run_campaign,
    run_cost,
)
from stef.campaign.sandbox import DuckDBTestDatabase, SQLiteTestDatabase, open_test_database
from stef.errors import InputError
from stef.models import Evaluation, EvaluationStatus

SAMPLE = Path(__file__).resolve().parent.parent / "flows" / "campaign_data"
DB = SAMPLE / "geography.sqlite"
SETTINGS = CampaignSettings(
    timeout_s=1.0, tariffs={"m1": Tariff(input_usd_per_million=1.0, output_usd_per_million=4.0)}
)
SLOW_CTE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"

GOLD = [
    GoldQuestion(
        question_id="q-capital",
        question="what is the capital of texas",
        gold_sql=["SELECT capital FROM state WHERE state_name = 'texas'"],
    ),
    GoldQuestion(
        question_id="q-two",
        question="what is the capital of texas and how many people live there",
        gold_sql=[
            "SELECT capital FROM state WHERE state_name = 'texas'",
            "SELECT population FROM state WHERE state_name = 'texas'",
        ],
    ),
    GoldQuestion(
        question_id="q-order",
        question="the 3 largest states by area",
        gold_sql=["SELECT state_name FROM state ORDER BY area DESC LIMIT 3"],
    ),
]
RIGHT_CAPITAL = "SELECT s.capital FROM state AS s WHERE s.state_name = 'texas'"
RIGHT_POPULATION = "SELECT population FROM state WHERE state_name = 'texas'"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _reference(sql: str, path: Path = DB) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute(sql).fetchall()


def _tools(*tables: str, extra: int = 0) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = [{"name": "catalog.listTables", "arguments": {}}]
    calls += [{"name": "catalog.describeTable", "arguments": {"table": t}} for t in tables]
    calls += [{"name": "catalog.listRelationships", "arguments": {"table": "state"}} for _ in range(extra)]
    return calls


def _run(
    statements: list[str],
    question_id: str = "q-capital",
    tool_calls: list[dict[str, Any]] | None = None,
    campaign_id: str = "mcp",
) -> CampaignRunLog:
    return CampaignRunLog(
        run_id="r1",
        campaign_id=campaign_id,
        question_id=question_id,
        question="q?",
        statements=statements,
        tool_calls=_tools("state") if tool_calls is None else tool_calls,
        model_version="m1",
        tokens={"prompt": 1000, "completion": 200},
        latency_ms=1500.0,
    )


@pytest.fixture(scope="module")
def db() -> Any:
    database = SQLiteTestDatabase(DB)
    yield database
    database.close()


@pytest.fixture(scope="module")
def audit(db: SQLiteTestDatabase) -> Any:
    return audit_gold(GOLD, db, SETTINGS)


@pytest.fixture(scope="module")
def catalog(db: SQLiteTestDatabase) -> CanonicalCatalog:
    return CanonicalCatalog(db.catalog())


# --------------------------------------------------------------------------- gold audit


def test_gold_audit_keeps_executable_gold_and_excludes_the_rest(db: SQLiteTestDatabase) -> None:
    gold = [
        *GOLD[:1],
        GoldQuestion(question_id="q-broken", question="?", gold_sql=["SELECT nope FROM state"]),
        GoldQuestion(
            question_id="q-empty", question="?", gold_sql=["SELECT capital FROM state WHERE state_name = 'atlantis'"]
        ),
        GoldQuestion(question_id="q-write", question="?", gold_sql=["DELETE FROM city"]),
    ]
    audit = audit_gold(gold, db, SETTINGS)
    by_id = {i.question_id: i for i in audit.items}
    assert by_id["q-capital"].ok and by_id["q-capital"].row_counts == [len(_reference(GOLD[0].gold_sql[0]))] == [1]
    assert [i.question_id for i in audit.excluded] == ["q-broken", "q-empty", "q-write"]
    assert "no such column: nope" in (by_id["q-broken"].reason or "")
    assert by_id["q-empty"].reason == "gold statement 1 returned no rows"
    assert "not authorized" in (by_id["q-write"].reason or "")
    assert list(audit.results) == ["q-capital"]
    assert audit.results["q-capital"][0].rows == tuple(_reference(GOLD[0].gold_sql[0]))


def test_gold_audit_rejects_duplicate_question_ids(db: SQLiteTestDatabase) -> None:
    with pytest.raises(InputError, match="question_id 'q-capital' appears twice"):
        audit_gold([GOLD[0], GOLD[0]], db, SETTINGS)


def test_runs_of_excluded_questions_are_skipped_with_the_reason(db: SQLiteTestDatabase) -> None:
    gold = [
        GoldQuestion(
            question_id="q-empty", question="?", gold_sql=["SELECT capital FROM state WHERE state_name = 'atlantis'"]
        )
    ]
    runs = [
        _run(["SELECT 1"], question_id="q-empty"),
        _run(["SELECT 1"], question_id="q-unknown").model_copy(update={"run_id": "r2"}),
        _run(
            ["SELECT 1"], question_id="q-unknown", campaign_id="baseline-static"
        ),  # the same run_id "r1" in another campaign
    ]
    result = run_campaign(runs, gold, db, SETTINGS)
    assert result.results == []
    assert result.skipped == {
        "mcp": {
            "r1": "question excluded by the gold audit: gold statement 1 returned no rows",
            "r2": "question_id 'q-unknown' is not in the gold battery",
        },
        "baseline-static": {"r1": "question_id 'q-unknown' is not in the gold battery"},
    }
    assert [(s.campaign_id, s.excluded_runs) for s in result.summaries] == [("mcp", 2), ("baseline-static", 1)]


# --------------------------------------------------------------------------- result comparison


@pytest.mark.parametrize(
    ("predicted", "gold", "ordered", "expected"),
    [
        pytest.param([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], False, True, id="row_order_ignored"),
        pytest.param([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], True, False, id="row_order_kept_with_gold_order_by"),
        pytest.param([("a", 1), ("b", 2)], [(1, "a"), (2, "b")], False, True, id="column_order_ignored"),
        pytest.param([(0.1 + 0.2,)], [(0.3,)], False, True, id="float_tolerance"),
        pytest.param([(3,)], [(3.0,)], False, True, id="int_equals_float"),
        pytest.param([(0.3001,)], [(0.3,)], False, False, id="float_difference_counts"),
        pytest.param([(None, 1)], [(None, 1)], False, True, id="null_equals_null"),
        pytest.param([(None,)], [("",)], False, False, id="null_is_not_empty_string"),
        pytest.param([(1,), (1,)], [(1,)], False, False, id="duplicates_count"),
        pytest.param([(1, 1)], [(1,)], False, False, id="column_count_differs"),
        pytest.param(
            [("x", "y"), ("y", "x")],
            [("x", "x"), ("y", "y")],
            False,
            False,
            id="columns_with_same_values_but_different_rows",
        ),
    ],
)
def test_results_match(
    predicted: list[tuple[Any, ...]], gold: list[tuple[Any, ...]], ordered: bool, expected: bool
) -> None:
    assert results_match(predicted, gold, ordered=ordered) is expected


# --------------------------------------------------------------------------- the six classes and their precedence


@pytest.mark.parametrize(
    ("statements", "question_id", "extra_calls", "outcome", "reason_part"),
    [
        pytest.param(
            [RIGHT_CAPITAL],
            "q-capital",
            10,
            "budget_exceeded",
            "12 tool calls, over the budget of 10",
            id="budget_exceeded",
        ),
        pytest.param(
            [RIGHT_CAPITAL + " WHERE WHERE"],
            "q-capital",
            10,
            "budget_exceeded",
            "over the budget",
            id="tie_budget_beats_syntax",
        ),
        pytest.param(
            ["SELEC capital FROM state"],
            "q-capital",
            0,
            "syntax_error",
            "statement 1: Invalid expression",
            id="syntax_error",
        ),
        pytest.param(
            ["SELEC capital"], "q-capital", 0, "syntax_error", "not a SQL statement", id="syntax_error_bare_expression"
        ),
        pytest.param(
            ["SELECT capitol FROM state", "SELECT capital FROM state WHERE"],
            "q-capital",
            0,
            "syntax_error",
            "statement 2",
            id="tie_syntax_beats_structural",
        ),
        pytest.param(
            ["SELECT capital FROM states"],
            "q-capital",
            0,
            "structural_error",
            "unknown table 'states'",
            id="structural_error_table",
        ),
        pytest.param(
            ["SELECT capitol FROM state"],
            "q-capital",
            0,
            "structural_error",
            "unknown column 'capitol'",
            id="structural_error_column",
        ),
        pytest.param(
            ["DROP TABLE state", "SELECT capitol FROM state"],
            "q-capital",
            0,
            "structural_error",
            "capitol",
            id="tie_structural_beats_execution",
        ),
        pytest.param(
            ["SELECT capital FROM state WHERE state_name = 'ohio'"],
            "q-capital",
            0,
            "execution_error",
            "no statement matches",
            id="execution_error_wrong_answer",
        ),
        pytest.param(
            ["DROP TABLE state", RIGHT_CAPITAL],
            "q-capital",
            0,
            "execution_error",
            "DROP refused",
            id="tie_execution_beats_success",
        ),
        pytest.param(
            ["SELECT CAST('a' AS INT) FROM state WHERE abs(-9223372036854775808) > 0"],
            "q-capital",
            0,
            "execution_error",
            "overflow",
            id="execution_error_engine",
        ),
        pytest.param(
            [RIGHT_CAPITAL, "SELECT population FROM state WHERE state_name = 'ohio'"],
            "q-two",
            0,
            "partial_success",
            "1 of 2",
            id="partial_success",
        ),
        pytest.param(
            ["SELECT COUNT(*) FROM city", RIGHT_POPULATION, RIGHT_CAPITAL],
            "q-two",
            0,
            "success",
            "all 2",
            id="success_two_required_any_order",
        ),
        pytest.param([RIGHT_CAPITAL], "q-capital", 0, "success", "all 1", id="success"),
        pytest.param(
            ["SELECT state_name FROM state ORDER BY area ASC LIMIT 3"],
            "q-order",
            0,
            "execution_error",
            "no statement matches",
            id="ordered_gold_wrong_rows",
        ),
        pytest.param(
            [
                "SELECT state_name FROM (SELECT state_name, area FROM state ORDER BY area DESC LIMIT 3) ORDER BY area DESC"
            ],
            "q-order",
            0,
            "success",
            "all 1",
            id="ordered_gold_same_order",
        ),
        pytest.param([], "q-capital", 0, "execution_error", "no statement", id="no_statement"),
    ],
)
def test_outcome_classes_and_precedence(
    db: SQLiteTestDatabase,
    audit: Any,
    catalog: CanonicalCatalog,
    statements: list[str],
    question_id: str,
    extra_calls: int,
    outcome: str,
    reason_part: str,
) -> None:
    run = _run(statements, question_id, _tools("state", extra=extra_calls))
    result = classify_run(run, audit, db, catalog, SETTINGS)
    assert result.outcome == outcome
    assert reason_part in result.reason


def test_budget_boundary_is_more_than_the_budget(db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog) -> None:
    at_budget = _run([RIGHT_CAPITAL], tool_calls=_tools("state", extra=8))
    over = _run([RIGHT_CAPITAL], tool_calls=_tools("state", extra=9))
    assert (
        len(at_budget.tool_calls) == 10 and classify_run(at_budget, audit, db, catalog, SETTINGS).outcome == "success"
    )
    assert len(over.tool_calls) == 11 and classify_run(over, audit, db, catalog, SETTINGS).outcome == "budget_exceeded"


def test_statement_evidence_and_reference_rows(db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog) -> None:
    result = classify_run(_run(["SELECT COUNT(*) FROM city", RIGHT_CAPITAL]), audit, db, catalog, SETTINGS)
    first, second = result.statements
    assert (first.outcome, first.row_count, first.matches_gold) == (
        "no_match",
        len(_reference("SELECT COUNT(*) FROM city")),
        [],
    )
    assert (second.outcome, second.execution_status, second.matches_gold) == ("match", "ok", [0])
    assert _reference(RIGHT_CAPITAL) == _reference(GOLD[0].gold_sql[0]) == [("austin",)]
    assert result.tables_used == ["city", "state"] and result.tables_looked_up == ["state"]
    assert result.catalog_traceability == 0.5
    assert result.cost_usd == pytest.approx((1000 * 1.0 + 200 * 4.0) / 1e6) and result.cost_source == "tariff"


def test_extra_statements_beyond_the_maximum_are_flagged_not_checked(
    db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog
) -> None:
    run = _run(["SELECT 1"] * 5 + [RIGHT_CAPITAL])
    result = classify_run(run, audit, db, catalog, SETTINGS)
    assert len(result.statements) == 5 and result.outcome == "execution_error"
    assert result.flags == ["too_many_statements: 6 logged, only the first 5 checked"]


def test_hive_dialect_statements_are_parsed_in_hive_and_run_on_sqlite(
    db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog
) -> None:
    hive = SETTINGS.model_copy(update={"dialect": "hive"})
    ok = classify_run(_run(["SELECT `capital` FROM `state` WHERE `state_name` = 'texas'"]), audit, db, catalog, hive)
    assert ok.outcome == "success"
    bad = classify_run(_run(["SELECT capital FROM state WHERE state_name = 'texas' QUALIFY"]), audit, db, catalog, hive)
    assert bad.outcome == "syntax_error"


def test_baseline_mode_compares_only_the_final_answer(
    db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog
) -> None:
    correct = classify_run(
        _run(["SELEC broken", RIGHT_CAPITAL], tool_calls=[], campaign_id="baseline-static"),
        audit,
        db,
        catalog,
        SETTINGS,
    )
    assert (correct.outcome, len(correct.statements)) == ("correct", 1)
    wrong = classify_run(
        _run([RIGHT_CAPITAL, "SELECT capital FROM state"], tool_calls=[], campaign_id="baseline-static"),
        audit,
        db,
        catalog,
        SETTINGS,
    )
    assert wrong.outcome == "incorrect" and wrong.reason == "final answer no_match: result differs from the gold answer"
    flagged = classify_run(_run([RIGHT_CAPITAL], campaign_id="baseline-static"), audit, db, catalog, SETTINGS)
    assert flagged.outcome == "correct" and flagged.flags == ["baseline_with_tool_calls: 2"]
    metrics, _, _ = evidence_documents(_run([RIGHT_CAPITAL], campaign_id="baseline-static"), flagged, catalog, SETTINGS)
    assert metrics["outcome"] == "correct" and metrics["latencyMs"] is None and metrics["costUsd"] is None


# --------------------------------------------------------------------------- read-only, timeout, row cap


@pytest.mark.parametrize(
    ("statement", "outcome"),
    [
        pytest.param("DROP TABLE state", "execution_error", id="drop"),
        pytest.param("DELETE FROM city", "execution_error", id="delete"),
        pytest.param("INSERT INTO state (state_name) VALUES ('atlantis')", "execution_error", id="insert"),
        pytest.param("UPDATE city SET population = 0", "execution_error", id="update"),
        pytest.param("PRAGMA query_only = OFF", "execution_error", id="pragma"),
        pytest.param("CREATE TABLE t AS SELECT * FROM city", "structural_error", id="create_as_select_unknown_table"),
    ],
)
def test_write_statements_never_modify_the_database(tmp_path: Path, statement: str, outcome: str) -> None:
    copy = tmp_path / "geo.sqlite"
    shutil.copyfile(DB, copy)
    before, cities = _sha(copy), _reference("SELECT COUNT(*) FROM city", copy)
    database = SQLiteTestDatabase(copy)
    try:
        raw = database.execute(statement, 1.0, 10)  # even straight to the engine, bypassing the SELECT-only check
        result = run_campaign([_run([statement, RIGHT_CAPITAL])], GOLD[:1], database, SETTINGS).results[0]
    finally:
        database.close()
    assert raw.status == "error"
    assert result.outcome == outcome and result.statements[0].execution_status in {"refused", None}
    assert result.statements[1].outcome == "match"
    assert _sha(copy) == before and _reference("SELECT COUNT(*) FROM city", copy) == cities == [(386,)]


def test_slow_statement_is_stopped_by_the_timeout(
    db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog
) -> None:
    quick = SETTINGS.model_copy(update={"timeout_s": 0.2})
    started = time.perf_counter()
    result = classify_run(_run([SLOW_CTE]), audit, db, catalog, quick)
    assert time.perf_counter() - started < 2.0
    assert result.outcome == "execution_error" and result.statements[0].execution_status == "timeout"
    assert "0.2 s statement timeout" in result.reason


def test_row_cap(db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog) -> None:
    capped = SETTINGS.model_copy(update={"row_cap": 10})
    result = classify_run(_run(["SELECT city_name FROM city"]), audit, db, catalog, capped)
    assert result.outcome == "execution_error" and result.statements[0].execution_status == "row_cap"
    raw = db.execute("SELECT city_name FROM city", 1.0, 386)
    assert raw.status == "ok" and len(raw.rows) == len(_reference("SELECT city_name FROM city")) == 386


def test_duckdb_test_database_is_read_only(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "t.duckdb"
    with duckdb.connect(str(path)) as setup:
        setup.execute("CREATE TABLE state AS SELECT 'texas' AS state_name, 'austin' AS capital")
    database = open_test_database(path)
    try:
        assert isinstance(database, DuckDBTestDatabase)
        assert database.catalog() == {"state": ["state_name", "capital"]}
        assert database.execute("SELECT capital FROM state", 1.0, 10).rows == (("austin",),)
        assert database.execute("DROP TABLE state", 1.0, 10).status == "error"
        result = run_campaign([_run([RIGHT_CAPITAL])], GOLD[:1], database, SETTINGS).results[0]
        assert result.outcome == "success"
    finally:
        database.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "no such test database", id="missing"),
        pytest.param(b"hello world, not a db", "neither a SQLite nor a DuckDB file", id="not_a_database"),
    ],
)
def test_open_test_database_rejects(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "x.db"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        open_test_database(path)


# --------------------------------------------------------------------------- inputs, cost, schemas


def test_read_jsonl_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(
        '{"run_id": "a", "campaign_id": "mcp", "question_id": "q", "question": "?"}\n\n{"run_id": "b", "campaign_id": "mcp", "question": "?"}\n'
    )
    with pytest.raises(InputError, match=r"runs.jsonl:3: field `question_id`: Field required"):
        read_jsonl(path, CampaignRunLog)


def test_load_catalog_rejects_wrong_shape(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text('{"state": "state_name"}')
    with pytest.raises(InputError, match="not a catalog of the form"):
        load_catalog(path)


@pytest.mark.parametrize(
    ("tokens", "model", "cost_usd", "expected"),
    [
        pytest.param({"prompt": 1000, "completion": 500}, "m1", None, (0.003, "tariff"), id="tariff_split"),
        pytest.param(2000, "m1", None, (0.002, "tariff"), id="tariff_total_at_input_rate"),
        pytest.param(2000, "unknown-model", 0.5, (0.5, "logged"), id="logged_fallback"),
        pytest.param(None, "m1", None, (None, None), id="nothing"),
    ],
)
def test_run_cost(tokens: Any, model: str, cost_usd: float | None, expected: tuple[float | None, str | None]) -> None:
    settings = SETTINGS.model_copy(update={"use_litellm_prices": False})
    run = CampaignRunLog(
        run_id="r",
        campaign_id="mcp",
        question_id="q",
        question="?",
        tokens=tokens,
        model_version=model,
        cost_usd=cost_usd,
    )
    assert run_cost(run, settings) == expected


def test_json_schemas_validate_the_bundled_sample() -> None:
    import jsonschema

    schemas = json_schemas()
    for line in (SAMPLE / "runs.jsonl").read_text().splitlines()[:5]:
        jsonschema.validate(json.loads(line), schemas["run_log"])
    for line in (SAMPLE / "gold.jsonl").read_text().splitlines():
        jsonschema.validate(json.loads(line), schemas["gold_question"])
    jsonschema.validate(json.loads((SAMPLE / "catalog.json").read_text()), schemas["catalog"])
    jsonschema.validate(json.loads((SAMPLE / "settings.json").read_text()), schemas["settings"])
    with pytest.raises(jsonschema.ValidationError, match="'gold_sql' is a required property"):
        jsonschema.validate({"question_id": "q", "question": "?"}, schemas["gold_question"])


# --------------------------------------------------------------------------- calibration


def test_calibration_report_by_hand(db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog) -> None:
    runs = [
        (_run([RIGHT_CAPITAL]).model_copy(update={"run_id": "a"}), 95.0),
        (_run(["SELECT capital FROM state WHERE state_name = 'ohio'"]).model_copy(update={"run_id": "b"}), 80.0),
        (_run(["SELEC x"]).model_copy(update={"run_id": "c"}), None),
        (_run([RIGHT_CAPITAL]).model_copy(update={"run_id": "d"}), 60.0),
    ]
    results = [classify_run(r, audit, db, catalog, SETTINGS) for r, _ in runs]
    evaluations = [
        Evaluation(run_id=r.run_id, status=EvaluationStatus.EVALUATED, score=s)
        if s is not None
        else Evaluation(run_id=r.run_id, status=EvaluationStatus.PARSE_ERROR)
        for r, s in runs
    ]
    report = calibration_report(results, evaluations)
    # positives a (95), d (60); negatives b (80), c (unscored = 0): pairs won 95>80, 95>0, 60>0, lost 60<80 -> 3/4
    assert (report.runs, report.scored, report.positives, report.auroc) == (4, 3, 2, 0.75)
    by_threshold = {c.threshold: (c.tp, c.fp, c.fn, c.tn) for c in report.confusion}
    assert by_threshold == {50.0: (2, 1, 0, 1), 75.0: (1, 1, 1, 1), 90.0: (1, 0, 1, 2)}
    assert report.mean_score_by_outcome == {"syntax_error": None, "execution_error": 80.0, "success": 77.5}
