"""A whole campaign (issue 6): runs of excluded or unknown questions are skipped with the reason.

Reference: Python's ``sqlite3`` on the bundled GeoQuery database (flows/campaign_data/).
"""

from __future__ import annotations

from stef.campaign.models import GoldQuestion, SkipStatus
from stef.campaign.run import run_campaign
from stef.campaign.sandbox import SQLiteTestDatabase
from tests.stef.campaign.support import (
    SETTINGS,
    run_log,
)


def test_runs_of_excluded_questions_are_skipped_with_the_reason(db: SQLiteTestDatabase) -> None:
    gold = [
        GoldQuestion(
            question_id="q-empty", question="?", gold_sql=["SELECT capital FROM state WHERE state_name = 'atlantis'"]
        )
    ]
    runs = [
        run_log(["SELECT 1"], question_id="q-empty"),
        run_log(["SELECT 1"], question_id="q-unknown").model_copy(update={"run_id": "r2"}),
        run_log(
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
    # no campaign classified a run: none gets a summary (writing or storing one would replace the
    # campaign's earlier evidence and outcomes with nothing); the lines keep their reasons
    assert result.summaries == []
    assert [(s.campaign_id, s.run_id, s.status, s.reason, s.line_number) for s in result.not_classified()] == [
        ("mcp", "r1", SkipStatus.QUESTION_EXCLUDED, result.skipped["mcp"]["r1"], None),
        ("mcp", "r2", SkipStatus.UNKNOWN_QUESTION, result.skipped["mcp"]["r2"], None),
        ("baseline-static", "r1", SkipStatus.UNKNOWN_QUESTION, result.skipped["baseline-static"]["r1"], None),
    ]
