"""Fixtures of the tests in tests/warehouse: an empty in-memory warehouse, the rollout warehouse (agent ``bird``
v1 → v2.0, agent ``solo``) of the monitoring tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from stef.models import FilterStatus, Verdict
from tests.support.monitoring_support import answers, store_answers
from tests.warehouse.monitoring_helpers import day
from warehouse import connect


@pytest.fixture
def conn() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = connect(":memory:")
    yield connection
    connection.close()


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
