"""The rollout warehouse of the monitoring tests (agent ``bird`` v1 → v2.0, agent ``solo``), a pytest plugin
(``pytest_plugins`` in tests/conftest.py) shared by tests/warehouse and tests/tasks."""

from __future__ import annotations

import shutil
from datetime import date, timedelta
from pathlib import Path

import pytest

from stef.models import FilterStatus, Verdict
from tests.support.monitoring_support import answers, store_answers
from warehouse import connect

D1 = date(2026, 11, 20)
"""Day 0 of the rollout."""


def day(offset: int) -> date:
    """Day ``offset`` of the rollout."""
    return D1 + timedelta(days=offset)


@pytest.fixture(scope="module")
def rollout_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse file: agent ``bird`` with v1 on days 0–6 (scores 70/90) and v2 from day 3 (scores 60/80,
    one parse error per day), agent ``solo`` with one version on day 6."""
    path = tmp_path_factory.mktemp("rollout") / "wh.duckdb"
    connection = connect(path)
    try:
        for offset in range(7):
            batch = answers(f"v1-{offset}", "bird", "v1", [70.0, 90.0] * 20)
            if offset >= 3:
                batch += answers(
                    f"v2-{offset}",
                    "bird",
                    "v2.0",
                    [60.0, 80.0] * 20 + [None],
                    verdict=Verdict.POTENTIALLY_INCORRECT,
                    filter_status=FilterStatus.NOT_APPLIED,
                )
            if offset == 6:
                batch += answers("solo", "solo", "s1", [50.0] * 5)
            store_answers(connection, day(offset), batch)
    finally:
        connection.close()
    return path


@pytest.fixture
def rollout(rollout_template: Path, tmp_path: Path) -> Path:
    """A private copy of the rollout warehouse (tests may write to it)."""
    path = tmp_path / "wh.duckdb"
    shutil.copyfile(rollout_template, path)
    return path
