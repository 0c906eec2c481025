"""Per-campaign summary of classified runs: counts and rates per outcome class, mean latency, tokens, cost.

Source: the campaign protocol of ``seeds/003`` (latency, tokens and cost "não se aplica ao
baseline"), DESIGN.md §7, issue 6.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from stef.campaign.models import (
    BaselineOutcome,
    CampaignMode,
    CampaignRunResult,
    CampaignSettings,
    CampaignSummary,
    RunOutcome,
)


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 6) if present else None


def summarize(
    results: Sequence[CampaignRunResult],
    settings: CampaignSettings,
    excluded_runs: Mapping[str, int] | None = None,
    rejected_runs: Mapping[str, int] | None = None,
) -> list[CampaignSummary]:
    """One :class:`CampaignSummary` per ``campaign_id`` (in first-seen order).

    ``counts`` lists every class of the campaign's mode (zeros included); ``rates`` are counts
    over classified runs. Latency, tokens and cost are ``None`` for ``baseline-static``.

    Args:
        results: classified runs.
        settings: for ``infra_cost_usd``.
        excluded_runs: campaign_id -> runs not classified (question excluded by the audit).
        rejected_runs: campaign_id -> run log lines naming it that were rejected (invalid, repeated run_id).

    Returns:
        The summaries.
    """
    excluded_runs = excluded_runs or {}
    rejected_runs = rejected_runs or {}
    campaigns = list(dict.fromkeys([r.campaign_id for r in results] + list(excluded_runs) + list(rejected_runs)))
    out: list[CampaignSummary] = []
    for campaign in campaigns:
        runs = [r for r in results if r.campaign_id == campaign]
        mode = (
            runs[0].mode
            if runs
            else (CampaignMode.BASELINE_STATIC if campaign.startswith("baseline") else CampaignMode.MCP)
        )
        classes = [o.value for o in (RunOutcome if mode is CampaignMode.MCP else BaselineOutcome)]
        counter = Counter(r.outcome for r in runs)
        counts = {c: counter.get(c, 0) for c in classes}
        mcp = mode is CampaignMode.MCP
        costs = [r.cost_usd for r in runs if r.cost_usd is not None]
        out.append(
            CampaignSummary(
                campaign_id=campaign,
                mode=mode,
                runs=len(runs),
                counts=counts,
                rates={c: round(n / len(runs), 4) if runs else 0.0 for c, n in counts.items()},
                excluded_runs=excluded_runs.get(campaign, 0),
                rejected_runs=rejected_runs.get(campaign, 0),
                mean_tool_calls=_mean(r.tool_calls for r in runs) if mcp else None,
                mean_latency_ms=_mean(r.latency_ms for r in runs) if mcp else None,
                mean_tokens=_mean(r.tokens for r in runs) if mcp else None,
                mean_cost_usd=_mean(costs) if mcp else None,
                total_cost_usd=round(sum(costs), 9) if mcp and costs else None,
                infra_cost_usd=settings.infra_cost_usd.get(campaign),
                mean_catalog_traceability=_mean(r.catalog_traceability for r in runs) if mcp else None,
            )
        )
    return out


__all__ = ["summarize"]
