"""Hostile campaign input (issue 13): the test database is a sandbox; evidence folders never collide.

Item 5: a DuckDB test database reads no host file and no statement re-opens access; byte and
memory bombs (SQLite and DuckDB) are one statement's error and the campaign goes on. Item 17:
run and campaign ids map to distinct, safe folder names. References: the bundled GeoQuery
SQLite database, a DuckDB database and a host file made here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from stef.campaign.protocol import (
    FOLDER_NAME_MAX_BYTES,
    CampaignRunLog,
    CampaignSettings,
    GoldQuestion,
    audit_gold,
    calibration_report,
    campaign_folder,
    folder_name,
    index_evaluations,
    run_campaign,
)
from stef.campaign.sandbox import DuckDBTestDatabase, ResourceLimits, SQLiteTestDatabase, open_test_database
from stef.models import Evaluation, EvaluationStatus

SAMPLE = Path(__file__).resolve().parent.parent / "flows" / "campaign_data"
DB = SAMPLE / "geography.sqlite"
SECRET = "STEF-HOST-SECRET-4b1d"
"""Content of the host file no statement may read."""

CAPITAL = GoldQuestion(
    question_id="q-capital",
    question="what is the capital of texas",
    gold_sql=["SELECT capital FROM state WHERE state_name = 'texas'"],
)
RIGHT = "SELECT capital FROM state WHERE state_name = 'texas'"
SQLITE_SETTINGS = CampaignSettings(timeout_s=0.5, use_litellm_prices=False)
DUCKDB_SETTINGS = CampaignSettings(timeout_s=0.5, dialect="duckdb", memory_mb=256, use_litellm_prices=False)


def _run(statement: str, run_id: str = "bomb", campaign_id: str = "mcp") -> CampaignRunLog:
    calls = [{"name": "catalog.describeTable", "arguments": {"table": "state"}}]
    return CampaignRunLog(
        run_id=run_id,
        campaign_id=campaign_id,
        question_id="q-capital",
        question="what is the capital of texas",
        statements=[statement],
        tool_calls=calls,
    )


@pytest.fixture(scope="module")
def host_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a secret text file and a CSV next to it."""
    folder = tmp_path_factory.mktemp("host")
    (folder / "secret.txt").write_text(SECRET + "\n", encoding="utf-8")
    (folder / "secret.csv").write_text(f"a,b\n{SECRET},2\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def duck_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import duckdb

    path = tmp_path_factory.mktemp("duck") / "geo.duckdb"
    with duckdb.connect(str(path)) as setup:
        setup.execute(
            "CREATE TABLE state AS SELECT * FROM (VALUES ('texas', 'austin'), ('ohio', 'columbus')) AS t(state_name, capital)"
        )
    return path


@pytest.fixture(scope="module")
def duck(duck_path: Path) -> Any:
    database = open_test_database(duck_path, DUCKDB_SETTINGS.resource_limits())
    assert isinstance(database, DuckDBTestDatabase)
    yield database
    database.close()


@pytest.fixture(scope="module")
def lite() -> Any:
    database = SQLiteTestDatabase(DB, SQLITE_SETTINGS.resource_limits())
    yield database
    database.close()


def _files(folder: Path) -> set[Path]:
    return set(folder.rglob("*"))


# --------------------------------------------------------------------------- item 5: DuckDB reads no host file


@pytest.mark.parametrize(
    "template",
    [
        pytest.param("SELECT content FROM read_text('{dir}/secret.txt')", id="read_text"),
        pytest.param("SELECT content FROM read_blob('{dir}/secret.txt')", id="read_blob"),
        pytest.param("SELECT * FROM read_csv('{dir}/secret.csv')", id="read_csv"),
        pytest.param("SELECT * FROM read_csv_auto('{dir}/secret.csv')", id="read_csv_auto"),
        pytest.param("SELECT * FROM read_json_auto('{dir}/secret.txt')", id="read_json"),
        pytest.param("SELECT * FROM read_parquet('{dir}/secret.txt')", id="read_parquet"),
        pytest.param("SELECT * FROM parquet_scan('{dir}/secret.txt')", id="parquet_scan"),
        pytest.param("SELECT * FROM query_table('{dir}/secret.csv')", id="query_table"),
        pytest.param("SELECT * FROM query('SELECT content FROM read_text(''{dir}/secret.txt'')')", id="query_wrapper"),
        pytest.param(
            "SELECT (SELECT count(*) FROM read_text('{dir}/secret.txt')) AS n FROM state", id="existence_oracle"
        ),
        pytest.param(
            "SELECT capital FROM state WHERE EXISTS (SELECT 1 FROM read_blob('{dir}/secret.txt'))", id="exists_oracle"
        ),
    ],
)
def test_duckdb_host_file_read_is_the_runs_execution_error(
    duck: DuckDBTestDatabase, host_dir: Path, template: str
) -> None:
    statement = template.format(dir=host_dir)
    result = run_campaign([_run(statement), _run(RIGHT, "next")], [CAPITAL], duck, DUCKDB_SETTINGS)
    hostile, following = result.results
    assert hostile.outcome == "execution_error"
    assert hostile.statements[0].execution_status == "error"
    assert (
        "PermissionException" in (hostile.statements[0].message or "") and "disabled by configuration" in hostile.reason
    )
    assert SECRET not in hostile.model_dump_json()
    assert following.outcome == "success"


@pytest.mark.parametrize(
    ("template", "created"),
    [
        pytest.param("SELECT * FROM read_text('{dir}/secret.txt')", None, id="read_text"),
        pytest.param("SELECT * FROM read_blob('{dir}/secret.txt')", None, id="read_blob"),
        pytest.param("SELECT * FROM read_csv('{dir}/secret.csv')", None, id="read_csv"),
        pytest.param("SELECT * FROM glob('{dir}/*')", None, id="glob"),
        pytest.param("SELECT * FROM '{dir}/secret.csv'", None, id="replacement_scan"),
        pytest.param("COPY state TO '{dir}/copied.csv'", "copied.csv", id="copy_to"),
        pytest.param(
            "COPY (SELECT 1) TO '{dir}/copied.parquet' (FORMAT parquet)", "copied.parquet", id="copy_query_to"
        ),
        pytest.param("EXPORT DATABASE '{dir}/exported'", "exported", id="export_database"),
        pytest.param("ATTACH '{dir}/attached.duckdb' AS other", "attached.duckdb", id="attach_new"),
        pytest.param("ATTACH '{dir}/secret.csv' AS other", None, id="attach_host_file"),
        pytest.param("INSTALL httpfs", None, id="install"),
        pytest.param("LOAD httpfs", None, id="load"),
        pytest.param("SET enable_external_access = true", None, id="set_external_access"),
        pytest.param("RESET enable_external_access", None, id="reset_external_access"),
        pytest.param("SET lock_configuration = false", None, id="unlock_configuration"),
        pytest.param("SET memory_limit = '64GB'", None, id="set_memory_limit"),
        pytest.param("SET temp_directory = '{dir}/spill'", None, id="set_temp_directory"),
        pytest.param("SET autoload_known_extensions = true", None, id="set_autoload"),
        pytest.param("PRAGMA threads = 8", None, id="pragma_threads"),
    ],
)
def test_duckdb_engine_refuses_host_access_and_setting_changes(
    duck: DuckDBTestDatabase, host_dir: Path, template: str, created: str | None
) -> None:
    before = _files(host_dir)
    result = duck.execute(
        template.format(dir=host_dir), 1.0, 10
    )  # straight to the engine, bypassing the SELECT-only check
    assert result.status == "error" and result.rows == ()
    assert SECRET not in (result.message or "")
    assert _files(host_dir) == before
    if created is not None:
        assert not (host_dir / created).exists()
    settings = duck.execute(
        "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', 'lock_configuration', 'threads') ORDER BY name",
        1.0,
        10,
    )
    assert settings.rows == (("enable_external_access", "false"), ("lock_configuration", "true"), ("threads", "1"))


def test_duckdb_gold_reading_a_host_file_is_excluded_with_the_reason(duck: DuckDBTestDatabase, host_dir: Path) -> None:
    gold = GoldQuestion(
        question_id="q-leak", question="?", gold_sql=[f"SELECT content FROM read_text('{host_dir}/secret.txt')"]
    )
    audit = audit_gold([gold, CAPITAL], duck, DUCKDB_SETTINGS)
    leak, capital = audit.items
    assert (
        not leak.ok
        and "gold statement 1 error: PermissionException" in (leak.reason or "")
        and SECRET not in (leak.reason or "")
    )
    assert capital.ok


@pytest.mark.parametrize(
    ("statement", "status", "message"),
    [
        pytest.param(
            "SELECT length(repeat('x', 1000000000)) AS n FROM state", "error", "OutOfMemoryException", id="repeat_1e9"
        ),
        pytest.param(
            "SELECT repeat('x', 10000000) AS s FROM range(100)", "error", "OutOfMemoryException", id="many_10mb_strings"
        ),
        pytest.param(
            "SELECT string_agg(repeat('x', 1000000), ',') AS s FROM range(2000)",
            "error",
            "OutOfMemoryException",
            id="string_agg",
        ),
        pytest.param(
            "SELECT list(range) AS l FROM range(1000000000)", "error", "OutOfMemoryException", id="list_of_1e9"
        ),
        pytest.param(
            "SELECT count(*) AS n FROM range(1000000000000)",
            "timeout",
            "0.5 s statement timeout",
            id="count_range_1e12",
        ),
        pytest.param("SELECT * FROM range(1000000000000)", "row_cap", "10000-row cap", id="rows_range_1e12"),
    ],
)
def test_duckdb_bomb_is_one_statements_error(
    duck: DuckDBTestDatabase, statement: str, status: str, message: str
) -> None:
    result = run_campaign([_run(statement), _run(RIGHT, "next")], [CAPITAL], duck, DUCKDB_SETTINGS)
    bomb, following = result.results
    assert bomb.outcome == "execution_error"
    assert bomb.statements[0].execution_status == status and message in (bomb.statements[0].message or "")
    assert following.outcome == "success"


@pytest.mark.parametrize(
    ("template", "created"),
    [
        pytest.param("ATTACH '{dir}/attached.sqlite' AS other", "attached.sqlite", id="attach"),
        pytest.param("VACUUM INTO '{dir}/copy.sqlite'", "copy.sqlite", id="vacuum_into"),
        pytest.param("SELECT load_extension('{dir}/secret.txt')", None, id="load_extension"),
        pytest.param("SELECT readfile('{dir}/secret.txt')", None, id="readfile"),
        pytest.param("PRAGMA temp_store_directory = '{dir}'", None, id="pragma_temp_directory"),
    ],
)
def test_sqlite_engine_refuses_host_access(
    lite: SQLiteTestDatabase, host_dir: Path, template: str, created: str | None
) -> None:
    before = _files(host_dir)
    result = lite.execute(
        template.format(dir=host_dir), 1.0, 10
    )  # straight to the engine, bypassing the SELECT-only check
    assert result.status == "error" and result.rows == () and SECRET not in (result.message or "")
    assert _files(host_dir) == before
    if created is not None:
        assert not (host_dir / created).exists()


# --------------------------------------------------------------------------- item 5: SQLite bombs


@pytest.mark.parametrize(
    ("statement", "status", "message"),
    [
        pytest.param("SELECT zeroblob(900000000) FROM city", "error", "string or blob too big", id="zeroblob_9e8"),
        pytest.param("SELECT randomblob(1e9)", "error", "string or blob too big", id="randomblob_1e9"),
        pytest.param(
            "SELECT length(replace(hex(zeroblob(8000000)), '0', 'xx'))",
            "error",
            "string or blob too big",
            id="replace_hex_zeroblob",
        ),
        pytest.param(
            "SELECT length(group_concat(hex(zeroblob(100000)))) FROM city",
            "error",
            "string or blob too big",
            id="group_concat",
        ),
        pytest.param(
            "WITH RECURSIVE r(n, s) AS (SELECT 1, 'x' UNION ALL SELECT n + 1, s || s FROM r WHERE n < 40) SELECT max(length(s)) FROM r",
            "error",
            "string or blob too big",
            id="recursive_cte_doubling",
        ),
        pytest.param("SELECT printf('%.*c', 1e9, 'x')", "timeout", "worker process was killed", id="printf_width_1e9"),
        pytest.param(
            "SELECT instr(replace(hex(zeroblob(4000000)), '0', 'a'), replace(hex(zeroblob(2000000)), '0', 'a') || 'b')",
            "timeout",
            "worker process was killed",
            id="quadratic_instr",
        ),
        pytest.param(
            "SELECT hex(zeroblob(4000000)) FROM city", "byte_cap", "67108864-byte result budget", id="386_rows_of_8mb"
        ),
        pytest.param(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
            "timeout",
            "0.5 s statement timeout",
            id="endless_cte",
        ),
    ],
)
def test_sqlite_bomb_is_one_statements_error(
    lite: SQLiteTestDatabase, statement: str, status: str, message: str
) -> None:
    result = run_campaign([_run(statement), _run(RIGHT, "next")], [CAPITAL], lite, SQLITE_SETTINGS)
    bomb, following = result.results
    assert bomb.outcome == "execution_error"
    assert bomb.statements[0].execution_status == status and message in (bomb.statements[0].message or "")
    assert following.outcome == "success"


def test_sqlite_memory_budget_is_the_statements_error() -> None:
    database = SQLiteTestDatabase(DB, ResourceLimits(memory_bytes=64 * 2**20, max_result_bytes=2**31))
    try:
        bomb = database.execute("SELECT hex(zeroblob(4000000)) FROM city", 5.0, 1000)  # 386 rows of 8 MB each
        after = database.execute("SELECT count(*) FROM city", 5.0, 10)
    finally:
        database.close()
    assert (bomb.status, bomb.message) == (
        "error",
        "MemoryError: the statement needs more than the 64 MiB memory budget",
    )
    assert (after.status, after.rows) == ("ok", ((386,),))


def test_a_worker_that_died_between_statements_is_replaced_before_the_next_one() -> None:
    database = SQLiteTestDatabase(DB)
    try:
        process = database._process  # the worker (private): killed from outside, as the kernel's OOM killer would
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        after = database.execute("SELECT count(*) FROM city", 5.0, 10)
        replaced = database._process
    finally:
        database.close()
    assert (after.status, after.rows) == ("ok", ((386,),))  # the statement did not cause the death: it is not its error
    assert replaced is not None and replaced.pid != process.pid


def test_a_worker_that_dies_during_a_statement_is_that_statements_error() -> None:
    database = SQLiteTestDatabase(DB)
    try:
        process = database._process
        assert process is not None
        killer = threading.Timer(0.3, lambda: os.kill(process.pid, signal.SIGKILL))
        killer.start()
        lost = database.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n", 30.0, 10
        )
        killer.join()
        after = database.execute("SELECT count(*) FROM city", 5.0, 10)
    finally:
        database.close()
    assert lost.status == "error" and f"exit code {-signal.SIGKILL}" in (lost.message or "")
    assert (after.status, after.rows) == ("ok", ((386,),))


def test_worker_does_not_rerun_the_callers_script(tmp_path: Path) -> None:
    """A script without ``if __name__ == "__main__"`` opens a database once (the worker never imports ``__main__``)."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from stef.campaign.sandbox import open_test_database\n"
        f"print('script body ran', flush=True)\ndb = open_test_database({str(DB)!r})\n"
        "print(db.execute('SELECT count(*) FROM state', 5.0, 10).rows)\ndb.close()\n",
        encoding="utf-8",
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["script body ran", "((51,),)"]


# --------------------------------------------------------------------------- item 17: evidence folders


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
    runs = [_run(RIGHT, run_id, campaign_id) for campaign_id in campaigns for run_id in run_ids]
    result = run_campaign(runs, [CAPITAL], lite, SQLITE_SETTINGS, out_dir=out)
    assert len(result.results) == len(runs) and {r.outcome for r in result.results} == {"success"}
    assert _files(tmp_path) - _files(out) == {tmp_path / "deep", out}  # nothing written outside OUT
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


def test_same_run_id_in_two_campaigns_keeps_its_own_score(lite: SQLiteTestDatabase, tmp_path: Path) -> None:
    from warehouse import connect
    from warehouse.campaign import read_campaign_outcomes, store_campaign

    runs = [_run(RIGHT, "r1", "mcp"), _run("SELECT capital FROM state WHERE state_name = 'ohio'", "r1", "mcp-2")]
    result = run_campaign(runs, [CAPITAL], lite, SQLITE_SETTINGS)
    assert [(r.campaign_id, r.outcome) for r in result.results] == [("mcp", "success"), ("mcp-2", "execution_error")]
    evaluations = [
        Evaluation(run_id="r1", status=EvaluationStatus.EVALUATED, score=90.0, agent_id="campaign:mcp"),
        Evaluation(run_id="r1", status=EvaluationStatus.EVALUATED, score=10.0, agent_id="campaign:mcp-2"),
    ]
    report = calibration_report(result.results, evaluations)
    assert report.mean_score_by_outcome == {"execution_error": 10.0, "success": 90.0} and report.auroc == 1.0
    with connect(str(tmp_path / "wh.duckdb")) as conn:
        store_campaign(
            conn,
            result.runs,
            result.results,
            result.summaries,
            result.audit,
            SQLITE_SETTINGS,
            index_evaluations(evaluations),
        )
        frame = read_campaign_outcomes(conn)
    assert sorted(zip(frame["campaign_id"], frame["run_id"], frame["stef_score"], strict=True)) == [
        ("mcp", "r1", 90.0),
        ("mcp-2", "r1", 10.0),
    ]


def test_after_memory_bombs_a_fresh_worker_runs_the_next_statements(duck: DuckDBTestDatabase) -> None:
    """A statement that ran before the bombs runs after them too: no later outcome depends on
    what an earlier statement left in the worker."""
    honest = "SELECT repeat('x', 20000) FROM range(1000)"
    assert duck.execute(honest, 10.0, 5000).status == "ok"
    for bomb in (
        "SELECT list(range) FROM range(300000000)",
        "SELECT string_agg(repeat('x', 100000), ',') FROM range(200000)",
    ):
        assert duck.execute(bomb, 10.0, 5000).status != "ok"
    again = duck.execute(honest, 10.0, 5000)
    assert again.status == "ok", again.message
