"""Evidence of a campaign on disk: ``metrics.json``, ``context.json``, ``session.jsonl`` per run, ``summary.json`` per campaign.

Source: the campaign protocol of ``seeds/003`` (camelCase evidence files per run), DESIGN.md §7,
issues 6 and 13 (item 17: distinct ids get distinct, safe folder names). The only module of
the protocol that writes files.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from stef.campaign.models import (
    CampaignMode,
    CampaignRunLog,
    CampaignRunResult,
    CampaignSettings,
    CampaignSummary,
    CanonicalCatalog,
)

PROTOCOL_SOURCE = "seeds/003_7e3f1b24b92db84a.txt (Protocolo de avaliação experimental)"
"""Where the protocol comes from; recorded in every ``context.json``."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _camel_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_camel(str(k)): _camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def evidence_documents(
    run: CampaignRunLog, result: CampaignRunResult, catalog: CanonicalCatalog, settings: CampaignSettings
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """``metrics.json``, ``context.json`` and the ``session.jsonl`` trail of one run (camelCase keys, as the seed).

    The metadata snapshot is the catalog entries of the tables the session looked up (``mcp``),
    or the whole catalog (``baseline-static``: the schema was in the prompt).

    Returns:
        ``(metrics, context, session_events)``.
    """
    metrics = _camel_keys(result.model_dump(mode="json", exclude={"question"}))
    metrics["statementCount"] = len(run.statements)
    if result.mode is CampaignMode.BASELINE_STATIC:
        for key in ("latencyMs", "tokens", "costUsd", "costSource", "toolCalls", "catalogTraceability"):
            metrics[key] = None  # not metrics of the baseline mode (seed: "não se aplica ao baseline")
    lower = {t.lower(): cols for t, cols in catalog.root.items()}
    if result.mode is CampaignMode.BASELINE_STATIC:
        snapshot = dict(catalog.root)
    else:
        snapshot = {t: lower[t] for t in result.tables_looked_up if t in lower}
    context = {
        "runId": run.run_id,
        "campaignId": run.campaign_id,
        "mode": result.mode.value,
        "questionId": run.question_id,
        "question": run.question,
        "metadataSnapshot": snapshot,
        "seed": run.seed,
        "modelVersion": run.model_version,
        "promptVersion": run.prompt_version,
        "commitHash": run.commit_hash,
        "dialect": settings.dialect,
        "toolBudget": settings.tool_budget,
        "maxStatements": settings.max_statements,
        "protocol": PROTOCOL_SOURCE,
    }
    session: list[dict[str, Any]] = [
        {"event": "question", "runId": run.run_id, "campaignId": run.campaign_id, "question": run.question}
    ]
    for number, call in enumerate(run.tool_calls, 1):
        session.append(
            {
                "event": "toolCall",
                "n": number,
                "name": call.name,
                "arguments": call.arguments,
                "durationMs": call.duration_ms,
            }
        )
    for statement in result.statements:
        session.append({"event": "statement", **_camel_keys(statement.model_dump(mode="json"))})
    session.append({"event": "outcome", "outcome": result.outcome, "reason": result.reason})
    return metrics, context, session


def write_evidence(
    out_dir: str | Path,
    run: CampaignRunLog,
    result: CampaignRunResult,
    catalog: CanonicalCatalog,
    settings: CampaignSettings,
) -> Path:
    """Write ``OUT/<campaign folder>/<run folder>/{metrics.json, context.json, session.jsonl}``.

    The folder names are :func:`folder_name` of ``campaign_id`` and ``run_id`` (distinct ids never
    share a folder); the files hold the ids as logged.

    Returns:
        The run's folder.
    """
    metrics, context, session = evidence_documents(run, result, catalog, settings)
    folder = campaign_folder(out_dir, run.campaign_id) / folder_name(run.run_id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.json").write_text(json.dumps(metrics, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / "context.json").write_text(json.dumps(context, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / "session.jsonl").write_text(
        "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in session), encoding="utf-8"
    )
    return folder


FOLDER_SAFE_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
"""Characters an id keeps in its folder name; every other UTF-8 byte becomes ``%XX``."""

FOLDER_NAME_MAX_BYTES = 255
"""Longest folder name (the usual file-name limit); longer encodings are cut and hashed."""

_FOLDER_HASH_CHARS = 32
"""Hex digits of the SHA-256 of the id that end a cut folder name (128 bits)."""


def folder_name(identifier: str) -> str:
    """The evidence folder name of a ``run_id`` or ``campaign_id``: safe, and distinct ids get distinct names.

    Lower-case ASCII letters, digits, ``-`` and ``_`` are kept; every other byte of the id's
    UTF-8 form (upper-case letters, ``.``, ``/``, ``%``, spaces, NUL, non-ASCII) is written
    ``%XX`` with upper-case hex digits. The mapping is injective, also on case-insensitive file
    systems, and no name is empty, ``.``, ``..``, absolute or contains a separator. An encoding
    longer than :data:`FOLDER_NAME_MAX_BYTES` is cut at a ``%XX`` boundary and ends with ``~`` and
    the first 32 hex digits of the id's SHA-256 (``~`` never occurs otherwise); the empty id
    is that suffix alone.

    Args:
        identifier: the id as logged (lone surrogates are hashed by their code points).

    Returns:
        The folder name (ASCII, 1 to 255 bytes).

    >>> [folder_name(i) for i in ("mcp-001", "a/b", "a_b", "a?b", "..", "Mcp", "ação")]
    ['mcp-001', 'a%2Fb', 'a_b', 'a%3Fb', '%2E%2E', '%4Dcp', 'a%C3%A7%C3%A3o']
    >>> long = folder_name("x" * 300)
    >>> len(long), long[-33]
    (255, '~')
    """
    data = identifier.encode("utf-8", "surrogatepass")
    parts = [chr(b) if chr(b) in FOLDER_SAFE_CHARACTERS else f"%{b:02X}" for b in data]
    name = "".join(parts)
    if 0 < len(name) <= FOLDER_NAME_MAX_BYTES:
        return name
    digest = hashlib.sha256(data).hexdigest()[:_FOLDER_HASH_CHARS]
    room = FOLDER_NAME_MAX_BYTES - 1 - _FOLDER_HASH_CHARS
    head: list[str] = []
    used = 0
    for part in parts:
        if used + len(part) > room:
            break
        head.append(part)
        used += len(part)
    return "".join(head) + "~" + digest


def campaign_folder(out_dir: str | Path, campaign_id: str) -> Path:
    """``OUT/<folder_name(campaign_id)>``: where a campaign's ``summary.json`` and run folders go."""
    return Path(out_dir) / folder_name(campaign_id)


def write_summary(out_dir: str | Path, summary: CampaignSummary) -> Path:
    """Write ``OUT/<campaign folder>/summary.json`` (no run folder can be named ``summary.json``: ``.`` is encoded).

    Returns:
        The file written.
    """
    folder = campaign_folder(out_dir, summary.campaign_id)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "summary.json"
    partial = folder / ".summary.json.partial"  # written whole, then renamed: never a half-written summary
    try:
        partial.write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def forget_summary(out_dir: str | Path, campaign_id: str) -> None:
    """Remove the ``summary.json`` an earlier run of ``campaign_id`` left in ``out_dir``: a run that
    starts writing the campaign's run folders again writes its summary only at its end, and one
    stopped before that must not leave the old summary to be read as this run's (``stef campaign
    compare``)."""
    (campaign_folder(out_dir, campaign_id) / "summary.json").unlink(missing_ok=True)


__all__ = [
    "FOLDER_NAME_MAX_BYTES",
    "FOLDER_SAFE_CHARACTERS",
    "PROTOCOL_SOURCE",
    "campaign_folder",
    "evidence_documents",
    "folder_name",
    "write_evidence",
    "write_summary",
]
