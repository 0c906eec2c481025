"""Checks of the sample logs shipped in ``flows/demo_data`` (read from the installed package)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import date, timedelta
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import pytest

from stef.logs import parse_line
from stef.models import AgentLogRecord

VERSIONS = {"v1.4.0", "v1.5.0"}


def _day_folders() -> list[Traversable]:
    root = resources.files("flows.demo_data")
    return sorted(
        (entry for entry in root.iterdir() if entry.is_dir() and entry.name[:2] == "20"), key=lambda e: e.name
    )


def _lines() -> list[tuple[str, str]]:
    """(day, raw line) of every line of every bundled log file."""
    lines = []
    for folder in _day_folders():
        for file in sorted(folder.iterdir(), key=lambda e: e.name):
            assert file.name.endswith(".jsonl"), file.name
            lines.extend((folder.name, line) for line in file.read_text(encoding="utf-8").splitlines())
    return lines


def _records() -> list[tuple[str, AgentLogRecord]]:
    parsed = [(day, parse_line(line.encode(), "demo", 0)) for day, line in _lines()]
    return [(day, item.record) for day, item in parsed if item is not None and item.record is not None]


def _labels() -> dict[str, dict[str, Any]]:
    text = resources.files("flows.demo_data").joinpath("labels.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines()]
    return {row["run_id"]: row for row in rows}


def test_three_consecutive_days_of_one_agent_in_two_versions() -> None:
    days = [date.fromisoformat(folder.name) for folder in _day_folders()]
    assert days == [days[0] + timedelta(days=i) for i in range(3)]
    records = _records()
    assert len(_lines()) >= 300
    assert {r.agent_id for _, r in records} == {"bird-analyst"}
    assert {r.agent_version for _, r in records} == VERSIONS
    for day, record in records:
        assert record.timestamp is not None and record.timestamp.startswith(day)
        assert record.timestamp.endswith("+00:00")
        assert record.dialect == "sqlite"


def test_records_carry_no_label_and_every_line_has_one_in_labels_file() -> None:
    labels = _labels()
    assert len(labels) == len(_lines())
    for _, record in _records():
        assert "label" not in record.model_dump() and "error_types" not in record.model_dump()
        assert record.run_id in labels


def test_newer_version_draws_more_incorrect_records() -> None:
    correct: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for row in _labels().values():
        total[row["agent_version"]] += 1
        correct[row["agent_version"]] += row["label"] is True
    assert correct["v1.5.0"] / total["v1.5.0"] < correct["v1.4.0"] / total["v1.4.0"] - 0.2


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("not_json", id="truncated_line"),
        pytest.param("empty_sql", id="empty_sql"),
        pytest.param("fence", id="markdown_fence"),
        pytest.param("drop", id="drop_table"),
    ],
)
def test_realistic_bad_lines_are_present(kind: str) -> None:
    lines = [line for _, line in _lines()]
    records = [record for _, record in _records()]
    found = {
        "not_json": sum(parse_line(line.encode(), "demo", 0).record is None for line in lines),
        "empty_sql": sum(record.sql == "" for record in records),
        "fence": sum("```sql" in record.sql and not record.sql.startswith("```") for record in records),
        "drop": sum("; DROP TABLE " in record.sql for record in records),
    }
    assert found[kind] == 1
    changed = [row for row in _labels().values() if row["change"]]
    assert len(changed) == 4
