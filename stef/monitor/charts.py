"""The weekly report's charts: score histogram, daily trend and breakdown per agent, as PNG ``data:`` URIs.

Matplotlib is imported only when charts are drawn (object API on the Agg canvas, no pyplot state).
"""

from __future__ import annotations

import base64
import io
import warnings
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any, cast

from stef.display import DISPLAY_WIDTH, shorten
from stef.models import FilterStatus, Verdict
from stef.monitor.report import BIN_LABELS, ReportData

if TYPE_CHECKING:
    from matplotlib.figure import Figure, SubFigure
    from matplotlib.typing import RcKeyType


@dataclass(frozen=True, slots=True)
class Chart:
    """One embedded chart: which agent, what it shows, the PNG as a ``data:`` URI."""

    agent_id: str
    kind: str
    title: str
    data_uri: str


_PLAIN_TEXT: dict[RcKeyType, Any] = {"text.parse_math": False, "text.usetex": False}
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


TREND_PANELS: tuple[tuple[str, str, float], ...] = (
    ("wrong_share", "wrong answers\n(est.) %", 100.0),
    ("mean_p_correct", "mean\nP(correct) %", 100.0),
    ("mean", "mean Φ", 1.0),
    ("p90", "P90 Φ", 1.0),
    ("coverage", "coverage %", 100.0),
)
"""(daily row key, axis label, scale) of the trend panels, top to bottom; every axis spans 0–100."""
_MARKERS = ("o", "s", "^", "D", "v", "P")
_LINESTYLES = ("-", "--", "-.", ":")


def trend_figure(data: ReportData, agent_id: str) -> Figure:
    """The daily-trend figure of one agent: the panels of :data:`TREND_PANELS` over the week's days,
    one line per version.

    Every axis spans its whole range (0–100 % or Φ 0–100), so one unscored record is not a cliff;
    versions are offset a little along the day axis and differ in marker and line style, so a
    version whose values equal another's (same P90 every day) stays visible. The estimated share
    of wrong answers is drawn with its 95 % interval as a band.
    """
    versions = data.versions(agent_id)
    days = [data.start + timedelta(days=i) for i in range(7)]
    figure = _figure(9.0, 9.0)
    panels = figure.subplots(len(TREND_PANELS), 1, sharex=True)
    series: dict[str, dict[date, dict[str, Any]]] = defaultdict(dict)
    for row in data.daily:
        if row["agent_id"] == agent_id:
            series[row["agent_version"]][row["log_date"]] = row
    handles = []
    spread = 0.12 if len(versions) > 1 else 0.0
    for index, (version, color) in enumerate(zip(versions, _colors(len(versions)), strict=True)):
        points = series.get(version, {})
        offset = spread * (index - (len(versions) - 1) / 2) / max(len(versions) - 1, 1)
        x = [day + offset for day in range(7)]
        style = {
            "color": color,
            "marker": _MARKERS[index % len(_MARKERS)],
            "linestyle": _LINESTYLES[index % len(_LINESTYLES)],
            "markersize": 6,
        }
        for axes, (key, _, scale) in zip(panels, TREND_PANELS, strict=True):
            values = [
                float("nan") if points.get(day, {}).get(key) is None else scale * float(points[day][key])
                for day in days
            ]
            (line,) = axes.plot(x, values, **style)
            if key == "wrong_share":
                low = [
                    float("nan") if not (points.get(d) or {}).get("wrong_ci") else 100 * points[d]["wrong_ci"][0]
                    for d in days
                ]
                high = [
                    float("nan") if not (points.get(d) or {}).get("wrong_ci") else 100 * points[d]["wrong_ci"][1]
                    for d in days
                ]
                axes.fill_between(x, low, high, color=color, alpha=0.15, linewidth=0)
                handles.append(line)
    for axes, (_, label, _) in zip(panels, TREND_PANELS, strict=True):
        axes.set_ylabel(label)
        axes.set_ylim(0, 102)
        axes.grid(alpha=0.3)
    _legend(
        panels[0],
        handles,
        [_label(v) for v in versions],
        loc="upper left",
        frameon=False,
        ncols=max(min(len(versions), 4), 1),
    )
    panels[-1].set_xticks(range(7), [day.strftime("%a %d %b") for day in days])
    panels[-1].set_xlim(-0.5, 6.5)
    panels[0].set_title(f"{_label(agent_id)}: daily trend")
    return figure


def trend_chart(data: ReportData, agent_id: str) -> Chart:
    """The daily trend of one agent (:func:`trend_figure`) as an embedded PNG (plain text labels)."""
    with _plain_text_charts():
        figure = trend_figure(data, agent_id)
        title = f"{_label(agent_id)}: daily trend"
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
