"""Tests of the review tasks (tasks/review.py) on a warehouse built with the store API."""

from __future__ import annotations

import csv
from datetime import timedelta
from pathlib import Path

from stef.models import EVALUATOR_VERSION
from tasks.review import write_sample
from tests.support.monitoring_support import _evaluation, _line, answers
from tests.tasks.helpers import MONDAY
from warehouse import connect, store_day


def test_a_sample_of_an_app_draws_from_the_newest_version_that_scored_that_app(tmp_path: Path) -> None:
    """Monday: 3 answers of app crm and 3 of shop; Tuesday: 2 of shop only, under a newer version
    (a deployment calibrator). The sample of crm drew from the newest version of every app, which
    scored no crm answer: "no stored answers match the filters"."""
    warehouse = tmp_path / "w.duckdb"
    newer = EVALUATOR_VERSION + "+calib=0123456789ab"
    with connect(warehouse) as conn:
        monday = answers("mon", "bird", "v1", [70.0, 90.0] * 3)
        store_day(
            conn,
            MONDAY,
            [_line(number, answer, MONDAY) for number, answer in enumerate(monday, start=1)],
            [_evaluation(a).model_copy(update={"app_id": "crm" if i % 2 else "shop"}) for i, a in enumerate(monday)],
        )
        tuesday, later = MONDAY + timedelta(days=1), answers("tue", "bird", "v1", [40.0, 80.0])
        store_day(
            conn,
            tuesday,
            [_line(number, answer, tuesday) for number, answer in enumerate(later, start=1)],
            [_evaluation(a).model_copy(update={"app_id": "shop", "evaluator_version": newer}) for a in later],
            evaluator_version=newer,
        )
        crm = conn.execute("SELECT run_id FROM evaluations WHERE app_id = 'crm' ORDER BY run_id").fetchall()
    result = write_sample(str(warehouse), tmp_path / "crm.csv", 10, "random", app_id="crm")
    assert (result.rows, result.candidates, result.evaluator_version) == (3, 3, EVALUATOR_VERSION)
    with (tmp_path / "crm.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["run_id"], row["app_id"]) for row in rows] == [(run_id, "crm") for (run_id,) in crm]
    shop = write_sample(str(warehouse), tmp_path / "shop.csv", 10, "random", app_id="shop")
    assert (shop.rows, shop.evaluator_version) == (2, newer)  # the newest version that scored shop
