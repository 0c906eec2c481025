"""Drift alert texts: the Prefect event of a worse drift and the Markdown table of a night's checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stef.display import Markdown, md_table, md_text, shorten
from stef.monitor.formatting import fmt, fmt_ci
from stef.monitor.models import ERROR_RATE_KEYS

DRIFT_EVENT = "stef.drift.detected"
"""Prefect event emitted for every check whose verdict is ``drift`` with direction ``worse``."""


def drift_event(check: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of ``prefect.events.emit_event`` for one check summary (:meth:`stef.monitor.models.DriftCheck.summary`).

    The resource is the agent (``stef.agent.<agent_id>``, labelled with the candidate version and
    the kind); the related resources are both agent versions; the payload carries the verdict,
    the direction, the versions, the windows, the estimated shares of wrong answers and the deltas
    with their intervals, the significant category shifts and the check's ``sentence``.

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
        "sentence",
        *ERROR_RATE_KEYS,
        "error_rate_with_unscored_baseline",
        "error_rate_with_unscored_candidate",
        "paired_error_rate_delta",
        "paired_error_rate_delta_ci",
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
        "payload": {
            **{key: check.get(key) for key in payload_keys},
            "category_shifts": [s for s in check.get("category_shifts") or () if s.get("significant")],
        },
    }


NOTIFY_WEBHOOK_ENV = "STEF_NOTIFY_WEBHOOK"
"""Environment variable with the URL of a Slack-compatible incoming webhook: every new drift for the
worse is posted there as its sentence (``stef nightly`` / ``stef serve --notify-webhook`` set it)."""


def webhook_payload(check: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body posted to a Slack-compatible webhook for a drift: the check's sentence as plain text.

    Slack reads ``<…>`` as links and mentions and ``&`` as the start of an entity: they are escaped
    (its three escapes), and ``mrkdwn`` is off, so a name with ``*`` or ``<!channel>`` shows as its text.

    >>> webhook_payload({"sentence": "bird <!channel> v2 answers an estimated 50 % ... *worse*."})
    {'text': 'bird &lt;!channel&gt; v2 answers an estimated 50 % ... *worse*.', 'mrkdwn': False}
    """
    text = str(check.get("sentence") or "")
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return {"text": escaped, "mrkdwn": False}


def is_new_worse_drift(check: Mapping[str, Any]) -> bool:
    """Whether ``check`` drifted for the worse and was not already so when stored before
    (a recomputed check carries ``previous_verdict`` / ``previous_direction``; the night's own checks always count).

    >>> is_new_worse_drift({"verdict": "drift", "direction": "worse"})
    True
    >>> is_new_worse_drift({"verdict": "drift", "direction": "worse", "recomputed": True,
    ...                     "previous_verdict": "drift", "previous_direction": "worse"})
    False
    """
    if check.get("verdict") != "drift" or check.get("direction") != "worse":
        return False
    if not check.get("recomputed"):
        return True
    return not (check.get("previous_verdict") == "drift" and check.get("previous_direction") == "worse")


def _table(checks: Sequence[Mapping[str, Any]]) -> str:
    header = [
        "agent",
        "kind",
        "baseline → candidate",
        "windows",
        "n",
        "verdict",
        "direction",
        "wrong answers (est.)",
        "Δ [95 % CI]",
        "mean Φ Δ",
        "coverage Δ",
        "PSI",
    ]
    rows = []
    for c in checks:
        bw, cw = c["baseline_window"], c["candidate_window"]
        rates = (
            f"{fmt(c.get('error_rate_baseline'), '.1%')} → {fmt(c.get('error_rate_candidate'), '.1%')}"
            if c.get("error_rate_baseline") is not None
            else "–"
        )
        rows.append(
            [
                shorten(c["agent_id"]),
                c["kind"],
                f"{shorten(c['baseline_version'])} → {shorten(c['candidate_version'])}",
                f"{bw[0]}…{bw[1]} → {cw[0]}…{cw[1]}",
                f"{c['n_baseline']} / {c['n_candidate']}",
                Markdown(f"**{md_text(c['verdict'])}**"),
                c["direction"] or "–",
                Markdown(md_text(rates)),
                Markdown(
                    f"{fmt(c.get('error_rate_delta'), '+.3f')} {fmt_ci(c.get('error_rate_delta_ci'), '+.3f')}"
                    if c.get("error_rate_delta") is not None
                    else "–"
                ),
                Markdown(f"{fmt(c.get('mean_delta'))} {fmt_ci(c.get('mean_delta_ci'))}"),
                Markdown(fmt(c.get("coverage_delta"), "+.3f")),
                Markdown(fmt(c.get("psi"), ".3f")),
            ]
        )
    return md_table(header, rows, "llllrllrrrrr")


def drift_markdown(checks: Sequence[Mapping[str, Any]], title: str) -> str:
    """A markdown page of check summaries (the drift artifact; also used by ``stef nightly`` readers).

    The night's checks, then those recomputed because the day falls in their windows (summaries
    with ``recomputed``): each as its sentence (:func:`stef.monitor.sentence.drift_sentence`), then
    as a table row. Every sentence and cell goes through :func:`stef.display.md_text` /
    :func:`stef.display.md_table` (names shortened by :func:`stef.display.shorten`): an agent id
    or a version with HTML, Markdown, ``|`` or line breaks shows as its text and keeps the page's shape.

    >>> print(drift_markdown([], "Drift 2026-11-26").splitlines()[-1])
    No drift check ran (no agent had data, or no agent has two versions or a previous window).
    """
    from stef.monitor.sentence import drift_sentence

    lines = [f"# {md_text(title)}", ""]
    if not checks:
        lines.append("No drift check ran (no agent had data, or no agent has two versions or a previous window).")
        return "\n".join(lines)
    night = [c for c in checks if not c.get("recomputed")]
    later = [c for c in checks if c.get("recomputed")]
    for heading, group in (("", night), ("## Checks recomputed: this day falls in their windows", later)):
        if not group:
            continue
        if heading:
            lines += ["", heading, ""]
        lines += [f"- {md_text(c.get('sentence') or drift_sentence(c))}" for c in group]
        lines += ["", _table(group)]
    lines += [
        "",
        (
            "Decision: drift when the estimated share of wrong answers (corrected for label shift) or the coverage "
            "moves by at least its threshold and the 95 % interval of the move excludes 0; "
            "`insufficient_data` below the minimum sample. Score statistics (mean Φ, PSI) are supporting evidence."
        ),
    ]
    return "\n".join(lines)
