"""Tests of tasks/log_checks.py through ``.fn()``: validating a day's logs with Great Expectations."""

from __future__ import annotations

import pytest

from stef.logs import parse_line
from tasks import (
    LogQualityError,
    validate_logs,
)
from tests.tasks.helpers import jsonl_line


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
        "timestamp is not a date and time: 'yesterday-ish' (log contract: ISO 8601, e.g. 2026-11-24T09:13:05+00:00)"
    )
    assert checked[2].reason == (
        "run_id is a duplicate: 'r1', first seen at day.jsonl:1 (log contract: run_id is unique)"
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
        match=r"2 of 11 log lines .* are bad \(18\.2%\), above the limit of 5\.0%; most common reasons: 1 x not valid JSON; 1 x duplicate run_id \(1 within the day\);",
    ):
        validate_logs.fn(lines)


@pytest.mark.parametrize("share", [pytest.param(-0.1, id="negative"), pytest.param(1.5, id="above_one")])
def test_validate_logs_rejects_a_bad_threshold(share: float) -> None:
    with pytest.raises(ValueError, match=r"max_bad_share must be within \[0, 1\]"):
        validate_logs.fn([jsonl_line(1, run_id="r1")], max_bad_share=share)


def test_validate_logs_of_an_empty_day_is_empty() -> None:
    assert validate_logs.fn([], max_bad_share=0.0) == []
