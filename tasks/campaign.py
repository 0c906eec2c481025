"""Prefect tasks of the campaign flow: classify the runs, score them with STEF, store (DESIGN.md §7).

Thin wrappers over :mod:`stef.campaign` and :mod:`warehouse.campaign`; paths and settings are
passed in, the database and the warehouse are opened inside the task (STYLE.md §12).
"""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from stef.campaign.calibration import index_evaluations, stef_record
from stef.campaign.inputs import load_catalog, read_jsonl
from stef.campaign.models import CampaignResult, CampaignRunLog, CampaignSettings, GoldQuestion
from stef.campaign.run import run_campaign
from stef.campaign.sandbox import open_test_database
from stef.display import shorten
from stef.models import Evaluation
from stef.pipeline.evaluate import evaluate_many
from tasks._runtime import io_task, run_logger
from warehouse import connect
from warehouse.campaign import CampaignStoreSummary, store_campaign_result


@task(name="campaign-classify", cache_policy=NO_CACHE, persist_result=False)
def classify_campaign(
    runs: str, gold: str, db: str, settings: CampaignSettings, out: str | None = None, catalog: str | None = None
) -> CampaignResult:
    """Audit the gold battery and classify every run (:func:`stef.campaign.run.run_campaign`).

    Args:
        runs: run log JSONL path.
        gold: gold battery JSONL path.
        db: test database path (opened read-only here).
        settings: protocol settings.
        out: evidence folder, or ``None``.
        catalog: canonical catalog JSON path, or ``None`` to derive it from ``db``.

    Returns:
        The :class:`stef.campaign.models.CampaignResult`.

    Raises:
        InputError: a missing or unreadable input file (a bad line of one is rejected, logged as a
            warning and listed in the result's ``rejected``; the other lines run).
    """
    database = open_test_database(db, settings.resource_limits())
    try:
        result = run_campaign(
            read_jsonl(runs, CampaignRunLog),
            read_jsonl(gold, GoldQuestion),
            database,
            settings,
            load_catalog(catalog) if catalog else None,
            Path(out) if out else None,
        )
    finally:
        database.close()
    for line in result.rejected:
        run_logger().warning("rejected %s: %s", shorten(line.where()), shorten(line.reason))
    for summary in result.summaries:
        run_logger().info("campaign %s: %s", shorten(summary.campaign_id), summary.counts)
    return result


@task(name="campaign-score", cache_policy=NO_CACHE, persist_result=False)
def score_campaign(result: CampaignResult, dialect: str | None) -> list[Evaluation]:
    """STEF's schema-free evaluation of every classified run (question + statements)."""
    return evaluate_many([stef_record(r, dialect) for r in result.results])


@io_task("campaign-store", retries=2, retry_delay_seconds=2)
def store_campaign_task(
    result: CampaignResult, settings: CampaignSettings, evaluations: list[Evaluation], warehouse: str | None = None
) -> CampaignStoreSummary:
    """Replace the campaigns' rows in the warehouse, the lines not classified with their reasons
    included (one transaction; retried on I/O errors)."""
    with connect(warehouse) as conn:
        return store_campaign_result(conn, result, settings, index_evaluations(evaluations))
