"""Days as people write them on a command line or in a deployment parameter: ISO ``YYYY-MM-DD`` only."""

from __future__ import annotations

import re
from datetime import date

from stef.errors import InputError

__all__ = ["DAY_FORM", "parse_day"]

DAY_FORM = "YYYY-MM-DD"
"""How a day is written (zero-padded month and day, as the log folders ``<logs-root>/<YYYY-MM-DD>/`` are named)."""

_ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def parse_day(text: str) -> date:
    """``text`` as a day, read only in the form ``YYYY-MM-DD`` (``2026-12-01``).

    ``datetime.strptime(text, "%Y-%m-%d")`` also reads ``2026-12-1``, ``2026-1-1`` and
    ``2026-12- 1``, and ``date.fromisoformat`` reads ``20261201`` and the week date ``2026-W48-1``:
    a day is written one way here, the way its log folder is named.

    Args:
        text: the day as given.

    Returns:
        The day.

    Raises:
        InputError: any other text, or a day the calendar does not have (``2026-11-31``), naming it.

    >>> parse_day("2026-12-01")
    datetime.date(2026, 12, 1)
    >>> parse_day("2026-12-1")
    Traceback (most recent call last):
    ...
    stef.errors.InputError: '2026-12-1' is not a date of the form YYYY-MM-DD
    >>> parse_day("2026-02-30")
    Traceback (most recent call last):
    ...
    stef.errors.InputError: '2026-02-30' is not a day of the calendar (day is out of range for month)
    """
    if _ISO_DAY.fullmatch(text):
        try:
            return date.fromisoformat(text)
        except ValueError as exc:  # 2026-11-31, 2026-13-01: of the form, but no such day
            raise InputError(f"{text!r} is not a day of the calendar ({exc})") from None
    raise InputError(f"{text!r} is not a date of the form {DAY_FORM}")
