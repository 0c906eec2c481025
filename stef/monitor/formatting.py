"""Small number formatters shared by the drift alerts and the weekly report."""

from __future__ import annotations

from typing import Any


def fmt(value: Any, spec: str = "+.2f") -> str:
    """``value`` formatted with ``spec``, or ``–`` for ``None``.

    >>> fmt(-3.0), fmt(None)
    ('-3.00', '–')
    """
    return "–" if value is None else format(value, spec)


def fmt_ci(value: Any, spec: str = "+.2f") -> str:
    """An interval ``[low, high]`` as ``[-11.80, -3.43]`` (each end formatted with ``spec``), or ``–`` when missing.

    >>> fmt_ci([-11.8, -3.43]), fmt_ci(None), fmt_ci([0.051, 0.249], "+.3f")
    ('[-11.80, -3.43]', '–', '[+0.051, +0.249]')
    """
    return "–" if not value or value[0] is None else f"[{format(value[0], spec)}, {format(value[1], spec)}]"
