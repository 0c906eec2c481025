"""The weekly report flow: one ISO week of the warehouse as HTML (self-contained) and Markdown.

Reads the week (read-only), draws the charts, writes ``stef-report-<week>.html`` and its ``.md``
twin, and publishes the headline table as a Prefect artifact (DESIGN.md §5, issue 5).
"""

from __future__ import annotations

from prefect import flow
from prefect.utilities.annotations import quote

from tasks.report import ReportFiles, collect_report_data, publish_report_artifact, write_report


@flow(name="stef-weekly-report")
def weekly_report(
    week: str | None = None,
    warehouse: str | None = None,
    out: str | None = None,
    evaluator_version: str | None = None,
) -> ReportFiles:
    """Write the weekly report of one ISO week.

    Args:
        week: ISO week ``YYYY-Www`` (default: the last complete week, so the Monday run reports
            the week that just ended).
        warehouse: DuckDB file; default ``$STEF_WAREHOUSE``, else ``./stef.duckdb``.
        out: the HTML file, or a folder (an existing one, or a path ending in ``/``) for
            ``stef-report-<week>.html``; default: that name in the working directory. The Markdown
            twin gets the same name with ``.md``.
        evaluator_version: whose evaluations (default: the newest stored in the week).

    Returns:
        The :class:`tasks.report.ReportFiles` written.

    Raises:
        InputError: a malformed week.
        WarehouseError: the warehouse is missing or locked.
    """
    data = collect_report_data(warehouse, week, evaluator_version)
    # quote(): skip Prefect's walk over the report's rows (Prefect's stubs do not accept quote, hence the ignore).
    files: ReportFiles = write_report(quote(data), out)
    publish_report_artifact(quote(data), files)  # type: ignore[call-overload]
    return files
