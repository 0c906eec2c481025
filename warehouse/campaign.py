"""Campaign tables: ``campaigns``, ``campaign_runs``, ``campaign_outcomes`` (migration 0004) and
``campaign_skipped`` (migration 0010: the input lines not classified, with status and reason).

Source: DESIGN.md §4 and §7, issue 6. Writes are idempotent and transactional: storing a
campaign deletes its previous rows first, in the same transaction. Imports only :mod:`stef`
models.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from stef.campaign.models import (
    CampaignResult,
    CampaignRunLog,
    CampaignRunResult,
    CampaignSettings,
    CampaignSummary,
    GoldAudit,
    SkippedRun,
)
from stef.models import Evaluation
from warehouse.transaction import transaction


@dataclass(frozen=True, slots=True)
class CampaignStoreSummary:
    """What :func:`store_campaign` wrote: campaign ids and row counts (``skipped``: rows of ``campaign_skipped``)."""

    campaigns: tuple[str, ...]
    runs: int
    outcomes: int
    skipped: int = 0


def _file_key(source: str | None) -> str | None:
    """An input file as ``campaign_skipped.source_file`` keys it: the absolute path, so that a rerun
    naming the same file another way (``runs.jsonl``, ``./runs.jsonl``, its full path) replaces its rows."""
    return None if source is None else str(Path(source).resolve())


def store_campaign_result(
    conn: duckdb.DuckDBPyConnection,
    result: CampaignResult,
    settings: CampaignSettings,
    evaluations: Mapping[tuple[str | None, str | None], Evaluation] | None = None,
) -> CampaignStoreSummary:
    """:func:`store_campaign` of one :func:`stef.campaign.run.run_campaign` result: its runs, outcomes,
    summaries, audit, and the lines it did not classify with the input files they came from (what
    ``stef campaign run`` and the campaign flow store)."""
    return store_campaign(
        conn,
        result.runs,
        result.results,
        result.summaries,
        result.audit,
        settings,
        evaluations,
        skipped=result.not_classified(),
        sources=result.sources,
    )


def store_campaign(
    conn: duckdb.DuckDBPyConnection,
    runs: Sequence[CampaignRunLog],
    results: Sequence[CampaignRunResult],
    summaries: Sequence[CampaignSummary],
    audit: GoldAudit,
    settings: CampaignSettings,
    evaluations: Mapping[tuple[str | None, str | None], Evaluation] | None = None,
    skipped: Sequence[SkippedRun] = (),
    sources: Sequence[str] = (),
) -> CampaignStoreSummary:
    """Replace the rows of every campaign in ``summaries`` (one transaction).

    The lines that were not classified (``skipped``) go to ``campaign_skipped`` with their status
    and reason: those naming a campaign of ``summaries`` replace that campaign's rows, those naming
    none replace the rows of their file (``sources``) that name none, so a rerun never duplicates.

    Args:
        conn: a read-write warehouse connection (migrated).
        runs: the run log lines (runs of excluded questions included).
        results: the classified runs.
        summaries: one per campaign.
        audit: the gold audit (stored with each campaign).
        settings: the protocol settings.
        evaluations: ``(campaign_id, run_id)`` -> STEF evaluation (:func:`stef.campaign.calibration.index_evaluations`),
            when calibration was computed.
        skipped: the input lines not classified (:meth:`stef.campaign.models.CampaignResult.not_classified`).
        sources: the input files read (:attr:`stef.campaign.models.CampaignResult.sources`).

    Returns:
        A :class:`CampaignStoreSummary`.

    Raises:
        WarehouseError: the write failed (nothing is kept).
    """
    evaluations = evaluations or {}
    now = datetime.now(UTC).replace(tzinfo=None)
    ids = [s.campaign_id for s in summaries]
    audit_json = json.dumps([i.model_dump(mode="json") for i in audit.items])
    run_rows = [
        (
            r.campaign_id,
            r.run_id,
            r.question_id,
            r.question,
            json.dumps([c.model_dump(mode="json") for c in r.tool_calls]),
            json.dumps(r.statements),
            r.model_version,
            r.prompt_version,
            None if r.seed is None else str(r.seed),
            r.commit_hash,
            None if r.tokens is None else json.dumps(r.tokens),
            r.latency_ms,
            r.cost_usd,
            r.model_dump_json(),
        )
        for r in runs
        if r.campaign_id in ids
    ]
    outcome_rows = []
    for x in results:
        if x.campaign_id not in ids:
            continue
        evaluation = evaluations.get((x.campaign_id, x.run_id))
        outcome_rows.append(
            (
                x.campaign_id,
                x.run_id,
                x.question_id,
                x.mode.value,
                x.outcome,
                x.reason,
                x.tool_calls,
                len(x.statements),
                x.required,
                len(x.matched),
                x.catalog_traceability,
                x.latency_ms,
                x.tokens,
                x.cost_usd,
                None if evaluation is None else evaluation.score,
                None if evaluation is None else evaluation.status.value,
                x.model_dump_json(),
                now,
            )
        )
    skipped_rows = [
        (
            x.campaign_id,
            x.run_id,
            x.question_id,
            x.input.value,
            x.status.value,
            x.reason,
            _file_key(x.source),
            x.line_number,
            x.raw,
            now,
        )
        for x in skipped
    ]
    # the files whose lines naming no stored campaign are replaced (the same file however it was named)
    named = (*sources, *(x.source for x in skipped if x.campaign_id not in ids))
    file_keys = sorted({str(Path(source).resolve()) for source in named if source})
    with transaction(conn, f"storing campaigns {', '.join(ids) or '(none, only rejected lines)'} failed"):
        for table in ("campaigns", "campaign_runs", "campaign_outcomes", "campaign_skipped"):
            conn.execute(f"DELETE FROM {table} WHERE campaign_id IN (SELECT unnest($ids))", {"ids": ids})
        conn.execute(  # this input's lines that name no campaign it stores: read again from the same files
            "DELETE FROM campaign_skipped WHERE source_file IN (SELECT unnest($sources))"
            " AND (campaign_id IS NULL OR campaign_id NOT IN (SELECT unnest($ids)))",
            {"sources": file_keys, "ids": ids},
        )
        if summaries:  # none when every line was rejected without naming a campaign
            conn.executemany(
                "INSERT INTO campaigns VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        s.campaign_id,
                        s.mode.value,
                        settings.model_dump_json(),
                        audit_json,
                        s.model_dump_json(),
                        s.infra_cost_usd,
                        now,
                    )
                    for s in summaries
                ],
            )
        if run_rows:
            conn.executemany("INSERT INTO campaign_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", run_rows)
        if outcome_rows:
            conn.executemany(
                "INSERT INTO campaign_outcomes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                outcome_rows,
            )
        if skipped_rows:
            conn.executemany("INSERT INTO campaign_skipped VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", skipped_rows)
    return CampaignStoreSummary(tuple(ids), len(run_rows), len(outcome_rows), len(skipped_rows))


def read_campaign_outcomes(conn: duckdb.DuckDBPyConnection, campaign_id: str | None = None) -> pl.DataFrame:
    """``campaign_outcomes`` rows (one campaign, or all), without the evidence column, ordered by campaign and run."""
    frame: pl.DataFrame = conn.sql(
        "SELECT * EXCLUDE (evidence) FROM campaign_outcomes WHERE ($cid::VARCHAR IS NULL OR campaign_id = $cid) ORDER BY campaign_id, run_id",
        params={"cid": campaign_id},
    ).pl()
    return frame


def read_campaign_skipped(conn: duckdb.DuckDBPyConnection, campaign_id: str | None = None) -> pl.DataFrame:
    """``campaign_skipped`` rows (one campaign, or all: also the lines naming none), without the raw
    text, in input and line order."""
    frame: pl.DataFrame = conn.sql(
        "SELECT * EXCLUDE (raw) FROM campaign_skipped WHERE ($cid::VARCHAR IS NULL OR campaign_id = $cid)"
        " ORDER BY source_file NULLS LAST, line_number NULLS LAST, campaign_id, run_id",
        params={"cid": campaign_id},
    ).pl()
    return frame


def read_campaign_summaries(conn: duckdb.DuckDBPyConnection) -> dict[str, CampaignSummary]:
    """Every stored campaign's :class:`CampaignSummary`, by campaign_id."""
    rows = conn.execute("SELECT campaign_id, summary FROM campaigns ORDER BY campaign_id").fetchall()
    return {cid: CampaignSummary.model_validate_json(summary) for cid, summary in rows}


__all__ = [
    "CampaignStoreSummary",
    "read_campaign_outcomes",
    "read_campaign_skipped",
    "read_campaign_summaries",
    "store_campaign",
]
