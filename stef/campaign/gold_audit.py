"""The gold audit: every gold statement G_i is executed before any run is classified.

Source: the seed's step "Auditar executabilidade das colas G_i" (``seeds/003``), issue 6. A
question whose gold fails or returns no row is excluded with the reason, as is one whose gold is
ambiguous (listed twice, or named by a rejected line of the battery).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot.errors import SqlglotError

from stef.campaign.models import CampaignSettings, GoldAudit, GoldAuditItem, GoldQuestion, SkippedRun
from stef.campaign.sandbox import ExecutionResult, TestDatabase
from stef.pipeline.dialects import parse_sql_text


def _too_deep_for_the_parser(sql: str, dialect: str) -> bool:
    """Whether sqlglot's recursive parser gives up on ``sql`` (nesting deeper than Python's recursion limit)."""
    try:
        parse_sql_text(sql, dialect)
    except RecursionError:
        return True
    except SqlglotError:
        return False
    return False


def _ambiguity(
    gold: Sequence[GoldQuestion], line_numbers: Sequence[int] | None, invalid: Sequence[SkippedRun]
) -> dict[str, str]:
    """question_id -> why its gold cannot be trusted: a line naming it is invalid, or it is listed twice."""
    reasons: dict[str, str] = {}
    for line in invalid:
        if line.question_id is not None:
            reasons.setdefault(line.question_id, f"{line.where()} is not a valid gold question: {line.reason}")
    lines: dict[str, list[int | None]] = {}
    for index, question in enumerate(gold):
        lines.setdefault(question.question_id, []).append(None if line_numbers is None else line_numbers[index])
    for question_id, where in lines.items():
        if len(where) > 1 and question_id not in reasons:
            numbers = [str(n) for n in where if n is not None]
            on = f" (lines {', '.join(numbers[:-1])} and {numbers[-1]})" if len(numbers) == len(where) else ""
            reasons[question_id] = f"question_id {question_id!r} appears {len(where)} times in the gold battery{on}"
    return reasons


def audit_gold(
    gold: Sequence[GoldQuestion],
    db: TestDatabase,
    settings: CampaignSettings,
    *,
    engine_dialect: str = "sqlite",
    line_numbers: Sequence[int] | None = None,
    invalid: Sequence[SkippedRun] = (),
) -> GoldAudit:
    """Execute every gold statement first (the seed's "Auditar executabilidade das colas G_i").

    A question whose gold statement fails, times out, passes the row cap or returns no row is
    excluded, with the reason; its runs are not classified. So is one whose gold statement the
    engine runs but sqlglot cannot parse for its depth (e.g. 600 nested ``NOT`` on DuckDB): its
    top-level ORDER BY, which decides how rows are compared, cannot be read. A question whose gold
    is ambiguous is excluded without being executed: its ``question_id`` is listed twice, or a
    rejected line of the battery names it (its runs would otherwise be compared with a gold that
    is not the one meant). One bad question never stops the audit.

    Args:
        gold: the battery.
        db: the test database (gold SQL is executed as written, in SQLite/DuckDB syntax).
        settings: timeout and row cap.
        engine_dialect: the sqlglot dialect of ``db`` (``sqlite`` or ``duckdb``).
        line_numbers: the file line of each question (named in the reason of a repeated id), or ``None``.
        invalid: the rejected lines of the battery (:func:`stef.campaign.inputs.read_jsonl`).

    Returns:
        A :class:`GoldAudit` (``results`` keeps the gold rows for comparison); one item per
        ``question_id``, in battery order, then the ones only rejected lines name.
    """
    ambiguous = _ambiguity(gold, line_numbers, invalid)
    items: list[GoldAuditItem] = []
    questions: dict[str, GoldQuestion] = {}
    results: dict[str, list[ExecutionResult]] = {}
    for question in gold:
        if question.question_id in questions:
            continue  # listed twice: excluded with its first line (`ambiguous`)
        questions[question.question_id] = question
        if question.question_id in ambiguous:
            items.append(
                GoldAuditItem(question_id=question.question_id, ok=False, reason=ambiguous[question.question_id])
            )
            continue
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
    for question_id, reason in ambiguous.items():
        if question_id not in questions:  # named only by rejected lines
            items.append(GoldAuditItem(question_id=question_id, ok=False, reason=reason))
    return GoldAudit(items=items, questions=questions, results=results)


__all__ = ["audit_gold"]
