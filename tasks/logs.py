"""The task that reads one day of agent logs (local folders and fsspec URLs); :mod:`tasks.log_checks` validates them."""

from __future__ import annotations

import threading
from datetime import date
from pathlib import Path
from typing import Any

from stef.display import one_line
from stef.errors import InputError
from stef.logs import (
    LogLine,
    capped_lines,
    log_files,
    parse_line,
    read_log_file,
    unread_log_like_files,
    unread_note,
)
from tasks._runtime import io_task, run_logger


def url_filesystem(logs_root: str) -> tuple[Any, str]:
    """``(fsspec filesystem, root path)`` of a ``--logs-root`` URL (``s3://``, ``gs://``, ``file://`` …).

    Raises:
        InputError: the scheme is unknown, or needs a package that is not installed (s3fs …).
    """
    import fsspec  # type: ignore[import-untyped]

    try:
        fs, root = fsspec.core.url_to_fs(logs_root)
    except ImportError as exc:  # e.g. s3:// without s3fs installed
        raise InputError(
            f"--logs-root {logs_root}: this URL scheme needs an extra package ({exc}); install it next to stef"
        ) from exc
    except ValueError as exc:  # unknown protocol
        raise InputError(f"--logs-root {logs_root}: not a readable location ({exc})") from exc
    return fs, str(root)


def _read_remote(logs_root: str, day: str) -> list[LogLine]:
    """Lines of ``<logs_root>/<day>/*.jsonl`` for an fsspec URL (``s3://``, ``gs://``, ``file://``...)."""
    fs, root = url_filesystem(logs_root)
    folder = f"{root.rstrip('/')}/{day}"
    if not fs.isdir(folder):
        raise InputError(f"no logs for {day}: folder {logs_root.rstrip('/')}/{day} does not exist")
    paths = sorted(fs.glob(f"{folder}/*.jsonl"))
    if not paths:
        raise InputError(f"no *.jsonl files in {logs_root.rstrip('/')}/{day}")
    lines: list[LogLine] = []
    for path in paths:
        source = fs.unstrip_protocol(path)
        if not fs.isfile(path):
            raise InputError(
                f"{source}: cannot read this log file, it is not a regular file (a folder?); fix or remove it, then run again"
            )
        with fs.open(path, "rb") as handle:
            for number, raw in capped_lines(handle):
                line = parse_line(raw, source, number)
                if line is not None:
                    lines.append(line)
    return lines


FileStamp = tuple[tuple[str, int, int, int, int], ...]
"""``(path, inode, size in bytes, modification time in ns, status change time in ns)`` of each log
file of a day, in name order (the change time catches a same-size file put back with its old
modification time: ``cp -p``, ``rsync -t``)."""

_PREFETCHED: dict[str, tuple[FileStamp, list[LogLine]]] = {}
_PREFETCH_LOCK = threading.Lock()


def _stamp(files: list[Path]) -> FileStamp:
    """The :data:`FileStamp` of ``files``.

    Raises:
        OSError: a file vanished or cannot be read.
    """
    stamps = []
    for path in files:
        status = path.stat()
        stamps.append((str(path), status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns))
    return tuple(stamps)


def prefetch_day(logs_root: str, log_date: date) -> int:
    """Read a local day's log files ahead of its flow run, for :func:`load_logs` to take.

    ``stef nightly`` does it while Prefect's temporary API boots and one core waits (about
    0.35 s for 20k lines on 2 cores, then off the flow's critical path). :func:`load_logs` uses
    the lines only if the day's files are still the same (:data:`FileStamp`: names, sizes, times),
    so a file written in between is read again; anything unusual (an fsspec URL, no folder, a
    file that cannot be read) is left to :func:`load_logs`, which reports it.

    Returns:
        The number of lines read ahead (0: none).
    """
    if "://" in logs_root:
        return 0
    folder = Path(logs_root).expanduser() / log_date.isoformat()
    try:
        files = log_files(folder) if folder.is_dir() else []
        if not files:
            return 0
        before = _stamp(files)
        lines = [line for path in files for line in read_log_file(path)]
        if _stamp(files) != before:  # being written: load_logs reads it again
            return 0
    except (OSError, InputError):
        return 0
    with _PREFETCH_LOCK:
        _PREFETCHED[str(folder)] = (before, lines)
    return len(lines)


def discard_prefetched() -> None:
    """Drop the lines :func:`prefetch_day` read that no flow run took (a run that failed first)."""
    with _PREFETCH_LOCK:
        _PREFETCHED.clear()


def _take_prefetched(folder: Path, files: list[Path]) -> list[LogLine] | None:
    """The lines :func:`prefetch_day` read of ``folder`` if its ``files`` are unchanged since, else ``None``."""
    with _PREFETCH_LOCK:
        entry = _PREFETCHED.pop(str(folder), None)
    if entry is None:
        return None
    try:
        return entry[1] if _stamp(files) == entry[0] else None
    except OSError:
        return None


@io_task("load-logs", retries=2, retry_delay_seconds=5)
def load_logs(logs_root: str, log_date: date, allow_empty: bool = False) -> list[LogLine]:
    """Read every line of ``<logs_root>/<YYYY-MM-DD>/*.jsonl`` (files in name order), or take the
    lines :func:`prefetch_day` read of the same, unchanged files.

    Args:
        logs_root: local folder, or an fsspec URL (``s3://bucket/logs``), holding one folder per day.
        log_date: the day to read.
        allow_empty: accept a day without lines (a day pulled from a trace store that had no
            SQL span: the store's answer, not logs still being written): its files hold none, or
            there is no file (``stef pull`` writes none for such a day) or no day folder.

    Returns:
        One :class:`stef.logs.LogLine` per non-blank line: valid (``record`` set) or rejected
        (``record is None`` with the reason and line number).

    Raises:
        InputError: (without ``allow_empty``) the day folder does not exist, holds no ``*.jsonl``
            file, or only empty or blank ones.
        OSError: a file cannot be read (retried twice).
    """
    day = log_date.isoformat()
    if "://" in logs_root:
        lines = _read_remote(logs_root, day)
    else:
        folder = Path(logs_root).expanduser() / day
        if allow_empty and not (folder.is_dir() and log_files(folder)):
            run_logger().info("no log file for %s in %s: a day without lines", day, one_line(folder))
            return []
        if not folder.is_dir():
            raise InputError(
                f"no logs for {day}: folder {folder} does not exist "
                "(logs are read from <logs-root>/<YYYY-MM-DD>/*.jsonl; check --logs-root and --date)"
            )
        files = log_files(folder)
        unread = unread_log_like_files(folder)
        if not files:
            raise InputError(
                f"no *.jsonl files in {folder}: nothing to evaluate for {day}"
                + (f"; {unread_note(unread)}" if unread else "")
            )
        if unread:  # read the rest, but say which files were left out
            run_logger().warning("%s: %s", one_line(folder), unread_note(unread))
        prefetched = _take_prefetched(folder, files)
        lines = prefetched if prefetched is not None else [line for path in files for line in read_log_file(path)]
    if not lines and not allow_empty:  # stored, the day would count as done: a backfill would skip its logs
        raise InputError(
            f"no log lines for {day}: its *.jsonl files in {one_line(logs_root.rstrip('/'))}/{day} are empty or blank; "
            "nothing was stored (run the day again once its logs are written)"
        )
    rejected = sum(1 for line in lines if line.record is None)
    run_logger().info("read %d log lines for %s (%d rejected by the reader)", len(lines), day, rejected)
    return lines
