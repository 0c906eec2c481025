"""The valid records of the bundled demo logs, for tests and benchmarks that replicate real records.

The records are real NL2SQL-BUGs / BIRD questions and SQL (attribution in flows/demo_data/README.md).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

REQUIRED_KEYS = ("run_id", "agent_id", "agent_version", "question", "sql")


def demo_source_records() -> list[dict[str, Any]]:
    """Every bundled demo log line that is a JSON object with all of :data:`REQUIRED_KEYS` set."""
    rows: list[dict[str, Any]] = []
    root = resources.files("flows.demo_data")
    for folder in sorted(root.iterdir(), key=lambda entry: entry.name):
        if not (folder.is_dir() and folder.name.startswith("20")):
            continue
        for line in folder.joinpath("agent-logs.jsonl").read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and all(row.get(key) for key in REQUIRED_KEYS):
                rows.append(row)
    return rows
