"""Calibration (DESIGN.md §7): Φ against the campaign outcome, computed by hand; a ``run_id`` shared
by two campaigns keeps its own score (issue 13).

Reference: Python's ``sqlite3`` on the bundled GeoQuery database (flows/campaign_data/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stef.campaign.calibration import calibration_report, index_evaluations
from stef.campaign.classify import classify_run
from stef.campaign.models import CanonicalCatalog
from stef.campaign.run import run_campaign
from stef.campaign.sandbox import SQLiteTestDatabase
from stef.models import Evaluation, EvaluationStatus
from tests.stef.campaign.support import (
    CAPITAL,
    RIGHT,
    RIGHT_CAPITAL,
    SETTINGS,
    SQLITE_SETTINGS,
    run_log,
    statement_run,
)


def test_calibration_report_by_hand(db: SQLiteTestDatabase, audit: Any, catalog: CanonicalCatalog) -> None:
    runs = [
        (run_log([RIGHT_CAPITAL]).model_copy(update={"run_id": "a"}), 95.0),
        (run_log(["SELECT capital FROM state WHERE state_name = 'ohio'"]).model_copy(update={"run_id": "b"}), 80.0),
        (run_log(["SELEC x"]).model_copy(update={"run_id": "c"}), None),
        (run_log([RIGHT_CAPITAL]).model_copy(update={"run_id": "d"}), 60.0),
    ]
    results = [classify_run(r, audit, db, catalog, SETTINGS) for r, _ in runs]
    evaluations = [
        Evaluation(run_id=r.run_id, status=EvaluationStatus.EVALUATED, score=s)
        if s is not None
        else Evaluation(run_id=r.run_id, status=EvaluationStatus.PARSE_ERROR)
        for r, s in runs
    ]
    report = calibration_report(results, evaluations)
    # positives a (95), d (60); negatives b (80), c (unscored = 0): pairs won 95>80, 95>0, 60>0, lost 60<80 -> 3/4
    assert (report.runs, report.scored, report.positives, report.auroc) == (4, 3, 2, 0.75)
    by_threshold = {c.threshold: (c.tp, c.fp, c.fn, c.tn) for c in report.confusion}
    assert by_threshold == {50.0: (2, 1, 0, 1), 75.0: (1, 1, 1, 1), 90.0: (1, 0, 1, 2)}
    assert report.mean_score_by_outcome == {"syntax_error": None, "execution_error": 80.0, "success": 77.5}


def test_same_run_id_in_two_campaigns_keeps_its_own_score(lite: SQLiteTestDatabase, tmp_path: Path) -> None:
    from warehouse import connect
    from warehouse.campaign import read_campaign_outcomes, store_campaign

    runs = [
        statement_run(RIGHT, "r1", "mcp"),
        statement_run("SELECT capital FROM state WHERE state_name = 'ohio'", "r1", "mcp-2"),
    ]
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
