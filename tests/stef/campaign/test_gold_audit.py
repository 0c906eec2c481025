"""The gold audit (seeds/003 "Auditar executabilidade das colas G_i", issue 6): executable gold is
kept, failing or empty gold is excluded with the reason.

Reference: Python's ``sqlite3`` on the bundled GeoQuery database (flows/campaign_data/).
"""

from __future__ import annotations

import pytest

from stef.campaign.gold_audit import audit_gold
from stef.campaign.models import GoldQuestion
from stef.campaign.sandbox import SQLiteTestDatabase
from stef.errors import InputError
from tests.stef.campaign.support import (
    GOLD,
    SETTINGS,
    reference_rows,
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


def test_gold_audit_rejects_duplicate_question_ids(db: SQLiteTestDatabase) -> None:
    with pytest.raises(InputError, match="question_id 'q-capital' appears twice"):
        audit_gold([GOLD[0], GOLD[0]], db, SETTINGS)
