"""Drift alert texts: the Prefect event of a worse drift and the Markdown table of a night's checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stef.display import Markdown, md_table, md_text, shorten
from stef.monitor.formatting import fmt, fmt_ci

DRIFT_EVENT = "stef.drift.detected"
"""Prefect event emitted for every check whose verdict is ``drift`` with direction ``worse``."""


def drift_event(check: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of ``prefect.events.emit_event`` for one check summary (:meth:`stef.monitor.models.DriftCheck.summary`).

    The resource is the agent (``stef.agent.<agent_id>``, labelled with the candidate version and
    the kind); the related resources are both agent versions; the payload carries the verdict,
    the direction, the versions, the windows and the deltas with their intervals.

    >>> kwargs = drift_event({"agent_id": "bird-analyst", "kind": "version", "baseline_version": "v1", "candidate_version": "v2",
    ...     "verdict": "drift", "direction": "worse", "mean_delta": -3.0})
    >>> kwargs["event"], kwargs["resource"]["prefect.resource.id"], kwargs["payload"]["mean_delta"]
    ('stef.drift.detected', 'stef.agent.bird-analyst', -3.0)
    """
    agent = str(check["agent_id"])
    related = [
        {
            "prefect.resource.id": f"stef.agent.{agent}.version.{check[key]}",
            "prefect.resource.role": role,
            "prefect.resource.name": str(check[key]),
        }
        for key, role in (("baseline_version", "baseline"), ("candidate_version", "candidate"))
    ]
    payload_keys = (
        "agent_id",
        "kind",
        "baseline_version",
        "candidate_version",
        "baseline_window",
        "candidate_window",
        "evaluator_version",
        "verdict",
        "direction",
        "n_baseline",
        "n_candidate",
        "mean_baseline",
        "mean_candidate",
        "mean_delta",
        "mean_delta_ci",
        "p90_delta",
        "p90_delta_ci",
        "coverage_delta",
        "coverage_delta_ci",
        "ks_pvalue",
        "psi",
        "wasserstein_norm",
        "reasons",
    )
    return {
        "event": DRIFT_EVENT,
        "resource": {
            "prefect.resource.id": f"stef.agent.{agent}",
            "prefect.resource.name": agent,
            "stef.agent-version": str(check["candidate_version"]),
            "stef.drift-kind": str(check["kind"]),
        },
        "related": related,
        "payload": {key: check.get(key) for key in payload_keys},
    }


def drift_markdown(checks: Sequence[Mapping[str, Any]], title: str) -> str:
    """A markdown table of check summaries (the drift artifact; also used by ``stef nightly`` readers).

    Every cell goes through :func:`stef.display.md_table` (names shortened by
    :func:`stef.display.shorten`): an agent id or a version with HTML, Markdown, ``|`` or line
    breaks shows as its text and keeps the table's shape.

    >>> print(drift_markdown([], "Drift 2026-11-26").splitlines()[-1])
    No drift check ran (no agent had data, or no agent has two versions or a previous window).
    """
    lines = [f"# {md_text(title)}", ""]
    if not checks:
        lines.append("No drift check ran (no agent had data, or no agent has two versions or a previous window).")
        return "\n".join(lines)
    header = [
        "agent",
        "kind",
        "baseline → candidate",
        "windows",
        "n",
        "verdict",
        "direction",
        "mean Δ [95 % CI]",
        "P90 Δ",
        "coverage Δ",
        "KS p",
        "PSI",
        "W/σ",
    ]
    rows = []
    for c in checks:
        bw, cw = c["baseline_window"], c["candidate_window"]
        rows.append(
            [
                shorten(c["agent_id"]),
                c["kind"],
                f"{shorten(c['baseline_version'])} → {shorten(c['candidate_version'])}",
                f"{bw[0]}…{bw[1]} → {cw[0]}…{cw[1]}",
                f"{c['n_baseline']} / {c['n_candidate']}",
                Markdown(f"**{md_text(c['verdict'])}**"),
                c["direction"] or "–",
                Markdown(f"{fmt(c.get('mean_delta'))} {fmt_ci(c.get('mean_delta_ci'))}"),
                Markdown(fmt(c.get("p90_delta"))),
                Markdown(fmt(c.get("coverage_delta"), "+.3f")),
                Markdown(fmt(c.get("ks_pvalue"), ".3g")),
                Markdown(fmt(c.get("psi"), ".3f")),
                Markdown(fmt(c.get("wasserstein_norm"), ".3f")),
            ]
        )
    lines.append(md_table(header, rows, "llllrllrrrrrr"))
    lines += [
        "",
        (
            "Decision: drift when |Δ| reaches its threshold and its 95 % bootstrap interval excludes 0 "
            "(mean, P90, coverage); `insufficient_data` below the minimum sample."
        ),
    ]
    return "\n".join(lines)
