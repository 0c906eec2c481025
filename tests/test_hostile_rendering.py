"""Hostile names, versions, run ids, questions and SQL through every place STEF shows them
(issue 13, items 3, 7, 8, 15): the Markdown escaping of :mod:`stef.display`, the weekly report
(charts, HTML, Markdown twin), ``stef drift``, ``stef evaluate``, and under the Prefect test
harness ``stef nightly`` (its drift step and artifacts) and ``stef report``.

Every command exits 0 and shows the data as its text: Markdown is checked by rendering it with a
real CommonMark renderer (markdown-it-py, a dependency of rich) with raw HTML *enabled*, so any
tag that got through would appear in its output.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, cast

import duckdb
import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

import stef.monitor.charts
from flows.cli.main import app
from stef.display import (
    DISPLAY_WIDTH,
    Markdown,
    md_cells,
    md_code,
    md_code_block,
    md_table,
    md_text,
    one_line,
    shorten,
    visible_text,
)
from stef.logs import parse_line
from stef.models import AlignmentResult, Evaluation, EvaluationStatus, FilterStatus, SuspectedError, Verdict
from stef.monitor.alerts import drift_markdown
from stef.monitor.charts import Chart, render_charts
from stef.monitor.rendering import render_html, render_markdown
from stef.monitor.report import ReportData
from stef.monitor.windows import order_versions, version_sort_key
from stef.pipeline.score import band_for
from tasks.drift_checks import plan_version_check, run_check
from tasks.report import collect
from tests.support.monitoring_support import write_log_day
from warehouse import compute_daily_metrics, connect, store_day
from warehouse.monitoring import store_drift_checks

MONDAY = date(2026, 11, 23)  # 2026-W48
WIDE = {"COLUMNS": "400"}  # rich tables do not fold a 48-character name on a 400-column terminal

HOSTILE = [
    pytest.param("[/x]", id="rich_closing_tag"),
    pytest.param("[link=http://evil.test/]click[/link]", id="rich_link"),
    pytest.param("[bold]loud", id="rich_open_tag"),
    pytest.param(":smile: :thumbs_up:", id="rich_emoji_codes"),
    pytest.param("$\\notacommand$", id="mathtext_unknown_command"),
    pytest.param("$x^2$ costs $5", id="mathtext_dollars"),
    pytest.param("<script>alert(1)</script>", id="html_script"),
    pytest.param('<iframe srcdoc="<script>alert(1)</script>"></iframe>', id="html_iframe_srcdoc"),
    pytest.param("<img src=x onerror=alert(1)>", id="html_img_onerror"),
    pytest.param("![](http://beacon.test/p.png)", id="markdown_image_beacon"),
    pytest.param("[click](http://evil.test/)", id="markdown_link"),
    pytest.param("**bold** _em_ ~~del~~", id="markdown_emphasis"),
    pytest.param("a | b | c", id="pipes"),
    pytest.param("a\n# injected heading\n<script>alert(1)</script>", id="newline_heading_script"),
    pytest.param("a\r\n---\r\nb", id="crlf_setext"),
    pytest.param("`\n# h\n<script>alert(1)</script>", id="backtick_newline_script"),
    pytest.param("x`` y ```", id="backtick_runs"),
    pytest.param("```\n<script>alert(1)</script>\n```", id="code_fence"),
    pytest.param("~~~", id="tilde_fence"),
    pytest.param("# heading", id="leading_hash"),
    pytest.param("- item", id="leading_dash"),
    pytest.param("+ item", id="leading_plus"),
    pytest.param("1. item", id="leading_ordered_list"),
    pytest.param("> quote", id="leading_quote"),
    pytest.param("\\", id="backslash"),
    pytest.param("&lt;b&gt; &amp;", id="html_entities"),
    pytest.param("v" + "9" * 4301, id="digits_4301"),
    pytest.param("v1²", id="superscript_digit"),
    pytest.param("v١٢", id="arabic_indic_digits"),
    pytest.param("x" * 10_000, id="name_10000_chars"),
    pytest.param("_canary", id="leading_underscore"),
    pytest.param("red\x1b[31m alarm\x07", id="terminal_escape"),
    pytest.param("abc\u202edcba", id="bidi_override"),
    pytest.param("名前 😀", id="cjk_emoji"),
]
"""Values put in every field: agent id, agent version, run id, question, SQL, evidence …"""

_MD = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")
"""CommonMark + GFM tables and strikethrough, raw HTML allowed: an unescaped tag shows in the output."""
REPORT_MD_TAGS = {
    "h1",
    "h2",
    "h3",
    "p",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "strong",
    "code",
    "pre",
    "ul",
    "li",
}
"""The tags the Markdown twin's own template produces."""


class _Page(HTMLParser):
    """Tags, attributes and text of an HTML document (character references decoded)."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self._pre = 0
        self.pre_texts: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "pre":
            self._pre += 1
            self.pre_texts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._pre -= 1

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)
        if self._pre:
            self.pre_texts[-1] += data

    @property
    def names(self) -> set[str]:
        return {tag for tag, _ in self.tags}

    @property
    def text(self) -> str:
        return "".join(self.chunks)


def _markdown_page(markdown: str) -> _Page:
    return _Page(_MD.render(markdown))


def _squash(text: str) -> str:
    """Whitespace runs as one space (terminal output wraps at spaces)."""
    return " ".join(text.split())


_BOX = dict.fromkeys(range(9472, 9600))


def _flat(text: str) -> str:
    """Text without whitespace and box-drawing characters: a cell folded over several lines of a
    bordered table reads as one run (the other cells of its continuation lines are empty)."""
    return "".join(text.translate(_BOX).split())


# --------------------------------------------------------------------------- stef.display


@pytest.mark.parametrize("value", HOSTILE)
def test_md_text_renders_as_its_text_inline_in_a_cell_and_alone(value: str) -> None:
    inline = _markdown_page(f"before {md_text(value)} after")
    assert inline.names == {"p"}
    assert inline.text.strip() == f"before {one_line(value)} after".strip()

    table = _markdown_page(str(md_table(["name", "n"], [[value, 7]], "lr")))
    assert table.names == {"table", "thead", "tbody", "tr", "th", "td"}
    cells = [chunk for chunk in table.chunks if chunk.strip()]
    assert cells == ["name", "n", *([one_line(value).strip()] if one_line(value).strip() else []), "7"]

    alone = _markdown_page(md_text(value))  # a Prefect table cell is rendered as one document
    assert alone.names <= {"p"}
    assert alone.text.strip() == one_line(value).strip()


@pytest.mark.parametrize("value", HOSTILE)
def test_md_code_cannot_be_closed_by_its_content(value: str) -> None:
    page = _markdown_page(f"run {md_code(value)} done")
    assert page.names == {"p", "code"}
    assert page.text.removesuffix("\n") == f"run {one_line(value)} done"


@pytest.mark.parametrize("value", HOSTILE)
def test_md_code_block_keeps_the_text_verbatim(value: str) -> None:
    page = _markdown_page(f"- a list\n\n{md_code_block(value, 'sql')}\n\nafter")
    assert page.names == {"ul", "li", "pre", "code", "p"}
    expected = (
        value.replace("\r\n", "\n").replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace("\u202e", "\\u202e")
    )
    assert page.pre_texts == [expected + "\n"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("a | b\nc", "a \\| b c", id="pipe_and_newline"),
        pytest.param("<b>&</b>", "\\<b\\>\\&\\</b\\>", id="html_characters"),
        pytest.param("- x", "\\- x", id="leading_dash"),
        pytest.param("  10. x", "  10\\. x", id="indented_ordered_marker"),
        pytest.param("v1.0-rc_2", "v1.0-rc\\_2", id="version_keeps_dots_and_dashes"),
        pytest.param(Markdown("**kept**"), "**kept**", id="markdown_passes_through"),
        pytest.param(42, "42", id="number"),
    ],
)
def test_md_text_escapes(value: object, expected: str) -> None:
    assert md_text(value) == expected


@pytest.mark.parametrize(
    ("value", "width", "expected"),
    [
        pytest.param("bird", 48, "bird", id="short_unchanged"),
        pytest.param("x" * 10_000, 48, "x" * 47 + "…", id="long_cut_with_ellipsis"),
        pytest.param("a\nb\tc", 48, "a b c", id="line_breaks_folded"),
        pytest.param("\x1b[2J", 48, "\\x1b[2J", id="control_escaped"),
    ],
)
def test_shorten(value: str, width: int, expected: str) -> None:
    assert shorten(value, width) == expected


def test_md_table_rejects_a_row_of_the_wrong_width() -> None:
    with pytest.raises(ValueError, match="a table row has 1 cells for 2 columns"):
        md_table(["a", "b"], [["only one"]])


def test_md_cells_escape_and_shorten_strings_only() -> None:
    rows = md_cells([{"agent": "<b>" + "x" * 100, "records": 3, "mean": None}])
    assert rows == [{"agent": "\\<b\\>" + "x" * (DISPLAY_WIDTH - 4) + "…", "records": 3, "mean": None}]


# --------------------------------------------------------------------------- version order


@pytest.mark.parametrize(
    ("versions", "expected"),
    [
        pytest.param(
            ["v" + "1" + "0" * 4400, "v" + "9" * 4301, "v10"],
            ["v10", "v" + "9" * 4301, "v" + "1" + "0" * 4400],
            id="digit_runs_beyond_int_limit_compare_by_value",
        ),
        pytest.param(["v2", "v1²", "v1"], ["v1", "v1²", "v2"], id="superscript_is_text"),
        pytest.param(["v١٢", "v3", "v12"], ["v3", "v12", "v١٢"], id="arabic_indic_digits_are_text"),
        pytest.param(["v010", "v10", "v9"], ["v9", "v10", "v010"], id="leading_zeros_break_ties"),
    ],
)
def test_version_sort_key_orders_any_version(versions: list[str], expected: list[str]) -> None:
    assert sorted(versions, key=version_sort_key) == expected
    assert order_versions(dict.fromkeys(versions, MONDAY)) == expected


# --------------------------------------------------------------------------- the weekly report


def _store(
    conn: duckdb.DuckDBPyConnection, day: date, rows: list[tuple[str, str, str, float, bool]], value: str
) -> None:
    """Store ``(run_id, agent_id, agent_version, score, missing filter)`` rows whose question,
    enriched question, SQL, rationale, evidence and filters all hold ``value``."""
    lines, evaluations = [], []
    for number, (run_id, agent, version, score, missing) in enumerate(rows, start=1):
        payload = {
            "run_id": run_id,
            "timestamp": f"{day.isoformat()}T10:00:00+00:00",
            "agent_id": agent,
            "agent_version": version,
            "question": f"How many {value}?",
            "enriched_question": value,
            "sql": f"SELECT COUNT(*) FROM t WHERE c = '{value}'\n{value}",
        }
        line = parse_line(json.dumps(payload).encode(), f"{day}/agent.jsonl", number)
        assert line is not None and line.record is not None, line
        lines.append(line)
        evaluations.append(
            Evaluation(
                run_id=run_id,
                status=EvaluationStatus.EVALUATED,
                score=score,
                band=band_for(score),
                filter_status=FilterStatus.NOT_APPLIED if missing else FilterStatus.FULLY_APPLIED,
                verdict=Verdict.INCORRECT if missing else Verdict.LIKELY_CORRECT,
                confidence=0.9,
                rationale=value,
                agent_id=agent,
                agent_version=version,
                alignment=AlignmentResult(
                    status=FilterStatus.NOT_APPLIED if missing else FilterStatus.FULLY_APPLIED,
                    missing=(value,) if missing else (),
                ),
                suspected_errors=(
                    SuspectedError(
                        category="Condition-Related Errors", subcategory="Explicit Condition Missing", evidence=value
                    ),
                )
                if missing
                else (),
            )
        )
    store_day(conn, day, lines, evaluations)
    compute_daily_metrics(conn, day)


def _hostile_week(conn: duckdb.DuckDBPyConnection, value: str) -> None:
    """Agent ``value``: version ``value`` all week (70/90), version ``value + "+1"`` from Thursday
    (40/60, a missing filter); run ids start with ``value``; a stored version check."""
    from stef.monitor.models import DriftThresholds

    for offset in range(7):
        rows = [(f"{value}-a{offset}-{i}", value, value, score, False) for i, score in enumerate([70.0, 90.0] * 2)]
        if offset >= 3:
            rows += [
                (f"{value}-b{offset}-{i}", value, value + "+1", score, True) for i, score in enumerate([40.0, 60.0] * 2)
            ]
        _store(conn, MONDAY + timedelta(days=offset), rows, value)
    plan = plan_version_check(conn, value, _evaluator_version(conn), end=MONDAY + timedelta(days=6))
    store_drift_checks(conn, [run_check(conn, plan, DriftThresholds(min_samples=5, n_resamples=100)).row("nightly")])


def _evaluator_version(conn: duckdb.DuckDBPyConnection) -> str:
    return str(conn.execute("SELECT max(evaluator_version) FROM evaluations").fetchall()[0][0])


@pytest.fixture(scope="module", params=HOSTILE)
def hostile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, ReportData]:
    """A warehouse file holding :func:`_hostile_week` of one hostile value, and its W48 report data."""
    value = cast(str, request.param)
    path = tmp_path_factory.mktemp("hostile") / "wh.duckdb"
    with connect(path) as conn:
        _hostile_week(conn, value)
        data = collect(conn, str(path), "2026-W48")
    return value, path, data


def test_markdown_twin_shows_every_field_as_text(hostile: tuple[str, Path, ReportData]) -> None:
    value, _, data = hostile
    markdown = render_markdown(data)
    page = _markdown_page(markdown)
    assert page.names <= REPORT_MD_TAGS  # no tag, image or link from the data
    text = page.text
    for shown in (
        f"How many {one_line(value)}?",
        f"enriched question: {one_line(value)}",
        f"missing filters: {one_line(value)}",
        f"Explicit Condition Missing: {one_line(value)}",
        f"rationale: {one_line(value)}",
        f"Agent {one_line(value)}",
        f"run {one_line(value)}-b",
    ):
        assert shown in text
    assert shorten(value) in text and shorten(value + "+1") in text
    sql = value.replace("\r\n", "\n").replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace("\u202e", "\\u202e")
    assert len(page.pre_texts) == 10 and all(block.endswith(f"'{sql}'\n{sql}\n") for block in page.pre_texts)
    rows = _table_rows(_MD.render(_section(markdown, "## Headline")))
    assert [row[:3] for row in rows[1:]] == [  # names shortened so the table fits 100 columns
        [shorten(value, 14), shorten(value, 12), "28"],
        [shorten(value, 14), shorten(value + "+1", 12), "16"],
    ]
    assert rows[2][-1] == "drift / worse"  # the cells did not shift


def _section(markdown: str, heading: str) -> str:
    """The first block (up to a blank line) after ``heading``."""
    return markdown.split(heading + "\n\n", 1)[1].split("\n\n", 1)[0]


def _table_rows(html: str) -> list[list[str]]:
    class Rows(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.rows: list[list[str]] = []
            self._cell: str | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self._cell = ""

        def handle_endtag(self, tag: str) -> None:
            if tag in ("td", "th") and self._cell is not None:
                self.rows[-1].append(self._cell)
                self._cell = None

        def handle_data(self, data: str) -> None:
            if self._cell is not None:
                self._cell += data

    parser = Rows()
    parser.feed(html)
    return parser.rows


def test_html_report_escapes_and_shortens_names(hostile: tuple[str, Path, ReportData]) -> None:
    value, _, data = hostile
    charts = [
        Chart(agent, kind, f"{shorten(agent)}: {kind}", "data:image/png;base64,")
        for agent in data.agents
        for kind in ("histogram", "trend", "breakdown")
    ]  # drawn in test_charts_draw_names_as_plain_shortened_text
    page = _Page(render_html(data, charts))
    assert page.names <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "h1",
        "h2",
        "h3",
        "p",
        "code",
        "strong",
        "div",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "span",
        "img",
        "br",
        "pre",
        "ul",
        "li",
    }
    assert [attrs["alt"] for tag, attrs in page.tags if tag == "img"] == [
        f"{shorten(value)}: {k}" for k in ("histogram", "trend", "breakdown")
    ]
    assert (
        visible_text(value) in page.text
    )  # the question and the SQL, whole (controls shown visibly, escaped by Jinja)
    assert f"Agent {shorten(value)}" in page.text
    titles = [attrs["title"] for tag, attrs in page.tags if tag == "span" and attrs.get("class") == "name"]
    assert (one_line(value) in titles) == (
        shorten(value) != one_line(value)
    )  # a shortened name keeps the whole as a tooltip


def test_html_report_shows_control_and_bidi_characters_visibly_as_the_markdown_twin() -> None:
    value = "red\x1b[31m alarm\x07 abc\u202edcba"
    shown = "red\\x1b[31m alarm\\x07 abc\\u202edcba"  # what the Markdown twin shows too
    conn = connect(":memory:")
    _store(conn, MONDAY, [(f"r{value}", f"a{value}", f"v{value}", 40.0, True)], value)
    data = collect(conn, "memory", "2026-W48")
    conn.close()
    charts = [
        Chart(a, kind, kind, "data:image/png;base64,")
        for a in data.agents
        for kind in ("histogram", "trend", "breakdown")
    ]
    html = render_html(data, charts)
    assert not {"\x1b", "\x07", "\u202e"} & set(html)  # no raw control or bidi character anywhere
    (row,) = _table_rows(html.split('<h2 id="worst">', 1)[1])[1:]
    assert row[1] == f"{MONDAY}a{shown} v{shown}r{shown}"  # day, agent, version, run id
    assert row[3] == f"How many {shown}?enriched: {shown}"  # question, enriched question
    assert row[4] == f"SELECT COUNT(*) FROM t WHERE c = '{shown}'\n{shown}"  # the SQL's <pre>, lines kept
    for evidence in (f"missing filters: {shown}", f"Explicit Condition Missing: {shown}", shown):
        assert evidence in row[5]
    markdown = render_markdown(data)
    assert f"- question: How many {md_text(value)}?" in markdown
    assert f"'{shown}'\n{shown}\n```" in markdown  # the same visible form in the twin's code block


def test_html_headline_keeps_long_names_narrow() -> None:
    long_name = "agent-" + "x" * 10_000
    conn = connect(":memory:")
    _store(conn, MONDAY, [(f"r{i}", long_name, "v1", 80.0, False) for i in range(3)], "q")
    data = collect(conn, "memory", "2026-W48")
    conn.close()
    page = render_html(data, render_charts(data))
    headline = page.split('<h2 id="headline">', 1)[1].split("</table>", 1)[0]
    rows = _table_rows(headline)
    assert rows[1][:3] == [shorten(long_name), "v1", "3"]  # the 10,000 characters do not widen the cell …
    assert max(len(cell) for row in rows for cell in row) <= DISPLAY_WIDTH
    assert f'title="{long_name}"' in headline  # … they are its tooltip
    assert "overflow-wrap: anywhere" in page  # and a long token in a question or SQL wraps


@pytest.fixture
def captured_figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The matplotlib figures the chart functions save (instead of their PNG)."""
    figures: list[Any] = []

    def keep(figure: Any) -> str:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(figure).draw()  # makes the ticks and lays out the legends, as saving would
        figures.append(figure)
        return "data:image/png;base64,"

    monkeypatch.setattr(stef.monitor.charts, "_data_uri", keep)
    return figures


def test_charts_draw_names_as_plain_shortened_text(
    hostile: tuple[str, Path, ReportData], captured_figures: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import matplotlib
    from matplotlib.text import Text

    value, _, data = hostile
    monkeypatch.setitem(matplotlib.rcParams, "text.usetex", True)  # a user's matplotlibrc: the charts still use no TeX
    monkeypatch.setitem(matplotlib.rcParams, "text.parse_math", True)
    charts = render_charts(data)
    assert [chart.kind for chart in charts] == ["histogram", "trend", "breakdown"]
    texts = [t for figure in captured_figures for t in figure.findobj(Text) if t.get_text()]
    assert not any(t.get_parse_math() or t.get_usetex() for t in texts)
    shown = [t.get_text() for t in texts]
    assert f"{shorten(value)}: score distribution per version" in shown
    assert f"{shorten(value)} (n=28)" in shown and f"{shorten(value + '+1')} (n=16)" in shown  # histogram legend
    trend_legend = [t.get_text() for t in captured_figures[1].axes[0].get_legend().get_texts()]
    assert trend_legend == [shorten(value), shorten(value + "+1")]  # a leading "_" does not hide the line
    assert max(len(text) for text in shown) <= DISPLAY_WIDTH + len(": score distribution per version")


# --------------------------------------------------------------------------- stef drift, stef evaluate


def test_drift_prints_names_as_text(hostile: tuple[str, Path, ReportData]) -> None:
    value, path, _ = hostile
    result = CliRunner().invoke(
        app, ["drift", "--warehouse", str(path), f"--agent={value}", "--min-samples", "5", "--no-store"], env=WIDE
    )
    assert result.exit_code == 0, result.output
    output = _squash(result.stdout)
    assert _squash(f"Drift check — agent {shorten(value)} (version)") in output
    assert (
        _squash(f"baseline {shorten(value)} 2026-11-23") in output
        and _squash(f"candidate {shorten(value + '+1')} 2026-11-23") in output
    )
    assert "drift / worse" in output

    as_json = CliRunner().invoke(
        app, ["drift", "--warehouse", str(path), f"--agent={value}", "--min-samples", "5", "--json", "--no-store"]
    )
    assert as_json.exit_code == 0, as_json.output
    summary = json.loads(as_json.stdout)
    assert (summary["agent_id"], summary["baseline_version"], summary["candidate_version"]) == (
        value,
        value,
        value + "+1",
    )


@pytest.mark.parametrize("value", HOSTILE)
def test_evaluate_prints_run_ids_and_reasons_as_text(value: str, tmp_path: Path) -> None:
    base = {"timestamp": "2026-11-26T10:00:00+00:00", "agent_id": value, "agent_version": value}
    lines = [
        {
            **base,
            "run_id": value,
            "question": "How many orders in 2025?",
            "sql": "SELECT count(*) FROM orders WHERE year = 2025",
        },
        {**base, "run_id": value + "-dialect", "question": value, "sql": "SELECT 1", "dialect": value},
        {**base, "run_id": value + "-invalid"},
    ]
    source = tmp_path / "logs.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    result = CliRunner().invoke(
        app, ["evaluate", str(source), "--out", str(tmp_path / "out.jsonl"), "--workers", "1"], env=WIDE
    )
    assert result.exit_code == 0, result.output
    output = _flat(result.stdout)
    assert _flat(shorten(value + "-dialect")) in output and _flat(shorten(value + "-invalid")) in output, result.stdout
    assert _flat(f"unknown SQL dialect {one_line(repr(value))} in the record") in output, result.stdout


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param("20\x1b[31m26", r"'20\x1b[31m26'", id="terminal_escape"),
        pytest.param("2026\u202e11\n26", r"'2026\u202e11\n26'", id="bidi_and_line_break"),
        pytest.param("C:\\26", r"'C:\\26'", id="backslash"),
    ],
)
def test_rejection_reasons_escape_user_text_once(value: str, shown: str, tmp_path: Path) -> None:
    """A reason quotes the logged value as a string literal, each unprintable character escaped once:
    ``'20\x1b[31m26'``, not ``'20\\x1b[31m26'`` (the visible escape escaped again by ``repr``), in the
    stored reason and in ``stef evaluate``'s and ``stef quarantine``'s output."""
    from stef.log_contract import duplicate_reason, timestamp_reason

    assert timestamp_reason(value).startswith(f"timestamp is not a date and time: {shown} (")
    assert duplicate_reason(value, "a.jsonl", 3).startswith(f"run_id is a duplicate: {shown}, first seen")
    base = {"agent_id": "a", "agent_version": "v1", "question": "How many?", "sql": "SELECT 1"}
    day = tmp_path / "logs" / "2026-11-26"
    day.mkdir(parents=True)
    source = day / "logs.jsonl"
    lines = [
        {**base, "run_id": "ok", "timestamp": "2026-11-26T10:00:00+00:00"},
        {**base, "run_id": "bad", "timestamp": value},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    result = CliRunner().invoke(
        app, ["evaluate", str(source), "--out", str(tmp_path / "out.jsonl"), "--workers", "1"], env=WIDE
    )
    assert result.exit_code == 0, result.output
    assert shown in _flat(result.stdout), result.stdout
    assert "\\\\x" not in result.stdout and "\\\\u" not in result.stdout  # no escape escaped again
    warehouse = tmp_path / "w.duckdb"
    night = CliRunner().invoke(
        app,
        [
            "nightly",
            "--date",
            "2026-11-26",
            "--logs-root",
            str(tmp_path / "logs"),
            "--warehouse",
            str(warehouse),
            "--max-bad-share",
            "1",
            "--quiet",
        ],
        env=WIDE,
    )
    assert night.exit_code == 0, night.output
    listing = CliRunner().invoke(app, ["quarantine", "--date", "2026-11-26", "--warehouse", str(warehouse)], env=WIDE)
    assert listing.exit_code == 0, listing.output
    assert shown in _flat(listing.stdout), listing.stdout
    stored = json.loads(
        CliRunner()
        .invoke(app, ["quarantine", "--date", "2026-11-26", "--warehouse", str(warehouse), "--json"], env=WIDE)
        .stdout.splitlines()[0]
    )
    assert stored["reason"] == timestamp_reason(value)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("[/x].jsonl", id="rich_closing_tag"),  # a folder "[" holding "x].jsonl"
        pytest.param(":smile:[bold].jsonl", id="rich_emoji_and_tag"),
        pytest.param("[link=https:evil.test]x.jsonl", id="rich_link"),
    ],
)
def test_evaluate_prints_file_names_as_text(name: str, tmp_path: Path) -> None:
    source = tmp_path / name
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(json.dumps({"run_id": "r1", "question": "How many?", "sql": "SELECT 1"}) + "\n", encoding="utf-8")
    out = source.with_name("out-" + source.name)
    result = CliRunner().invoke(app, ["evaluate", str(source), "--out", str(out)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert str(source) in result.stdout and str(out) in result.stdout


def test_drift_markdown_keeps_the_table_shape() -> None:
    checks = [
        {
            "agent_id": value,
            "kind": "version",
            "baseline_version": value,
            "candidate_version": "v2 | x\n# h",
            "baseline_window": ["2026-11-20", "2026-11-26"],
            "candidate_window": ["2026-11-20", "2026-11-26"],
            "n_baseline": 30,
            "n_candidate": 30,
            "verdict": "drift",
            "direction": "worse",
            "mean_delta": -3.0,
            "mean_delta_ci": [-4.0, -2.0],
        }
        for value in ("<script>x</script>", "a|b", "![](http://b.test/p.png)")
    ]
    html = _MD.render(drift_markdown(checks, "STEF drift checks 2026-11-26"))
    # the sentences are a list of text items, the table keeps its shape: no tag, image or link from a name
    assert _Page(html).names <= {"h1", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "strong", "code"}
    rows = _table_rows(html)
    assert [row[:3] for row in rows[1:]] == [
        ["<script>x</script>", "version", "<script>x</script> → v2 | x # h"],
        ["a|b", "version", "a|b → v2 | x # h"],
        ["![](http://b.test/p.png)", "version", "![](http://b.test/p.png) → v2 | x # h"],
    ]
    assert all(row[4] == "30 / 30" and row[5] == "drift" for row in rows[1:])


# --------------------------------------------------------------------------- the nightly and weekly flows


def _hostile_logs(logs: Path, day: date) -> None:
    """One day in which every hostile value is an agent with two versions, in the run ids and the questions."""
    records = []
    for index, param in enumerate(HOSTILE):
        value = cast(str, param.values[0])
        for version in (value, value + "+1"):
            for number in range(4):
                correct = version == value or number % 2 == 0
                sql = (
                    f"SELECT COUNT(*) FROM orders WHERE region = 'Region {number}' AND order_year = 2025"
                    if correct
                    else "SELECT COUNT(*) FROM orders WHERE order_year = 2024"
                )
                records.append(
                    {
                        "run_id": f"{value}-{index}-{version == value}-{number}",
                        "timestamp": f"{day}T10:00:00+00:00",
                        "agent_id": value,
                        "agent_version": version,
                        "app_id": "shop",
                        "dialect": "postgres",
                        "question": f"How many orders were placed in region 'Region {number}' in 2025? {value}",
                        "sql": sql,
                    }
                )
    write_log_day(logs, day, records)


@pytest.fixture(scope="module")
def hostile_night(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> Iterator[dict[str, Any]]:
    """``stef nightly`` then ``stef report`` over a day of hostile agents; their outputs and artifacts."""
    from prefect.artifacts import Artifact

    from tasks.artifacts import SUMMARY_ARTIFACT_KEY
    from tasks.drift import DRIFT_ARTIFACT_KEY
    from tasks.report import REPORT_ARTIFACT_KEY

    root = tmp_path_factory.mktemp("hostile")
    day = MONDAY + timedelta(days=3)
    _hostile_logs(root / "logs", day)
    warehouse_path = root / "wh.duckdb"
    env = {**WIDE, "STEF_DRIFT_THRESHOLDS": json.dumps({"min_samples": 2, "n_resamples": 100})}
    nightly = CliRunner().invoke(
        app,
        ["nightly", "--date", day.isoformat(), "--logs-root", str(root / "logs"), "--warehouse", str(warehouse_path)],
        env=env,
    )
    drift = cast(Any, Artifact.get(DRIFT_ARTIFACT_KEY))  # sync calls: not coroutines
    summary = cast(Any, Artifact.get(SUMMARY_ARTIFACT_KEY))
    report = CliRunner().invoke(
        app,
        ["report", "--week", "2026-W48", "--warehouse", str(warehouse_path), "--out", str(root / "r.html")],
        env=WIDE,
    )
    headline = cast(Any, Artifact.get(REPORT_ARTIFACT_KEY))
    with connect(warehouse_path, read_only=True) as conn:
        checks = conn.execute("SELECT agent_id, kind, verdict FROM drift_checks").fetchall()
    yield {
        "nightly": nightly,
        "report": report,
        "drift": drift,
        "summary": summary,
        "headline": headline,
        "checks": checks,
        "markdown": (root / "r.md").read_text(encoding="utf-8") if (root / "r.md").is_file() else "",
    }


@pytest.mark.flow
def test_nightly_and_report_exit_0_with_hostile_agents(hostile_night: dict[str, Any]) -> None:
    assert hostile_night["nightly"].exit_code == 0, hostile_night["nightly"].output
    assert hostile_night["report"].exit_code == 0, hostile_night["report"].output
    assert len(hostile_night["checks"]) == 2 * len(
        HOSTILE
    )  # a version and a temporal check per agent: no drift step failed
    assert _markdown_page(hostile_night["markdown"]).names <= REPORT_MD_TAGS


@pytest.mark.flow
@pytest.mark.parametrize("value", HOSTILE)
def test_nightly_outputs_show_hostile_names_as_text(value: str, hostile_night: dict[str, Any]) -> None:
    nightly = _squash(hostile_night["nightly"].stdout)
    assert (
        _squash(f"{shorten(value)} {shorten(value)} ") in nightly
        and _squash(f"{shorten(value)} {shorten(value + '+1')} ") in nightly
    )

    drift = hostile_night["drift"]
    assert drift is not None and drift.type == "markdown"
    page = _markdown_page(str(drift.data))  # the checks' sentences as list items, then the table
    assert page.names <= {"h1", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "strong", "code"}
    assert f"{shorten(value)} → {shorten(value + '+1')}" in [
        cell for row in _table_rows(_MD.render(str(drift.data))) for cell in row
    ]

    for artifact in (hostile_night["summary"], hostile_night["headline"]):
        assert artifact is not None and artifact.type == "table"
        rows = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
        shown = []
        for row in rows:  # the Prefect UI renders each string cell as Markdown
            for name in ("agent", "version", "drift_sentence"):
                if name not in row:  # the night's summary table has no drift sentence
                    continue
                cell = _markdown_page(row[name])
                assert cell.names <= {"p"}
                if name != "drift_sentence":
                    shown.append(cell.text.strip())
        assert shorten(value).strip() in shown and shorten(value + "+1") in shown


@pytest.mark.flow
@pytest.mark.parametrize("value", HOSTILE)
def test_report_prints_hostile_names_as_text(value: str, hostile_night: dict[str, Any]) -> None:
    report = _squash(hostile_night["report"].stdout)
    assert _squash(f"{shorten(value)} {shorten(value + '+1')} ") in report
    rows = _table_rows(_MD.render(_section(hostile_night["markdown"], "## Headline")))
    assert [shorten(value, 14), shorten(value + "+1", 12), "4"] in [row[:3] for row in rows]
