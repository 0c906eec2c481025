"""Tests of tasks/logs.py through ``.fn()``: loading a day's logs (local folders and fsspec URLs)."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from stef.errors import InputError
from tasks import (
    load_logs,
)
from tasks.backfill import day_has_logs
from tests.tasks.helpers import DAY


def test_load_logs_reads_every_file_of_the_day_in_name_order(log_day: Path) -> None:
    lines = load_logs.fn(str(log_day), DAY)
    assert [(Path(x.source).name, x.line_number) for x in lines] == [
        ("sales-agent.jsonl", 1),
        ("sales-agent.jsonl", 2),
        ("sales-agent.jsonl", 3),
        ("sales-agent.jsonl", 4),
        ("sales-agent.jsonl", 5),
        ("support-agent.jsonl", 1),
        ("support-agent.jsonl", 3),
        ("support-agent.jsonl", 4),
    ]
    rejected = [(x.line_number, x.run_id) for x in lines if x.record is None]
    assert rejected == [(5, None), (4, "support-0003")]


def test_load_logs_accepts_a_file_url(log_day: Path) -> None:
    lines = load_logs.fn(log_day.as_uri(), DAY)
    assert len(lines) == 8
    assert lines[0].record is not None and lines[0].record.run_id == "sales-0001"
    assert lines[0].source.startswith("file://")


@pytest.mark.parametrize(
    ("prepare", "match"),
    [
        pytest.param(
            lambda root: None, r"no logs for 2026-11-20: folder .*2026-11-20 does not exist", id="missing_day_folder"
        ),
        pytest.param(
            lambda root: (root / "2026-11-20").mkdir(parents=True),
            r"no \*\.jsonl files in .*2026-11-20",
            id="empty_day_folder",
        ),
        pytest.param(
            lambda root: _day_file(root, b""), r"no log lines for 2026-11-20: .* are empty or blank", id="empty_file"
        ),
        pytest.param(
            lambda root: _day_file(root, b"\n  \n\r\n"),
            r"no log lines for 2026-11-20: .* are empty or blank",
            id="blank_lines_only",
        ),
    ],
)
def test_load_logs_fails_clearly_without_logs(tmp_path: Path, prepare: Any, match: str) -> None:
    prepare(tmp_path)
    with pytest.raises(InputError, match=match):
        load_logs.fn(str(tmp_path), DAY)
    assert not day_has_logs(str(tmp_path), DAY)  # so a backfill reports the day as without logs


def test_load_logs_says_which_files_of_the_day_it_does_not_read(
    log_day: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Files that look like logs but are not ``*.jsonl`` were left out without a word."""
    folder = log_day / DAY.isoformat()
    (folder / "more.JSONL").write_text('{"run_id": "x1", "question": "q", "sql": "SELECT 1"}\n', encoding="utf-8")
    (folder / "old.jsonl.gz").write_bytes(b"\x1f\x8b")
    (folder / "README.txt").write_text("not a log", encoding="utf-8")
    with caplog.at_level("WARNING"):
        lines = load_logs.fn(str(log_day), DAY)
    assert len(lines) == 8  # the *.jsonl files only, as before
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"{folder}: not *.jsonl, so not read: more.JSONL, old.jsonl.gz"
    ]


def _day_file(root: Path, content: bytes) -> None:
    (root / "2026-11-20").mkdir(parents=True)
    (root / "2026-11-20" / "agent.jsonl").write_bytes(content)


def test_a_day_with_one_line_in_a_late_chunk_has_logs(tmp_path: Path) -> None:
    _day_file(tmp_path, b" " * 200_000 + b"{}\n")
    assert day_has_logs(str(tmp_path), DAY)
    (tmp_path / "2026-11-20" / "agent.jsonl").write_bytes(b" \n" * 10 + b"{}\n")
    assert day_has_logs(tmp_path.as_uri(), DAY)
    (tmp_path / "2026-11-20" / "agent.jsonl").write_bytes(b" \n" * 10)
    assert not day_has_logs(tmp_path.as_uri(), DAY)  # a remote day of blank lines has none either


def test_a_named_pipe_among_the_day_files_is_never_opened(tmp_path: Path) -> None:
    """Opening a FIFO would wait for a writer: it counts as logs, and reading the day reports it."""
    (tmp_path / "2026-11-20").mkdir(parents=True)
    os.mkfifo(tmp_path / "2026-11-20" / "live.jsonl")
    assert day_has_logs(str(tmp_path), DAY)
    with pytest.raises(InputError, match=r"live\.jsonl"):
        load_logs.fn(str(tmp_path), DAY)


@pytest.mark.parametrize(
    ("logs_root", "message"),
    [
        pytest.param(
            "s3://bucket/logs",
            r"--logs-root s3://bucket/logs: this URL scheme needs an extra package",
            id="missing_fsspec_backend",
        ),
        pytest.param("foo://somewhere", r"--logs-root foo://somewhere: not a readable location", id="unknown_protocol"),
    ],
)
def test_unreadable_logs_root_url_is_a_clear_error(logs_root: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_logs.fn(logs_root, date(2026, 11, 20))


def test_load_logs_takes_the_lines_read_ahead_only_while_the_files_are_unchanged(log_day: Path) -> None:
    """``prefetch_day`` reads the day (``stef nightly`` does while Prefect's API boots); the load
    task takes those very lines once, and reads the files again when one was written in between
    (a line appended is loaded) or when nothing was read ahead (an fsspec URL)."""
    from tasks.logs import _PREFETCHED, discard_prefetched, prefetch_day

    read = load_logs.fn(str(log_day), DAY)
    assert prefetch_day(str(log_day), DAY) == len(read) == 8
    ahead = next(iter(_PREFETCHED.values()))[1]
    taken = load_logs.fn(str(log_day), DAY)
    assert taken is ahead and _PREFETCHED == {}
    assert [(x.source, x.line_number, x.raw, x.reason) for x in taken] == [
        (x.source, x.line_number, x.raw, x.reason) for x in read
    ]

    assert prefetch_day(str(log_day), DAY) == 8
    day_file = log_day / DAY.isoformat() / "support-agent.jsonl"
    with day_file.open("a", encoding="utf-8") as handle:
        handle.write('{"run_id": "late-0001", "question": "How many?", "sql": "SELECT 1"}\n')
    later = load_logs.fn(str(log_day), DAY)
    assert len(later) == 9 and later[-1].record is not None and later[-1].record.run_id == "late-0001"
    assert _PREFETCHED == {}

    # a same-size file put back with its old modification time (cp -p, rsync -t) is read again too
    assert prefetch_day(str(log_day), DAY) == 9
    text = day_file.read_text(encoding="utf-8")
    status = day_file.stat()
    day_file.write_text(text.replace("late-0001", "late-0002"), encoding="utf-8")
    os.utime(day_file, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert day_file.stat().st_size == status.st_size and day_file.stat().st_mtime_ns == status.st_mtime_ns
    replaced = load_logs.fn(str(log_day), DAY)
    assert replaced[-1].record is not None and replaced[-1].record.run_id == "late-0002"

    assert prefetch_day(log_day.as_uri(), DAY) == 0 and _PREFETCHED == {}
    assert prefetch_day(str(log_day), date(2001, 1, 1)) == 0  # no folder: left to load_logs, which says so
    prefetch_day(str(log_day), DAY)
    discard_prefetched()
    assert _PREFETCHED == {}
