"""Tests of tasks/logs.py through ``.fn()``: loading a day's logs (local and fsspec URLs) and validating them."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from stef.errors import InputError
from stef.logs import parse_line
from tasks import (
    LogQualityError,
    load_logs,
    validate_logs,
)
from tests.tasks.helpers import DAY, jsonl_line


def test_load_logs_reads_every_file_of_the_day_in_name_order(log_day: Path) -> None:
    lines = load_logs.fn(str(log_day), DAY)
    assert [(Path(x.source).name, x.line_number) for x in lines] == [
        ("sales-agent.jsonl", 1),
        ("sales-agent.jsonl", 2),
        ("sales-agent.jsonl", 3),
        ("sales-agent.jsonl", 4),
        ("sales-agent.jsonl", 5),
        ("support-agent.jsonl", 1),
        ("support-agent.jsonl", 3),
        ("support-agent.jsonl", 4),
    ]
    rejected = [(x.line_number, x.run_id) for x in lines if x.record is None]
    assert rejected == [(5, None), (4, "support-0003")]


def test_load_logs_accepts_a_file_url(log_day: Path) -> None:
    lines = load_logs.fn(log_day.as_uri(), DAY)
    assert len(lines) == 8
    assert lines[0].record is not None and lines[0].record.run_id == "sales-0001"
    assert lines[0].source.startswith("file://")


@pytest.mark.parametrize(
    ("prepare", "match"),
    [
        pytest.param(
            lambda root: None, r"no logs for 2026-11-20: folder .*2026-11-20 does not exist", id="missing_day_folder"
        ),
        pytest.param(
            lambda root: (root / "2026-11-20").mkdir(parents=True),
            r"no \*\.jsonl files in .*2026-11-20",
            id="empty_day_folder",
        ),
    ],
)
def test_load_logs_fails_clearly_without_logs(tmp_path: Path, prepare: Any, match: str) -> None:
    prepare(tmp_path)
    with pytest.raises(InputError, match=match):
        load_logs.fn(str(tmp_path), DAY)


def test_validate_logs_quarantines_failing_rows_with_their_line_numbers() -> None:
    lines = [
        jsonl_line(1, run_id="r1", timestamp="2026-11-20T08:00:00Z"),
        jsonl_line(2, run_id="r2", timestamp="yesterday-ish"),
        jsonl_line(3, run_id="r1", timestamp="2026-11-20T09:00:00Z"),
        jsonl_line(4, run_id="r3"),
    ]
    checked = validate_logs.fn(lines, max_bad_share=0.5)
    assert [x.line_number for x in checked] == [1, 2, 3, 4]
    assert [x.record is not None for x in checked] == [True, False, False, True]
    assert checked[1].reason == (
        "failed expectation expect_column_values_to_be_dateutil_parseable(column=timestamp): value 'yesterday-ish'"
    )
    assert checked[2].reason == (
        "failed expectation expect_column_values_to_be_unique(column=run_id): duplicate run_id 'r1', first seen at day.jsonl:1"
    )
    assert (checked[1].run_id, checked[2].run_id) == ("r2", "r1")
    assert checked[0] is lines[0]


def test_validate_logs_fails_loudly_above_the_bad_share() -> None:
    lines = [jsonl_line(i, run_id=f"r{i}") for i in range(1, 10)]
    lines.append(parse_line(b"{not json", "day.jsonl", 10))
    lines.append(jsonl_line(11, run_id="r1"))
    assert len(validate_logs.fn(lines, max_bad_share=2 / 11)) == 11  # exactly at the limit: accepted
    with pytest.raises(
        LogQualityError,
        match=r"2 of 11 log lines .* are bad \(18\.2%\), above the limit of 5\.0%; most common reasons: 1 x not valid JSON; 1 x failed expectation",
    ):
        validate_logs.fn(lines)


@pytest.mark.parametrize("share", [pytest.param(-0.1, id="negative"), pytest.param(1.5, id="above_one")])
def test_validate_logs_rejects_a_bad_threshold(share: float) -> None:
    with pytest.raises(ValueError, match=r"max_bad_share must be within \[0, 1\]"):
        validate_logs.fn([jsonl_line(1, run_id="r1")], max_bad_share=share)


def test_validate_logs_of_an_empty_day_is_empty() -> None:
    assert validate_logs.fn([], max_bad_share=0.0) == []


@pytest.mark.parametrize(
    ("logs_root", "message"),
    [
        pytest.param(
            "s3://bucket/logs",
            r"--logs-root s3://bucket/logs: this URL scheme needs an extra package",
            id="missing_fsspec_backend",
        ),
        pytest.param("foo://somewhere", r"--logs-root foo://somewhere: not a readable location", id="unknown_protocol"),
    ],
)
def test_unreadable_logs_root_url_is_a_clear_error(logs_root: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_logs.fn(logs_root, date(2026, 11, 20))
