"""Evidence folders (issue 13, item 17): run and campaign ids map to distinct, safe folder names.

Reference: the bundled GeoQuery SQLite database.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stef.campaign.evidence import FOLDER_NAME_MAX_BYTES, campaign_folder, folder_name
from stef.campaign.run import run_campaign
from stef.campaign.sandbox import SQLiteTestDatabase
from tests.stef.campaign.support import (
    CAPITAL,
    RIGHT,
    SQLITE_SETTINGS,
    files_under,
    statement_run,
)


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param(("a/b", "a_b", "a?b", "a%2Fb", "a%252Fb", "a\\b"), id="separators_and_escapes"),
        pytest.param((".", "..", "...", "%2E", "%2E%2E"), id="dots"),
        pytest.param(("A", "a", "%41"), id="case"),
        pytest.param(("/etc/passwd", "etc/passwd", "C:\\x", "~root"), id="absolute_and_home"),
        pytest.param(("a\x00b", "a b", "a\tb", "a\nb", ""), id="control_characters"),
        pytest.param(("x" * 300, "x" * 301, "x" * 254 + "é", "é" * 200, "x" * 255), id="longer_than_255_bytes"),
        pytest.param(("ação", "acao", "açao", "a\u0301"), id="non_ascii"),
        pytest.param(("summary.json", "summary_json", "metrics.json"), id="file_names_of_the_evidence"),
        pytest.param(("\ud800", "\udfff", "?"), id="lone_surrogates"),
    ],
)
def test_folder_names_are_distinct_and_safe(ids: tuple[str, ...]) -> None:
    names = [folder_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert len({n.lower() for n in names}) == len(ids)  # distinct on case-insensitive file systems too
    for name in names:
        assert name not in {"", ".", "..", "summary.json"} and name.isascii()
        assert not any(c in name for c in "/\\\x00:") and Path(name).name == name
        assert 0 < len(name.encode()) <= FOLDER_NAME_MAX_BYTES


def test_evidence_of_colliding_ids_lands_in_distinct_folders(lite: SQLiteTestDatabase, tmp_path: Path) -> None:
    out = tmp_path / "deep" / "out"
    run_ids = ["a/b", "a_b", "a?b", "..", ".", "summary.json", "x" * 400, "/abs", "A"]
    campaigns = ["mcp", "../escape", "mcp/sub", "MCP"]
    runs = [statement_run(RIGHT, run_id, campaign_id) for campaign_id in campaigns for run_id in run_ids]
    result = run_campaign(runs, [CAPITAL], lite, SQLITE_SETTINGS, out_dir=out)
    assert len(result.results) == len(runs) and {r.outcome for r in result.results} == {"success"}
    assert files_under(tmp_path) - files_under(out) == {tmp_path / "deep", out}  # nothing written outside OUT
    metrics = sorted(out.rglob("metrics.json"))
    assert len(metrics) == len(runs)
    seen = set()
    for path in metrics:
        document = json.loads(path.read_text(encoding="utf-8"))
        context = json.loads((path.parent / "context.json").read_text(encoding="utf-8"))
        assert document["runId"] == context["runId"]
        assert path.parent == campaign_folder(out, context["campaignId"]) / folder_name(context["runId"])
        seen.add((context["campaignId"], context["runId"]))
    assert seen == {(r.campaign_id, r.run_id) for r in runs}
    for campaign_id in campaigns:
        summary = json.loads((campaign_folder(out, campaign_id) / "summary.json").read_text(encoding="utf-8"))
        assert summary["campaign_id"] == campaign_id and summary["runs"] == len(run_ids)


def test_a_rerun_stopped_before_its_summary_leaves_no_summary_of_the_earlier_run(
    lite: SQLiteTestDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run folders are written as the runs are classified, summary.json at the end: a rerun
    into the same folder stopped in between left the earlier run's summary, which `stef campaign
    compare` read as the new run's."""
    import stef.campaign.run as campaign_run

    out = tmp_path / "out"
    runs = [statement_run(RIGHT, f"r{i}", "mcp") for i in range(3)]
    run_campaign(runs, [CAPITAL], lite, SQLITE_SETTINGS, out_dir=out)
    summary = campaign_folder(out, "mcp") / "summary.json"
    assert json.loads(summary.read_text(encoding="utf-8"))["runs"] == 3

    def stopped(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(campaign_run, "summarize", stopped)
    with pytest.raises(KeyboardInterrupt):
        run_campaign(runs[:1], [CAPITAL], lite, SQLITE_SETTINGS, out_dir=out)
    assert not summary.exists()
    assert not list(campaign_folder(out, "mcp").glob(".summary*"))  # no partial file either
