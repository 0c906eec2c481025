"""Run classification (DESIGN.md §7, seeds/003, issue 6): the six outcome classes and their precedence,
the tool-call budget, baseline mode, the run cost C_i.

Reference: Python's ``sqlite3`` on the bundled GeoQuery database (flows/campaign_data/).
"""

from __future__ import annotations

from typing import Any

import pytest

from stef.campaign.classify import classify_run, run_cost
from stef.campaign.evidence import evidence_documents
from stef.campaign.models import CampaignRunLog, CanonicalCatalog
from stef.campaign.sandbox import SQLiteTestDatabase
from tests.stef.campaign.support import (
    GOLD,
    RIGHT_CAPITAL,
    RIGHT_POPULATION,
    SETTINGS,
    catalog_calls,
    reference_rows,
    run_log,
)


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
    run = run_log(statements, question_id, catalog_calls("state", extra=extra_calls))
    result = classify_run(run, audit, db, catalog, SETTINGS)
    assert result.outcome == outcome
    assert reason_part in result.reason


def test_budget_boundary_is_more_than_the_budget(db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog) -> None:
    at_budget = run_log([RIGHT_CAPITAL], tool_calls=catalog_calls("state", extra=8))
    over = run_log([RIGHT_CAPITAL], tool_calls=catalog_calls("state", extra=9))
    assert (
        len(at_budget.tool_calls) == 10 and classify_run(at_budget, audit, db, catalog, SETTINGS).outcome == "success"
    )
    assert len(over.tool_calls) == 11 and classify_run(over, audit, db, catalog, SETTINGS).outcome == "budget_exceeded"


def test_statement_evidence_and_reference_rows(db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog) -> None:
    result = classify_run(run_log(["SELECT COUNT(*) FROM city", RIGHT_CAPITAL]), audit, db, catalog, SETTINGS)
    first, second = result.statements
    assert (first.outcome, first.row_count, first.matches_gold) == (
        "no_match",
        len(reference_rows("SELECT COUNT(*) FROM city")),
        [],
    )
    assert (second.outcome, second.execution_status, second.matches_gold) == ("match", "ok", [0])
    assert reference_rows(RIGHT_CAPITAL) == reference_rows(GOLD[0].gold_sql[0]) == [("austin",)]
    assert result.tables_used == ["city", "state"] and result.tables_looked_up == ["state"]
    assert result.catalog_traceability == 0.5
    assert result.cost_usd == pytest.approx((1000 * 1.0 + 200 * 4.0) / 1e6) and result.cost_source == "tariff"


def test_extra_statements_beyond_the_maximum_are_flagged_not_checked(
    db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog
) -> None:
    run = run_log(["SELECT 1"] * 5 + [RIGHT_CAPITAL])
    result = classify_run(run, audit, db, catalog, SETTINGS)
    assert len(result.statements) == 5 and result.outcome == "execution_error"
    assert result.flags == ["too_many_statements: 6 logged, only the first 5 checked"]


def test_hive_dialect_statements_are_parsed_in_hive_and_run_on_sqlite(
    db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog
) -> None:
    hive = SETTINGS.model_copy(update={"dialect": "hive"})
    ok = classify_run(run_log(["SELECT `capital` FROM `state` WHERE `state_name` = 'texas'"]), audit, db, catalog, hive)
    assert ok.outcome == "success"
    bad = classify_run(
        run_log(["SELECT capital FROM state WHERE state_name = 'texas' QUALIFY"]), audit, db, catalog, hive
    )
    assert bad.outcome == "syntax_error"


def test_a_statement_the_parser_faults_on_is_a_syntax_error(
    db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog
) -> None:
    """sqlglot's PostgreSQL parser raises a TypeError on a stray ``?``: the run's classification
    raised it instead of calling the statement a syntax error."""
    postgres = SETTINGS.model_copy(update={"dialect": "postgres"})
    bad = classify_run(run_log(["SELECT capital? FROM state"]), audit, db, catalog, postgres)
    assert bad.outcome == "syntax_error"
    assert "the parser failed on this SQL (TypeError: " in (bad.statements[0].message or "")


def test_baseline_mode_compares_only_the_final_answer(
    db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog
) -> None:
    correct = classify_run(
        run_log(["SELEC broken", RIGHT_CAPITAL], tool_calls=[], campaign_id="baseline-static"),
        audit,
        db,
        catalog,
        SETTINGS,
    )
    assert (correct.outcome, len(correct.statements)) == ("correct", 1)
    wrong = classify_run(
        run_log([RIGHT_CAPITAL, "SELECT capital FROM state"], tool_calls=[], campaign_id="baseline-static"),
        audit,
        db,
        catalog,
        SETTINGS,
    )
    assert wrong.outcome == "incorrect" and wrong.reason == "final answer no_match: result differs from the gold answer"
    flagged = classify_run(run_log([RIGHT_CAPITAL], campaign_id="baseline-static"), audit, db, catalog, SETTINGS)
    assert flagged.outcome == "correct" and flagged.flags == ["baseline_with_tool_calls: 2"]
    metrics, _, _ = evidence_documents(
        run_log([RIGHT_CAPITAL], campaign_id="baseline-static"), flagged, catalog, SETTINGS
    )
    assert metrics["outcome"] == "correct" and metrics["latencyMs"] is None and metrics["costUsd"] is None


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


def test_litellm_prices_come_from_the_local_price_table() -> None:
    """A campaign pricing a model at litellm's price imported litellm plainly: without
    ``LITELLM_LOCAL_MODEL_COST_MAP`` it fetches its price table from the network first (retries,
    seconds offline). In a fresh process without the variable, the price is litellm's local one."""
    import os
    import subprocess
    import sys

    script = (
        "import os\n"
        "from stef.campaign.classify import run_cost\n"
        "from stef.campaign.models import CampaignRunLog, CampaignSettings\n"
        "run = CampaignRunLog(run_id='r', campaign_id='c', question_id='q', question='?', tokens=1_000_000, model_version='gpt-4o-mini')\n"
        "print(run_cost(run, CampaignSettings()), os.environ.get('LITELLM_LOCAL_MODEL_COST_MAP'))\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "LITELLM_LOCAL_MODEL_COST_MAP"}
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    assert shown.stdout.strip() == "(0.15, 'litellm') True"
