"""The campaign flow: the reference-based protocol of DESIGN.md §7 as a Prefect flow.

Gold audit, per-run classification into the six outcome classes (``seeds/003``), STEF scores of
the same runs, storage into ``campaigns`` / ``campaign_runs`` / ``campaign_outcomes`` and the lines
not classified, with their reasons, into ``campaign_skipped``. The CLI
(``stef campaign run``) runs the same library code without Prefect.
"""

from __future__ import annotations

from prefect import flow
from prefect.utilities.annotations import quote

from stef.campaign.models import CampaignResult, CampaignSettings
from tasks.campaign import classify_campaign, score_campaign, store_campaign_task


@flow(name="stef-campaign")
def campaign(
    runs: str,
    gold: str,
    db: str,
    out: str | None = None,
    catalog: str | None = None,
    settings: CampaignSettings | None = None,
    warehouse: str | None = None,
    store: bool = True,
) -> CampaignResult:
    """Run one campaign file end to end.

    Args:
        runs: run log JSONL.
        gold: gold battery JSONL.
        db: SQLite or DuckDB test database (read-only).
        out: evidence folder (``<campaign_id>/<run_id>/``), or ``None``.
        catalog: canonical catalog JSON, or ``None`` (derived from ``db``).
        settings: protocol settings (defaults of the seed when ``None``).
        warehouse: DuckDB file; default ``$STEF_WAREHOUSE``, else ``./stef.duckdb``.
        store: write the warehouse.

    Returns:
        The :class:`stef.campaign.models.CampaignResult`.
    """
    settings = settings or CampaignSettings()
    result: CampaignResult = classify_campaign(runs, gold, db, settings, out, catalog)
    if store:
        evaluations = score_campaign(quote(result), settings.dialect)  # type: ignore[call-overload]
        store_campaign_task(quote(result), settings, quote(evaluations), warehouse)
    return result
