"""Backfill helpers: which days of a range are already done, which have logs at all."""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from stef.display import one_line
from stef.errors import InputError
from stef.logs import unread_log_like_files, unread_note
from tasks._runtime import io_task, run_logger
from tasks.logs import url_filesystem
from warehouse import connect
from warehouse.monitoring import done_days, fallback_counts, judge_spend_since

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


def day_folder_problem(logs_root: str, log_date: date) -> str | None:
    """Why ``<logs_root>/<YYYY-MM-DD>`` cannot be a day folder when it exists but is no folder
    (``"… is a file, not a folder"``), else ``None`` (also for a missing path and a URL).

    >>> day_folder_problem("/nonexistent-stef-root", date(2026, 11, 24)) is None
    True
    """
    if "://" in logs_root:
        return None
    path = Path(logs_root).expanduser() / log_date.isoformat()
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return None
    return f"{path} is a file, not a folder" if stat.S_ISREG(mode) else f"{path} is not a folder"


def logs_root_note(logs_root: str) -> str | None:
    """What is wrong with a local ``--logs-root`` that holds no day folder as a message clause: it is
    a file, or a day folder itself (it holds ``*.jsonl`` files); else ``None`` (also for a URL).

    >>> logs_root_note("/nonexistent-stef-root") is None
    True
    """
    if "://" in logs_root:
        return None
    root = Path(logs_root).expanduser()
    if root.is_file():
        return f"--logs-root {one_line(logs_root)} is a file, not the folder of the day folders"
    if root.is_dir() and any(root.glob("*.jsonl")):
        parent = one_line(str(root.parent))
        return (
            f"{one_line(logs_root)} holds *.jsonl files itself, so it is a day folder: --logs-root is the "
            f"folder of the day folders, here probably --logs-root {parent}"
        )
    return None


def unread_files_note(logs_root: str, log_date: date) -> str | None:
    """The files of a local day folder that look like logs but are not read (``B.JSONL``,
    ``c.json``, ``d.jsonl.gz``: :func:`stef.logs.unread_log_like_files`) as a message clause, else
    ``None`` (also for a URL).

    >>> unread_files_note("/nonexistent-stef-root", date(2026, 11, 24)) is None
    True
    """
    if "://" in logs_root:
        return None
    names = unread_log_like_files(Path(logs_root).expanduser() / log_date.isoformat())
    return unread_note(names) if names else None


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


@dataclass(frozen=True, slots=True)
class BackfillPlan:
    """What the warehouse holds of a backfill's range.

    Attributes:
        done: the days already done with the evaluator version (stored, metrics computed).
        fallbacks: per done day, how many of its records fell back to the symbolic verdict
            (only days with at least one; always empty for the symbolic judge).
    """

    done: list[date] = field(default_factory=list)
    fallbacks: dict[date, int] = field(default_factory=dict)


@io_task("plan-backfill", retries=2, retry_delay_seconds=5)
def plan_backfill(warehouse_path: str | None, start: date, end: date, evaluator_version: str) -> BackfillPlan:
    """The days in ``start … end`` already done with ``evaluator_version``, and their fallbacks.

    Args:
        warehouse_path: DuckDB file (created and migrated when missing).
        start: first day.
        end: last day.
        evaluator_version: the version the backfill would store.

    Returns:
        A :class:`BackfillPlan`: the done days sorted, and how many records of each fell back.

    Raises:
        WarehouseLockedError: another process writes the file (retried twice).
    """
    conn = connect(warehouse_path, on_wait=run_logger().warning)
    try:
        done = sorted(done_days(conn, start, end, evaluator_version))
        counts = fallback_counts(conn, start, end, evaluator_version)
        return BackfillPlan(done, {day: counts[day] for day in done if day in counts})
    finally:
        conn.close()


@io_task("backfill-day-spend", retries=2, retry_delay_seconds=5)
def day_spend(warehouse_path: str, since: datetime, log_date: date, evaluator_version: str) -> float:
    """What the model-judged run of ``log_date`` started at ``since`` spent (USD), read back from
    the warehouse (:func:`warehouse.monitoring.judge_spend_since`): the backfill's budget is
    charged with it.

    Raises:
        WarehouseLockedError: another process writes the file (retried twice).
    """
    conn = connect(warehouse_path, on_wait=run_logger().warning)
    try:
        return judge_spend_since(conn, since, log_date, evaluator_version)
    finally:
        conn.close()
