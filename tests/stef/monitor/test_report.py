"""Tests of stef/monitor/report.py: the ISO week of a report."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from stef.errors import InputError
from stef.monitor.report import parse_week
from tests.tasks.helpers import MONDAY


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("2026-W48", ("2026-W48", MONDAY, MONDAY + timedelta(days=6)), id="iso"),
        pytest.param("2026w48", ("2026-W48", MONDAY, MONDAY + timedelta(days=6)), id="compact_lower_case"),
        pytest.param("2026-W1", ("2026-W01", date(2025, 12, 29), date(2026, 1, 4)), id="week_one_starts_in_december"),
        pytest.param("2026-W53", ("2026-W53", date(2026, 12, 28), date(2027, 1, 3)), id="long_year"),
    ],
)
def test_parse_week(value: str, expected: tuple[str, date, date]) -> None:
    assert parse_week(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("2026-11-23", r"week '2026-11-23' is not an ISO week; write it as YYYY-Www", id="a_date"),
        pytest.param("2025-W53", r"week '2025-W53' does not exist: 2025 has no ISO week 53", id="no_week_53"),
    ],
)
def test_parse_week_rejects(value: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_week(value)


@pytest.mark.parametrize(
    ("today", "expected"),
    [
        pytest.param(date(2026, 11, 30), "2026-W48", id="monday_reports_the_week_just_ended"),
        pytest.param(date(2026, 12, 6), "2026-W48", id="sunday_reports_the_week_before"),
    ],
)
def test_default_week_is_the_last_complete_one(today: date, expected: str) -> None:
    assert parse_week(None, today=today)[0] == expected
