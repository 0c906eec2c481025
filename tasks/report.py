"""The weekly report: read a week from the warehouse, draw the charts, write HTML and Markdown.

:func:`collect_report_data` reads everything the report shows into a :class:`ReportData` (plain,
JSON-ready values); :func:`render_html` and :func:`render_markdown` turn it into one
self-contained HTML file (charts embedded as PNG ``data:`` URIs, inline CSS, no network needed
to view it) and its Markdown twin (the same tables, no charts), from the Jinja2 templates in
``tasks/templates/``. Matplotlib is imported only when charts are drawn (object API on the Agg
canvas, no pyplot state).
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import warnings
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from markupsafe import Markup, escape
from prefect import task
from prefect.cache_policies import NO_CACHE

from stef.display import DISPLAY_WIDTH, Markdown, md_cells, md_code, md_code_block, md_text, one_line, shorten
from stef.errors import InputError
from stef.models import Band, FilterStatus, Verdict
from stef.monitor.drift import SCORE_BIN_EDGES, score_histogram
from tasks._runtime import retry_on_io_error
from warehouse import connect, read_daily_metrics, resolve_path
from warehouse.monitoring import latest_evaluator_version, read_drift_checks, read_lowest_scores, read_scored_rows

if TYPE_CHECKING:
    from matplotlib.figure import Figure, SubFigure

REPORT_ARTIFACT_KEY = "stef-weekly-report"
"""Key of the table artifact with the report's headline table."""
WORST_QUERIES = 10
"""How many of the lowest-scoring queries the report lists with their evidence."""
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
            ``evaluated``, ``coverage``, ``mean``, ``p50``, ``p90``, band counts, ``poor_share``,
            ``drift`` (verdict of the newest version check with this version as candidate, as
            ``verdict / direction vs baseline``) and its parts ``drift_verdict``,
            ``drift_direction``, ``drift_baseline`` (all ``None`` without a check).
        histograms: per agent × version: ``counts`` per 10-point bin and ``shares``.
        daily: per day × agent × version (``daily_agent_metrics``): ``records``, ``coverage``,
            ``mean``, ``p90``.
        breakdown: per agent × version × field (``filter_status`` / ``verdict``) × category:
            ``count`` and ``share`` of the scored records.
        drift: the newest check of each agent × kind × versions whose window ends in the week
            (:meth:`tasks.drift.DriftCheck.summary` keys).
        worst: the :data:`WORST_QUERIES` lowest-scoring queries with their evidence.
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


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """The files one report run wrote.

    Attributes:
        week: the ISO week.
        html: path of the self-contained HTML report.
        markdown: path of the Markdown twin.
        agents: agents in the report.
        evaluations: scored records in the week.
        headline: the headline table (:func:`headline_table`).
    """

    week: str
    html: str
    markdown: str
    agents: int
    evaluations: int
    headline: list[dict[str, Any]] = field(default_factory=list)


# --------------------------------------------------------------------------- reading


def _ordered_versions(frame_rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], date]:
    first: dict[tuple[str, str], date] = {}
    for row in frame_rows:
        key = (row["agent_id"], row["agent_version"])
        if key not in first or row["log_date"] < first[key]:
            first[key] = row["log_date"]
    return first


def collect(
    conn: Any, warehouse_label: str, week: str | None, evaluator_version: str | None = None, today: date | None = None
) -> ReportData:
    """Read one week into a :class:`ReportData` (the body of :func:`collect_report_data`).

    Args:
        conn: a warehouse connection.
        warehouse_label: how the report names the warehouse.
        week: ISO week (``None``: the last complete week).
        evaluator_version: whose evaluations (default: the newest stored in the week).
        today: decides the default week (tests).

    Raises:
        InputError: a malformed week.
    """
    import polars as pl

    from stef.monitor.drift import order_versions

    label, start, end = parse_week(week, today)
    generated = datetime.now(UTC).replace(microsecond=0).isoformat()
    version = evaluator_version or latest_evaluator_version(conn, start=start, end=end)
    if version is None:
        return ReportData(label, start, end, warehouse_label, None, generated)
    rows = read_scored_rows(conn, start, end, version)
    metrics = read_daily_metrics(conn, start, end, evaluator_version=version)
    first_days = _ordered_versions(rows.select("log_date", "agent_id", "agent_version").unique().to_dicts())
    by_agent: dict[str, dict[str, date]] = defaultdict(dict)
    for (agent, agent_version), first in first_days.items():
        by_agent[agent][agent_version] = first
    order = [(agent, v) for agent in sorted(by_agent) for v in order_versions(by_agent[agent])]

    scored = rows.filter(pl.col("status") == "evaluated", pl.col("score").is_not_null())
    drift = _latest_drift(read_drift_checks(conn, start, end, evaluator_version=version).to_dicts())
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
        headline.append(
            {
                "agent_id": agent,
                "agent_version": agent_version,
                "records": records,
                "evaluated": evaluated,
                "coverage": evaluated / records if records else None,
                "mean_p_correct": _mean(mine.get_column("p_correct").drop_nulls().to_list()),
                "mean": float(cast(float, series.mean())) if evaluated else None,
                "p50": float(cast(float, series.quantile(0.5, "linear"))) if evaluated else None,
                "p90": float(cast(float, series.quantile(0.9, "linear"))) if evaluated else None,
                **{f"n_{name}": count for name, count in bands.items()},
                "poor_share": bands[Band.POOR.value] / evaluated if evaluated else None,
                "drift": f"{check['verdict']}{' / ' + check['direction'] if check['direction'] else ''} vs {check['baseline_version']}"
                if check
                else None,
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
        }
        for row in metrics.to_dicts()
    ]
    worst = read_lowest_scores(conn, start, end, version, WORST_QUERIES)
    return ReportData(
        label, start, end, warehouse_label, version, generated, headline, histograms, daily, breakdown, drift, worst
    )


def _latest_drift(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest check (by window end, then time) per agent × kind × versions, as summaries."""
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
        latest[key] = summary
    order = sorted(latest, key=lambda k: (k[0], k[1] != "version", k[2], k[3]))  # version checks first
    return [latest[key] for key in order]


@task(
    name="collect-report-data",
    retries=2,
    retry_delay_seconds=10,
    retry_condition_fn=retry_on_io_error,
    cache_policy=NO_CACHE,
    persist_result=False,
)
def collect_report_data(
    warehouse_path: str | None, week: str | None, evaluator_version: str | None = None
) -> ReportData:
    """Read one ISO week from the warehouse (read-only) into a :class:`ReportData`.

    Args:
        warehouse_path: DuckDB file (``None``: ``$STEF_WAREHOUSE`` or ``./stef.duckdb``); must exist.
        week: ISO week ``YYYY-Www`` (``None``: the last complete week).
        evaluator_version: whose evaluations (default: the newest stored in the week).

    Returns:
        The report data (empty lists when the week has no evaluations).

    Raises:
        InputError: a malformed week.
        WarehouseError: the file is missing, locked or has an older schema.
    """
    from warehouse import WarehouseError

    target = resolve_path(warehouse_path)
    if not target.is_file():
        raise WarehouseError(
            f"warehouse {target} does not exist; run `stef nightly` or `stef backfill` first, or pass --warehouse"
        )
    conn = connect(target, read_only=True)
    try:
        return collect(conn, str(target), week, evaluator_version)
    finally:
        conn.close()


# --------------------------------------------------------------------------- charts


@dataclass(frozen=True, slots=True)
class Chart:
    """One embedded chart: which agent, what it shows, the PNG as a ``data:`` URI."""

    agent_id: str
    kind: str
    title: str
    data_uri: str


_PLAIN_TEXT = {"text.parse_math": False, "text.usetex": False}
"""Matplotlib settings of every chart: a ``$`` in an agent id or a version is a dollar sign, not
mathtext (``$\\notacommand$`` would fail the drawing), and no label goes through LaTeX."""


@contextmanager
def _plain_text_charts() -> Iterator[None]:
    """Draw inside: every text matplotlib creates (titles, tick labels, legend entries, also those
    made while saving) is plain text (:data:`_PLAIN_TEXT`), whatever the user's matplotlibrc says.

    A character of a name that the font lacks (CJK, emoji …) is drawn as a box; matplotlib's
    warning about it, once per character and chart, is silenced here (the tables show the name).
    """
    from matplotlib import rc_context

    with rc_context(_PLAIN_TEXT), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font", category=UserWarning)
        yield


TICK_LABEL_WIDTH = 24
"""Characters of a version shown as a tick label beside the bars of the breakdown chart."""


def _label(value: object, width: int = DISPLAY_WIDTH) -> str:
    """A name as a chart shows it: one line, at most ``width`` characters (:func:`stef.display.shorten`)."""
    return shorten(value, width)


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _data_uri(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _colors(count: int) -> list[Any]:
    from matplotlib import colormaps

    palette = colormaps["tab10"]
    return [palette(i % 10) for i in range(count)]


def _legend(owner: Any, handles: Sequence[Any], labels: Sequence[str], **options: Any) -> None:
    """A legend with explicit labels: matplotlib hides the artists of a label starting with ``_``
    only when it collects the labels itself, and a version may be called ``_canary``."""
    owner.legend(handles=list(handles), labels=list(labels), **options)


def histogram_chart(data: ReportData, agent_id: str) -> Chart:
    """Grouped bars: share of scored answers per 10-point bin, one colour per version.

    User data (the agent id, the versions) is drawn as plain, shortened text (:func:`_plain_text_charts`).
    """
    with _plain_text_charts():
        versions = data.versions(agent_id)
        rows = {row["agent_version"]: row for row in data.histograms if row["agent_id"] == agent_id}
        figure = _figure(9.0, 3.4)
        axes = figure.subplots()
        width = 0.8 / max(len(versions), 1)
        handles, labels = [], []
        for index, (version, color) in enumerate(zip(versions, _colors(len(versions)), strict=True)):
            row = rows[version]
            positions = [b - 0.4 + width * (index + 0.5) for b in range(len(BIN_LABELS))]
            handles.append(axes.bar(positions, [100 * s for s in row["shares"]], width=width, color=color))
            labels.append(f"{_label(version)} (n={sum(row['counts'])})")
        axes.set_xticks(range(len(BIN_LABELS)), BIN_LABELS)
        axes.set_xlabel("score Φ")
        axes.set_ylabel("% of scored answers")
        _legend(axes, handles, labels, loc="upper left", frameon=False)
        axes.grid(axis="y", alpha=0.3)
        title = f"{_label(agent_id)}: score distribution per version"
        axes.set_title(title)
        return Chart(agent_id, "histogram", title, _data_uri(figure))


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def trend_chart(data: ReportData, agent_id: str) -> Chart:
    """Four panels over the week's days: mean P(correct), mean Φ, P90 Φ and coverage, one line
    per version (plain text labels)."""
    with _plain_text_charts():
        versions = data.versions(agent_id)
        days = [data.start + timedelta(days=i) for i in range(7)]
        figure = _figure(9.0, 7.5)
        panels = figure.subplots(4, 1, sharex=True)
        series: dict[str, dict[date, dict[str, Any]]] = defaultdict(dict)
        for row in data.daily:
            if row["agent_id"] == agent_id:
                series[row["agent_version"]][row["log_date"]] = row
        handles = []
        for version, color in zip(versions, _colors(len(versions)), strict=True):
            points = series.get(version, {})
            for axes, key, scale in zip(
                panels, ("mean_p_correct", "mean", "p90", "coverage"), (100.0, 1.0, 1.0, 100.0), strict=True
            ):
                values = [
                    float("nan") if points.get(day, {}).get(key) is None else scale * float(points[day][key])
                    for day in days
                ]
                (line,) = axes.plot(range(7), values, marker="o", color=color)
                if axes is panels[0]:
                    handles.append(line)
        for axes, label in zip(panels, ("P(correct) %", "mean Φ", "P90 Φ", "coverage %"), strict=True):
            axes.set_ylabel(label)
            axes.grid(alpha=0.3)
        _legend(
            panels[0],
            handles,
            [_label(v) for v in versions],
            loc="lower left",
            frameon=False,
            ncols=max(min(len(versions), 4), 1),
        )
        panels[-1].set_xticks(range(7), [day.strftime("%a %d %b") for day in days])
        title = f"{_label(agent_id)}: daily trend"
        panels[0].set_title(title)
        return Chart(agent_id, "trend", title, _data_uri(figure))


def breakdown_chart(data: ReportData, agent_id: str) -> Chart:
    """Two panels of stacked horizontal bars: filter-status and verdict shares per version (plain text labels)."""
    with _plain_text_charts():
        versions = data.versions(agent_id)
        figure = _figure(9.0, 1.9 + 0.6 * max(len(versions), 1))
        panels = list(cast("Iterable[SubFigure]", figure.subfigures(1, 2)))
        fields = [("filter_status", [m.value for m in FilterStatus]), ("verdict", [m.value for m in Verdict])]
        for panel, (name, categories) in zip(panels, fields, strict=True):
            axes = panel.subplots()
            left = [0.0] * len(versions)
            for category, color in zip(categories, ("#2e7d32", "#9ccc65", "#ffb74d", "#e53935"), strict=True):
                shares = [
                    100
                    * next(
                        (
                            r["share"]
                            for r in data.breakdown
                            if r["agent_id"] == agent_id
                            and r["agent_version"] == v
                            and r["field"] == name
                            and r["category"] == category
                        ),
                        0.0,
                    )
                    for v in versions
                ]
                axes.barh(
                    range(len(versions)), shares, left=left, color=color, label=category.replace("_", " ").lower()
                )
                left = [a + b for a, b in zip(left, shares, strict=True)]
            axes.set_yticks(range(len(versions)), [_label(v, TICK_LABEL_WIDTH) for v in versions])
            axes.set_xlim(0, 100)
            axes.set_xlabel("% of scored answers")
            axes.set_title(name.replace("_", " "))
            panel.legend(loc="outside lower center", ncols=2, frameon=False, fontsize="small")
        title = f"{_label(agent_id)}: filter status and verdict"
        return Chart(agent_id, "breakdown", title, _data_uri(figure))


def render_charts(data: ReportData) -> list[Chart]:
    """Every chart of the report: histogram, trend and breakdown per agent."""
    charts: list[Chart] = []
    for agent in data.agents:
        charts += [histogram_chart(data, agent), trend_chart(data, agent), breakdown_chart(data, agent)]
    return charts


# --------------------------------------------------------------------------- rendering


def _num(value: Any, spec: str = ".1f") -> Markdown:
    return Markdown("–" if value is None else format(value, spec))


def _pct(value: Any) -> Markdown:
    return Markdown("–" if value is None else f"{100 * value:.1f} %")


def _ci(value: Any) -> str:
    return "–" if not value or value[0] is None else f"[{value[0]:+.2f}, {value[1]:+.2f}]"


def _delta(value: Any, interval: Any) -> Markdown:
    """A delta with its interval (``-7.56 [-11.80, -3.43]``), or ``–``.

    >>> _delta(-7.5612, [-11.8, -3.43]), _delta(None, None)
    ('-7.56 [-11.80, -3.43]', '–')
    """
    return Markdown("–" if value is None else f"{value:+.2f} {_ci(interval)}")


def html_name(value: object, width: int = DISPLAY_WIDTH) -> Markup:
    """A name (agent id, version, run id) for the HTML report: escaped, on one line, shortened to
    ``width`` characters; a shortened name keeps the whole one in a ``title`` attribute (tooltip).

    >>> html_name("<b>bird</b>")
    Markup('&lt;b&gt;bird&lt;/b&gt;')
    >>> html_name("a" * 60, 10)
    Markup('<span class="name" title="aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">aaaaaaaaa…</span>')
    """
    full, short = one_line(value), shorten(value, width)
    if short == full:
        return escape(full)
    return Markup('<span class="name" title="{}">{}</span>').format(full, short)


def md_name(value: object, width: int = DISPLAY_WIDTH) -> Markdown:
    """A name for the Markdown twin: :func:`stef.display.shorten` then :func:`stef.display.md_text`."""
    return md_text(shorten(value, width))


def _md_finalize(value: Any) -> Markdown:
    """Jinja ``finalize`` of the Markdown twin: every ``{{ … }}`` goes through :func:`stef.display.md_text`
    unless a filter already made it Markdown (:func:`stef.display.md_code`, ``num`` …), so a new
    field in the template is escaped without anyone remembering to."""
    return md_text(value)


def _environment(markdown: bool) -> Any:
    """The Jinja environment of the HTML report (autoescape) or of its Markdown twin (:func:`_md_finalize`)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    options: dict[str, Any] = {"finalize": _md_finalize} if markdown else {"autoescape": True}
    environment = Environment(
        loader=PackageLoader("tasks", "templates"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        **options,
    )
    environment.filters.update(num=_num, pct=_pct, delta=_delta)
    if markdown:
        environment.filters.update(name=md_name, md=md_text, code=md_code, code_block=md_code_block)
    else:
        environment.filters.update(name=html_name)
    return environment


def _context(data: ReportData) -> dict[str, Any]:
    return {
        "data": data,
        "bins": BIN_LABELS,
        "filter_statuses": [m.value for m in FilterStatus],
        "verdicts": [m.value for m in Verdict],
        "bands": [m.value for m in Band],
    }


def render_html(data: ReportData, charts: Sequence[Chart]) -> str:
    """The self-contained HTML report (template ``weekly_report.html.j2``; charts as ``data:`` URIs)."""
    by_agent: dict[str, dict[str, Chart]] = defaultdict(dict)
    for chart in charts:
        by_agent[chart.agent_id][chart.kind] = chart
    return str(
        _environment(markdown=False).get_template("weekly_report.html.j2").render(charts=by_agent, **_context(data))
    )


def render_markdown(data: ReportData) -> str:
    """The Markdown twin (template ``weekly_report.md.j2``): the same tables, no charts."""
    return str(_environment(markdown=True).get_template("weekly_report.md.j2").render(**_context(data)))


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def report_paths(out: str | Path | None, week: str) -> tuple[Path, Path]:
    """The HTML and Markdown paths of a report.

    ``out`` is the HTML file; a folder (one that exists, or a path ending in ``/``) gets
    ``stef-report-<week>.html`` inside; ``None`` means that name in the working directory. The
    Markdown twin has the same name with ``.md``.

    >>> [str(p) for p in report_paths(None, "2026-W48")]
    ['stef-report-2026-W48.html', 'stef-report-2026-W48.md']
    >>> [str(p) for p in report_paths("reports/", "2026-W48")]
    ['reports/stef-report-2026-W48.html', 'reports/stef-report-2026-W48.md']
    """
    name = f"stef-report-{week}.html"
    if out is None or not str(out):
        html = Path(name)
    elif str(out).endswith(("/", os.sep)) or Path(out).is_dir():
        html = Path(out) / name
    else:
        html = Path(out)
    return html, html.with_suffix(".md")


@task(
    name="write-report",
    retries=1,
    retry_delay_seconds=5,
    retry_condition_fn=retry_on_io_error,
    cache_policy=NO_CACHE,
    persist_result=False,
)
def write_report(data: ReportData, out: str | None = None) -> ReportFiles:
    """Draw the charts and write the HTML report and its Markdown twin (each written atomically).

    Args:
        data: from :func:`collect_report_data`.
        out: the HTML file, or a folder for ``stef-report-<week>.html`` (:func:`report_paths`;
            default: that name in the working directory); the Markdown twin takes the same name
            with ``.md``. Missing folders are created.

    Returns:
        The :class:`ReportFiles`.

    Raises:
        OSError: a file cannot be written (retried once).
    """
    html_path, md_path = report_paths(out, data.week)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(html_path, render_html(data, render_charts(data)))
    _write_atomically(md_path, render_markdown(data))
    return ReportFiles(
        data.week,
        str(html_path),
        str(md_path),
        len(data.agents),
        sum(row["evaluated"] for row in data.headline),
        headline_table(data),
    )


def headline_table(data: ReportData) -> list[dict[str, Any]]:
    """Rows of the report artifact: agent, version, records, coverage, mean, P90, poor share, drift.

    >>> headline_table(ReportData("2026-W48", date(2026, 11, 23), date(2026, 11, 29), "wh", None, "now"))
    []
    """
    return [
        {
            "agent": row["agent_id"],
            "version": row["agent_version"],
            "records": row["records"],
            "coverage": None if row["coverage"] is None else round(row["coverage"], 4),
            "mean_p_correct": None if row.get("mean_p_correct") is None else round(row["mean_p_correct"], 3),
            "mean": None if row["mean"] is None else round(row["mean"], 1),
            "p90": None if row["p90"] is None else round(row["p90"], 1),
            "poor_share": None if row["poor_share"] is None else round(row["poor_share"], 4),
            "drift": row["drift"] or "–",
        }
        for row in data.headline
    ]


@task(name="publish-report-artifact", cache_policy=NO_CACHE, persist_result=False)
def publish_report_artifact(data: ReportData, files: ReportFiles) -> UUID:
    """Table artifact (key :data:`REPORT_ARTIFACT_KEY`) with the headline table and where the report is.

    The Prefect UI renders the description and every string cell as Markdown: names and paths go
    through :func:`stef.display.md_cells` / :func:`stef.display.md_code` (shown as text, names shortened).
    """
    from prefect.artifacts import create_table_artifact

    description = (
        f"STEF weekly report {data.week} ({data.start} … {data.end}): {files.evaluations} scored answers of "
        f"{files.agents} agents. HTML: {md_code(files.html)} · Markdown: {md_code(files.markdown)}"
    )
    return cast(
        UUID, create_table_artifact(table=md_cells(files.headline), key=REPORT_ARTIFACT_KEY, description=description)
    )
