"""Tests of the weekly report tasks (tasks/report.py): the data read from the warehouse, the HTML and Markdown
written from the templates; no Prefect run."""

from __future__ import annotations

import base64
import doctest
import os
import re
import stat
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

import flows.deployments
import stef.monitor.charts
import stef.monitor.rendering
import stef.monitor.report
import tasks.report
from stef.display import md_code_block, md_text
from stef.errors import InputError
from stef.models import EVALUATOR_VERSION
from stef.monitor.charts import render_charts
from stef.monitor.rendering import render_html, render_markdown
from stef.monitor.report import BIN_LABELS, ReportData, headline_table
from tasks.report import collect, report_paths, write_report
from tests.tasks.helpers import MONDAY, _Collector


def test_headline_per_agent_and_version(data: ReportData, week_conn: duckdb.DuckDBPyConnection) -> None:
    assert (data.week, data.start, data.end, data.evaluator_version) == (
        "2026-W48",
        MONDAY,
        MONDAY + timedelta(days=6),
        EVALUATOR_VERSION,
    )
    assert [(r["agent_id"], r["agent_version"]) for r in data.headline] == [("bird", "v1"), ("bird", "v2")]
    v1, v2 = data.headline
    assert (v1["records"], v1["evaluated"], v1["coverage"], v1["mean"]) == (42, 42, 1.0, pytest.approx(80.0))
    v2_scores = [40.0, 80.0] * 12
    assert (v2["records"], v2["evaluated"]) == (28, 24)
    assert v2["coverage"] == pytest.approx(24 / 28)
    assert (v2["mean"], v2["p50"], v2["p90"]) == (
        pytest.approx(60.0),
        pytest.approx(np.percentile(v2_scores, 50)),
        pytest.approx(np.percentile(v2_scores, 90)),
    )
    assert (v2["n_poor"], v2["n_good"], v2["poor_share"]) == (12, 12, pytest.approx(0.5))
    assert v2["drift"] == "drift / worse vs v1" and v1["drift"] is None
    assert headline_table(data)[1] == {  # the rows carry no p_correct: no estimated share of wrong answers
        "agent": "bird",
        "version": "v2",
        "records": 28,
        "coverage": "85.7 %",
        "wrong (est.)": "–",
        "mean Φ": 60.0,
        "P90 Φ": pytest.approx(np.percentile(v2_scores, 90), abs=0.05),
        "drift": "drift / worse vs v1",
    }
    assert v2["drift_sentence"] == (  # mean Φ decided and is named
        "bird v2 scores a mean Φ of 60.0, against 80.0 for v1; it scores 86 % of its answers, down from 100 %; "
        "suspected Condition-Related Errors in 100 % of its answers, against 0 %: worse."
    )
    assert (v2["wrong_share"], v2["wrong_ci"]) == (None, None)


def test_histograms_trend_and_breakdown(data: ReportData) -> None:
    v2 = next(h for h in data.histograms if h["agent_version"] == "v2")
    assert v2["counts"] == [0, 0, 0, 0, 12, 0, 0, 0, 12, 0]
    assert v2["shares"][4] == pytest.approx(0.5)
    assert len(data.daily) == 7 + 4
    thursday = [d for d in data.daily if d["log_date"] == MONDAY + timedelta(days=3)]
    assert sorted((d["agent_version"], d["records"], d["mean"]) for d in thursday) == [("v1", 6, 80.0), ("v2", 7, 60.0)]
    breakdown = {(b["agent_version"], b["field"], b["category"]): (b["count"], b["share"]) for b in data.breakdown}
    assert breakdown[("v2", "verdict", "INCORRECT")] == (24, 1.0)
    assert breakdown[("v2", "filter_status", "FULLY_APPLIED")] == (0, 0.0)
    assert breakdown[("v1", "filter_status", "FULLY_APPLIED")] == (42, 1.0)
    assert len(data.breakdown) == 2 * (4 + 4)


def test_drift_and_worst_queries(data: ReportData) -> None:
    assert [
        (c["kind"], c["baseline_version"], c["candidate_version"], c["verdict"], c["direction"]) for c in data.drift
    ] == [("version", "v1", "v2", "drift", "worse")]
    assert data.drift[0]["mean_delta"] == pytest.approx(60.0 - 80.0)
    assert len(data.worst) == 10
    # per version, the candidate first: v2's five lowest, then v1's (not ten of one version's ties)
    assert [(q["agent_version"], q["score"]) for q in data.worst] == [("v2", 40.0)] * 5 + [("v1", 70.0)] * 5
    assert data.worst[0]["missing"] == ["region = region 1"]


def test_an_empty_week_says_so(week_conn: duckdb.DuckDBPyConnection) -> None:
    empty = collect(week_conn, "memory", "2026-W40")
    assert (empty.evaluator_version, empty.headline, empty.worst) == (None, [], [])
    assert "No evaluations are stored for 2026-W40." in render_html(empty, [])
    assert "**No evaluations are stored for 2026-W40.**" in render_markdown(empty)


def test_html_report_is_self_contained_with_charts_and_worst_queries(data: ReportData) -> None:
    charts = render_charts(data)
    assert [(c.agent_id, c.kind) for c in charts] == [("bird", "histogram"), ("bird", "trend"), ("bird", "breakdown")]
    page = render_html(data, charts)
    parser = _Collector()
    parser.feed(page)
    assert len(parser.images) == 3
    for src in parser.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert parser.links == []  # no stylesheet, script or link to fetch
    assert not re.search(r"https?://", page)
    assert parser.worst_rows == 1 + 10  # header + the 10 lowest-scoring queries
    assert "drift / worse" in page and "missing filters: region = region 1" in page
    assert "SELECT COUNT(*) FROM orders WHERE region = &#39;Region" in page  # SQL is escaped, not markup


def test_markdown_twin_holds_the_same_tables(data: ReportData) -> None:
    text = render_markdown(data)
    assert text.startswith("# STEF weekly report — 2026-W48\n")
    # the report opens with the verdict in one sentence, then the headline table
    lead = text.index("\n- **bird v2 scores a mean Φ of 60.0, against 80.0 for v1")
    assert lead < text.index("## Headline")
    assert "| bird | v2 | 28 | 85.7 % | – | 60.0 |" in text  # no p_correct in these synthetic rows
    assert "| v2 | 0 | 0 | 0 | 0 | 12 | 0 | 0 | 0 | 12 | 0 |" in text
    assert f"| version | {' | '.join(BIN_LABELS)} |" in text
    assert "| bird | version | v1 → v2 | **worse** | – → – | – |" in text  # no error rates without p_correct
    assert "| v1 → v2 | version | -20.00 [" in text
    assert "\n- bird v2 scores a mean Φ of 60.0, against 80.0 for v1; it scores 86 % of its answers" in text
    assert text.count("\n```sql\n") == 10
    assert "- missing filters: region = region 1" in text
    table_lines = [line for line in text.splitlines() if line.startswith("|")]
    assert all(line.endswith("|") for line in table_lines)


def test_markdown_cells_escape_pipes() -> None:
    assert md_text("a | b\nc") == "a \\| b c"
    assert md_code_block("x ``` y", "sql").splitlines()[0] == "````sql"


def test_write_report_writes_both_files(data: ReportData, tmp_path: Path) -> None:
    files = write_report.fn(data, str(tmp_path / "out") + "/")
    assert Path(files.html) == tmp_path / "out" / "stef-report-2026-W48.html"
    assert Path(files.markdown).read_text(encoding="utf-8") == render_markdown(data)
    assert "data:image/png;base64," in Path(files.html).read_text(encoding="utf-8")
    assert (files.agents, files.evaluations, len(files.headline)) == (1, 42 + 24, 2)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "stef-report-2026-W48.html",
        "stef-report-2026-W48.md",
    ]


def test_an_out_ending_in_md_names_the_twin_and_keeps_the_html(data: ReportData, tmp_path: Path) -> None:
    """``--out week.md`` wrote the HTML to week.md and then the Markdown twin over it: the HTML was
    lost while the command printed ``HTML report: week.md``."""
    files = write_report.fn(data, str(tmp_path / "week.md"))
    assert (Path(files.html), Path(files.markdown)) == (tmp_path / "week.html", tmp_path / "week.md")
    assert "data:image/png;base64," in (tmp_path / "week.html").read_text(encoding="utf-8")
    assert (tmp_path / "week.md").read_text(encoding="utf-8") == render_markdown(data)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["week.html", "week.md"]


@pytest.mark.parametrize("name", ["week.xlsx", "week.PDF", "week.csv", "stef.duckdb", "week.png"])
def test_report_paths_refuse_a_name_of_another_format(tmp_path: Path, name: str) -> None:
    """``--out x.xlsx`` wrote an HTML page named like a workbook (and x.md beside it), exit code 0."""
    with pytest.raises(InputError, match=r"writes an HTML page and its Markdown twin, not a \.\w+ file; name it"):
        report_paths(tmp_path / name, "2026-W48")
    assert not list(tmp_path.iterdir())
    assert report_paths(tmp_path / "week.htm", "2026-W48")[1] == tmp_path / "week.md"  # HTML by another name


def test_report_paths(tmp_path: Path) -> None:
    assert report_paths(tmp_path, "2026-W48") == (
        tmp_path / "stef-report-2026-W48.html",
        tmp_path / "stef-report-2026-W48.md",
    )
    assert report_paths(tmp_path / "r.html", "2026-W48") == (tmp_path / "r.html", tmp_path / "r.md")


def test_report_output_that_is_not_a_regular_file_is_refused(data: ReportData, tmp_path: Path) -> None:
    """A device or pipe is never replaced by the report (it is written to a temporary file and
    renamed): ``--out /dev/null`` as root would otherwise turn the device into a regular file."""
    pipe = tmp_path / "pipe.html"
    os.mkfifo(pipe)
    with pytest.raises(InputError, match=r"pipe\.html exists and is not a regular file"):
        write_report.fn(data, str(pipe))
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    assert not (tmp_path / "pipe.md").exists()
    (tmp_path / "twin.md").mkdir()  # the Markdown twin's name taken by a folder
    with pytest.raises(InputError, match=r"twin\.md exists and is not a regular file"):
        report_paths(tmp_path / "twin.html", "2026-W48")
    assert not (tmp_path / "twin.html").exists()


def test_a_report_that_cannot_be_written_names_its_file_not_the_temporary_one(
    data: ReportData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Path, *args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_text", refuse)
    with pytest.raises(PermissionError) as raised:
        write_report.fn(data, str(tmp_path / "r.html"))
    assert raised.value.filename == str(tmp_path / "r.html") and raised.value.strerror == "Permission denied"


def test_report_doctests() -> None:
    for module in (tasks.report, stef.monitor.report, stef.monitor.charts, stef.monitor.rendering):
        assert doctest.testmod(module).failed == 0, module.__name__
    assert doctest.testmod(flows.deployments).failed == 0


def _renamed(data: ReportData, names: dict[str, str]) -> ReportData:
    """``data`` with its agent ids and versions renamed (every list of rows, every name field)."""
    keys = ("agent_id", "agent_version", "baseline_version", "candidate_version")

    def rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {k: names.get(v, v) if k in keys and isinstance(v, str) else v for k, v in row.items()} for row in items
        ]

    return replace(
        data,
        headline=rows(data.headline),
        histograms=rows(data.histograms),
        daily=rows(data.daily),
        breakdown=rows(data.breakdown),
        drift=rows(data.drift),
        worst=rows(data.worst),
    )


def test_markdown_twin_tables_fit_100_columns_with_long_names(data: ReportData) -> None:
    """Issue 17 item 4: every table row of the Markdown twin is at most 100 characters, with the drift
    verdict in it, also for long agent ids and versions (shortened) and large counts."""
    long = _renamed(
        data,
        {
            "bird": "customer-support-analytics-agent-eu-west",
            "v1": "v2026.11.24-rc.1+build.5",
            "v2": "v2026.11.30-rc.2+build.9",
        },
    )
    long = replace(long, headline=[{**row, "records": 1_234_567, "evaluated": 1_234_560} for row in long.headline])
    text = render_markdown(long)
    tables = [line for line in text.splitlines() if line.startswith("|")]
    assert len(tables) > 20
    too_wide = [line for line in tables if len(line) > 100]
    assert too_wide == []
    headline = text.split("## Headline\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert headline[-1].endswith("| drift / worse |")  # the verdict is in the row, not cut off
    assert "| 1234567 |" in headline[-1]


def test_report_artifact_rows_fit_100_columns_with_percentages(data: ReportData) -> None:
    """Issue 17 item 4: the Prefect table artifact shows shares as percentages and fits 100 columns."""
    rows = headline_table(data)
    assert [row["coverage"] for row in rows] == ["100.0 %", "85.7 %"]
    widths = [max(len(key), *(len(str(row[key])) for row in rows)) + 3 for key in rows[0]]
    assert sum(widths) + 1 <= 100, widths
    assert rows[1]["drift"] == "drift / worse vs v1"


def test_trend_chart_axes_do_not_mislead(data: ReportData) -> None:
    """Issue 17 item 6: every trend axis spans 0–100 (one unscored record is no cliff), a version with
    the same values as another stays visible (offset, own marker and line style), and the
    estimated share of wrong answers has its own panel."""
    from stef.monitor.charts import TREND_PANELS, trend_figure

    figure = trend_figure(data, "bird")
    axes = figure.axes
    assert [a.get_ylabel() for a in axes] == [label for _, label, _ in TREND_PANELS]
    assert TREND_PANELS[0][0] == "wrong_share"
    for panel in axes:
        low, high = panel.get_ylim()
        assert low == 0 and high >= 100
    p90 = axes[[key for key, _, _ in TREND_PANELS].index("p90")]
    v1, v2 = p90.get_lines()
    assert list(v1.get_xdata()) != list(v2.get_xdata())  # offset: not drawn on top of each other
    assert (v1.get_marker(), v1.get_linestyle()) != (v2.get_marker(), v2.get_linestyle())
    days_with_v2 = [d for d in data.daily if d["agent_version"] == "v2"]
    assert days_with_v2 and all("wrong_share" in d for d in days_with_v2)


def test_breakdowns_by_app_category_and_previous_week(data: ReportData) -> None:
    """Issue 17 item 5: per agent × version the report breaks the week down by app_id, by suspected
    error category and against the previous week (v1 ran both weeks, v2 only this one)."""
    assert {(r["agent_version"], r["records"], r["evaluated"]) for r in data.by_app} == {("v1", 42, 42), ("v2", 28, 24)}
    v2_app = next(r for r in data.by_app if r["agent_version"] == "v2")
    assert v2_app["mean"] == pytest.approx(60.0)
    previous = {r["agent_version"]: r for r in data.vs_previous}
    assert (previous["v1"]["previous_records"], previous["v1"]["records"]) == (18, 42)  # 3 days × 6 before
    assert previous["v1"]["previous_mean"] == pytest.approx(80.0) and previous["v1"]["mean"] == pytest.approx(80.0)
    assert (previous["v2"]["previous_records"], previous["v2"]["previous_mean"]) == (None, None)
    categories = {(r["agent_version"], r["category"]): (r["count"], r["share"]) for r in data.by_category}
    assert all(
        share == pytest.approx(count / (24 if v == "v2" else 42)) for (v, _), (count, share) in categories.items()
    )
    text = render_markdown(data)
    for heading in ("### By database (app_id)", "### Against the previous week"):
        assert heading in text
    assert "| v1 | 18 → 42 |" in text and "| v2 | – → 28 |" in text


def test_lowest_queries_per_version_put_the_candidates_new_failures_first() -> None:
    """Issue 17 item 5: the candidate's queries come first, its new failures (a question the older
    version answered with Φ ≥ 50) ahead of lower-scoring old failures; at most k per version."""
    from stef.monitor.error_rate import question_key
    from stef.monitor.report import order_worst

    def query(run_id: str, score: float, question: str) -> dict[str, Any]:
        return {"run_id": run_id, "score": score, "question": question, "log_date": "2026-11-24"}

    lowest = {
        ("bird", "v2"): [query("a", 0.0, "Q1"), query("b", 0.0, "Q2"), query("c", 20.0, "Q3"), query("d", 45.0, "Q4")],
        ("bird", "v1"): [query("e", 0.0, "Q2"), query("f", 10.0, "Q5")],
    }
    answered_well = {"bird": {"v1": {question_key("Q3"), question_key("Q4")}, "v2": {question_key("Q9")}}}
    worst = order_worst(lowest, answered_well, per_version=3)
    assert [(q["run_id"], q["new_failure"]) for q in worst] == [
        ("c", True),  # v2 fails Q3 and Q4, which v1 answered well: first, lowest Φ first
        ("d", True),
        ("a", False),
        ("e", False),  # v1 has no older version: nothing is new
        ("f", False),
    ]
    assert worst[0]["new_failure_of"] == ["v1"]


def test_answers_scored_only_by_another_evaluator_version_are_named_not_silently_left_out() -> None:
    """A week whose first days were scored before ``--schema-dir`` (another evaluator version): the
    report of the newest version showed the last days only, with nothing saying 18 answers were
    left out ("records 6" for a version that answered 24 times that week)."""
    from tests.support.monitoring_support import answers, store_answers
    from warehouse import connect

    conn = connect(":memory:")
    try:
        for offset in range(4):
            store_answers(conn, MONDAY + timedelta(days=offset), answers(f"r{offset}", "bird", "v1", [70.0, 90.0] * 3))
        for table in ("evaluations", "daily_agent_metrics"):  # Monday … Wednesday: scored by an older version
            conn.execute(
                f"UPDATE {table} SET evaluator_version = 'stef-old' WHERE log_date < ?", [MONDAY + timedelta(3)]
            )
        data = collect(conn, "memory", "2026-W48")
        assert data.evaluator_version == EVALUATOR_VERSION
        assert [row["records"] for row in data.headline] == [6]
        note = (
            f"Not in this report: 18 answers of the week scored only by evaluator stef-old ({MONDAY} … "
            f"{MONDAY + timedelta(2)}); the report shows {EVALUATOR_VERSION}. --evaluator-version reports another "
            "version; to compare like with like, score the week's days with the same options again "
            "(stef backfill --force)."
        )
        assert data.other_versions == [
            {"evaluator_version": "stef-old", "evaluations": 18, "first_day": MONDAY, "last_day": MONDAY + timedelta(2)}
        ]
        assert stef.monitor.report.left_out_note(data) == note
        assert md_text(note) in render_markdown(data)
        html = render_html(data, render_charts(data))
        assert "Not in this report: 18 answers of the week scored only by evaluator stef-old" in html
        store_answers(conn, MONDAY, answers("r0", "bird", "v1", [70.0, 90.0] * 3))  # Monday scored again
        again = collect(conn, "memory", "2026-W48")
        assert [v["evaluations"] for v in again.other_versions] == [12]  # answers both versions scored are not left out
    finally:
        conn.close()


def test_a_delta_that_shows_as_zero_has_no_minus_sign(data: ReportData) -> None:
    """Two equal shares of wrong answers differ by -1.1e-16 in floating point: the drift table showed
    ``-0.0 [-20.0, +20.0]``; a mean Φ delta of -1e-17 with its interval ``-0.00 [-0.00, +3.00]``."""
    check = {
        **data.drift[0],
        "error_rate_delta": 0.30 - 0.1 - 0.2,  # -2.8e-17
        "error_rate_delta_ci": [-0.2, 0.2],
        "mean_delta": -1e-17,
        "mean_delta_ci": [-1e-17, 3.0],
    }
    assert check["error_rate_delta"] < 0
    zero = replace(data, drift=[check])
    for text in (render_markdown(zero), render_html(zero, render_charts(zero))):
        assert "+0.0 [-20.0, +20.0]" in text and "+0.00 [+0.00, +3.00]" in text
        assert "-0.0 " not in text and "-0.00" not in text


def test_a_stored_day_whose_metrics_were_never_computed_counts_in_the_headline_and_trend() -> None:
    """Monday is stored with its metrics; Tuesday only stored (the nightly run stopped before its
    metrics): the headline had Monday's 6 records against the 16 scored answers of both days, a
    coverage of 267 %, and the trend had no Tuesday."""
    from tests.support.monitoring_support import _evaluation, _line, answers, store_answers
    from warehouse import connect, store_day

    conn = connect(":memory:")
    try:
        store_answers(conn, MONDAY, answers("mon", "bird", "v1", [70.0, 90.0] * 3))
        tuesday, batch = MONDAY + timedelta(days=1), answers("tue", "bird", "v1", [40.0, 80.0] * 5 + [None])
        store_day(
            conn, tuesday, [_line(n, a, tuesday) for n, a in enumerate(batch, start=1)], [_evaluation(a) for a in batch]
        )
        week = collect(conn, "memory", "2026-W48")
        reference = conn.execute(  # per day: records, scored, mean Φ
            "SELECT log_date, count(*), count(*) FILTER (WHERE status = 'evaluated'), "
            "avg(score) FILTER (WHERE status = 'evaluated') FROM evaluations GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    finally:
        conn.close()
    assert reference == [(MONDAY, 6, 6, 80.0), (tuesday, 11, 10, 60.0)]
    (row,) = week.headline
    assert (row["records"], row["evaluated"]) == (17, 16)
    assert row["coverage"] == pytest.approx(16 / 17) and row["mean"] == pytest.approx((6 * 80.0 + 10 * 60.0) / 16)
    assert [(d["log_date"], d["records"], d["coverage"], d["mean"]) for d in week.daily] == [
        (MONDAY, 6, 1.0, pytest.approx(80.0)),
        (tuesday, 11, pytest.approx(10 / 11), pytest.approx(60.0)),
    ]
