"""Tests of tasks/_runtime.py: the I/O tasks retry on I/O errors only."""

from __future__ import annotations

import pytest
from prefect.states import Failed

from stef.errors import InputError
from tasks._runtime import retry_on_io_error
from warehouse import WarehouseLockedError


@pytest.mark.parametrize(
    ("error", "retry"),
    [
        pytest.param(OSError("disk hiccup"), True, id="os_error"),
        pytest.param(WarehouseLockedError("locked"), False, id="locked_warehouse_waits_in_connect"),
        pytest.param(InputError("no folder"), False, id="missing_input"),
        pytest.param(ValueError("bug"), False, id="programming_error"),
    ],
)
def test_io_tasks_retry_only_on_io_errors(error: Exception, retry: bool) -> None:
    assert retry_on_io_error(None, None, Failed(data=error)) is retry
