"""The STEF warehouse: one DuckDB file with versioned schema and typed, idempotent writes.

Public API::

    conn = connect(path)                       # resolve path, lock check, migrate
    summary = store_day(conn, day, lines, evaluations)   # replace one day (one transaction)
    metrics = compute_daily_metrics(conn, day)           # replace that day's metric rows
    read_daily_metrics(conn, start, end)                 # polars DataFrame
    day_is_done(conn, day, evaluator_version)

Imports only :mod:`stef` models (never Prefect); DESIGN.md §4 describes the tables.
"""

from __future__ import annotations

from warehouse.connection import DEFAULT_PATH, ENV_VAR, IN_MEMORY, connect, existing_warehouse, resolve_path
from warehouse.errors import WarehouseError, WarehouseLockedError, WarehouseReadOnlyError
from warehouse.metrics import compute_daily_metrics, day_is_done, read_daily_metrics
from warehouse.migrate import apply_migrations, available_migrations, current_version
from warehouse.store import StoreSummary, line_identity, store_day, stored_elsewhere

__all__ = [
    "DEFAULT_PATH",
    "ENV_VAR",
    "IN_MEMORY",
    "StoreSummary",
    "WarehouseError",
    "WarehouseLockedError",
    "WarehouseReadOnlyError",
    "apply_migrations",
    "available_migrations",
    "compute_daily_metrics",
    "connect",
    "current_version",
    "day_is_done",
    "existing_warehouse",
    "line_identity",
    "read_daily_metrics",
    "resolve_path",
    "store_day",
    "stored_elsewhere",
]
