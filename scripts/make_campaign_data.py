"""Build the bundled campaign sample (flows/campaign_data/) from the GeoQuery data.

Usage: ``python scripts/make_campaign_data.py [GEOQUERY_DIR]`` (default ../shared/data/geoquery).

GeoQuery: text2sql-data collection (Finegan-Dollak, Kummerfeld, et al., "Improving Text-to-SQL
Evaluation Methodology", ACL 2018; jkkummerfeld/text2sql-data); GeoQuery itself goes back to Zelle
and Mooney (1996). Writes a copy of the SQLite database, the canonical catalog, a 30-question gold
battery (28 GeoQuery questions + 2 two-part questions composed from GeoQuery templates), sample
run logs for the campaigns ``mcp`` and ``baseline-static`` covering every outcome class, and the
sample settings. Deterministic: the same input gives the same files.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import sqlglot

OUT = Path(__file__).resolve().parent.parent / "flows" / "campaign_data"
TEMPLATE_STEP = 8
BATTERY_SIZE = 30
MODEL = "gemini-2.5-flash"
COMPOSED = [
    {
        "question_id": "geo-c01",
        "question": "what is the capital of texas and how many people live in texas",
        "gold_sql": [
            "SELECT capital FROM state WHERE state_name = 'texas'",
            "SELECT population FROM state WHERE state_name = 'texas'",
        ],
        "source": "composed from GeoQuery templates 'capital of state_name0' and 'population of state_name0'",
    },
    {
        "question_id": "geo-c02",
        "question": "how long is the mississippi river and which states does it run through",
        "gold_sql": [
            "SELECT DISTINCT length FROM river WHERE river_name = 'mississippi'",
            "SELECT traverse FROM river WHERE river_name = 'mississippi'",
        ],
        "source": "composed from GeoQuery templates 'length of river_name0' and 'states river_name0 runs through'",
    },
]


def _fill(text: str, variables: dict[str, str], quote: bool) -> str:
    for name, value in sorted(variables.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(f'"{name}"', f"'{value}'") if quote else text.replace(name, value)
    return text


def battery(geo: Path, db: sqlite3.Connection) -> list[dict[str, Any]]:
    """28 GeoQuery questions (every 8th template, first sentence, gold that returns rows) + the composed ones."""
    templates = json.loads((geo / "geography.json").read_text(encoding="utf-8"))
    out: list[dict[str, Any]] = []
    for index in range(0, len(templates), TEMPLATE_STEP):
        entry = templates[index]
        sentence = entry["sentences"][0]
        sql = _fill(entry["sql"][0], sentence["variables"], quote=True).strip().rstrip(";").strip()
        if not db.execute(sql).fetchall():
            continue
        out.append(
            {
                "question_id": f"geo-{index:03d}",
                "question": _fill(sentence["text"], sentence["variables"], quote=False),
                "gold_sql": [sql],
                "source": f"GeoQuery geography.json template {index}, sentence 0",
                "variables": sentence["variables"],
            }
        )
        if len(out) == BATTERY_SIZE - len(COMPOSED):
            break
    return out + COMPOSED


def _pretty(sql: str) -> str:
    return sqlglot.transpile(sql, read="sqlite", write="sqlite")[0]


def _tools(tables: list[str], extra: int = 0, skip: set[str] | None = None) -> list[dict[str, Any]]:
    calls = [{"name": "catalog.listTables", "arguments": {}, "duration_ms": 41}]
    calls += [
        {"name": "catalog.describeTable", "arguments": {"table": t}, "duration_ms": 57}
        for t in tables
        if t not in (skip or set())
    ]
    calls += [
        {"name": "catalog.listRelationships", "arguments": {"table": tables[0]}, "duration_ms": 63}
        for _ in range(extra)
    ]
    return calls


def _tables(sql: str) -> list[str]:
    tree = sqlglot.parse_one(sql, read="sqlite")
    return list(dict.fromkeys(t.name.lower() for t in tree.find_all(sqlglot.exp.Table)))


def _wrong(q: dict[str, Any]) -> str:
    """A plausible wrong answer: another value for the question's variable, else MAX <-> MIN."""
    sql: str = q["gold_sql"][-1]
    for value in q.get("variables", {}).values():
        other = "texas" if value != "texas" else "ohio"
        return sql.replace(f"'{value}'", f"'{other}'")
    if "MAX(" in sql.replace(" ", ""):
        return sql.replace("MAX(", "MIN(").replace("MAX (", "MIN (")
    if "DESC" in sql:
        return sql.replace("DESC", "ASC")
    return re.sub(r"'[^']*'", "'ohio'", sql, count=1)


def runs(gold: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sample runs: campaign ``mcp`` (every class) and ``baseline-static`` (correct and incorrect)."""
    by_id = {q["question_id"]: q for q in gold}
    ids = [q["question_id"] for q in gold]
    base = {"model_version": MODEL, "prompt_version": "campaign-v1", "seed": 7, "commit_hash": "3f2a9c1"}
    out: list[dict[str, Any]] = []

    def mcp(n: int, qid: str, statements: list[str], tool_calls: list[dict[str, Any]], note: str) -> None:
        out.append(
            {
                "run_id": f"mcp-{n:03d}",
                "campaign_id": "mcp",
                "question_id": qid,
                "question": by_id[qid]["question"],
                "tool_calls": tool_calls,
                "statements": statements,
                **base,
                "tokens": {"prompt": 1800 + 90 * len(tool_calls), "completion": 120 + 40 * len(statements)},
                "latency_ms": 2400 + 380 * len(tool_calls) + 90 * n % 700,
                "note": note,
            }
        )

    special = {
        ids[1]: "wrong_value",
        ids[2]: "syntax",
        ids[3]: "structural_column",
        ids[4]: "budget",
        ids[5]: "drop",
        ids[6]: "wrong_value",
        ids[7]: "budget_and_syntax",
        ids[8]: "structural_table",
        ids[9]: "timeout",
        ids[10]: "delete_then_right",
        ids[11]: "untraced",
        ids[12]: "wrong_value",
        "geo-c01": "partial",
        "geo-c02": "both",
    }
    for n, qid in enumerate(ids, 1):
        q = by_id[qid]
        kind = special.get(qid, "right")
        right = [_pretty(s) for s in q["gold_sql"]]
        tables = list(dict.fromkeys(t for s in q["gold_sql"] for t in _tables(s)))
        tools = _tools(tables)
        if kind == "right":
            statements = (["SELECT COUNT(*) FROM state"] if n % 4 == 0 else []) + right
            mcp(n, qid, statements, tools, "success: the gold answer (after an exploratory statement on every 4th run)")
        elif kind == "wrong_value":
            mcp(
                n,
                qid,
                [_pretty(_wrong(q))],
                tools,
                "execution_error: runs, but answers another question (wrong filter value / MIN for MAX)",
            )
        elif kind == "syntax":
            mcp(n, qid, [right[0].replace("SELECT", "SELEC", 1)], tools, "syntax_error: misspelt keyword")
        elif kind == "structural_column":
            mcp(n, qid, [right[0].replace("LENGTH", "LENGHT", 1)], tools, "structural_error: unknown column (LENGHT)")
        elif kind == "structural_table":
            mcp(
                n,
                qid,
                ["SELECT city_name FROM cities WHERE state_name = 'texas'"],
                tools,
                "structural_error: unknown table",
            )
        elif kind == "budget":
            mcp(n, qid, right, _tools(tables, extra=10), "budget_exceeded: 11+ tool calls even though the SQL is right")
        elif kind == "budget_and_syntax":
            mcp(
                n,
                qid,
                [right[0] + " WHERE WHERE"],
                _tools(tables, extra=10),
                "budget_exceeded wins over syntax_error (precedence tie)",
            )
        elif kind == "drop":
            mcp(n, qid, ["DROP TABLE state", *right], tools, "execution_error: DROP refused, never executed")
        elif kind == "delete_then_right":
            mcp(n, qid, ["DELETE FROM city", *right], tools, "execution_error: DELETE refused, never executed")
        elif kind == "timeout":
            slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"
            mcp(n, qid, [slow], tools, "execution_error: runaway recursive CTE stopped by the statement timeout")
        elif kind == "untraced":
            mcp(
                n,
                qid,
                right,
                _tools(tables, skip=set(tables)),
                "success, but catalog traceability 0 (tables never looked up)",
            )
        elif kind == "partial":
            mcp(
                n,
                qid,
                [right[0], "SELECT population FROM state WHERE state_name = 'ohio'"],
                tools,
                "partial_success: 1 of 2 required statements",
            )
        elif kind == "both":
            mcp(n, qid, right, tools, "success: both required statements")
    wrong_baseline = set(ids[0:30:4])
    for n, qid in enumerate(ids, 1):
        q = by_id[qid]
        if qid in wrong_baseline:
            final = _pretty(_wrong(q)) if n % 8 != 1 else q["gold_sql"][-1].replace("SELECT", "SELEC", 1)
            note = "incorrect final answer"
        else:
            final = _pretty(q["gold_sql"][-1])
            note = "correct final answer"
        out.append(
            {
                "run_id": f"base-{n:03d}",
                "campaign_id": "baseline-static",
                "question_id": qid,
                "question": q["question"],
                "tool_calls": [],
                "statements": [final],
                **base,
                "note": note,
            }
        )
    return out


def main(geo: Path) -> None:
    """Write every sample file into flows/campaign_data/."""
    OUT.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(geo / "geography.sqlite", OUT / "geography.sqlite")
    db = sqlite3.connect(f"file:{OUT / 'geography.sqlite'}?mode=ro", uri=True)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    catalog = {t.lower(): [r[1].lower() for r in db.execute(f"PRAGMA table_info({t})")] for t in tables}
    (OUT / "catalog.json").write_text(json.dumps(catalog, indent=2) + "\n", encoding="utf-8")
    gold = battery(geo, db)
    (OUT / "gold.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in q.items() if k != "variables"}) + "\n" for q in gold), encoding="utf-8"
    )
    (OUT / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs(gold)), encoding="utf-8")
    settings = {
        "tool_budget": 10,
        "max_statements": 5,
        "dialect": "sqlite",
        "timeout_s": 1.0,
        "row_cap": 10000,
        "tariffs": {MODEL: {"input_usd_per_million": 0.30, "output_usd_per_million": 2.50}},
        "infra_cost_usd": {"mcp": 1.75, "baseline-static": 1.75},
    }
    (OUT / "settings.json").write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    db.close()


if __name__ == "__main__":
    main(
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "geoquery"
    )
