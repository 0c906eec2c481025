"""A drift check in one sentence: what ``stef drift``, the weekly report, the Prefect artifact and the
``stef.drift.detected`` event say about it (issue 16).

Plain text: names are shortened to one line (:func:`stef.display.shorten`); whoever renders the
sentence as Markdown or HTML escapes it like any other user text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stef.display import shorten
from stef.monitor.formatting import OUT_OF_RANGE, clipped_away


def _percent(value: float) -> str:
    return f"{round(100 * value):d} %"


def _rate(value: float | None, interval: Sequence[float | None] | None) -> str:
    if value is None:
        return "?"
    if clipped_away(value, interval):
        return f"{_percent(value)} ({OUT_OF_RANGE})"
    if interval and interval[0] is not None and interval[1] is not None:
        return f"{_percent(value)} ({round(100 * interval[0]):d}–{round(100 * interval[1]):d} %)"
    return _percent(value)


def _points(value: float) -> str:
    points = round(100 * value)
    if points == 0:
        return "0 points"
    return f"{points:+d} point{'s' if abs(points) != 1 else ''}"


def _sides(summary: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(subject, baseline phrase, candidate phrase, baseline name): ``agent version``, ``for v0`` /
    ``in <window>``, the candidate's window for a temporal check, ``v0`` / ``<window>``."""
    agent = shorten(str(summary.get("agent_id", "?")), 60)
    candidate = shorten(str(summary.get("candidate_version", "?")), 40)
    if summary.get("kind") == "temporal":
        bw, cw = summary.get("baseline_window") or ["?", "?"], summary.get("candidate_window") or ["?", "?"]
        return f"{agent} {candidate}", f"in {bw[0]}…{bw[1]}", f" in {cw[0]}…{cw[1]}", f"{bw[0]}…{bw[1]}"
    baseline = shorten(str(summary.get("baseline_version", "?")), 40)
    return f"{agent} {candidate}", f"for {baseline}", "", baseline


def _category_clause(summary: Mapping[str, Any]) -> str:
    shifts = [s for s in summary.get("category_shifts") or () if isinstance(s, Mapping) and s.get("significant")]
    if not shifts:
        return ""
    top = max(shifts, key=lambda s: abs(float(s["candidate_share"]) - float(s["baseline_share"])))
    return (
        f"; suspected {shorten(str(top['category']), 60)} in {_percent(float(top['candidate_share']))} of its answers, "
        f"against {_percent(float(top['baseline_share']))}"
        + (
            f" (and {len(shifts) - 1} more categor{'y' if len(shifts) == 2 else 'ies'} shifted)"
            if len(shifts) > 1
            else ""
        )
    )


def _coverage_clause(summary: Mapping[str, Any]) -> str:
    base, cand = summary.get("coverage_baseline"), summary.get("coverage_candidate")
    reasons = " ".join(str(r) for r in summary.get("reasons") or ())
    if base is None or cand is None or "coverage delta" not in reasons:
        return ""
    return f"; it scores {_percent(cand)} of its answers, {'down' if cand < base else 'up'} from {_percent(base)}"


def drift_sentence(summary: Mapping[str, Any]) -> str:
    """The check of ``summary`` (:meth:`stef.monitor.models.DriftCheck.summary`, or a stored one) in one sentence.

    The estimated share of wrong answers of both sides with their 95 % intervals, the verdict and
    direction; the most shifted suspected error category when one shifted significantly; the
    coverage when it decided. Checks of evaluations without ``p_correct`` fall back to mean Φ.

    >>> print(drift_sentence({"agent_id": "bird-analyst", "kind": "version", "baseline_version": "v1.4.0",
    ...     "candidate_version": "v1.5.0", "verdict": "drift", "direction": "worse",
    ...     "error_rate_baseline": 0.21, "error_rate_baseline_ci": [0.18, 0.25],
    ...     "error_rate_candidate": 0.35, "error_rate_candidate_ci": [0.31, 0.39], "error_rate_delta": 0.14}))
    bird-analyst v1.5.0 answers an estimated 35 % (31–39 %) of questions wrongly, up from 21 % (18–25 %) for v1.4.0: worse.
    """
    subject, before, window, baseline_name = _sides(summary)
    level = float(summary.get("confidence_level") or 0.95)
    verdict, direction = summary.get("verdict"), summary.get("direction")
    if verdict == "insufficient_data":
        needed = summary.get("min_samples")
        return (
            f"{subject}{window}: insufficient data, {summary.get('n_candidate', 0)} scored answers against "
            f"{summary.get('n_baseline', 0)} {before}"
            + (f" (at least {needed} per side needed)" if needed else "")
            + "."
        )
    base, cand = summary.get("error_rate_baseline"), summary.get("error_rate_candidate")
    if base is not None and cand is not None:
        shown_c, shown_b = round(100 * cand), round(100 * base)  # the word follows the figures printed
        moved = "up from" if shown_c > shown_b else ("down from" if shown_c < shown_b else "the same as")
        if (
            moved == "the same as" and verdict == "drift"
        ):  # equal figures (clipped to 0 % or 100 %), a change that decided
            moved = "against"
        head = (
            f"{subject} answers an estimated {_rate(cand, summary.get('error_rate_candidate_ci'))} of questions "
            f"wrongly{window}, {moved} {_rate(base, summary.get('error_rate_baseline_ci'))} {before}"
        )
    else:
        mean_b, mean_c = summary.get("mean_baseline"), summary.get("mean_candidate")
        if mean_b is None or mean_c is None:
            head = f"{subject}{window} has no scored answers to compare with {baseline_name}"
        else:
            head = f"{subject} scores a mean Φ of {mean_c:.1f}{window}, against {mean_b:.1f} {before}"
    clauses = _coverage_clause(summary) + _category_clause(summary)
    interval = summary.get("error_rate_delta_ci")
    detail = ""
    if base is not None and cand is not None and interval and None not in interval:
        # the change and its interval: what the verdict rests on (the two rates' intervals may overlap)
        delta = float(summary.get("error_rate_delta") or 0.0)
        detail = f" ({_points(delta)}, {level:.0%} CI {_points(interval[0])} to {_points(interval[1])})"
    if verdict == "drift":
        return f"{head}{clauses}: {direction or 'drift'}{detail}."
    return f"{head}{clauses}: no drift{detail}."
