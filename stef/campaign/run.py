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
from stef.campaign.evidence import forget_summary, write_evidence, write_summary
from stef.campaign.gold_audit import audit_gold
from stef.campaign.inputs import JsonlFile, ModelT
from stef.campaign.models import (
    CampaignResult,
    CampaignRunLog,
    CampaignRunResult,
    CampaignSettings,
    CanonicalCatalog,
    GoldQuestion,
    InputKind,
    SkippedRun,
    SkipStatus,
)
from stef.campaign.sandbox import TestDatabase
from stef.campaign.summary import summarize


def _unpack(
    items: Sequence[ModelT] | JsonlFile[ModelT],
) -> tuple[list[ModelT], list[int] | None, str | None, list[SkippedRun]]:
    """``(items, line numbers, source, rejected lines)`` of a file read by :func:`read_jsonl`, or of plain items."""
    if isinstance(items, JsonlFile):
        return items.items, items.line_numbers, items.source, items.rejected
    return list(items), None, None, []


def run_campaign(
    runs: Sequence[CampaignRunLog] | JsonlFile[CampaignRunLog],
    gold: Sequence[GoldQuestion] | JsonlFile[GoldQuestion],
    db: TestDatabase,
    settings: CampaignSettings,
    catalog: CanonicalCatalog | None = None,
    out_dir: str | Path | None = None,
) -> CampaignResult:
    """Audit the gold battery, classify every run, write the evidence, summarise per campaign.

    Runs whose question is not in the battery or was excluded by the audit are not classified;
    they are listed in ``skipped`` (by campaign, then run) with the reason, in ``skipped_runs``
    with their status (``unknown_question``, ``question_excluded``) and line, and counted as
    ``excluded_runs``. A ``run_id`` is unique within its campaign only: every map of runs here
    is keyed by campaign first. Bad input never stops the campaign: the invalid lines of the
    files (:func:`~stef.campaign.inputs.read_jsonl`) and each repeat of a ``run_id`` within a
    campaign (the first is classified) are listed in ``rejected`` with the file, line and reason
    and counted as ``rejected_runs`` of the campaign they name; a ``question_id`` listed twice
    in the battery excludes that question (:func:`~stef.campaign.gold_audit.audit_gold`).

    Args:
        runs: the run log (a :class:`~stef.campaign.inputs.JsonlFile` names the lines of its runs).
        gold: the gold battery (idem).
        db: the test database (opened read-only).
        settings: protocol settings.
        catalog: the canonical catalog; ``None`` derives it from ``db``.
        out_dir: where to write each run's evidence (:func:`write_evidence`) and each campaign's
            ``summary.json`` (:func:`write_summary`); ``None`` writes nothing.

    Returns:
        A :class:`CampaignResult`.
    """
    run_items, run_lines, run_source, rejected = _unpack(runs)
    gold_items, gold_lines, gold_source, gold_rejected = _unpack(gold)
    catalog = catalog or CanonicalCatalog(db.catalog())
    engine = "duckdb" if type(db).__name__.startswith("DuckDB") else "sqlite"
    audit = audit_gold(gold_items, db, settings, engine_dialect=engine, line_numbers=gold_lines, invalid=gold_rejected)
    rejected = gold_rejected + rejected
    first_line: dict[tuple[str, str], int | None] = {}
    kept: list[CampaignRunLog] = []
    results: list[CampaignRunResult] = []
    rewritten: set[str] = set()  # campaigns whose evidence this run has started to write
    skipped: dict[str, dict[str, str]] = {}
    skipped_runs: list[SkippedRun] = []
    excluded: Counter[str] = Counter()
    for index, run in enumerate(run_items):
        key = (run.campaign_id, run.run_id)
        line = None if run_lines is None else run_lines[index]
        if key in first_line:
            first = first_line[key]
            where = "" if first is None else f" (first on {run_source} line {first})"
            rejected.append(
                SkippedRun(
                    status=SkipStatus.DUPLICATE_RUN,
                    reason=f"run_id {run.run_id!r} appears twice in campaign {run.campaign_id!r}{where}: only the first is classified",
                    source=run_source,
                    line_number=line,
                    campaign_id=run.campaign_id,
                    run_id=run.run_id,
                    question_id=run.question_id,
                    raw=run.model_dump_json(),
                )
            )
            continue
        first_line[key] = line
        kept.append(run)
        if run.question_id not in audit.results:
            item = next((i for i in audit.items if i.question_id == run.question_id), None)
            reason = (
                f"question excluded by the gold audit: {item.reason}"
                if item
                else f"question_id {run.question_id!r} is not in the gold battery"
            )
            skipped.setdefault(run.campaign_id, {})[run.run_id] = reason
            skipped_runs.append(
                SkippedRun(
                    status=SkipStatus.QUESTION_EXCLUDED if item else SkipStatus.UNKNOWN_QUESTION,
                    reason=reason,
                    source=run_source,
                    line_number=line,
                    campaign_id=run.campaign_id,
                    run_id=run.run_id,
                    question_id=run.question_id,
                    raw=run.model_dump_json(),
                )
            )
            excluded[run.campaign_id] += 1
            continue
        result = classify_run(run, audit, db, catalog, settings, engine_dialect=engine)
        results.append(result)
        if out_dir is not None:
            if run.campaign_id not in rewritten:  # its old summary goes before its first run folder is written
                forget_summary(out_dir, run.campaign_id)
                rewritten.add(run.campaign_id)
            write_evidence(out_dir, run, result, catalog, settings)
    # rejected lines count in the summary of a campaign this input holds; a line naming any other
    # campaign must not make one (storing it would replace that campaign's earlier runs with none)
    kept_campaigns = {run.campaign_id for run in kept}
    rejected_runs = Counter(
        r.campaign_id for r in rejected if r.input is InputKind.RUN_LOG and r.campaign_id in kept_campaigns
    )
    # a campaign none of whose runs could be classified (its questions all excluded by the gold
    # audit, say a wrong --db) has no summary: writing or storing one would replace the campaign's
    # earlier evidence and outcomes with nothing (its lines are in ``skipped`` with the reasons)
    summaries = [summary for summary in summarize(results, settings, excluded, rejected_runs) if summary.runs > 0]
    if out_dir is not None:
        for summary in summaries:
            write_summary(out_dir, summary)
    return CampaignResult(
        runs=kept,
        audit=audit,
        results=results,
        skipped=skipped,
        skipped_runs=skipped_runs,
        rejected=rejected,
        summaries=summaries,
        sources=[s for s in (run_source, gold_source) if s is not None],
    )


__all__ = ["run_campaign"]
