"""Shared data and helpers of the campaign tests: the bundled GeoQuery sample, gold questions, run logs.

Reference: Python's ``sqlite3`` on the bundled GeoQuery database (flows/campaign_data/).
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

from stef.campaign.models import CampaignRunLog, CampaignSettings, GoldQuestion, Tariff
from tests.support.checkout import REPO_ROOT

SAMPLE = REPO_ROOT / "flows" / "campaign_data"
"""The bundled GeoQuery campaign sample."""

DB = SAMPLE / "geography.sqlite"
"""The bundled GeoQuery SQLite test database."""

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


def sha256_of(path: Path) -> str:
    """SHA-256 hex digest of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def reference_rows(sql: str, path: Path = DB) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` from Python's ``sqlite3`` on a read-only connection (the reference)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute(sql).fetchall()


def catalog_calls(*tables: str, extra: int = 0) -> list[dict[str, Any]]:
    """Tool calls: ``listTables``, one ``describeTable`` per table, ``extra`` ``listRelationships``."""
    calls: list[dict[str, Any]] = [{"name": "catalog.listTables", "arguments": {}}]
    calls += [{"name": "catalog.describeTable", "arguments": {"table": t}} for t in tables]
    calls += [{"name": "catalog.listRelationships", "arguments": {"table": "state"}} for _ in range(extra)]
    return calls


def run_log(
    statements: list[str],
    question_id: str = "q-capital",
    tool_calls: list[dict[str, Any]] | None = None,
    campaign_id: str = "mcp",
) -> CampaignRunLog:
    """Run ``r1`` of model ``m1`` (1000 prompt + 200 completion tokens, 1.5 s) with ``statements``."""
    return CampaignRunLog(
        run_id="r1",
        campaign_id=campaign_id,
        question_id=question_id,
        question="q?",
        statements=statements,
        tool_calls=catalog_calls("state") if tool_calls is None else tool_calls,
        model_version="m1",
        tokens={"prompt": 1000, "completion": 200},
        latency_ms=1500.0,
    )


SECRET = "STEF-HOST-SECRET-4b1d"
"""Content of the host file no statement may read."""

CAPITAL = GoldQuestion(
    question_id="q-capital",
    question="what is the capital of texas",
    gold_sql=["SELECT capital FROM state WHERE state_name = 'texas'"],
)
RIGHT = "SELECT capital FROM state WHERE state_name = 'texas'"
SQLITE_SETTINGS = CampaignSettings(timeout_s=0.5, use_litellm_prices=False)
DUCKDB_SETTINGS = CampaignSettings(timeout_s=0.5, dialect="duckdb", memory_mb=256, use_litellm_prices=False)


def statement_run(statement: str, run_id: str = "bomb", campaign_id: str = "mcp") -> CampaignRunLog:
    """A one-statement run of the question ``q-capital`` that looked the table ``state`` up."""
    calls = [{"name": "catalog.describeTable", "arguments": {"table": "state"}}]
    return CampaignRunLog(
        run_id=run_id,
        campaign_id=campaign_id,
        question_id="q-capital",
        question="what is the capital of texas",
        statements=[statement],
        tool_calls=calls,
    )


def files_under(folder: Path) -> set[Path]:
    """Every file and folder below ``folder``."""
    return set(folder.rglob("*"))
