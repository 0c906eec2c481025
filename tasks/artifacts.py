"""Task that publishes the nightly summary as a Prefect table artifact."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any, cast
from uuid import UUID

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from stef.display import md_cells
from stef.monitor.report import percent_text

SUMMARY_ARTIFACT_KEY = "stef-nightly-summary"
"""Artifact key: Prefect keeps the history of every nightly summary under this key."""


def _rounded(value: Any, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


def summary_table(metrics: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the summary artifact, one per agent x version, sorted by agent and version.

    Args:
        metrics: rows as returned by :func:`tasks.compute_metrics`.

    Returns:
        ``[{"agent", "version", "records", "coverage", "mean P(correct)", "mean", "p90", "excellent", "good",
        "marginal", "poor", "quarantined"}]`` with JSON-ready values (coverage and mean P(correct) as
        percentages, ``100.0 %``; scores rounded to 1 digit, ``None`` when nothing was scored).

    >>> summary_table([{"agent_id": "a", "agent_version": "v1", "records": 5, "coverage": 0.8, "mean_p_correct": 0.41, "mean_score": 25.0,
    ...                 "p90_score": 37.0, "n_excellent": 0, "n_good": 0, "n_marginal": 0, "n_poor": 4, "n_quarantined": 0}])
    [{'agent': 'a', 'version': 'v1', 'records': 5, 'coverage': '80.0 %', 'mean P(correct)': '41.0 %', 'mean': 25.0, 'p90': 37.0, 'excellent': 0, 'good': 0, 'marginal': 0, 'poor': 4, 'quarantined': 0}]
    """
    rows = sorted(metrics, key=lambda row: (str(row["agent_id"]), str(row["agent_version"])))
    return [
        {
            "agent": str(row["agent_id"]),
            "version": str(row["agent_version"]),
            "records": int(row["records"]),
            "coverage": percent_text(row["coverage"]),
            "mean P(correct)": percent_text(row.get("mean_p_correct")),
            "mean": _rounded(row["mean_score"], 1),
            "p90": _rounded(row["p90_score"], 1),
            "excellent": int(row["n_excellent"]),
            "good": int(row["n_good"]),
            "marginal": int(row["n_marginal"]),
            "poor": int(row["n_poor"]),
            "quarantined": int(row["n_quarantined"]),
        }
        for row in rows
    ]


@task(name="publish-summary-artifact", cache_policy=NO_CACHE, persist_result=False)
def publish_summary_artifact(
    log_date: date,
    metrics: list[dict[str, Any]],
    records: int,
    evaluated: int,
    quarantined: int,
) -> UUID:
    """Create the nightly summary table artifact (key :data:`SUMMARY_ARTIFACT_KEY`).

    Args:
        log_date: the day.
        metrics: per agent x version rows from :func:`tasks.compute_metrics`.
        records: the day's log lines.
        evaluated: evaluations with a score.
        quarantined: quarantined lines.

    Returns:
        The artifact id.
    """
    coverage = evaluated / records if records else 0.0
    description = (
        f"STEF nightly {log_date.isoformat()}: {records} log lines, {evaluated} scored, "
        f"{quarantined} quarantined, coverage {coverage:.1%}. One row per agent x version."
    )
    # The Prefect UI renders every string cell as Markdown: agent ids and versions are escaped (and shortened).
    artifact_id = create_table_artifact(
        table=md_cells(summary_table(metrics)), key=SUMMARY_ARTIFACT_KEY, description=description
    )
    return cast(UUID, artifact_id)  # sync call: Prefect returns the id, not a coroutine
