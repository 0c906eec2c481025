"""The weekly report's tasks: read a week from the warehouse, write HTML and Markdown, publish the artifact.

:func:`collect_report_data` reads everything the report shows into a
:class:`stef.monitor.report.ReportData` (plain, JSON-ready values); :func:`write_report` draws the
charts (:mod:`stef.monitor.charts`) and writes the self-contained HTML file and its Markdown twin
(:mod:`stef.monitor.rendering`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from prefect import task
from prefect.cache_policies import NO_CACHE

from stef.display import md_cells, md_code, md_text, one_line, shorten
from stef.errors import InputError
from stef.monitor.charts import render_charts
from stef.monitor.drift import sample_error_rate
from stef.monitor.models import OperatingPoint
from stef.monitor.rendering import render_html, render_markdown
from stef.monitor.report import (
    NEW_FAILURE_SCORE,
    ReportData,
    breakdowns,
    headline_table,
    left_out_note,
    new_failure_candidates,
    order_worst,
    parse_week,
    report_data,
)
from tasks._runtime import io_task
from tasks.drift_checks import (
    checks_as_labelled_now,
    deployment_calibrators_of,
    drift_sample,
    operating_points_for,
    read_drift_sample,
)
from warehouse import connect, existing_warehouse, read_daily_metrics
from warehouse.monitoring import (
    answers_of_other_versions,
    latest_evaluator_version,
    read_breakdown_rows,
    read_drift_checks,
    read_lowest_scores,
    read_scored_rows,
)

REPORT_ARTIFACT_KEY = "stef-weekly-report"
"""Key of the table artifact with the report's headline table."""

SENTENCE_WIDTH = 400
"""Longest drift sentence shown in the artifact (its names are already shortened: it is rarely cut)."""
WORST_PER_VERSION = 5
"""How many of each version's lowest-scoring queries the report lists with their evidence."""


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """The files one report run wrote.

    Attributes:
        week: the ISO week.
        html: path of the self-contained HTML report.
        markdown: path of the Markdown twin.
        agents: agents in the report.
        evaluations: scored records in the week.
        headline: the headline table (:func:`stef.monitor.report.headline_table`).
        sentences: the drift sentences the report opens with (one per version with a check).
        left_out: the report's note on the week's evaluations of other evaluator versions
            (:func:`stef.monitor.report.left_out_note`), ``None`` without any.
    """

    week: str
    html: str
    markdown: str
    agents: int
    evaluations: int
    headline: list[dict[str, Any]] = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    left_out: str | None = None


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
    label, start, end = parse_week(week, today)
    generated = datetime.now(UTC).replace(microsecond=0).isoformat()
    version = evaluator_version or latest_evaluator_version(conn, start=start, end=end)
    if version is None:
        return ReportData(label, start, end, warehouse_label, None, generated)
    rows = read_scored_rows(conn, start, end, version)
    metrics = _with_uncomputed_days(
        conn, read_daily_metrics(conn, start, end, evaluator_version=version), rows, version
    )
    # a check stored before the newest reviewer labels is rerun with them, as the headline's estimate is
    drift_rows = checks_as_labelled_now(conn, read_drift_checks(conn, start, end, evaluator_version=version).to_dicts())
    pairs = rows.select("agent_id", "agent_version").unique().rows()
    points = operating_points_for(conn, version)
    error_rates = {
        (agent, agent_version): sample_error_rate(
            read_drift_sample(conn, agent, agent_version, (start, end), version), points
        )
        for agent, agent_version in pairs
    }
    daily_error_rates = {
        (day, agent, agent_version): sample_error_rate(
            read_drift_sample(conn, agent, agent_version, (day, day), version), points
        )
        for day, agent, agent_version in rows.select("log_date", "agent_id", "agent_version").unique().rows()
    }
    data = report_data(
        (label, start, end),
        warehouse_label,
        version,
        generated,
        rows,
        metrics,
        drift_rows,
        [],
        error_rates,
        daily_error_rates,
    )
    others = answers_of_other_versions(conn, start, end, version)
    return replace(
        _with_breakdowns(conn, data, version, points),
        reviewers=reviewer_agreement(conn, version, points),
        other_versions=others,
    )


def _with_uncomputed_days(conn: Any, metrics: Any, rows: Any, version: str) -> Any:
    """``metrics`` (:func:`warehouse.read_daily_metrics` of the week) with the metrics of each day
    that has evaluations (``rows``) but no stored metrics computed on the fly
    (:func:`warehouse.metrics.day_metrics`): the headline summed the records of the other days only,
    against the scored answers of every day (a coverage of 267 %), and the trend left the day out."""
    import polars as pl

    from warehouse.metrics import day_metrics

    done = set(metrics.get_column("log_date").to_list())
    missing = sorted(set(rows.get_column("log_date").to_list()) - done)
    if not missing:
        return metrics
    computed = [day_metrics(conn, day, version).select(metrics.columns) for day in missing]
    return pl.concat([metrics, *computed], how="vertical_relaxed").sort(
        "log_date", "agent_id", "agent_version", "evaluator_version"
    )


def reviewer_agreement(conn: Any, version: str, points: Mapping[str, Any]) -> dict[str, Any] | None:
    """The report's "judge vs reviewers" figures (:attr:`stef.monitor.report.ReportData.reviewers`)."""
    from stef.monitor.review import Reviewed, agreement
    from warehouse.reviews import has_review_tables, read_reviewed_evaluations

    if not has_review_tables(conn):
        return None
    stored = int(conn.execute("SELECT count(DISTINCT run_id) FROM reviews").fetchall()[0][0])
    if not stored:
        return None
    deployment = deployment_calibrators_of(conn, version)
    fitted_at = None if deployment is None else deployment[0]
    # a +calib version is measured only on labels its calibrator was not fitted on
    rows = read_reviewed_evaluations(conn, version, imported_after=fitted_at)

    def reviewed(row: Mapping[str, Any]) -> Reviewed:
        score = row["score"] if row["status"] == "evaluated" else None
        return Reviewed(row["label"] == "correct", score, row["p_correct"], row["error_category"])

    weeks: dict[str, list[Reviewed]] = {}
    for row in rows:
        iso = row["log_date"].isocalendar()
        weeks.setdefault(f"{iso.year}-W{iso.week:02d}", []).append(reviewed(row))
    keys = ("n", "accuracy", "kappa", "base_rate_incorrect", "auroc")
    return {
        **agreement([reviewed(row) for row in rows]),  # the resamples of `stef review stats`: the same intervals
        "by_week": [
            {"week": week, **{k: v for k, v in agreement(items, resamples=0).items() if k in keys}}
            for week, items in sorted(weeks.items())
        ],
        "stored": stored,
        "held_out_only": fitted_at is not None,
        "corrected": sorted(key for key, point in points.items() if str(point.source).startswith("reviewer labels")),
    }


def _with_breakdowns(
    conn: Any, data: ReportData, version: str, points: Mapping[str, OperatingPoint] | None = None
) -> ReportData:
    """``data`` with its breakdowns (by app_id, suspected error category, previous week; error rates with
    ``points``, the headline's operating points) and its
    lowest-scoring queries per version, new failures first (:func:`stef.monitor.report.breakdowns`,
    :func:`stef.monitor.report.order_worst`)."""
    from collections import defaultdict
    from dataclasses import replace
    from datetime import timedelta

    from stef.monitor.error_rate import question_key

    week_rows = read_breakdown_rows(conn, data.start, data.end, version)
    by_app: dict[tuple[str, str, str | None], list[tuple[Any, ...]]] = defaultdict(list)
    answered_well: dict[str, dict[str, set[str]]] = defaultdict(dict)
    for row in data.headline:  # versions in headline order: oldest first
        answered_well[row["agent_id"]][row["agent_version"]] = set()
    for agent, agent_version, app_id, _, *fields in week_rows:
        by_app[(agent, agent_version, app_id)].append(tuple(fields))
        status, score, question = fields[0], fields[1], fields[-1]
        if status == "evaluated" and score is not None and score >= NEW_FAILURE_SCORE and question:
            answered_well[agent].setdefault(agent_version, set()).add(question_key(str(question)))
    previous_rows: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
    week = timedelta(days=7)
    for agent, agent_version, _, _, *fields in read_breakdown_rows(conn, data.start - week, data.end - week, version):
        previous_rows[(agent, agent_version)].append(tuple(fields))
    app_rows, category_rows, previous = breakdowns(
        {key: drift_sample(value) for key, value in by_app.items()},
        {key: drift_sample(value) for key, value in previous_rows.items()},
        points,
    )
    failures = new_failure_candidates(week_rows, answered_well, WORST_PER_VERSION)
    lowest = {}
    for _, row in sorted(enumerate(data.headline), key=lambda item: (item[1]["agent_id"], -item[0])):
        key = (row["agent_id"], row["agent_version"])  # per agent, the newest version (the candidate) first
        queries = read_lowest_scores(
            conn, data.start, data.end, version, WORST_PER_VERSION, agent_id=key[0], agent_version=key[1]
        )
        if failures.get(key):
            seen = {q["run_id"] for q in queries}
            queries += [
                q
                for q in read_lowest_scores(
                    conn, data.start, data.end, version, len(failures[key]), *key, run_ids=failures[key]
                )
                if q["run_id"] not in seen
            ]
        lowest[key] = queries
    return replace(
        data,
        worst=order_worst(lowest, answered_well, WORST_PER_VERSION),
        by_app=app_rows,
        by_category=category_rows,
        vs_previous=previous,
    )


@io_task("collect-report-data", retries=2, retry_delay_seconds=10)
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
        WarehouseError: the file is missing (or a folder), locked or has an older schema.
    """
    target = existing_warehouse(warehouse_path)
    conn = connect(target, read_only=True)
    try:
        return collect(conn, str(target), week, evaluator_version)
    finally:
        conn.close()


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``<path>.partial``, then rename it onto ``path``.

    Raises:
        OSError: the file cannot be written, named as ``path`` (not the temporary file).
    """
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
    finally:
        partial.unlink(missing_ok=True)


OTHER_FORMAT_SUFFIXES = frozenset(
    {".xlsx", ".xlsm", ".xls", ".ods", ".numbers", ".csv", ".tsv", ".json", ".jsonl", ".parquet", ".pdf", ".png"}
    | {".jpg", ".jpeg", ".svg", ".docx", ".doc", ".pptx", ".txt", ".duckdb", ".db"}
)
"""``--out`` suffixes of other formats than the report's HTML and Markdown: an HTML page written
under such a name would not open as the file its name promises (or would replace a warehouse)."""


def report_paths(out: str | Path | None, week: str) -> tuple[Path, Path]:
    """The HTML and Markdown paths of a report.

    ``out`` is the HTML file; a folder (one that exists, or a path ending in ``/``) gets
    ``stef-report-<week>.html`` inside; ``None`` means that name in the working directory. The
    Markdown twin has the same name with ``.md``. An ``out`` ending in ``.md`` names the twin, and
    the HTML file takes the same name with ``.html`` (else the twin would overwrite the HTML).

    Raises:
        InputError: either path exists and is not a regular file (``/dev/null``, a pipe, a folder
            named like the twin): each file is written to a temporary file and renamed onto its
            path, which would replace a device with a regular file; or ``out``'s suffix names
            another format (:data:`OTHER_FORMAT_SUFFIXES`: ``report.xlsx``, ``report.pdf``), or
            ``out`` is ``-`` (standard output: a report is two files; ``./-`` still names one).

    >>> [str(p) for p in report_paths(None, "2026-W48")]
    ['stef-report-2026-W48.html', 'stef-report-2026-W48.md']
    >>> [str(p) for p in report_paths("reports/", "2026-W48")]
    ['reports/stef-report-2026-W48.html', 'reports/stef-report-2026-W48.md']
    >>> [str(p) for p in report_paths("week.MD", "2026-W48")]
    ['week.html', 'week.MD']
    """
    name = f"stef-report-{week}.html"
    if str(out) == "-":
        raise InputError(
            f"--out -: stef report writes two files (an HTML page and its Markdown twin), not standard output; "
            f"pass a file path or a folder, e.g. {name}"
        )
    if out is None or not str(out):
        html = Path(name)
    elif str(out).endswith(("/", os.sep)) or Path(out).is_dir():
        html = Path(out) / name
    else:
        html = Path(out)
    if html.suffix.lower() in OTHER_FORMAT_SUFFIXES:
        raise InputError(
            f"--out {one_line(html)}: stef report writes an HTML page and its Markdown twin, not a "
            f"{html.suffix} file; name it {one_line(html.with_suffix('.html'))} (or give a folder)"
        )
    if html.suffix.lower() == ".md":  # the twin's name: the HTML goes beside it
        html, markdown = html.with_suffix(".html"), html
    else:
        markdown = html.with_suffix(".md")
    for path in (html, markdown):
        if path.exists() and not path.is_file():  # a device, a pipe, a socket or (the twin) a folder
            raise InputError(
                f"report output {one_line(path)} exists and is not a regular file: the report replaces its "
                "files whole, which would destroy it; pass a file path or a folder (--out)"
            )
    return html, markdown


@io_task("write-report", retries=1, retry_delay_seconds=5)
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
        [str(row["drift_sentence"]) for row in data.headline if row.get("drift_sentence")],
        left_out_note(data),
    )


@task(name="publish-report-artifact", cache_policy=NO_CACHE, persist_result=False)
def publish_report_artifact(data: ReportData, files: ReportFiles) -> UUID:
    """Table artifact (key :data:`REPORT_ARTIFACT_KEY`) with the headline table and where the report is.

    The Prefect UI renders the description and every string cell as Markdown: names and paths go
    through :func:`stef.display.md_cells` / :func:`stef.display.md_code` (shown as text, names shortened).
    """
    from prefect.artifacts import create_table_artifact

    # the drift sentences lead the description (shown whole, as escaped text), so the table stays narrow
    sentences = [f"- {md_text(shorten(sentence, SENTENCE_WIDTH))}" for sentence in files.sentences]
    description = "\n".join(
        [
            *sentences,
            *([""] if sentences else []),
            f"STEF weekly report {data.week} ({data.start} … {data.end}): {files.evaluations} scored answers of "
            f"{files.agents} agents. HTML: {md_code(files.html)} · Markdown: {md_code(files.markdown)}",
        ]
    )
    return cast(
        UUID, create_table_artifact(table=md_cells(files.headline), key=REPORT_ARTIFACT_KEY, description=description)
    )
