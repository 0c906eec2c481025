"""Build the bundled demo logs (``flows/demo_data/``) from the NL2SQL-BUGs development split.

The demo shows one agent, ``bird-analyst``, answering BIRD questions over three consecutive days
while release ``v1.5.0`` is rolled out next to ``v1.4.0`` (canary: 1/3 of the traffic on the
first day, 2/3 on the last). ``v1.5.0`` draws a larger share of records that NL2SQL-BUGs labels
semantically incorrect, so the nightly scores of the two versions differ visibly.

Output (every run with the same source file and seed writes byte-identical files)::

    <out>/<YYYY-MM-DD>/agent-logs.jsonl   one AgentLogRecord per line, time-ordered, no labels
    <out>/labels.jsonl                    run_id, label, error_types, ... (to check scores against)

A few lines are damaged the way real logs are (a truncated line, an empty SQL, SQL inside a
markdown fence with prose before it, a SELECT followed by a DROP TABLE) so the demo shows the
quarantine and the typed statuses; ``labels.jsonl`` says which record was changed and how.

Usage (from the repository root; the source defaults to the shared checkout beside it)::

    python scripts/make_demo_data.py --source ../shared/data/nl2sql_bugs/dev.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp

AGENT_ID = "bird-analyst"
OLD_VERSION = "v1.4.0"
NEW_VERSION = "v1.5.0"
FIRST_DAY = date(2026, 11, 24)
DAY_PLAN: tuple[tuple[int, int], ...] = ((80, 40), (60, 60), (40, 80))
"""Records per day as (``v1.4.0``, ``v1.5.0``): the canary rollout of ``v1.5.0``."""
CORRECT_SHARE = {OLD_VERSION: 0.75, NEW_VERSION: 0.45}
"""Share of label-true (semantically correct) records drawn for each version."""
DEFAULT_SEED = 20261124
LOG_FILE_NAME = "agent-logs.jsonl"
RUN_ID_PREFIX = "nl2sql-bugs-"


@dataclass(frozen=True, slots=True)
class Damage:
    """A realistic defect applied to one sampled record.

    Attributes:
        kind: ``truncated_line``, ``empty_sql``, ``markdown_fence`` or ``drop_table``.
        day: index of the day (0-based) the record is taken from.
        version: agent version the record is taken from.
        label: the NL2SQL-BUGs label the chosen record must have (``True``: start from a correct
            SQL so the defect is the only problem).
    """

    kind: str
    day: int
    version: str
    label: bool


DAMAGES: tuple[Damage, ...] = (
    Damage("empty_sql", 0, OLD_VERSION, True),
    Damage("truncated_line", 1, NEW_VERSION, True),
    Damage("markdown_fence", 1, NEW_VERSION, True),
    Damage("drop_table", 2, NEW_VERSION, True),
)


def load_source(path: Path) -> list[dict[str, Any]]:
    """Read the NL2SQL-BUGs JSONL file, sorted by ``id`` so sampling does not depend on line order.

    Raises:
        SystemExit: the file is missing or a line lacks a required field.
    """
    if not path.is_file():
        raise SystemExit(f"{path}: source file not found (pass --source PATH to dev.jsonl)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    required = {"id", "question", "evidence", "db_id", "sql", "label", "error_types"}
    for number, row in enumerate(rows, start=1):
        missing = required - row.keys()
        if missing:
            raise SystemExit(f"{path}: line {number} lacks {sorted(missing)}")
    return sorted(rows, key=lambda row: int(row["id"]))


def sample(rows: Sequence[dict[str, Any]], rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    """Draw each version's records without replacement, in the version's correct/incorrect mix.

    Returns:
        ``{version: [source row, ...]}`` shuffled, with as many rows as ``DAY_PLAN`` needs.

    Raises:
        SystemExit: the source holds too few correct or incorrect rows.
    """
    correct = [row for row in rows if row["label"] is True]
    incorrect = [row for row in rows if row["label"] is False]
    rng.shuffle(correct)
    rng.shuffle(incorrect)
    picked: dict[str, list[dict[str, Any]]] = {}
    for column, version in enumerate((OLD_VERSION, NEW_VERSION)):
        total = sum(plan[column] for plan in DAY_PLAN)
        n_correct = round(total * CORRECT_SHARE[version])
        n_incorrect = total - n_correct
        if n_correct > len(correct) or n_incorrect > len(incorrect):
            raise SystemExit("source file has too few labelled rows for the demo plan")
        chosen = correct[:n_correct] + incorrect[:n_incorrect]
        del correct[:n_correct], incorrect[:n_incorrect]
        rng.shuffle(chosen)
        picked[version] = chosen
    return picked


def log_record(row: dict[str, Any], version: str, timestamp: datetime) -> dict[str, Any]:
    """Map one NL2SQL-BUGs row to an ``AgentLogRecord`` payload (no label).

    >>> row = {"id": 7, "question": "How many?", "evidence": "", "db_id": "x", "sql": "SELECT 1"}
    >>> log_record(row, "v1.4.0", datetime(2026, 11, 24, 9, 13, 5, tzinfo=UTC))["enriched_question"] is None
    True
    """
    evidence = row["evidence"].strip()
    return {
        "run_id": f"{RUN_ID_PREFIX}{row['id']}",
        "timestamp": timestamp.isoformat(timespec="seconds"),
        "agent_id": AGENT_ID,
        "agent_version": version,
        "question": row["question"],
        "enriched_question": f"{row['question']} {evidence}" if evidence else None,
        "sql": row["sql"],
        "dialect": "sqlite",
        "app_id": row["db_id"],
    }


def first_table(sql: str) -> str:
    """Name of the first table a SQLite query reads (used to write a realistic DROP TABLE).

    >>> first_table("SELECT T1.a FROM frpm AS T1 JOIN schools AS T2 ON T1.id = T2.id")
    'frpm'
    """
    table = sqlglot.parse_one(sql, read="sqlite").find(exp.Table)
    return table.name if table is not None else "users"


def damage(kind: str, record: dict[str, Any]) -> tuple[str, str]:
    """Apply a defect to a record.

    Returns:
        (the physical log line, a description of the change for ``labels.jsonl``).
    """
    if kind == "empty_sql":
        line = json.dumps({**record, "sql": ""}, ensure_ascii=False)
        return line, "sql replaced by an empty string (the agent returned no query)"
    if kind == "markdown_fence":
        wrapped = f"Here is the SQL query that answers your question:\n\n```sql\n{record['sql']}\n```"
        return json.dumps(
            {**record, "sql": wrapped}, ensure_ascii=False
        ), "sql wrapped in a markdown ```sql fence with prose before it"
    if kind == "drop_table":
        statement = f"{record['sql']}; DROP TABLE {first_table(record['sql'])}"
        return json.dumps(
            {**record, "sql": statement}, ensure_ascii=False
        ), "a DROP TABLE statement appended after the SELECT"
    if kind == "truncated_line":
        full = json.dumps(record, ensure_ascii=False)
        return full[: len(full) * 3 // 5], "line cut off at 60 % (the log writer crashed): not valid JSON"
    raise ValueError(f"unknown damage kind {kind!r}")


def build(rows: Sequence[dict[str, Any]], seed: int) -> tuple[dict[str, list[str]], list[dict[str, Any]]]:
    """Build every day's log lines and the label rows.

    Returns:
        (``{"YYYY-MM-DD": [log line, ...]}``, ``[label row, ...]`` in log order).
    """
    rng = random.Random(seed)
    pools = sample(rows, rng)
    days: dict[str, list[str]] = {}
    labels: list[dict[str, Any]] = []
    for day_index, plan in enumerate(DAY_PLAN):
        day = FIRST_DAY + timedelta(days=day_index)
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        entries: list[tuple[datetime, str, dict[str, Any]]] = []
        for version, count in zip((OLD_VERSION, NEW_VERSION), plan, strict=True):
            for row in pools[version][:count]:
                offset = timedelta(seconds=rng.randrange(6 * 3600, 22 * 3600))
                entries.append((start + offset, version, row))
            del pools[version][:count]
        entries.sort(key=lambda entry: (entry[0], entry[2]["id"]))
        changes: dict[int, str] = {}
        for item in DAMAGES:
            if item.day != day_index:
                continue
            candidates = [
                i
                for i, (_, version, row) in enumerate(entries)
                if version == item.version and row["label"] is item.label and i not in changes
            ]
            changes[rng.choice(candidates)] = item.kind
        lines: list[str] = []
        for index, (timestamp, version, row) in enumerate(entries):
            record = log_record(row, version, timestamp)
            change: str | None = None
            if index in changes:
                line, change = damage(changes[index], record)
            else:
                line = json.dumps(record, ensure_ascii=False)
            lines.append(line)
            labels.append(
                {
                    "run_id": record["run_id"],
                    "label": row["label"],
                    "error_types": row["error_types"],
                    "log_date": day.isoformat(),
                    "agent_version": version,
                    "db_id": row["db_id"],
                    "source_id": row["id"],
                    "change": change,
                }
            )
        days[day.isoformat()] = lines
    return days, labels


def write(out: Path, days: dict[str, list[str]], labels: list[dict[str, Any]]) -> None:
    """Write ``<out>/<day>/agent-logs.jsonl`` and ``<out>/labels.jsonl`` (UTF-8, ``\\n`` endings)."""
    for day, lines in days.items():
        folder = out / day
        folder.mkdir(parents=True, exist_ok=True)
        (folder / LOG_FILE_NAME).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in labels)
    (out / "labels.jsonl").write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source",
        type=Path,
        default=root.parent / "shared/data/nl2sql_bugs/dev.jsonl",
        help="NL2SQL-BUGs dev.jsonl (raw formatting)",
    )
    parser.add_argument("--out", type=Path, default=root / "flows/demo_data", help="output folder")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    args = parser.parse_args(argv)
    days, labels = build(load_source(args.source), args.seed)
    write(args.out, days, labels)
    total = sum(len(lines) for lines in days.values())
    print(f"wrote {total} log lines over {len(days)} days and {len(labels)} labels to {args.out}")


if __name__ == "__main__":
    main()
