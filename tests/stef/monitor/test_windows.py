"""Tests of stef/monitor/windows.py: comparison windows and the natural order of versions."""

from __future__ import annotations

from datetime import date

import pytest

from stef.monitor.models import DriftError
from stef.monitor.windows import order_versions, previous_window, trailing_window, version_sort_key


def test_windows() -> None:
    assert trailing_window(date(2026, 11, 26), 7) == (date(2026, 11, 20), date(2026, 11, 26))
    assert trailing_window(date(2026, 11, 26), 1) == (date(2026, 11, 26), date(2026, 11, 26))
    assert previous_window(date(2026, 11, 20), date(2026, 11, 26)) == (date(2026, 11, 13), date(2026, 11, 19))
    with pytest.raises(DriftError, match=r"at least one day, got 0"):
        trailing_window(date(2026, 11, 26), 0)
    with pytest.raises(DriftError, match=r"window end 2026-11-19 is before its start 2026-11-20"):
        previous_window(date(2026, 11, 20), date(2026, 11, 19))


@pytest.mark.parametrize(
    ("first_seen", "expected"),
    [
        pytest.param({"v2.0": date(2026, 11, 2), "v1.0": date(2026, 11, 1)}, ["v1.0", "v2.0"], id="by_first_day"),
        pytest.param(
            {"v1.10.0": date(2026, 11, 1), "v1.9.0": date(2026, 11, 1)},
            ["v1.9.0", "v1.10.0"],
            id="natural_order_on_ties",
        ),
        pytest.param({"b": date(2026, 11, 1), "a": date(2026, 11, 5)}, ["b", "a"], id="names_without_numbers"),
    ],
)
def test_order_versions(first_seen: dict[str, date], expected: list[str]) -> None:
    assert order_versions(first_seen) == expected


def test_version_sort_key_is_natural() -> None:
    assert sorted(["rc10", "rc9", "rc9a"], key=version_sort_key) == ["rc9", "rc9a", "rc10"]
