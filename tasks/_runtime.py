"""Shared task plumbing: a logger that works with and without a Prefect run, the retry rule, the I/O task decorator."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext, TaskRunContext

from warehouse import WarehouseLockedError

FALLBACK_LOGGER = "stef.tasks"
"""Logger used when a task body runs outside a Prefect run (``task.fn(...)``)."""


def run_logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """Prefect's run logger inside a flow or task run, else the ``stef.tasks`` logger."""
    if TaskRunContext.get() is not None or FlowRunContext.get() is not None:
        return get_run_logger()
    return logging.getLogger(FALLBACK_LOGGER)


def retry_on_io_error(task: Any, task_run: Any, state: Any) -> bool:
    """``retry_condition_fn`` of the I/O tasks: retry on ``OSError`` only.

    Prefect passes the failed state whose ``data`` is the raised exception; data errors
    (a missing log folder, a broken contract) fail at once instead of being retried. A locked
    warehouse is not retried either: :func:`warehouse.connect` already waits for the lock
    (``$STEF_LOCK_TIMEOUT_S``), so the wait its error reports is the whole wait of the run.
    """
    return isinstance(state.data, OSError) and not isinstance(state.data, WarehouseLockedError)


def io_task(name: str, *, retries: int, retry_delay_seconds: float) -> Callable[[Callable[..., Any]], Any]:
    """``@task`` of a task that does I/O: retried on ``OSError`` (:func:`retry_on_io_error`), never cached.

    Args:
        name: the task name (shown in the Prefect UI).
        retries: how many times a failed run is retried.
        retry_delay_seconds: the wait before each retry.

    Returns:
        Prefect's ``task(...)`` decorator with ``cache_policy=NO_CACHE`` and ``persist_result=False``.
    """
    return task(
        name=name,
        retries=retries,
        retry_delay_seconds=retry_delay_seconds,
        retry_condition_fn=retry_on_io_error,
        cache_policy=NO_CACHE,
        persist_result=False,
    )
