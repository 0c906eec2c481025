"""The gold audit: every gold statement G_i is executed before any run is classified.

Source: the seed's step "Auditar executabilidade das colas G_i" (``seeds/003``), issue 6. A
question whose gold fails or returns no row is excluded with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlglot
from sqlglot.errors import SqlglotError

from stef.campaign.models import CampaignSettings, GoldAudit, GoldAuditItem, GoldQuestion
from stef.campaign.sandbox import ExecutionResult, TestDatabase
from stef.errors import InputError


def _too_deep_for_the_parser(sql: str, dialect: str) -> bool:
    """Whether sqlglot's recursive parser gives up on ``sql`` (nesting deeper than Python's recursion limit)."""
    try:
        sqlglot.parse(sql, read=dialect or None)
    except RecursionError:
        return True
    except SqlglotError:
        return False
    return False


def audit_gold(
    gold: Iterable[GoldQuestion], db: TestDatabase, settings: CampaignSettings, *, engine_dialect: str = "sqlite"
) -> GoldAudit:
    """Execute every gold statement first (the seed's "Auditar executabilidade das colas G_i").

    A question whose gold statement fails, times out, passes the row cap or returns no row is
    excluded, with the reason; its runs are not classified. So is one whose gold statement the
    engine runs but sqlglot cannot parse for its depth (e.g. 600 nested ``NOT`` on DuckDB): its
    top-level ORDER BY, which decides how rows are compared, cannot be read.

    Args:
        gold: the battery.
        db: the test database (gold SQL is executed as written, in SQLite/DuckDB syntax).
        settings: timeout and row cap.
        engine_dialect: the sqlglot dialect of ``db`` (``sqlite`` or ``duckdb``).

    Returns:
        A :class:`GoldAudit` (``results`` keeps the gold rows for comparison).

    Raises:
        InputError: two gold questions share a ``question_id``.
    """
    items: list[GoldAuditItem] = []
    questions: dict[str, GoldQuestion] = {}
    results: dict[str, list[ExecutionResult]] = {}
    for question in gold:
        if question.question_id in questions:
            raise InputError(f"gold battery: question_id {question.question_id!r} appears twice")
        questions[question.question_id] = question
        executed = [db.execute(sql, settings.timeout_s, settings.row_cap) for sql in question.gold_sql]
        reason = None
        for index, result in enumerate(executed):
            if result.status != "ok":
                reason = f"gold statement {index + 1} {result.status}: {result.message}"
                break
            if not result.rows:
                reason = f"gold statement {index + 1} returned no rows"
                break
            if _too_deep_for_the_parser(question.gold_sql[index], engine_dialect):
                reason = (
                    f"gold statement {index + 1} nests too deeply for sqlglot's parser (its ORDER BY cannot be read)"
                )
                break
        items.append(
            GoldAuditItem(
                question_id=question.question_id,
                ok=reason is None,
                reason=reason,
                row_counts=[len(r.rows) for r in executed],
            )
        )
        if reason is None:
            results[question.question_id] = executed
    return GoldAudit(items=items, questions=questions, results=results)


__all__ = ["audit_gold"]
