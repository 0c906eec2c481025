"""Helpers of the tests in tests/flows/cli (moved from tests/test_cli.py): the fixture log, CLI runs, JSONL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from flows.cli.main import app
from tests.support.checkout import FIXTURES

FIXTURE = FIXTURES / "cli" / "agent-logs.jsonl"
"""Six records: two plain, one line that is not JSON, one empty SQL, one fenced SQL, one without question."""
FIXTURE_RUN_IDS = ["cli-1", "cli-2", None, "cli-4", "cli-5", "cli-6"]
CONTRACT_KEYS = ("run_id", "status", "score", "band", "filter_status", "verdict", "confidence")
HEAVY_MODULES = ("prefect", "litellm", "great_expectations", "duckdb")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def invoke(*args: str) -> Any:
    """Run ``stef ARGS`` in this process (:class:`typer.testing.CliRunner`); the result."""
    return CliRunner().invoke(app, list(args))
