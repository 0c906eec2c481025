"""Comparison windows (trailing, previous) and the order of agent versions (DESIGN.md §6)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, timedelta

from stef.monitor.models import DEFAULT_WINDOW_DAYS, DriftError


def trailing_window(end: date, days: int = DEFAULT_WINDOW_DAYS) -> tuple[date, date]:
    """The ``days`` days ending at ``end`` (both included).

    Raises:
        DriftError: ``days`` < 1.

    >>> trailing_window(date(2026, 11, 26))
    (datetime.date(2026, 11, 20), datetime.date(2026, 11, 26))
    """
    if days < 1:
        raise DriftError(f"a drift window needs at least one day, got {days}")
    return end - timedelta(days=days - 1), end


def previous_window(start: date, end: date) -> tuple[date, date]:
    """The window of the same length just before ``start … end``.

    Raises:
        DriftError: ``end`` is before ``start``.

    >>> previous_window(date(2026, 11, 20), date(2026, 11, 26))
    (datetime.date(2026, 11, 13), datetime.date(2026, 11, 19))
    """
    if end < start:
        raise DriftError(f"window end {end.isoformat()} is before its start {start.isoformat()}")
    length = (end - start).days + 1
    return start - timedelta(days=length), start - timedelta(days=1)


_NUMBER = re.compile(r"([0-9]+)")
"""A run of ASCII digits (``\\d`` would also take other scripts' digits, which ``int()`` reads differently)."""


def version_sort_key(version: str) -> tuple[tuple[int, int, str, int], ...]:
    """Natural sort key of a version name (numbers compare as numbers: ``v1.10`` > ``v1.9``).

    The name is split into runs of ASCII digits ``0-9`` and the text between them. A digit run
    compares by its length without leading zeros, then by its digits, then by its leading zeros
    (``v01`` after ``v1``): the order of the numbers' values for runs of any length, with no ``int()``
    (which refuses runs of more than 4,300 digits). Everything else, ``²`` or ``١٢`` (Arabic-Indic
    digits) included, compares as text. Numbers sort before text at the same position.

    Args:
        version: any agent version name.

    Returns:
        One tuple per part: ``(0, length, digits, leading zeros)`` for a digit run (``digits``
        without its leading zeros), ``(1, 0, text, 0)`` for text.

    >>> sorted(["v1.10.0", "v1.9.2", "v1.9.10"], key=version_sort_key)
    ['v1.9.2', 'v1.9.10', 'v1.10.0']
    >>> sorted(["v1²", "v" + "9" * 5000, "v10", "v١٢", "v010"], key=version_sort_key)[:3]
    ['v1²', 'v10', 'v010']
    """
    key: list[tuple[int, int, str, int]] = []
    for part in _NUMBER.split(version):
        if not part:
            continue
        if _NUMBER.fullmatch(part):
            number = part.lstrip("0") or "0"
            key.append((0, len(number), number, len(part) - len(number)))
        else:
            key.append((1, 0, part, 0))
    return tuple(key)


def order_versions(first_seen: Mapping[str, date]) -> list[str]:
    """Versions from oldest to newest: by the first day each was seen, then by natural order.

    >>> order_versions({"v2": date(2026, 11, 3), "v1": date(2026, 11, 1), "v1.1": date(2026, 11, 3)})
    ['v1', 'v1.1', 'v2']
    """
    return sorted(first_seen, key=lambda v: (first_seen[v], version_sort_key(v)))
