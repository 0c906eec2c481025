"""Tests of the weekly report (tasks/report.py, its templates) and of the deployments
(flows/deployments.py, prefect.yaml); no Prefect run."""

from __future__ import annotations

import base64
import doctest
import re
from collections.abc import Iterator
from datetime import date, timedelta
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import numpy as np
import pytest
import yaml

import flows.deployments
import stef.monitor.charts
import stef.monitor.rendering
import stef.monitor.report
import tasks.report
from stef.display import md_code_block, md_text
from stef.errors import InputError
from stef.models import EVALUATOR_VERSION, FilterStatus, Verdict
from stef.monitor.charts import render_charts
from stef.monitor.rendering import render_html, render_markdown
from stef.monitor.report import BIN_LABELS, ReportData, headline_table, parse_week
from tasks.drift_checks import plan_version_check, run_check
from tasks.report import collect, report_paths, write_report
from tests.support.monitoring_support import answers, store_answers
from warehouse import connect
from warehouse.monitoring import store_drift_checks

MONDAY = date(2026, 11, 23)  # 2026-W48
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def week_conn() -> Iterator[duckdb.DuckDBPyConnection]:
    """W48 of agent ``bird``: v1 every day (scores 70, 90), v2 from Thursday (40, 80 and a parse
    error); the week before holds v1 only; one stored version check ending on Sunday."""
    conn = connect(":memory:")
    for offset in range(-3, 7):
        day = MONDAY + timedelta(days=offset)
        batch = answers(f"v1-{offset}", "bird", "v1", [70.0, 90.0] * 3)
        if offset >= 3:
            batch += answers(
                f"v2-{offset}",
                "bird",
                "v2",
                [40.0, 80.0] * 3 + [None],
                verdict=Verdict.INCORRECT,
                filter_status=FilterStatus.NOT_APPLIED,
            )
        store_answers(conn, day, batch)
    plan = plan_version_check(conn, "bird", EVALUATOR_VERSION, end=MONDAY + timedelta(days=6))
    from stef.monitor.models import DriftThresholds

    store_drift_checks(conn, [run_check(conn, plan, DriftThresholds(min_samples=5, n_resamples=200)).row("nightly")])
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def data(week_conn: duckdb.DuckDBPyConnection) -> ReportData:
    return collect(week_conn, "memory", "2026-W48")


# --------------------------------------------------------------------------- weeks


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("2026-W48", ("2026-W48", MONDAY, MONDAY + timedelta(days=6)), id="iso"),
        pytest.param("2026w48", ("2026-W48", MONDAY, MONDAY + timedelta(days=6)), id="compact_lower_case"),
        pytest.param("2026-W1", ("2026-W01", date(2025, 12, 29), date(2026, 1, 4)), id="week_one_starts_in_december"),
        pytest.param("2026-W53", ("2026-W53", date(2026, 12, 28), date(2027, 1, 3)), id="long_year"),
    ],
)
def test_parse_week(value: str, expected: tuple[str, date, date]) -> None:
    assert parse_week(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("2026-11-23", r"week '2026-11-23' is not an ISO week; write it as YYYY-Www", id="a_date"),
        pytest.param("2025-W53", r"week '2025-W53' does not exist: 2025 has no ISO week 53", id="no_week_53"),
    ],
)
def test_parse_week_rejects(value: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_week(value)


@pytest.mark.parametrize(
    ("today", "expected"),
    [
        pytest.param(date(2026, 11, 30), "2026-W48", id="monday_reports_the_week_just_ended"),
        pytest.param(date(2026, 12, 6), "2026-W48", id="sunday_reports_the_week_before"),
    ],
)
def test_default_week_is_the_last_complete_one(today: date, expected: str) -> None:
    assert parse_week(None, today=today)[0] == expected


# --------------------------------------------------------------------------- data


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
    assert headline_table(data)[1] == {
        "agent": "bird",
        "version": "v2",
        "records": 28,
        "coverage": round(24 / 28, 4),
        "mean_p_correct": None,
        "mean": 60.0,
        "p90": pytest.approx(np.percentile(v2_scores, 90), abs=0.05),
        "poor_share": 0.5,
        "drift": "drift / worse vs v1",
    }


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
    assert [q["score"] for q in data.worst] == [40.0] * 10
    assert data.worst[0]["missing"] == ["region = region 1"]


def test_an_empty_week_says_so(week_conn: duckdb.DuckDBPyConnection) -> None:
    empty = collect(week_conn, "memory", "2026-W40")
    assert (empty.evaluator_version, empty.headline, empty.worst) == (None, [], [])
    assert "No evaluations are stored for 2026-W40." in render_html(empty, [])
    assert "**No evaluations are stored for 2026-W40.**" in render_markdown(empty)


# --------------------------------------------------------------------------- rendering


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.tables = 0
        self.worst_rows = 0
        self._in_worst = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "img":
            self.images.append(values.get("src") or "")
        for name in ("href", "src"):
            if tag not in ("img",) and values.get(name):
                self.links.append(values[name] or "")
        if tag == "table":
            self.tables += 1
        if tag == "h2" and values.get("id") == "worst":
            self._in_worst = True
        if tag == "tr" and self._in_worst:
            self.worst_rows += 1


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
    assert "| bird | v2 | 28 | 24 | 85.7 % | – | 60.0 |" in text  # no p_correct in these synthetic rows
    assert "| v2 | 0 | 0 | 0 | 0 | 12 | 0 | 0 | 0 | 12 | 0 |" in text
    assert f"| version | {' | '.join(BIN_LABELS)} |" in text
    assert "**drift / worse** | -20.00 [" in text
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


def test_report_paths(tmp_path: Path) -> None:
    assert report_paths(tmp_path, "2026-W48") == (
        tmp_path / "stef-report-2026-W48.html",
        tmp_path / "stef-report-2026-W48.md",
    )
    assert report_paths(tmp_path / "r.html", "2026-W48") == (tmp_path / "r.html", tmp_path / "r.md")


def test_report_doctests() -> None:
    for module in (tasks.report, stef.monitor.report, stef.monitor.charts, stef.monitor.rendering):
        assert doctest.testmod(module).failed == 0, module.__name__
    assert doctest.testmod(flows.deployments).failed == 0


# --------------------------------------------------------------------------- deployments


def test_deployments_have_the_schedules() -> None:
    deployments = flows.deployments.build_deployments(
        timezone="Europe/Zurich", logs_root="/logs", warehouse="/wh.duckdb", reports_dir="/reports/"
    )
    found = {
        d.name: (
            d.entrypoint,
            [(getattr(s.schedule, "cron", None), getattr(s.schedule, "timezone", None)) for s in d.schedules or []],
            d.parameters,
        )
        for d in deployments
    }
    assert found == {
        "stef-nightly": (
            "flows.nightly.nightly",
            [("0 2 * * *", "Europe/Zurich")],
            {"logs_root": "/logs", "warehouse": "/wh.duckdb"},
        ),
        "stef-weekly-report": (
            "flows.weekly_report.weekly_report",
            [("0 6 * * 1", "Europe/Zurich")],
            {"out": "/reports/", "warehouse": "/wh.duckdb"},
        ),
        "stef-backfill": ("flows.backfill.backfill", [], {"logs_root": "/logs", "warehouse": "/wh.duckdb"}),
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param(
            {"timezone": "Mars/Olympus"}, r"--timezone 'Mars/Olympus' is not an IANA time zone", id="timezone"
        ),
        pytest.param(
            {"nightly_cron": "every night"}, r"--nightly-cron 'every night' is not a valid cron expression", id="cron"
        ),
    ],
)
def test_deployments_reject_bad_settings(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        flows.deployments.build_deployments(**kwargs)


def test_prefect_yaml_matches_the_served_deployments() -> None:
    config = yaml.safe_load((REPO / "prefect.yaml").read_text(encoding="utf-8"))
    by_name = {d["name"]: d for d in config["deployments"]}
    assert set(by_name) == {
        flows.deployments.NIGHTLY_DEPLOYMENT,
        flows.deployments.WEEKLY_DEPLOYMENT,
        flows.deployments.BACKFILL_DEPLOYMENT,
    }
    assert [s["cron"] for s in by_name["stef-nightly"]["schedules"]] == [flows.deployments.NIGHTLY_CRON]
    assert [s["cron"] for s in by_name["stef-weekly-report"]["schedules"]] == [flows.deployments.WEEKLY_CRON]
    assert not by_name["stef-backfill"].get("schedules")
    import importlib

    from prefect import Flow

    for deployment in config["deployments"]:
        path, function = deployment["entrypoint"].split(":")
        assert (REPO / path).is_file()
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        assert isinstance(getattr(module, function), Flow)
