"""Reading agent logs: JSONL lines -> :class:`AgentLogRecord` or a typed rejection.

Nothing is dropped: every physical line of a file yields one :class:`LogLine`, either with a
validated record or with the reason it was rejected (invalid UTF-8, not JSON, not an object,
missing/invalid fields). Blank lines are skipped (they carry no record).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from stef.models import AgentLogRecord

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Lines longer than this are rejected without being decoded (16 MiB)."""


@dataclass(frozen=True, slots=True)
class LogLine:
    """One non-blank line of a log file.

    Attributes:
        source: file the line came from.
        line_number: 1-based physical line number.
        record: the validated record, or ``None`` when rejected.
        reason: why the line was rejected (``None`` when ``record`` is set).
        raw: the line text (decoded with replacement characters when not UTF-8; truncated to
            64 KiB for rejected lines so quarantine rows stay small).
        run_id: the ``run_id`` if one could be read even from a rejected line.
    """

    source: str
    line_number: int
    record: AgentLogRecord | None
    reason: str | None
    raw: str
    run_id: str | None = None


def _validation_reason(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        location = ".".join(str(p) for p in error["loc"]) or "(record)"
        parts.append(f"field `{location}`: {error['msg']}")
    return "invalid record: " + "; ".join(parts)


def _salvage_run_id(text: str) -> str | None:
    """The ``run_id`` of a line rejected for its encoding, when the rest of it is readable JSON."""
    try:
        payload = json.loads(text)
    except json.JSONDecodeError:
        return None
    run_id = payload.get("run_id") if isinstance(payload, dict) else None
    return str(run_id) if isinstance(run_id, (str, int)) and not isinstance(run_id, bool) and str(run_id) else None


def parse_line(raw_bytes: bytes, source: str, line_number: int) -> LogLine | None:
    """Turn one raw line into a :class:`LogLine`; ``None`` for a blank line.

    >>> parse_line(b'{"run_id": "r1", "question": "How many?", "sql": "SELECT 1"}', "x.jsonl", 1).record.run_id
    'r1'
    >>> parse_line(b'not json', "x.jsonl", 2).reason
    'not valid JSON: Expecting value (column 1)'
    """
    if not raw_bytes.strip():
        return None
    if len(raw_bytes) > MAX_LINE_BYTES:
        return LogLine(source, line_number, None, f"line longer than {MAX_LINE_BYTES} bytes", raw_bytes[:65536].decode("utf-8", "replace"))
    if line_number == 1 and raw_bytes.startswith(b"\xef\xbb\xbf"):
        raw_bytes = raw_bytes[3:]  # UTF-8 byte-order mark written by some editors
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        salvaged = raw_bytes[:65536].decode("utf-8", "replace")
        return LogLine(source, line_number, None, f"invalid UTF-8 at byte {exc.start}", salvaged, _salvage_run_id(salvaged))
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        return LogLine(source, line_number, None, f"not valid JSON: {exc.msg} (column {exc.colno})", text[:65536])
    if not isinstance(payload, dict):
        return LogLine(source, line_number, None, f"not a JSON object but {type(payload).__name__}", text[:65536])
    run_id = payload.get("run_id")
    run_id = str(run_id) if isinstance(run_id, (str, int)) and not isinstance(run_id, bool) and str(run_id) else None
    if isinstance(payload.get("run_id"), int) and not isinstance(payload.get("run_id"), bool):
        payload = {**payload, "run_id": str(payload["run_id"])}
    try:
        record = AgentLogRecord.model_validate(payload)
    except ValidationError as exc:
        return LogLine(source, line_number, None, _validation_reason(exc), text[:65536], run_id)
    return LogLine(source, line_number, record, None, text, record.run_id)


def read_raw_lines(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number, bytes)`` for every physical line of a file, without its line break
    and undecoded (streamed; :func:`parse_line` turns each into a :class:`LogLine`).

    Raises:
        OSError: the file cannot be opened or read.
    """
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            yield number, raw.rstrip(b"\r\n")


def read_log_file(path: str | Path) -> Iterator[LogLine]:
    """Yield a :class:`LogLine` for every non-blank line of one JSONL file (streamed).

    Raises:
        OSError: the file cannot be opened.
    """
    source = str(Path(path))
    for number, raw in read_raw_lines(path):
        line = parse_line(raw, source, number)
        if line is not None:
            yield line


def log_files(path: str | Path) -> list[Path]:
    """The JSONL files of ``path``: the file itself, or ``*.jsonl`` in a directory (sorted)."""
    path = Path(path)
    if path.is_dir():
        return sorted(p for p in path.glob("*.jsonl") if p.is_file())
    return [path]
