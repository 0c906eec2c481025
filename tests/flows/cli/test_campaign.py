"""The bundled GeoQuery campaign sample, ``stef campaign`` commands, campaign tables, the campaign flow."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from stef.campaign.inputs import read_jsonl
from stef.campaign.models import OUTCOME_CLASSES, CampaignRunLog, CampaignSettings, GoldQuestion
from stef.campaign.run import run_campaign
from stef.campaign.sandbox import SQLiteTestDatabase
from tests.support.checkout import REPO_ROOT

SAMPLE = REPO_ROOT / "flows" / "campaign_data"
SAMPLE_COUNTS = {
    "budget_exceeded": 2,
    "syntax_error": 1,
    "structural_error": 2,
    "execution_error": 6,
    "partial_success": 1,
    "success": 18,
    "correct": 22,
    "incorrect": 8,
}
"""Outcome counts of the bundled sample (every class at least once; see flows/campaign_data/README.md)."""

runner = CliRunner()


def _settings() -> CampaignSettings:
    return CampaignSettings.model_validate_json((SAMPLE / "settings.json").read_text())


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the bundled database, so the checksum test sees only this module's campaigns."""
    copy = tmp_path_factory.mktemp("geo") / "geography.sqlite"
    shutil.copyfile(SAMPLE / "geography.sqlite", copy)
    return copy


@pytest.fixture(scope="module")
def sample_run(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``stef campaign run --json`` on the bundled sample (once per module)."""
    out = tmp_path_factory.mktemp("campaign-out")
    warehouse = out / "wh.duckdb"
    before = hashlib.sha256(sample_db.read_bytes()).hexdigest()
    result = runner.invoke(
        app,
        [
            "campaign",
            "run",
            "--runs",
            str(SAMPLE / "runs.jsonl"),
            "--gold",
            str(SAMPLE / "gold.jsonl"),
            "--db",
            str(sample_db),
            "--catalog",
            str(SAMPLE / "catalog.json"),
            "--settings",
            str(SAMPLE / "settings.json"),
            "--out",
            str(out),
            "--warehouse",
            str(warehouse),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as conn:
        scored = conn.execute("SELECT count(*) FROM campaign_outcomes WHERE stef_score IS NOT NULL").fetchall()[0][0]
        statuses = [row[0] for row in conn.execute("SELECT DISTINCT stef_status FROM campaign_outcomes").fetchall()]
    return {
        "payload": json.loads(result.stdout),
        "out": out,
        "warehouse": warehouse,
        "before": before,
        "db": sample_db,
        "scored": (scored, statuses),
    }


def test_sample_covers_every_outcome_class(sample_run: dict[str, Any]) -> None:
    payload = sample_run["payload"]
    assert payload["counts"] == SAMPLE_COUNTS
    assert set(payload["counts"]) == set(OUTCOME_CLASSES) and all(n >= 1 for n in payload["counts"].values())
    assert payload["gold_audit"] == {"questions": 30, "excluded": []}
    assert payload["campaigns"]["mcp"]["mean_latency_ms"] is not None
    assert payload["campaigns"]["baseline-static"]["mean_latency_ms"] is None
    assert payload["campaigns"]["mcp"]["infra_cost_usd"] == 1.75 and payload["stored_outcomes"] == 60


def test_sample_notes_agree_with_outcomes(sample_run: dict[str, Any]) -> None:
    """Each sample run's note names the class it was built to show; metrics.json says the same."""
    runs = [json.loads(line) for line in (SAMPLE / "runs.jsonl").read_text().splitlines()]
    for run in runs:
        metrics = json.loads((sample_run["out"] / run["campaign_id"] / run["run_id"] / "metrics.json").read_text())
        expected = run["note"].split(":")[0].split(" ")[0].rstrip(",")
        assert metrics["outcome"] == expected, run["run_id"]
    tie = json.loads((sample_run["out"] / "mcp" / "mcp-008" / "metrics.json").read_text())
    assert tie["outcome"] == "budget_exceeded" and tie["statements"][0]["outcome"] == "syntax_error"


def test_sample_never_modifies_the_database(sample_run: dict[str, Any]) -> None:
    assert hashlib.sha256(sample_run["db"].read_bytes()).hexdigest() == sample_run["before"]
    drops = [
        json.loads((sample_run["out"] / "mcp" / rid / "metrics.json").read_text()) for rid in ("mcp-006", "mcp-011")
    ]
    assert [m["statements"][0]["executionStatus"] for m in drops] == ["refused", "refused"]


def test_evidence_files_use_the_seed_keys(sample_run: dict[str, Any]) -> None:
    folder = sample_run["out"] / "mcp" / "mcp-001"
    metrics = json.loads((folder / "metrics.json").read_text())
    context = json.loads((folder / "context.json").read_text())
    session = [json.loads(line) for line in (folder / "session.jsonl").read_text().splitlines()]
    assert {
        "runId",
        "campaignId",
        "outcome",
        "toolCalls",
        "statements",
        "latencyMs",
        "tokens",
        "costUsd",
        "catalogTraceability",
    } <= set(metrics)
    assert {
        "runId",
        "campaignId",
        "question",
        "metadataSnapshot",
        "seed",
        "modelVersion",
        "promptVersion",
        "commitHash",
    } <= set(context)
    assert context["metadataSnapshot"] == {"city": ["city_name", "population", "country_name", "state_name"]}
    assert [e["event"] for e in session] == ["question", "toolCall", "toolCall", "statement", "outcome"]
    assert session[-1]["outcome"] == metrics["outcome"] == "success"


def test_warehouse_tables_and_idempotent_rerun(sample_run: dict[str, Any]) -> None:
    from warehouse import connect
    from warehouse.campaign import read_campaign_outcomes, read_campaign_summaries, store_campaign

    settings = _settings()
    database = SQLiteTestDatabase(sample_run["db"])
    try:
        result = run_campaign(
            read_jsonl(SAMPLE / "runs.jsonl", CampaignRunLog),
            read_jsonl(SAMPLE / "gold.jsonl", GoldQuestion),
            database,
            settings,
        )
    finally:
        database.close()
    with connect(sample_run["warehouse"]) as conn:
        stored = store_campaign(conn, result.runs, result.results, result.summaries, result.audit, settings)
        assert (stored.runs, stored.outcomes) == (60, 60)
        counts = dict(conn.execute("SELECT outcome, count(*) FROM campaign_outcomes GROUP BY outcome").fetchall())
        assert counts == SAMPLE_COUNTS
        assert conn.execute("SELECT count(*) FROM campaign_runs").fetchall() == [(60,)]
        assert conn.execute("SELECT count(*) FROM campaigns").fetchall() == [(2,)]
        frame = read_campaign_outcomes(conn, "mcp")
        assert frame.height == 30 and frame["stef_score"].null_count() == 30  # this rerun stored no scores
        assert read_campaign_summaries(conn)["baseline-static"].counts == {"correct": 22, "incorrect": 8}


def test_cli_run_stores_stef_scores_next_to_outcomes(sample_run: dict[str, Any]) -> None:
    scored, statuses = sample_run["scored"]
    assert 50 <= scored < 60  # runs whose SQL STEF cannot parse (syntax errors) have no Φ
    assert set(statuses) <= {"evaluated", "parse_error", "non_select"}


def test_cli_compare_from_evidence_folder(sample_run: dict[str, Any]) -> None:
    result = runner.invoke(
        app, ["campaign", "compare", "mcp", "baseline-static", "--out", str(sample_run["out"]), "--json"]
    )
    assert result.exit_code == 0, result.output
    both = json.loads(result.stdout)
    assert both["mcp"]["counts"]["success"] == 18 and both["baseline-static"]["counts"]["correct"] == 22
    table = runner.invoke(app, ["campaign", "compare", "mcp", "baseline-static", "--out", str(sample_run["out"])])
    assert "partial_success" in table.stdout and "catalog traceability" in table.stdout
    missing = runner.invoke(app, ["campaign", "compare", "mcp", "nope", "--out", str(sample_run["out"])])
    assert missing.exit_code == 2 and "campaign 'nope' not found" in missing.stderr


def test_cli_calibrate_on_the_sample() -> None:
    result = runner.invoke(
        app,
        [
            "campaign",
            "calibrate",
            "--runs",
            str(SAMPLE / "runs.jsonl"),
            "--gold",
            str(SAMPLE / "gold.jsonl"),
            "--db",
            str(SAMPLE / "geography.sqlite"),
            "--settings",
            str(SAMPLE / "settings.json"),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["runs"] == 60 and report["positives"] == 40
    assert report["auroc"] == 0.6987  # the README's figure for the bundled sample
    for cell in report["confusion"]:
        assert cell["tp"] + cell["fp"] + cell["fn"] + cell["tn"] == 60
    assert report["runs_by_outcome"] == SAMPLE_COUNTS


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--runs", "missing.jsonl"], "missing.jsonl: no such file", id="missing_runs"),
        pytest.param(["--db", "missing.sqlite"], "missing.sqlite: no such test database", id="missing_db"),
        pytest.param(["--dialect", "klingon"], "--dialect", id="unknown_dialect"),
    ],
)
def test_cli_run_errors(tmp_path: Path, args: list[str], message: str) -> None:
    base = {
        "--runs": str(SAMPLE / "runs.jsonl"),
        "--gold": str(SAMPLE / "gold.jsonl"),
        "--db": str(SAMPLE / "geography.sqlite"),
    }
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    flat = [item for pair in base.items() for item in pair]
    if "--dialect" in args:
        flat += ["--dialect", "klingon"]
    result = runner.invoke(app, ["campaign", "run", *flat, "--out", str(tmp_path / "out"), "--no-store"])
    assert result.exit_code == 2
    assert message in result.stderr


def test_cli_schema() -> None:
    result = runner.invoke(app, ["campaign", "schema", "run_log"])
    assert result.exit_code == 0
    assert "statements" in json.loads(result.stdout)["properties"]
    bad = runner.invoke(app, ["campaign", "schema", "nope"])
    assert bad.exit_code == 2 and "unknown schema 'nope'" in bad.stderr


@pytest.mark.flow
def test_campaign_flow_smoke(prefect_harness: None, tmp_path: Path) -> None:
    from flows.campaign import campaign

    warehouse = tmp_path / "wh.duckdb"
    result = campaign(
        str(SAMPLE / "runs.jsonl"),
        str(SAMPLE / "gold.jsonl"),
        str(SAMPLE / "geography.sqlite"),
        out=str(tmp_path / "out"),
        settings=_settings(),
        warehouse=str(warehouse),
    )
    assert result.counts() == SAMPLE_COUNTS
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as conn:
        scored = conn.execute("SELECT count(*) FROM campaign_outcomes WHERE stef_score IS NOT NULL").fetchall()[0][0]
    assert 0 < scored <= 60


def test_cli_run_and_compare_with_hostile_ids(tmp_path: Path) -> None:
    """Ids with separators, dots and rich markup: distinct folders inside --out, printed as text, found again by compare."""
    gold = json.loads((SAMPLE / "gold.jsonl").read_text(encoding="utf-8").splitlines()[0])
    campaigns = ["../[/]escape", "mcp/[bold red]x"]
    run_ids = ["a/b", "a_b", "a?b", "..", "summary.json"]
    lines = [
        json.dumps(
            {
                "run_id": r,
                "campaign_id": c,
                "question_id": gold["question_id"],
                "question": gold["question"],
                "statements": gold["gold_sql"],
            }
        )
        for c in campaigns
        for r in run_ids
    ]
    lines.append(
        json.dumps(
            {"run_id": "[/]", "campaign_id": campaigns[0], "question_id": "[/]nope", "question": "?", "statements": []}
        )
    )
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "box" / "out"
    base = [
        "campaign",
        "run",
        "--runs",
        str(runs),
        "--gold",
        str(SAMPLE / "gold.jsonl"),
        "--db",
        str(SAMPLE / "geography.sqlite"),
        "--out",
        str(out),
        "--no-store",
        "--no-score",
    ]
    table = runner.invoke(app, base)
    assert table.exit_code == 0, table.output
    printed = " ".join(table.stdout.split())  # rich wraps lines at the terminal width
    assert "run [/] of ../[/]escape not classified: question_id '[/]nope' is not in the gold battery" in printed
    compact = "".join(table.stdout.split())
    assert "mcp/[boldred]x(mcp)" in compact and "../[/]escape(mcp)" in compact  # the column headers, as text
    assert set(tmp_path.iterdir()) == {runs, tmp_path / "box"} and list((tmp_path / "box").iterdir()) == [
        out
    ]  # nothing outside --out
    assert len(list(out.rglob("metrics.json"))) == len(campaigns) * len(run_ids)
    payload = json.loads(runner.invoke(app, [*base, "--json"]).stdout)
    assert payload["skipped"] == {campaigns[0]: {"[/]": "question_id '[/]nope' is not in the gold battery"}}
    both = runner.invoke(app, ["campaign", "compare", *campaigns, "--out", str(out), "--json"])
    assert both.exit_code == 0, both.output
    assert {c: s["counts"]["success"] for c, s in json.loads(both.stdout).items()} == dict.fromkeys(
        campaigns, len(run_ids)
    )


def _sample_lines(name: str) -> list[str]:
    return (SAMPLE / name).read_text(encoding="utf-8").splitlines()


def test_cli_run_rejects_bad_run_lines_and_classifies_the_others(tmp_path: Path) -> None:
    """A line that is not JSON, lacks a field or has a field of the wrong type is rejected with its
    file, line and reason; the runs on the other lines are classified as without them."""
    good = _sample_lines("runs.jsonl")[:3]  # mcp-001 .. mcp-003
    lines = [
        good[0],
        "{not json",
        json.dumps({"run_id": "x1", "campaign_id": "mcp", "question": "?"}),  # no question_id
        json.dumps(
            {"run_id": "x2", "campaign_id": "mcp", "question_id": "geo-000", "question": "?", "statements": "SELECT 1"}
        ),
        good[1],
        "[1, 2]",
        good[2],
    ]
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    base = [
        "campaign",
        "run",
        "--runs",
        str(runs),
        "--gold",
        str(SAMPLE / "gold.jsonl"),
        "--db",
        str(SAMPLE / "geography.sqlite"),
        "--settings",  # its tariffs price the runs: no lookup in litellm's price list
        str(SAMPLE / "settings.json"),
        "--out",
        str(tmp_path / "out"),
        "--no-store",
        "--no-score",
    ]
    result = runner.invoke(app, [*base, "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["classified"] == 3 and payload["campaigns"]["mcp"]["runs"] == 3
    assert [(r["line_number"], r["status"], r["campaign_id"], r["run_id"]) for r in payload["rejected"]] == [
        (2, "invalid_input", None, None),
        (3, "invalid_input", "mcp", "x1"),
        (4, "invalid_input", "mcp", "x2"),
        (6, "invalid_input", None, None),
    ]
    assert {r["source"] for r in payload["rejected"]} == {str(runs)}
    reasons = [r["reason"] for r in payload["rejected"]]
    assert reasons[0].startswith("not valid JSON: ")
    assert reasons[1] == "invalid record: field `question_id`: Field required"
    assert reasons[2] == "invalid record: field `statements`: Input should be a valid list"
    assert reasons[3] == "not a JSON object but a list"
    assert payload["campaigns"]["mcp"]["rejected_runs"] == 2  # the lines that name the campaign
    table = runner.invoke(app, base)
    assert table.exit_code == 0, table.output
    printed = " ".join(table.stdout.split())
    assert f"rejected {runs} line 3: invalid record: field `question_id`: Field required" in printed
    assert "runs rejected (invalid lines) 2" in printed


def test_cli_run_rejects_bad_gold_lines_and_excludes_their_questions(tmp_path: Path) -> None:
    """A gold line that is not a valid question excludes the question it names (its runs are not
    classified, with the reason); a gold line naming no question is rejected; the battery goes on."""
    gold_lines = _sample_lines("gold.jsonl")
    first = json.loads(gold_lines[0])
    broken = json.dumps({"question_id": first["question_id"], "question": first["question"], "gold_sql": []})
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join([broken, "oops", *gold_lines[1:]]) + "\n", encoding="utf-8")
    runs = [json.loads(line) for line in _sample_lines("runs.jsonl") if json.loads(line)["campaign_id"] == "mcp"]
    result = runner.invoke(
        app,
        [
            "campaign",
            "run",
            "--runs",
            str(SAMPLE / "runs.jsonl"),
            "--gold",
            str(gold),
            "--db",
            str(SAMPLE / "geography.sqlite"),
            "--settings",
            str(SAMPLE / "settings.json"),
            "--settings",  # its tariffs price the runs: no lookup in litellm's price list
            str(SAMPLE / "settings.json"),
            "--out",
            str(tmp_path / "out"),
            "--no-store",
            "--no-score",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    first_runs = [r["run_id"] for r in runs if r["question_id"] == first["question_id"]]
    assert first_runs and payload["classified"] == 60 - 2 * len(first_runs)
    reason = payload["skipped"]["mcp"][first_runs[0]]
    assert reason == (
        f"question excluded by the gold audit: {gold} line 1 is not a valid gold question:"
        " invalid record: field `gold_sql`: List should have at least 1 item after validation, not 0"
    )
    assert [(r["input"], r["line_number"], r["question_id"]) for r in payload["rejected"]] == [
        ("gold", 1, first["question_id"]),
        ("gold", 2, None),
    ]


def test_run_campaign_rejects_repeated_ids_instead_of_stopping(tmp_path: Path) -> None:
    """A run_id logged twice in one campaign and a question_id listed twice in the battery no longer
    stop the campaign: the repeated run is rejected (line of the first named), the question excluded."""
    good = _sample_lines("runs.jsonl")[:2]
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join([good[0], good[1], good[0]]) + "\n", encoding="utf-8")
    gold_lines = _sample_lines("gold.jsonl")
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join([*gold_lines, gold_lines[1]]) + "\n", encoding="utf-8")
    database = SQLiteTestDatabase(SAMPLE / "geography.sqlite")
    try:
        result = run_campaign(read_jsonl(runs, CampaignRunLog), read_jsonl(gold, GoldQuestion), database, _settings())
    finally:
        database.close()
    first = json.loads(good[0])
    assert [r.run_id for r in result.results] == [first["run_id"]]
    assert [(r.status.value, r.line_number, r.run_id) for r in result.rejected] == [
        ("duplicate_run", 3, first["run_id"])
    ]
    assert result.rejected[0].reason == (
        f"run_id {first['run_id']!r} appears twice in campaign 'mcp' (first on {runs} line 1): only the first is classified"
    )
    second_q = json.loads(gold_lines[1])["question_id"]
    assert result.skipped["mcp"][json.loads(good[1])["run_id"]] == (
        f"question excluded by the gold audit: question_id {second_q!r} appears 2 times in the gold battery (lines 2 and 31)"
    )
    assert [(s.runs, s.excluded_runs, s.rejected_runs) for s in result.summaries] == [(1, 1, 1)]


def test_cli_run_stores_every_skipped_run_with_its_status_and_reason(tmp_path: Path) -> None:
    """Runs that are not classified were only printed: the warehouse kept no reason for them (and
    none at all for a repeated run_id or an invalid line). Every skip path is now a row of
    campaign_skipped with its typed status and reason, counted as the stored summary counts it."""
    import duckdb

    from warehouse.campaign import read_campaign_skipped

    good = _sample_lines("runs.jsonl")
    unknown = json.loads(good[2]) | {"run_id": "mcp-x", "question_id": "geo-nope"}
    runs = tmp_path / "runs.jsonl"
    runs.write_text(
        "\n".join([good[0], good[1], json.dumps(unknown), good[1], "{oops", good[30], '{"campaign_id": "mcp"}']) + "\n",
        encoding="utf-8",
    )
    gold_lines = _sample_lines("gold.jsonl")
    broken = json.loads(gold_lines[0]) | {"gold_sql": ["SELECT nope FROM city"]}  # geo-000: mcp-001 and base-001
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join([json.dumps(broken), *gold_lines[1:], "[]"]) + "\n", encoding="utf-8")
    warehouse = tmp_path / "wh.duckdb"
    args = [
        "campaign",
        "run",
        "--runs",
        str(runs),
        "--gold",
        str(gold),
        "--db",
        str(SAMPLE / "geography.sqlite"),
        "--settings",  # its tariffs price the runs: no lookup in litellm's price list
        str(SAMPLE / "settings.json"),
        "--out",
        str(tmp_path / "out"),
        "--warehouse",
        str(warehouse),
        "--no-score",
        "--json",
    ]
    for _ in range(2):  # a rerun replaces the rows, also those of lines naming no campaign
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["classified"] == 1 and payload["stored_skipped"] == 7
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        rows = conn.execute(
            "SELECT campaign_id, run_id, input, status, source_file, line_number FROM campaign_skipped"
            " ORDER BY input DESC, line_number"
        ).fetchall()
        reasons = dict(
            conn.execute("SELECT run_id, reason FROM campaign_skipped WHERE status LIKE '%question%'").fetchall()
        )
        summaries = {
            cid: json.loads(summary)
            for cid, summary in conn.execute("SELECT campaign_id, summary FROM campaigns").fetchall()
        }
        per_campaign = dict(
            conn.execute(
                "SELECT campaign_id, count(*) FILTER (WHERE status IN ('question_excluded', 'unknown_question'))"
                " || '/' || count(*) FILTER (WHERE status IN ('invalid_input', 'duplicate_run'))"
                " FROM campaign_skipped WHERE campaign_id IS NOT NULL GROUP BY campaign_id"
            ).fetchall()
        )
        # the repeat is not a run; baseline-static classified none of its runs: it stores no campaign
        # (its earlier one would be replaced with nothing), only its skipped line with the reason
        assert conn.execute("SELECT count(*) FROM campaign_runs").fetchall() == [(3,)]
        assert set(summaries) == {"mcp"}
        mcp = read_campaign_skipped(conn, "mcp")
        assert mcp["line_number"].to_list() == [1, 3, 4, 7] and "raw" not in mcp.columns
        assert read_campaign_skipped(conn).height == 7
    assert rows == [
        ("mcp", "mcp-001", "run_log", "question_excluded", str(runs), 1),
        ("mcp", "mcp-x", "run_log", "unknown_question", str(runs), 3),
        ("mcp", "mcp-002", "run_log", "duplicate_run", str(runs), 4),
        (None, None, "run_log", "invalid_input", str(runs), 5),
        ("baseline-static", "base-001", "run_log", "question_excluded", str(runs), 6),
        ("mcp", None, "run_log", "invalid_input", str(runs), 7),
        (None, None, "gold", "invalid_input", str(gold), 31),
    ]
    assert reasons["mcp-x"] == "question_id 'geo-nope' is not in the gold battery"
    assert reasons["mcp-001"].startswith("question excluded by the gold audit: gold statement 1 error: ")
    assert reasons["mcp-001"] == reasons["base-001"] == payload["skipped"]["mcp"]["mcp-001"]
    for cid, summary in summaries.items():  # the stored summaries count what the table holds
        assert per_campaign[cid] == f"{summary['excluded_runs']}/{summary['rejected_runs']}", cid
    assert per_campaign == {"mcp": "2/2", "baseline-static": "1/0"}


@pytest.mark.parametrize(
    ("tokens", "problem"),
    [
        pytest.param(
            10**30,
            "`tokens.constrained-int`: Input should be less than or equal to 9007199254740991",
            id="total_beyond_bigint",
        ),
        pytest.param(
            {"prompt": 10**19, "completion": 1},
            "`tokens.dict[str,constrained-int].prompt`: Input should be less than or equal to 9007199254740991",
            id="prompt_beyond_bigint",
        ),
        pytest.param(-5, "`tokens.constrained-int`: Input should be greater than or equal to 0", id="negative"),
    ],
)
def test_cli_run_rejects_a_token_count_the_warehouse_cannot_hold(tmp_path: Path, tokens: object, problem: str) -> None:
    """A run logging 10**30 tokens was classified, then failed the whole store ('Type INT128 ... out of
    range for INT64'): no outcome of the campaign was kept. It is now an invalid_input line."""
    good = _sample_lines("runs.jsonl")[:2]
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join([good[0], json.dumps(json.loads(good[1]) | {"tokens": tokens})]) + "\n", encoding="utf-8")
    result = runner.invoke(
        app,
        [
            "campaign",
            "run",
            "--runs",
            str(runs),
            "--gold",
            str(SAMPLE / "gold.jsonl"),
            "--db",
            str(SAMPLE / "geography.sqlite"),
            "--settings",
            str(SAMPLE / "settings.json"),
            "--out",
            str(tmp_path / "out"),
            "--warehouse",
            str(tmp_path / "wh.duckdb"),
            "--no-score",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert (payload["stored_outcomes"], payload["stored_skipped"]) == (1, 1)
    [rejected] = payload["rejected"]
    assert (rejected["line_number"], rejected["status"], rejected["run_id"]) == (2, "invalid_input", "mcp-002")
    assert rejected["reason"].startswith("invalid record: ") and problem in rejected["reason"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param(b'{"campaign_id": 3}', "field `campaign_id`: Input should be a valid string", id="wrong_type"),
        pytest.param(b"\xff\xfe{", "field `(file)`: Invalid JSON", id="not_utf8_json"),
    ],
)
def test_cli_compare_names_a_summary_file_that_is_not_one(tmp_path: Path, content: bytes, problem: str) -> None:
    """A summary.json that is not a campaign summary ended `stef campaign compare` in a traceback."""
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "summary.json").write_bytes(content)
    result = runner.invoke(app, ["campaign", "compare", "mcp", "baseline-static", "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert f"{tmp_path / 'mcp' / 'summary.json'}: not a campaign summary written by `stef campaign run`" in message
    assert problem in message


def test_a_rejected_line_naming_another_stored_campaign_keeps_that_campaign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One invalid line of the mcp log naming baseline-static made a 0-run summary of baseline-static:
    storing it replaced the 30 outcomes stored from the baseline's own log with none, and its
    summary.json with the empty one. The line is stored (with its campaign); the campaign stays.
    Lines naming no stored campaign are replaced per file however the file is named on a rerun."""
    import duckdb

    lines = _sample_lines("runs.jsonl")
    base = tmp_path / "base.jsonl"
    base.write_text("\n".join(x for x in lines if json.loads(x)["campaign_id"] == "baseline-static") + "\n")
    bad = '{"run_id": "x1", "campaign_id": "baseline-static", "question_id": "geo-000", "statements": "oops"}'
    mcp = tmp_path / "mcp.jsonl"
    mcp.write_text("\n".join([*(x for x in lines if json.loads(x)["campaign_id"] == "mcp"), bad, "not json"]) + "\n")
    warehouse = tmp_path / "wh.duckdb"

    def run(runs: str, out: Path) -> None:
        args = ["campaign", "run", "--runs", runs, "--gold", str(SAMPLE / "gold.jsonl"), "--db"]
        args += [str(SAMPLE / "geography.sqlite"), "--settings", str(SAMPLE / "settings.json"), "--out", str(out)]
        result = runner.invoke(app, [*args, "--warehouse", str(warehouse), "--no-score"])
        assert result.exit_code == 0, result.output

    run(str(base), tmp_path / "o1")
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        before = conn.execute("SELECT campaign_id, count(*) FROM campaign_outcomes GROUP BY ALL ORDER BY 1").fetchall()
        base_summary = conn.execute("SELECT summary FROM campaigns WHERE campaign_id = 'baseline-static'").fetchall()
    assert before == [("baseline-static", 30)]
    run(str(mcp), tmp_path / "o2")
    monkeypatch.chdir(tmp_path)
    run("mcp.jsonl", tmp_path / "o3")  # the same file by a relative name: its rows are replaced, not repeated
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        outcomes = conn.execute(
            "SELECT campaign_id, count(*) FROM campaign_outcomes GROUP BY ALL ORDER BY 1"
        ).fetchall()
        summary = conn.execute("SELECT summary FROM campaigns WHERE campaign_id = 'baseline-static'").fetchall()
        skipped = conn.execute(
            "SELECT campaign_id, run_id, status, source_file, line_number FROM campaign_skipped ORDER BY line_number"
        ).fetchall()
    assert outcomes == [("baseline-static", 30), ("mcp", 30)] and summary == base_summary
    assert not (tmp_path / "o2" / "baseline-static").exists() and not (tmp_path / "o3" / "baseline-static").exists()
    assert skipped == [
        ("baseline-static", "x1", "invalid_input", str(mcp.resolve()), 31),
        (None, None, "invalid_input", str(mcp.resolve()), 32),
    ]


@pytest.mark.parametrize("mistake", ["empty_database", "runs_and_gold_swapped"])
def test_a_campaign_run_that_classifies_nothing_fails_and_keeps_the_stored_campaigns(
    sample_run: dict[str, Any], tmp_path: Path, mistake: str
) -> None:
    """A wrong --db (every gold question excluded) or --runs and --gold swapped (every line
    rejected) exited 0 and replaced the campaigns' stored outcomes with none."""
    import sqlite3

    import duckdb

    warehouse = tmp_path / "wh.duckdb"
    shutil.copyfile(sample_run["warehouse"], warehouse)
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        before = conn.execute("SELECT count(*) FROM campaign_outcomes").fetchall()[0][0]
    assert before == sum(SAMPLE_COUNTS.values())
    db, runs, gold = sample_run["db"], SAMPLE / "runs.jsonl", SAMPLE / "gold.jsonl"
    if mistake == "empty_database":
        db = tmp_path / "empty.sqlite"
        with sqlite3.connect(db) as sqlite:
            sqlite.execute("CREATE TABLE x (a)")
    else:
        runs, gold = gold, runs
    result = runner.invoke(
        app,
        [
            "campaign", "run", "--runs", str(runs), "--gold", str(gold), "--db", str(db),
            "--settings", str(SAMPLE / "settings.json"), "--out", str(tmp_path / "out"), "--warehouse", str(warehouse),
        ],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    why = "no gold question is executable (0 of 30: check --db and --gold)"  # swapped: the gold file is the runs
    last = result.stderr.splitlines()[-1]
    assert last.startswith("error: no run classified: ") and why in last
    assert last.endswith("nothing stored (the warehouse keeps its earlier results of these campaigns)")
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM campaign_outcomes").fetchall()[0][0] == before


def test_a_campaign_that_classifies_nothing_keeps_its_evidence_and_outcomes_beside_one_that_does(
    sample_run: dict[str, Any], tmp_path: Path
) -> None:
    """With every run of ``baseline-static`` naming an unknown question and ``mcp`` classified,
    ``baseline-static``'s stored outcomes were replaced with none and its summary.json rewritten
    with zero runs (exit 0); both are kept now, with a warning."""
    import duckdb

    warehouse = tmp_path / "wh.duckdb"
    shutil.copyfile(sample_run["warehouse"], warehouse)
    out = tmp_path / "out"
    shutil.copytree(sample_run["out"], out, ignore=shutil.ignore_patterns("*.duckdb*"))
    summary = next(out.glob("baseline*/summary.json"))
    before_summary = summary.read_bytes()
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        before = dict(conn.execute("SELECT campaign_id, count(*) FROM campaign_outcomes GROUP BY 1").fetchall())
    runs = tmp_path / "runs.jsonl"
    rows = [json.loads(line) for line in (SAMPLE / "runs.jsonl").read_text().splitlines()]
    for row in rows:
        if row["campaign_id"] != "mcp":
            row["question_id"] = "unknown-" + row["question_id"]
    runs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = runner.invoke(
        app,
        [
            "campaign", "run", "--runs", str(runs), "--gold", str(SAMPLE / "gold.jsonl"), "--db", str(sample_run["db"]),
            "--settings", str(SAMPLE / "settings.json"), "--out", str(out), "--warehouse", str(warehouse), "--no-score",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    other = next(c for c in before if c != "mcp")
    assert f"warning: campaign {other}: no run classified; its earlier evidence and stored outcomes are kept" in (
        " ".join(result.stderr.split())
    )
    assert summary.read_bytes() == before_summary
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        after = dict(conn.execute("SELECT campaign_id, count(*) FROM campaign_outcomes GROUP BY 1").fetchall())
    assert after == before
