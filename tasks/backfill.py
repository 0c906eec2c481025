"""Backfill helpers: which days of a range are already done, which have logs at all."""

from __future__ import annotations

import stat
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from stef.errors import InputError
from tasks._runtime import io_task, run_logger
from tasks.logs import url_filesystem
from warehouse import connect
from warehouse.monitoring import done_days

MAX_BACKFILL_DAYS = 3660
"""Longest range one backfill accepts (about ten years): a typo in a year should not start a
decade of work without a second look."""


def days_in_range(start: date, end: date) -> list[date]:
    """Every day from ``start`` to ``end``, both included.

    Raises:
        InputError: ``end`` is before ``start``, or the range is longer than :data:`MAX_BACKFILL_DAYS`.

    >>> [d.isoformat() for d in days_in_range(date(2026, 11, 30), date(2026, 12, 2))]
    ['2026-11-30', '2026-12-01', '2026-12-02']
    """
    if end < start:
        raise InputError(f"backfill end {end.isoformat()} is before its start {start.isoformat()}")
    count = (end - start).days + 1
    if count > MAX_BACKFILL_DAYS:
        raise InputError(f"backfill of {count} days is longer than the limit of {MAX_BACKFILL_DAYS}; split the range")
    return [start + timedelta(days=offset) for offset in range(count)]


def day_has_logs(logs_root: str, log_date: date) -> bool:
    """Whether ``<logs_root>/<YYYY-MM-DD>/`` exists and holds a ``*.jsonl`` file with a line in it: a
    byte other than whitespace (anywhere in a local file; in the first 64 KiB of a remote one). A
    file that cannot be read counts as holding one, and so does anything but a regular local file:
    reading the day then reports it. A day of empty files has no logs yet: stored, it would count
    as done and a later backfill would skip its real logs."""
    day = log_date.isoformat()
    if "://" in logs_root:
        fs, root = url_filesystem(logs_root)
        remote = f"{root.rstrip('/')}/{day}"
        return bool(fs.isdir(remote)) and any(_remote_holds_a_line(fs, path) for path in fs.glob(f"{remote}/*.jsonl"))
    folder = Path(logs_root).expanduser() / day
    return folder.is_dir() and any(_holds_a_line(path) for path in folder.glob("*.jsonl"))


_LINE_SCAN_BYTES = 1 << 16


def _holds_a_line(path: Path) -> bool:
    """Whether the local file ``path`` holds a byte other than ASCII whitespace. Only a regular file
    is opened (opening a named pipe would wait for a writer)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return True
        with path.open("rb") as handle:
            while chunk := handle.read(_LINE_SCAN_BYTES):
                if chunk.strip():
                    return True
    except OSError:
        return True
    return False


def _remote_holds_a_line(fs: Any, path: str) -> bool:
    """Whether the remote file ``path`` has a byte other than whitespace in its first 64 KiB."""
    try:
        with fs.open(path, "rb") as handle:
            return bool(handle.read(_LINE_SCAN_BYTES).strip())
    except (OSError, ValueError):
        return True


@io_task("plan-backfill", retries=2, retry_delay_seconds=5)
def plan_backfill(warehouse_path: str | None, start: date, end: date, evaluator_version: str) -> list[date]:
    """The days in ``start … end`` already done with ``evaluator_version`` (stored, metrics computed).

    Args:
        warehouse_path: DuckDB file (created and migrated when missing).
        start: first day.
        end: last day.
        evaluator_version: the version the backfill would store.

    Returns:
        The done days, sorted.

    Raises:
        WarehouseLockedError: another process writes the file (retried twice).
    """
    conn = connect(warehouse_path, on_wait=run_logger().warning)
    try:
        return sorted(done_days(conn, start, end, evaluator_version))
    finally:
        conn.close()
