"""Small number formatters shared by the drift alerts and the weekly report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def fmt(value: Any, spec: str = "+.2f") -> str:
    """``value`` formatted with ``spec``, or ``–`` for ``None``; a value that shows as zero has no
    minus sign (a delta of two equal shares computes to −1e-16: ``+0.0``, not ``-0.0``).

    >>> fmt(-3.0), fmt(None), fmt(-1e-16, "+.1f"), fmt(-0.0, ".1%"), fmt(-0.04, ".1f")
    ('-3.00', '–', '+0.0', '0.0%', '0.0')
    """
    if value is None:
        return "–"
    text = format(value, spec)
    if text.startswith("-") and not any(ch in "123456789" for ch in text):
        return ("+" if spec.startswith("+") else "") + text[1:]
    return text


def fmt_ci(value: Any, spec: str = "+.2f") -> str:
    """An interval ``[low, high]`` as ``[-11.80, -3.43]`` (each end formatted with ``spec``), or ``–`` when missing.

    >>> fmt_ci([-11.8, -3.43]), fmt_ci(None), fmt_ci([0.051, 0.249], "+.3f")
    ('[-11.80, -3.43]', '–', '[+0.051, +0.249]')
    """
    return "–" if not value or value[0] is None else f"[{fmt(value[0], spec)}, {fmt(value[1], spec)}]"


OUT_OF_RANGE = "outside the judge's calibrated range"
"""Said in the drift sentences instead of an interval that clipping to [0, 1] shrank to one bound
(:func:`clipped_away`); the report's tables say :data:`OUT_OF_RANGE_SHORT` and explain it below them."""

OUT_OF_RANGE_SHORT = "n/a"
""":data:`OUT_OF_RANGE` in a table cell (the report's notes explain it)."""


def clipped_away(share: float | None, interval: Sequence[float | None] | None) -> bool:
    """Whether an estimated share's interval lies wholly beyond 0 % or 100 %, so that clipping it to
    [0, 1] left a width-zero ``[0, 0]`` or ``[1, 1]``: the answers score beyond the judge's calibrated
    means (above its mean for correct answers, or below its mean for wrong ones), and the share is
    not estimated there; printing ``0 % [0–0 %]`` would claim a certainty the estimate does not have
    (:func:`stef.monitor.error_rate.estimate_error_rate` clips the estimate and both ends).

    >>> clipped_away(0.0, [0.0, 0.0]), clipped_away(1.0, [1.0, 1.0]), clipped_away(0.0, [0.0, 0.04])
    (True, True, False)
    """
    if share is None or not interval or interval[0] is None or interval[1] is None:
        return False
    return interval[0] == interval[1] == share and share in (0.0, 1.0)
