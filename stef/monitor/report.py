"""The weekly report's data: the ISO week, what the report shows (:class:`ReportData`), its headline table.

:func:`report_data` summarises the rows :func:`tasks.report.collect` reads from the warehouse
into plain, JSON-ready values; :mod:`stef.monitor.charts` draws them and
:mod:`stef.monitor.rendering` writes them as HTML and Markdown.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from typing import TYPE_CHECKING, Any, cast

from stef.display import one_line
from stef.errors import InputError
from stef.models import Band, FilterStatus, Verdict
from stef.monitor.formatting import OUT_OF_RANGE_SHORT, clipped_away
from stef.monitor.models import SCORE_BIN_EDGES, DriftSample, ErrorRate, OperatingPoint
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
    >>> parse_week("0001-W01")[0]  # the label parses back to the same week
    '0001-W01'
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
    return f"{year:04d}-W{week:02d}", monday, monday + timedelta(days=6)


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
        worst: per agent × version (headline order) its lowest-scoring queries with their evidence
            (:data:`tasks.report.WORST_PER_VERSION`); a newer version's new failures (``new_failure``:
            a question an older version answered with Φ ≥ 50) first.
        by_app, by_category, vs_previous: the breakdowns of :func:`breakdowns`.
        reviewers: the judge against reviewer labels (:func:`stef.monitor.review.agreement` of the
            reviewed answers this evaluator version scored, every week): the figures with
            ``by_week`` (ISO week of the answers), ``stored`` (all stored reviews),
            ``held_out_only`` (a ``+calib`` version: only labels imported after its calibrator,
            which were not used to fit it) and ``corrected`` (calibration keys whose error-rate
            estimate uses the labels); ``None`` when the warehouse has no reviews.
        other_versions: the week's evaluations stored under other evaluator versions, which the
            report leaves out: ``evaluator_version``, ``evaluations``, ``first_day``, ``last_day``
            (:func:`warehouse.monitoring.answers_of_other_versions`: answers this version did not
            evaluate).
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
    by_app: list[dict[str, Any]] = field(default_factory=list)
    by_category: list[dict[str, Any]] = field(default_factory=list)
    vs_previous: list[dict[str, Any]] = field(default_factory=list)
    reviewers: dict[str, Any] | None = None
    other_versions: list[dict[str, Any]] = field(default_factory=list)

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


NEW_FAILURE_SCORE = 50.0
"""A query is a new failure of a version when it scores below this and an older version of the
agent answered the same (normalised) question with at least this in the week."""


def breakdowns(
    by_app: Mapping[tuple[str, str, str | None], DriftSample],
    previous: Mapping[tuple[str, str], DriftSample],
    operating_points: Mapping[str, OperatingPoint] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The report's breakdowns per agent × version: by ``app_id``, by suspected error category and
    against the previous week.

    Args:
        by_app: the week's answers per (agent, version, app_id) (``app_id`` ``None``: not logged).
        previous: the previous week's answers per (agent, version).
        operating_points: the judge's operating points of the evaluator version (default: the shipped
            calibrators'), those of the headline (:func:`tasks.drift_checks.operating_points_for`:
            reviewer labels, a deployment calibrator), so every estimate of the report agrees.

    Returns:
        ``(by_app, by_category, vs_previous)`` rows: ``by_app`` has ``agent_id``, ``agent_version``,
        ``app_id``, ``records``, ``evaluated``, ``mean``, ``wrong_share``, ``wrong_ci``;
        ``by_category`` has ``agent_id``, ``agent_version``, ``category``, ``count`` and ``share``
        of the scored answers with it (most frequent first); ``vs_previous`` has ``agent_id``,
        ``agent_version`` and ``records`` / ``mean`` / ``wrong_share`` of this week and, as
        ``previous_*``, of the week before (``None`` when it had no answers).
    """
    from stef.monitor.drift import sample_error_rate

    app_rows: list[dict[str, Any]] = []
    merged: dict[tuple[str, str], list[DriftSample]] = defaultdict(list)
    for (agent, agent_version, app_id), sample in sorted(
        by_app.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]))
    ):
        merged[(agent, agent_version)].append(sample)
        app_rows.append(
            {
                "agent_id": agent,
                "agent_version": agent_version,
                "app_id": app_id,
                "records": sample.records,
                "evaluated": sample.n,
                "mean": _mean(sample.scores),
                **_wrong(sample_error_rate(sample, operating_points)),
            }
        )
    category_rows: list[dict[str, Any]] = []
    previous_rows: list[dict[str, Any]] = []
    for (agent, agent_version), samples in merged.items():
        counts: Counter[str] = Counter()
        scored = sum(sample.n for sample in samples)
        for sample in samples:
            for found in sample.categories:
                counts.update(found)
        for category, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            category_rows.append(
                {
                    "agent_id": agent,
                    "agent_version": agent_version,
                    "category": category,
                    "count": count,
                    "share": count / scored if scored else 0.0,
                }
            )
        week = _merged_sample(samples)
        before = previous.get((agent, agent_version))
        previous_rows.append(
            {
                "agent_id": agent,
                "agent_version": agent_version,
                "records": week.records,
                "mean": _mean(week.scores),
                **_wrong(sample_error_rate(week, operating_points)),
                "previous_records": before.records if before else None,
                "previous_mean": _mean(before.scores) if before else None,
                "previous_wrong_share": (
                    rate.estimate if (rate := sample_error_rate(before, operating_points)) else None
                )
                if before
                else None,
            }
        )
    return app_rows, category_rows, previous_rows


def _merged_sample(samples: Sequence[DriftSample]) -> DriftSample:
    """One sample of several (the per-record fields kept only when every part has them)."""
    if len(samples) == 1:
        return samples[0]
    complete = all(len(s.p_correct) == s.n and len(s.categories) == s.n for s in samples)
    base = DriftSample(
        scores=tuple(x for s in samples for x in s.scores),
        records=sum(s.records for s in samples),
        verdicts=tuple(x for s in samples for x in s.verdicts),
        filter_statuses=tuple(x for s in samples for x in s.filter_statuses),
    )
    if not complete:
        return base
    return replace(
        base,
        p_correct=tuple(x for s in samples for x in s.p_correct),
        calibrations=tuple(x for s in samples for x in s.calibrations),
        categories=tuple(x for s in samples for x in s.categories),
        questions=tuple(x for s in samples for x in s.questions),
    )


def left_out_note(data: ReportData) -> str | None:
    """One line on the week's evaluations the report leaves out, stored under other evaluator
    versions (a day scored with ``--schema-dir``, a refit calibrator ...), else ``None``.

    >>> data = ReportData("2026-W48", date(2026, 11, 23), date(2026, 11, 29), "wh.duckdb", "v+schema", "now",
    ...     other_versions=[{"evaluator_version": "v", "evaluations": 359, "first_day": date(2026, 11, 24),
    ...     "last_day": date(2026, 11, 26)}])
    >>> print(left_out_note(data))
    Not in this report: 359 answers of the week scored only by evaluator v (2026-11-24 … 2026-11-26); the report shows v+schema. --evaluator-version reports another version; to compare like with like, score the week's days with the same options again (stef backfill --force).
    """
    if not data.other_versions or data.evaluator_version is None:
        return None
    parts = "; ".join(
        f"{v['evaluations']} answers of the week scored only by evaluator {one_line(v['evaluator_version'])} "
        f"({v['first_day']} … {v['last_day']})"
        for v in data.other_versions
    )
    return (
        f"Not in this report: {parts}; the report shows {one_line(data.evaluator_version)}. --evaluator-version "
        "reports another version; to compare like with like, score the week's days with the same options again "
        "(stef backfill --force)."
    )


def new_failure_candidates(
    rows: Sequence[tuple[Any, ...]], answered_well: Mapping[str, Mapping[str, set[str]]], per_version: int
) -> dict[tuple[str, str], list[str]]:
    """Per (agent, version), the run ids of its ``per_version`` lowest-scoring answers below
    :data:`NEW_FAILURE_SCORE` to a question an older version of the agent answered with Φ ≥
    :data:`NEW_FAILURE_SCORE` (lowest first).

    Args:
        rows: ``(agent_id, agent_version, app_id, run_id, status, score, ..., question)`` tuples
            (:func:`warehouse.monitoring.read_breakdown_rows`).
        answered_well: as :func:`order_worst`'s (versions oldest first).
        per_version: run ids kept per version.

    >>> rows = [("a", "v2", None, "r1", "evaluated", 10.0, "Q one"), ("a", "v2", None, "r2", "evaluated", 30.0, "Q two"),
    ...         ("a", "v2", None, "r3", "evaluated", 5.0, "Q three")]
    >>> new_failure_candidates(rows, {"a": {"v1": {"q one", "q two"}, "v2": set()}}, 5)
    {('a', 'v2'): ['r1', 'r2']}
    """
    from stef.monitor.error_rate import question_key

    found: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for agent, agent_version, _, run_id, status, score, *_, question in rows:
        if status != "evaluated" or score is None or score >= NEW_FAILURE_SCORE or not question:
            continue
        versions = list(answered_well.get(agent, {}))
        older = versions[: versions.index(agent_version)] if agent_version in versions else []
        key = question_key(str(question))
        if any(key in answered_well[agent][v] for v in older):
            found.setdefault((agent, agent_version), []).append((float(score), str(run_id)))
    return {key: [run_id for _, run_id in sorted(values)[:per_version]] for key, values in found.items()}


def order_worst(
    lowest: Mapping[tuple[str, str], list[dict[str, Any]]],
    answered_well: Mapping[str, Mapping[str, set[str]]],
    per_version: int,
) -> list[dict[str, Any]]:
    """The report's lowest-scoring queries: per agent × version (in ``lowest``'s order) at most
    ``per_version``, each marked ``new_failure`` when an older version of the agent answered its
    question with Φ ≥ :data:`NEW_FAILURE_SCORE` (``new_failure_of``: those versions), new failures first.

    Args:
        lowest: per (agent, version), its lowest-scoring queries and its new-failure candidates
            (:func:`warehouse.monitoring.read_lowest_scores`, :func:`new_failure_candidates`), so
            new failures can move up.
        answered_well: per agent, per version, the normalised questions it answered with Φ ≥
            :data:`NEW_FAILURE_SCORE` in the week.
        per_version: queries kept per version.
    """
    from stef.monitor.error_rate import question_key

    out: list[dict[str, Any]] = []
    for (agent, agent_version), queries in lowest.items():
        versions = list(answered_well.get(agent, {}))
        older = versions[: versions.index(agent_version)] if agent_version in versions else []
        marked = []
        for query in queries:
            key = question_key(str(query.get("question") or ""))
            earlier = [v for v in older if key in answered_well[agent][v]] if query.get("question") else []
            new_failure = bool(earlier) and float(query["score"]) < NEW_FAILURE_SCORE
            marked.append({**query, "new_failure": new_failure, "new_failure_of": earlier if new_failure else []})
        marked.sort(key=lambda q: (not q["new_failure"], q["score"], str(q["log_date"]), str(q["run_id"])))
        out.extend(marked[:per_version])
    return out


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
    """An estimated share with its interval in whole percent (``72 % [41–100 %]``), or ``–``; an
    interval that lies wholly beyond 0 % or 100 % (:func:`clipped_away`) is named as such.

    >>> share_text(0.7234, [0.41, 1.0]), share_text(0.3), share_text(None)
    ('72 % [41–100 %]', '30 %', '–')
    >>> share_text(0.0, [0.0, 0.0])
    '0 % [n/a]'
    """
    if share is None:
        return "–"
    if not interval:
        return f"{100 * share:.0f} %"
    if clipped_away(share, interval):
        return f"{100 * share:.0f} % [{OUT_OF_RANGE_SHORT}]"
    return f"{100 * share:.0f} % [{100 * interval[0]:.0f}–{100 * interval[1]:.0f} %]"
