"""Small number formatters shared by the drift alerts and the weekly report."""

from __future__ import annotations

from typing import Any


def fmt(value: Any, spec: str = "+.2f") -> str:
    """``value`` formatted with ``spec``, or ``–`` for ``None``.

    >>> fmt(-3.0), fmt(None)
    ('-3.00', '–')
    """
    return "–" if value is None else format(value, spec)


def fmt_ci(value: Any) -> str:
    """An interval ``[low, high]`` as ``[-11.80, -3.43]``, or ``–`` when missing.

    >>> fmt_ci([-11.8, -3.43]), fmt_ci(None)
    ('[-11.80, -3.43]', '–')
    """
    return "–" if not value or value[0] is None else f"[{value[0]:+.2f}, {value[1]:+.2f}]"
