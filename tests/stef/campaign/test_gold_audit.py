"""The gold audit (seeds/003 "Auditar executabilidade das colas G_i", issue 6): executable gold is
kept, failing or empty gold is excluded with the reason.

Reference: Python's ``sqlite3`` on the bundled GeoQuery database (flows/campaign_data/).
"""

from __future__ import annotations

from stef.campaign.classify import _has_top_level_order
from stef.campaign.gold_audit import audit_gold
from stef.campaign.models import GoldQuestion
from stef.campaign.run import run_campaign
from stef.campaign.sandbox import DuckDBTestDatabase, SQLiteTestDatabase
from tests.stef.campaign.support import (
    CAPITAL,
    DUCKDB_SETTINGS,
    GOLD,
    RIGHT,
    SETTINGS,
    reference_rows,
    statement_run,
)


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
    assert by_id["q-capital"].ok and by_id["q-capital"].row_counts == [len(reference_rows(GOLD[0].gold_sql[0]))] == [1]
    assert [i.question_id for i in audit.excluded] == ["q-broken", "q-empty", "q-write"]
    assert "no such column: nope" in (by_id["q-broken"].reason or "")
    assert by_id["q-empty"].reason == "gold statement 1 returned no rows"
    assert "not authorized" in (by_id["q-write"].reason or "")
    assert list(audit.results) == ["q-capital"]
    assert audit.results["q-capital"][0].rows == tuple(reference_rows(GOLD[0].gold_sql[0]))


def test_gold_audit_excludes_a_repeated_question_id_and_goes_on(db: SQLiteTestDatabase) -> None:
    """A question_id listed twice was an InputError that stopped the campaign; now that question is
    excluded (its gold is ambiguous) and the others are audited."""
    audit = audit_gold([GOLD[0], GOLD[1], GOLD[0]], db, SETTINGS, line_numbers=[1, 2, 7])
    assert [(i.question_id, i.ok, i.reason) for i in audit.items] == [
        ("q-capital", False, "question_id 'q-capital' appears 2 times in the gold battery (lines 1 and 7)"),
        ("q-two", True, None),
    ]
    assert list(audit.results) == ["q-two"]
    assert audit.results["q-two"][1].rows == tuple(reference_rows(GOLD[1].gold_sql[1]))


def test_a_gold_too_deep_for_sqlglot_is_excluded_and_the_campaign_goes_on(duck: DuckDBTestDatabase) -> None:
    """DuckDB runs 600 nested ``NOT``; sqlglot's recursive parser does not: reading the gold's ORDER BY
    raised RecursionError out of run_campaign (``stef campaign run`` ended in a traceback, nothing stored)."""
    deep = GoldQuestion(question_id="q-deep", question="?", gold_sql=["SELECT " + "NOT " * 600 + "true AS x"])
    runs = [
        statement_run("SELECT true AS x", "deep").model_copy(update={"question_id": "q-deep"}),
        statement_run(RIGHT, "capital"),
    ]
    result = run_campaign(runs, [deep, CAPITAL], duck, DUCKDB_SETTINGS)
    deep_item, capital_item = result.audit.items
    assert not deep_item.ok and "nests too deeply for sqlglot's parser" in (deep_item.reason or "")
    assert capital_item.ok
    assert result.skipped == {"mcp": {"deep": f"question excluded by the gold audit: {deep_item.reason}"}}
    assert [(r.run_id, r.outcome) for r in result.results] == [("capital", "success")]
    assert not _has_top_level_order(deep.gold_sql[0], "duckdb")  # classify_run called directly does not raise either
