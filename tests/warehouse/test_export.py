"""Tests of warehouse/export.py: a window of evaluations as CSV, Parquet and JSON lines, read back with DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from stef.models import EVALUATOR_VERSION
from tests.warehouse.monitoring_helpers import day
from warehouse import WarehouseError, connect
from warehouse.export import EXPORT_COLUMNS, export_evaluations

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
