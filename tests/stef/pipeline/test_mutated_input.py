"""Mutated answers never crash the evaluation (a seeded fuzz over the bundled demo day's records).

Each case inserts pieces of SQL syntax and hostile text (INTO clauses, comments, placeholders,
fences, zero-width and halfwidth characters, package calls ...) into a real answer or its
question, truncates or deletes spans, and evaluates it in one of nine dialects: every record
gets a typed status (never ``internal_error`` nor an exception out of :func:`evaluate`), and a
verdict agrees with its P(correct). The fuzz this test keeps found the parser faults of
``stef.pipeline.dialects.PARSER_FAULTS`` and the Snowflake generator's ``OptimizeError``.
"""

from __future__ import annotations

import json
import random

import pytest

from stef.models import AgentLogRecord, EvaluationStatus, Verdict
from stef.pipeline.evaluate import evaluate
from tests.support.checkout import REPO_ROOT

DEMO_DAY = REPO_ROOT / "flows" / "demo_data" / "2026-11-26" / "agent-logs.jsonl"
PIECES = (
    " INTO OUTFILE '/x'",
    " INTO @v",
    " INTO DUMPFILE",
    " INTO",
    " @",
    " @@",
    "'",
    '"',
    "`",
    "(",
    ")",
    ";",
    "--",
    "/*",
    "*/",
    "/*!",
    " UNION SELECT 1",
    " EXCEPT ",
    " NOT ",
    "\u200b",
    "\uff76\uff9e",
    "\ufeff",
    "```",
    "```sql\n",
    " FOR UPDATE",
    " FIELDS TERMINATED BY",
    " utl_http.request('x')",
    ".",
    ",",
    " WHERE",
    " GROUP BY",
    " HAVING",
    " LIMIT 1",
    "?",
    "$1",
    ":name",
    "[",
    "]",
    "{",
    "}",
    "\\",
)
DIALECTS = (None, "sqlite", "mysql", "postgres", "tsql", "oracle", "bigquery", "snowflake", "duckdb")
CASES = 1500


def mutate(text: str, rng: random.Random) -> str:
    """``text`` with one to four random edits: a piece inserted, the rest cut off, or a span deleted."""
    for _ in range(rng.randint(1, 4)):
        position = rng.randint(0, len(text))
        roll = rng.random()
        if roll < 0.6:
            text = text[:position] + rng.choice(PIECES) + text[position:]
        elif roll < 0.8:
            text = text[:position]
        else:
            text = text[:position] + text[position + rng.randint(1, 10) :]
    return text


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_mutated_answer_always_gets_a_typed_status(seed: int) -> None:
    records = [json.loads(line) for line in DEMO_DAY.read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(seed)
    statuses: set[EvaluationStatus] = set()
    for number in range(CASES):
        source = rng.choice(records)
        question = source["question"]
        if rng.random() < 0.2:
            question = mutate(question, rng)
        record = AgentLogRecord(
            run_id=f"m{number}",
            question=question if question.strip() else "How many?",
            enriched_question=source.get("enriched_question"),
            sql=mutate(source["sql"], rng) or "x",
            dialect=rng.choice(DIALECTS),
        )
        evaluation = evaluate(record)
        assert evaluation.status is not EvaluationStatus.INTERNAL_ERROR, (record.sql, evaluation.status_reason)
        statuses.add(evaluation.status)
        if evaluation.verdict is not None:
            assert evaluation.p_correct is not None
            assert (evaluation.p_correct >= 0.5) == (evaluation.verdict in (Verdict.CORRECT, Verdict.LIKELY_CORRECT))
    assert {EvaluationStatus.EVALUATED, EvaluationStatus.PARSE_ERROR} <= statuses  # the mutations reach both
