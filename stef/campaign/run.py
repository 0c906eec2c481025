"""A whole campaign (``stef campaign run``): audit the gold, classify every run, write the evidence, summarise.

Source: the campaign protocol of ``seeds/003`` (one question = one session = one run),
DESIGN.md §7 and issue 6. Drives :func:`~stef.campaign.gold_audit.audit_gold`,
:func:`~stef.campaign.classify.classify_run`, :mod:`stef.campaign.evidence` and
:func:`~stef.campaign.summary.summarize` in that order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from stef.campaign.classify import classify_run
from stef.campaign.evidence import write_evidence, write_summary
from stef.campaign.gold_audit import audit_gold
from stef.campaign.models import (
    CampaignResult,
    CampaignRunLog,
    CampaignRunResult,
    CampaignSettings,
    CanonicalCatalog,
    GoldQuestion,
)
from stef.campaign.sandbox import TestDatabase
from stef.campaign.summary import summarize
from stef.errors import InputError


def run_campaign(
    runs: Sequence[CampaignRunLog],
    gold: Sequence[GoldQuestion],
    db: TestDatabase,
    settings: CampaignSettings,
    catalog: CanonicalCatalog | None = None,
    out_dir: str | Path | None = None,
) -> CampaignResult:
    """Audit the gold battery, classify every run, write the evidence, summarise per campaign.

    Runs whose question is not in the battery or was excluded by the audit are not classified;
    they are listed in ``skipped`` (by campaign, then run) with the reason and counted as
    ``excluded_runs``. A ``run_id`` is unique within its campaign only: every map of runs here
    is keyed by campaign first.

    Args:
        runs: the run log.
        gold: the gold battery.
        db: the test database (opened read-only).
        settings: protocol settings.
        catalog: the canonical catalog; ``None`` derives it from ``db``.
        out_dir: where to write each run's evidence (:func:`write_evidence`) and each campaign's
            ``summary.json`` (:func:`write_summary`); ``None`` writes nothing.

    Returns:
        A :class:`CampaignResult`.

    Raises:
        InputError: duplicate ``run_id`` within a campaign or duplicate gold ``question_id``.
    """
    catalog = catalog or CanonicalCatalog(db.catalog())
    engine = "duckdb" if type(db).__name__.startswith("DuckDB") else "sqlite"
    audit = audit_gold(gold, db, settings, engine_dialect=engine)
    seen: set[tuple[str, str]] = set()
    results: list[CampaignRunResult] = []
    skipped: dict[str, dict[str, str]] = {}
    excluded: Counter[str] = Counter()
    for run in runs:
        key = (run.campaign_id, run.run_id)
        if key in seen:
            raise InputError(f"run log: run_id {run.run_id!r} appears twice in campaign {run.campaign_id!r}")
        seen.add(key)
        if run.question_id not in audit.results:
            item = next((i for i in audit.items if i.question_id == run.question_id), None)
            skipped.setdefault(run.campaign_id, {})[run.run_id] = (
                f"question excluded by the gold audit: {item.reason}"
                if item
                else f"question_id {run.question_id!r} is not in the gold battery"
            )
            excluded[run.campaign_id] += 1
            continue
        result = classify_run(run, audit, db, catalog, settings, engine_dialect=engine)
        results.append(result)
        if out_dir is not None:
            write_evidence(out_dir, run, result, catalog, settings)
    summaries = summarize(results, settings, excluded)
    if out_dir is not None:
        for summary in summaries:
            write_summary(out_dir, summary)
    return CampaignResult(runs=list(runs), audit=audit, results=results, skipped=skipped, summaries=summaries)


__all__ = ["run_campaign"]
