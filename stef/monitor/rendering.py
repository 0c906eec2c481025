"""The weekly report as one self-contained HTML file and its Markdown twin (Jinja2 templates).

The HTML embeds the charts as PNG ``data:`` URIs with inline CSS (no network needed to view it);
the Markdown twin holds the same tables, no charts. The templates are in ``stef/monitor/templates/``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape

from stef.display import DISPLAY_WIDTH, Markdown, md_code, md_code_block, md_text, one_line, shorten, visible_text
from stef.models import Band, FilterStatus, Verdict
from stef.monitor.charts import Chart
from stef.monitor.formatting import fmt, fmt_ci
from stef.monitor.report import BIN_LABELS, ReportData, left_out_note, share_text


def _num(value: Any, spec: str = ".1f") -> Markdown:
    return Markdown("–" if value is None else format(value, spec))


def _pct(value: Any) -> Markdown:
    return Markdown("–" if value is None else f"{100 * value:.1f} %")


def _delta(value: Any, interval: Any) -> Markdown:
    """A delta with its interval (``-7.56 [-11.80, -3.43]``), or ``–``.

    >>> _delta(-7.5612, [-11.8, -3.43]), _delta(None, None)
    ('-7.56 [-11.80, -3.43]', '–')
    """
    return Markdown("–" if value is None else f"{fmt(value)} {fmt_ci(interval)}")


def _rate_delta(value: Any, interval: Any = None, unit: str = " points") -> Markdown:
    """A delta of shares in points with its interval (``+15.0 [+9.1, +20.9] points``), or ``–``
    (``unit=""``: the column header names the unit).

    >>> _rate_delta(0.15, [0.091, 0.209]), _rate_delta(0.15, [0.091, 0.209], unit=""), _rate_delta(None, None)
    ('+15.0 [+9.1, +20.9] points', '+15.0 [+9.1, +20.9]', '–')
    >>> _rate_delta(-1.1e-16, [-1.0, 1.0], unit="")  # two equal shares: no minus sign on the zero
    '+0.0 [-100.0, +100.0]'
    """
    if value is None:
        return Markdown("–")
    if not interval or interval[0] is None:
        return Markdown(f"{fmt(100 * value, '+.1f')}{unit}")
    return Markdown(f"{fmt(100 * value, '+.1f')} {fmt_ci([100 * interval[0], 100 * interval[1]], '+.1f')}{unit}")


def _figure(value: Any, interval: Any = None) -> Markdown:
    """A figure in [0, 1] (κ, AUROC, ECE) with two decimals and its interval (``0.21 [0.13–0.29]``), or ``–``.

    >>> _figure(0.2094, [0.128, 0.291]), _figure(0.76), _figure(None)
    ('0.21 [0.13–0.29]', '0.76', '–')
    """
    if value is None:
        return Markdown("–")
    if not interval or interval[0] is None:
        return Markdown(f"{value:.2f}")
    return Markdown(f"{value:.2f} [{interval[0]:.2f}–{interval[1]:.2f}]")


def _rate(value: Any, interval: Any = None) -> Markdown:
    """A share with its interval, in whole percent (``72 % [41–100 %]``), or ``–`` (:func:`stef.monitor.report.share_text`).

    >>> _rate(0.7234, [0.41, 1.0]), _rate(0.05), _rate(None)
    ('72 % [41–100 %]', '5 %', '–')
    """
    return Markdown(share_text(value, interval if interval and interval[0] is not None else None))


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


def _html_finalize(value: Any) -> Any:
    """Jinja ``finalize`` of the HTML report: every string of a ``{{ … }}`` (the question, the
    enriched question, the SQL, evidence …) through :func:`stef.display.visible_text`, so a control
    or bidirectional character shows as ``\\x1b`` or ``\\u202e`` as in the Markdown twin, line breaks
    kept for the SQL's ``<pre>``; autoescape then escapes it. :class:`~markupsafe.Markup` built by
    STEF (:func:`html_name`: already visible) and non-strings pass unchanged.

    >>> _html_finalize("a\\u202eb\\x1b[31m"), _html_finalize(Markup("<b>x</b>")), _html_finalize(3)
    ('a\\\\u202eb\\\\x1b[31m', Markup('<b>x</b>'), 3)
    """
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible_text(value)
    return value


def _environment(markdown: bool) -> Any:
    """The Jinja environment of the HTML report (autoescape, :func:`_html_finalize`) or of its
    Markdown twin (:func:`_md_finalize`)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    options: dict[str, Any] = (
        {"finalize": _md_finalize} if markdown else {"autoescape": True, "finalize": _html_finalize}
    )
    environment = Environment(
        loader=PackageLoader("stef.monitor", "templates"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        **options,
    )
    environment.filters.update(num=_num, pct=_pct, rate=_rate, figure=_figure, delta=_delta, rate_delta=_rate_delta)
    if markdown:
        environment.filters.update(name=md_name, md=md_text, code=md_code, code_block=md_code_block)
    else:
        environment.filters.update(name=html_name)
    return environment


def _context(data: ReportData) -> dict[str, Any]:
    return {
        "data": data,
        "left_out": left_out_note(data),
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
