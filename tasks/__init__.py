"""Prefect tasks: thin wrappers over :mod:`stef` and :mod:`warehouse` (DESIGN.md §5).

Tasks take paths and settings, never open connections; they open DuckDB inside. Only the I/O
tasks (reading logs, writing the warehouse) retry, and only on I/O errors. No task caches: the
inputs are large and the writing tasks must run every time.
"""

from __future__ import annotations

import os

# Defaults that must be in place before Prefect is imported (the submodules below import it).
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from tasks.artifacts import publish_summary_artifact, summary_table
from tasks.evaluate import evaluate_batch
from tasks.log_checks import LogQualityError, bad_share_error, quarantine_command, validate_logs
from tasks.logs import load_logs
from tasks.store import (
    check_warehouse,
    compute_metrics,
    learn_observed_catalogs,
    mark_done,
    quarantine_evaluations,
    reject_run_ids_of_other_days,
    run_ids_of_other_days,
    store_rejected,
    store_results,
)

__all__ = [
    "LogQualityError",
    "bad_share_error",
    "check_warehouse",
    "compute_metrics",
    "evaluate_batch",
    "learn_observed_catalogs",
    "load_logs",
    "mark_done",
    "publish_summary_artifact",
    "quarantine_command",
    "quarantine_evaluations",
    "reject_run_ids_of_other_days",
    "run_ids_of_other_days",
    "store_rejected",
    "store_results",
    "summary_table",
    "validate_logs",
]
