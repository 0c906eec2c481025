"""The weekly report's data: the ISO week, what the report shows (:class:`ReportData`), its headline table.

:func:`report_data` summarises the rows :func:`tasks.report.collect` reads from the warehouse
into plain, JSON-ready values; :mod:`stef.monitor.charts` draws them and
:mod:`stef.monitor.rendering` writes them as HTML and Markdown.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from typing import TYPE_CHECKING, Any, cast

from stef.errors import InputError
from stef.models import Band, FilterStatus, Verdict
from stef.monitor.models import SCORE_BIN_EDGES, ErrorRate
from stef.monitor.sentence import drift_sentence
from stef.monitor.statistics import p90_score, score_histogram
from stef.monitor.windows import order_versions

if TYPE_CHECKING:
    import polars as pl

_WEEK = re.compile(r"^\s*(\d{4})-?[Ww](\d{1,2})\s*$")
BIN_LABELS: tuple[str, ...] = tuple(f"{int(low)}–{int(high)}" for low, high in pairwise(SCORE_BIN_EDGES))
"""Labels of the 10-point score bins (``0–10`` … ``90–100``)."""


def parse_week(value: str | None, today: date | None = None) -> tuple[str, date, date]:
    """An ISO week ``YYYY-Www`` as ``(label, Monday, Sunday)``; ``None`` is the last complete week.

    Args:
        value: ``2026-W48`` (also ``2026W48``, ``2026-w48``), or ``None``.
        today: the day that decides the last complete week (default: today, UTC).

    Returns:
        The normalised label and the week's first and last day.

    Raises:
        InputError: not an ISO week (or a week number the year does not have).

    >>> parse_week("2026-W48")
    ('2026-W48', datetime.date(2026, 11, 23), datetime.date(2026, 11, 29))
    >>> parse_week(None, today=date(2026, 12, 2))[0]
    '2026-W48'
    """
    if value is None:
        current = today or datetime.now(UTC).date()
        monday = current - timedelta(days=current.weekday() + 7)
        year, week, _ = monday.isocalendar()
    else:
        match = _WEEK.match(value)
        if not match:
            raise InputError(f"week {value!r} is not an ISO week; write it as YYYY-Www, e.g. 2026-W48")
        year, week = int(match.group(1)), int(match.group(2))
        try:
            monday = date.fromisocalendar(year, week, 1)
        except ValueError:
            raise InputError(f"week {value!r} does not exist: {year} has no ISO week {week}") from None
    return f"{year}-W{week:02d}", monday, monday + timedelta(days=6)


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything the weekly report shows (JSON-ready lists of dicts).

    Attributes:
        week, start, end: the ISO week and its Monday and Sunday.
        warehouse: the DuckDB file read.
        evaluator_version: whose evaluations (``None`` when the week has none).
        generated_at: UTC time of the read (ISO-8601).
        headline: per agent × version: ``agent_id``, ``agent_version``, ``records``,
            ``evaluated``, ``coverage``, ``wrong_share`` (estimated share of wrong answers, the
            drift checks' estimate, :func:`stef.monitor.drift.sample_error_rate`) with its 95 %
            interval ``wrong_ci``, ``mean_p_correct`` (uncorrected), ``mean``, ``p50``, ``p90``,
            band counts, ``poor_share``,
            ``drift`` (verdict of the newest version check with this version as candidate, as
            ``verdict / direction vs baseline``) and its parts ``drift_verdict``,
            ``drift_direction``, ``drift_baseline`` (all ``None`` without a check).
        histograms: per agent × version: ``counts`` per 10-point bin and ``shares``.
        daily: per day × agent × version (``daily_agent_metrics``): ``records``, ``coverage``,
            ``mean``, ``p90``, ``mean_p_correct``, ``wrong_share`` and ``wrong_ci`` (as in ``headline``).
        breakdown: per agent × version × field (``filter_status`` / ``verdict``) × category:
            ``count`` and ``share`` of the scored records.
        drift: the newest check of each agent × kind × versions whose window ends in the week
            (:meth:`stef.monitor.models.DriftCheck.summary` keys).
        worst: the :data:`tasks.report.WORST_QUERIES` lowest-scoring queries with their evidence.
    """

    week: str
    start: date
    end: date
    warehouse: str
    evaluator_version: str | None
    generated_at: str
    headline: list[dict[str, Any]] = field(default_factory=list)
    histograms: list[dict[str, Any]] = field(default_factory=list)
    daily: list[dict[str, Any]] = field(default_factory=list)
    breakdown: list[dict[str, Any]] = field(default_factory=list)
    drift: list[dict[str, Any]] = field(default_factory=list)
    worst: list[dict[str, Any]] = field(default_factory=list)

    @property
    def agents(self) -> list[str]:
        """Agent ids in the report, sorted."""
        return sorted({row["agent_id"] for row in self.headline})

    def versions(self, agent_id: str) -> list[str]:
        """The agent's versions in the report, in headline order (oldest first)."""
        return [row["agent_version"] for row in self.headline if row["agent_id"] == agent_id]


def _ordered_versions(frame_rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], date]:
    first: dict[tuple[str, str], date] = {}
    for row in frame_rows:
        key = (row["agent_id"], row["agent_version"])
        if key not in first or row["log_date"] < first[key]:
            first[key] = row["log_date"]
    return first


def report_data(
    week: tuple[str, date, date],
    warehouse_label: str,
    version: str,
    generated: str,
    rows: pl.DataFrame,
    metrics: pl.DataFrame,
    drift_rows: Sequence[dict[str, Any]],
    worst: list[dict[str, Any]],
    error_rates: Mapping[tuple[str, str], ErrorRate | None] | None = None,
    daily_error_rates: Mapping[tuple[date, str, str], ErrorRate | None] | None = None,
) -> ReportData:
    """Summarise one week's rows into a :class:`ReportData` (the computation of :func:`tasks.report.collect`).

    Args:
        week: the ISO week label with its Monday and Sunday (:func:`parse_week`).
        warehouse_label: how the report names the warehouse.
        version: whose evaluations.
        generated: UTC time of the read (ISO-8601).
        rows: the week's evaluations (:func:`warehouse.monitoring.read_scored_rows`).
        metrics: the week's daily metrics (:func:`warehouse.read_daily_metrics`).
        drift_rows: the week's stored drift checks (:func:`warehouse.monitoring.read_drift_checks`, as dicts).
        worst: the lowest-scoring queries (:func:`warehouse.monitoring.read_lowest_scores`).
        error_rates: per (agent, version), the week's estimated share of wrong answers
            (:func:`stef.monitor.drift.sample_error_rate`; missing: ``None``).
        daily_error_rates: the same per (day, agent, version), for the daily trend.
    """
    import polars as pl

    label, start, end = week
    first_days = _ordered_versions(rows.select("log_date", "agent_id", "agent_version").unique().to_dicts())
    by_agent: dict[str, dict[str, date]] = defaultdict(dict)
    for (agent, agent_version), first in first_days.items():
        by_agent[agent][agent_version] = first
    order = [(agent, v) for agent in sorted(by_agent) for v in order_versions(by_agent[agent])]

    scored = rows.filter(pl.col("status") == "evaluated", pl.col("score").is_not_null())
    drift = latest_drift(drift_rows)
    candidate_verdicts = {(c["agent_id"], c["candidate_version"]): c for c in drift if c["kind"] == "version"}
    headline: list[dict[str, Any]] = []
    histograms: list[dict[str, Any]] = []
    breakdown: list[dict[str, Any]] = []
    for agent, agent_version in order:
        mine = scored.filter(pl.col("agent_id") == agent, pl.col("agent_version") == agent_version)
        scores = mine.get_column("score").to_list()
        day_rows = metrics.filter(pl.col("agent_id") == agent, pl.col("agent_version") == agent_version)
        all_rows = rows.filter(pl.col("agent_id") == agent, pl.col("agent_version") == agent_version)
        records = int(day_rows.get_column("records").sum()) if day_rows.height else all_rows.height
        evaluated = len(scores)
        bands = {band.value: sum(1 for s in mine.get_column("band").to_list() if s == band.value) for band in Band}
        series = pl.Series(scores, dtype=pl.Float64)
        check = candidate_verdicts.get((agent, agent_version))
        rate = (error_rates or {}).get((agent, agent_version))
        headline.append(
            {
                "agent_id": agent,
                "agent_version": agent_version,
                "records": records,
                "evaluated": evaluated,
                "coverage": evaluated / records if records else None,
                "mean_p_correct": _mean(mine.get_column("p_correct").drop_nulls().to_list()),
                **_wrong(rate),
                "mean": float(cast(float, series.mean())) if evaluated else None,
                "p50": float(cast(float, series.quantile(0.5, "linear"))) if evaluated else None,
                "p90": p90_score(series.to_list()) if evaluated else None,
                **{f"n_{name}": count for name, count in bands.items()},
                "poor_share": bands[Band.POOR.value] / evaluated if evaluated else None,
                "drift": f"{check['verdict']}{' / ' + check['direction'] if check['direction'] else ''} vs {check['baseline_version']}"
                if check
                else None,
                "drift_sentence": check["sentence"] if check else None,
                "drift_verdict": check["verdict"] if check else None,
                "drift_direction": check["direction"] if check else None,
                "drift_baseline": check["baseline_version"] if check else None,
            }
        )
        counts = score_histogram(scores) if scores else (0,) * len(BIN_LABELS)
        histograms.append(
            {
                "agent_id": agent,
                "agent_version": agent_version,
                "counts": list(counts),
                "shares": [c / evaluated if evaluated else 0.0 for c in counts],
            }
        )
        for name, members in (("filter_status", FilterStatus), ("verdict", Verdict)):
            values = mine.get_column(name).to_list()
            for member in members:
                count = sum(1 for v in values if v == member.value)
                breakdown.append(
                    {
                        "agent_id": agent,
                        "agent_version": agent_version,
                        "field": name,
                        "category": member.value,
                        "count": count,
                        "share": count / evaluated if evaluated else 0.0,
                    }
                )
    daily = [
        {
            "log_date": row["log_date"],
            "agent_id": row["agent_id"],
            "agent_version": row["agent_version"],
            "records": int(row["records"]),
            "coverage": row["coverage"],
            "mean": row["mean_score"],
            "p90": row["p90_score"],
            "mean_p_correct": row.get("mean_p_correct"),
            **_wrong((daily_error_rates or {}).get((row["log_date"], row["agent_id"], row["agent_version"]))),
        }
        for row in metrics.to_dicts()
    ]
    return ReportData(
        label, start, end, warehouse_label, version, generated, headline, histograms, daily, breakdown, drift, worst
    )


def _wrong(rate: ErrorRate | None) -> dict[str, Any]:
    """``wrong_share`` and ``wrong_ci`` of a row (``None`` without an estimate)."""
    return {"wrong_share": rate.estimate if rate else None, "wrong_ci": [rate.ci_low, rate.ci_high] if rate else None}


def latest_drift(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest check (by window end, then time) per agent × kind × versions, as summaries with their
    ``sentence`` (stored, or composed for checks stored before it was: :func:`stef.monitor.sentence.drift_sentence`)."""
    latest: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for row in rows:  # read_drift_checks sorts by window_end, then checked_at
        key = (row["agent_id"], row["kind"], row["baseline_version"], row["candidate_version"])
        statistics = json.loads(row["statistics"]) if row["statistics"] else {}
        summary = dict(statistics.get("summary") or {})
        summary.update(
            {
                "agent_id": row["agent_id"],
                "kind": row["kind"],
                "baseline_version": row["baseline_version"],
                "candidate_version": row["candidate_version"],
                "verdict": row["verdict"],
                "direction": row["direction"],
                "n_baseline": row["n_baseline"],
                "n_candidate": row["n_candidate"],
                "source": row["source"],
            }
        )
        summary.setdefault("candidate_window", [row["window_start"].isoformat(), row["window_end"].isoformat()])
        summary.setdefault(
            "baseline_window",
            [
                (row["baseline_window_start"] or row["window_start"]).isoformat(),
                (row["baseline_window_end"] or row["window_end"]).isoformat(),
            ],
        )
        summary["sentence"] = row.get("sentence") or summary.get("sentence") or drift_sentence(summary)
        latest[key] = summary
    order = sorted(latest, key=lambda k: (k[0], k[1] != "version", k[2], k[3]))  # version checks first
    return [latest[key] for key in order]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def headline_table(data: ReportData) -> list[dict[str, Any]]:
    """Rows of the report artifact, narrow enough for 100 columns: agent, version, records, coverage and
    the estimated share of wrong answers (as percentages), mean and P90 Φ, drift (verdict vs baseline);
    the drift sentences go in the artifact's description.

    >>> headline_table(ReportData("2026-W48", date(2026, 11, 23), date(2026, 11, 29), "wh", None, "now"))
    []
    """
    return [
        {
            "agent": row["agent_id"],
            "version": row["agent_version"],
            "records": row["records"],
            "coverage": percent_text(row["coverage"]),
            "wrong (est.)": share_text(row.get("wrong_share"), row.get("wrong_ci")),
            "mean Φ": None if row["mean"] is None else round(row["mean"], 1),
            "P90 Φ": None if row["p90"] is None else round(row["p90"], 1),
            "drift": row["drift"] or "–",
        }
        for row in data.headline
    ]


def percent_text(share: float | None, digits: int = 1) -> str:
    """A share in [0, 1] as a percentage for a table cell (``1.0`` -> ``100.0 %``; ``None`` -> ``–``).

    >>> percent_text(1.0), percent_text(0.98765), percent_text(None)
    ('100.0 %', '98.8 %', '–')
    """
    return "–" if share is None else f"{100 * share:.{digits}f} %"


def share_text(share: float | None, interval: Sequence[float] | None = None) -> str:
    """An estimated share with its interval in whole percent (``72 % [41–100 %]``), or ``–``.

    >>> share_text(0.7234, [0.41, 1.0]), share_text(0.3), share_text(None)
    ('72 % [41–100 %]', '30 %', '–')
    """
    if share is None:
        return "–"
    if not interval:
        return f"{100 * share:.0f} %"
    return f"{100 * share:.0f} % [{100 * interval[0]:.0f}–{100 * interval[1]:.0f} %]"
