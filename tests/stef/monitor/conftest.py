"""Fixtures of the tests in tests/stef/monitor: the NL2SQL-BUGs score pools."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.monitoring_support import bugs_pools


@pytest.fixture(scope="module")
def pools() -> dict[bool, tuple[tuple[Any, ...], ...]]:
    return bugs_pools()
