"""Fixtures of the tests in tests/stef/monitor: the NL2SQL-BUGs score pools."""

from __future__ import annotations

import pytest

from tests.support.monitoring_support import bugs_pools


@pytest.fixture(scope="module")
def pools() -> dict[bool, tuple[tuple[str, float | None, str | None, str | None], ...]]:
    return bugs_pools()
