"""Reading agent logs: JSONL lines -> :class:`AgentLogRecord` or a typed rejection.

Nothing is dropped: every physical line of a file yields one :class:`LogLine`, either with a
validated record or with the reason it was rejected (invalid UTF-8, not JSON, not an object,
missing/invalid fields). Blank lines are skipped (they carry no record).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from stef.config_files import binary_kind
from stef.display import json_kind, one_line
from stef.errors import InputError
from stef.models import AgentLogRecord

SOURCE_ERROR_KEY = "source_error"
"""Key of a log line ``stef pull`` could not map from a trace span (:mod:`stef.traces.spans`): its
value is the reason, and :func:`parse_line` rejects the line with it."""

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

    def rejected(self, reason: str) -> LogLine:
        """This line rejected for ``reason``: no record, its run_id kept, its text cut to 64 KiB
        as the reader cuts every rejected line.

        >>> line = parse_line(b'{"run_id": "r1", "question": "q", "sql": "SELECT 1"}', "a.jsonl", 1)
        >>> bad = line.rejected("duplicate run_id")
        >>> (bad.record, bad.reason, bad.run_id)
        (None, 'duplicate run_id', 'r1')
        """
        run_id = self.record.run_id if self.record is not None else self.run_id
        return LogLine(self.source, self.line_number, None, reason, self.raw[:_SCAN_BYTES], run_id)


MAX_JSON_DEPTH = 64
"""Objects and arrays nested deeper than this in one log line reject the line (the record's own
fields nest two or three levels; pydantic cannot serialise a few hundred)."""
_SCAN_BYTES = 65536
"""Rejected lines keep this many characters of their text (quarantine rows stay small)."""


class _UnreadableNumber(ValueError):
    """A JSON number Python cannot hold as a finite value (``NaN``, ``Infinity``, ``1e400``)."""


def _reject_constant(name: str) -> float:
    raise _UnreadableNumber(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _UnreadableNumber(f"number {text[:40]} is out of range")
    return value


AMBIGUOUS_JSON = "ambiguous JSON"
"""Start of the reason of a line whose object names a key twice."""


class _DuplicateKey(ValueError):
    """A JSON object that names one key twice."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``dict(pairs)``; :class:`_DuplicateKey` when a key comes twice (``object_pairs_hook``)."""
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                shown = key if len(key) <= 60 else key[:60] + "…"
                raise _DuplicateKey(f"key {shown!r} appears twice in one object")
            seen.add(key)
    return record


def _decode_json(text: str) -> tuple[object, str | None]:
    """``(payload, None)`` for standard JSON, else ``(None, reason)``.

    Rejects what :func:`json.loads` raises on (syntax, nesting beyond Python's recursion limit,
    integers of more than 4,300 digits) and what it would let through but no later stage can
    store: ``NaN``/``Infinity`` (not JSON, RFC 8259 §6), numbers beyond a float's range, and an
    object naming a key twice (RFC 8259 §4: its meaning is not defined; Python keeps the last
    value, other readers the first, so the stored raw line and the evaluated record could differ).

    >>> _decode_json('{"sql": "SELECT 1", "sql": "SELECT 2"}')
    (None, "ambiguous JSON: key 'sql' appears twice in one object")
    """
    try:
        return (
            json.loads(
                text, parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
            ),
            None,
        )
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc.msg} (column {exc.colno})"
    except _DuplicateKey as exc:
        return None, f"{AMBIGUOUS_JSON}: {exc}"
    except RecursionError:
        return None, f"not readable JSON: nested deeper than {MAX_JSON_DEPTH} levels"
    except _UnreadableNumber as exc:
        return None, f"not readable JSON: {exc}"
    except ValueError as exc:  # int(): more digits than sys.get_int_max_str_digits()
        return None, f"not readable JSON: {str(exc).split(';')[0]}"


def _unambiguous_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The pairs whose key comes once (``object_pairs_hook``): a key named twice has no value."""
    counts = Counter(key for key, _ in pairs)
    return {key: value for key, value in pairs if counts[key] == 1}


def decode_json_object(text: str) -> dict[str, object] | None:
    """The JSON object ``text`` holds, or ``None`` when it holds none (not JSON, not an object,
    or JSON :func:`parse_line` rejects: too deep, NaN, out-of-range numbers); never raises. Of
    an object that names a key twice (rejected as ambiguous), the keys named once, at every level.

    For reading back the raw text of a rejected line (its agent id, its run id).

    >>> decode_json_object('{"agent_id": "a"}'), decode_json_object("[" * 5000 + "]" * 5000)
    ({'agent_id': 'a'}, None)
    >>> decode_json_object('{"run_id": "r9", "agent_id": "a", "sql": "SELECT 1", "sql": "SELECT 2"}')
    {'run_id': 'r9', 'agent_id': 'a'}
    """
    payload, reason = _decode_json(text)
    if reason is not None and reason.startswith(AMBIGUOUS_JSON):
        try:  # it read once already: only the duplicate keys stopped it
            payload = json.loads(text, parse_float=float, object_pairs_hook=_unambiguous_keys)
        except (ValueError, RecursionError):
            payload = None
    return payload if isinstance(payload, dict) else None


def _field_name(path: tuple[object, ...]) -> str:
    return ".".join(str(part) for part in path) or "(record)"


def _structure_problem(payload: object, text: str) -> str | None:
    """Why a decoded line cannot be a record although it is JSON: nesting deeper than
    :data:`MAX_JSON_DEPTH`, or a string (key or value) holding a lone UTF-16 surrogate
    (``"\\ud800"``: valid JSON syntax, but not Unicode text; nothing can encode it as UTF-8).

    The walk is iterative and runs only when the text could hold either problem (enough
    brackets; a ``\\u`` escape).
    """
    check_depth = text.count("{") + text.count("[") > MAX_JSON_DEPTH
    check_text = "\\u" in text
    if not (check_depth or check_text):
        return None
    stack: list[tuple[object, tuple[object, ...]]] = [(payload, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            if len(path) >= MAX_JSON_DEPTH:
                return f"not readable JSON: nested deeper than {MAX_JSON_DEPTH} levels (at field `{_field_name(path[:3])}`)"
            for key, item in value.items():
                if check_text and _surrogate(key) is not None:
                    return f"invalid record: field `{_field_name((*path, encodable_text(key)))}`: its name holds the lone surrogate {_surrogate(key)}, not Unicode text"
                stack.append((item, (*path, key)))
        elif isinstance(value, list):
            if len(path) >= MAX_JSON_DEPTH:
                return f"not readable JSON: nested deeper than {MAX_JSON_DEPTH} levels (at field `{_field_name(path[:3])}`)"
            stack.extend((item, (*path, index)) for index, item in enumerate(value))
        elif check_text and isinstance(value, str):
            bad = _surrogate(value)
            if bad is not None:
                return f"invalid record: field `{_field_name(path)}`: holds the lone surrogate {bad}, not Unicode text"
    return None


def _surrogate(value: str) -> str | None:
    """The first lone surrogate of ``value`` as an escape (``"\\ud800"``), or ``None``."""
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"\\u{ord(value[exc.start]):04x}"
    return None


def encodable_text(value: str) -> str:
    """``value`` with lone surrogates written as ``\\udXXX`` escapes (always encodable as UTF-8).

    >>> encodable_text("r1\\ud800")
    'r1\\\\ud800'
    """
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def validation_reason(exc: ValidationError) -> str:
    """``invalid record: field `a`: message; ...`` for the first five errors of ``exc`` (the reason
    of a line that is JSON but not a valid record)."""
    parts = []
    for error in exc.errors()[:5]:
        location = ".".join(str(p) for p in error["loc"]) or "(record)"
        message = str(error["msg"]).removeprefix("Value error, ")  # a validator's own sentence
        parts.append(f"field `{location}`: {message}")
    return "invalid record: " + "; ".join(parts)


def _run_id_of(payload: object) -> str | None:
    """The ``run_id`` a JSON object names (a non-empty string or an integer), always encodable
    as UTF-8 (lone surrogates escaped), or ``None``."""
    run_id = payload.get("run_id") if isinstance(payload, dict) else None
    if isinstance(run_id, bool) or not isinstance(run_id, (str, int)):
        return None
    text = run_id if isinstance(run_id, str) else str(run_id)
    return encodable_text(text) if text else None


def _salvage_run_id(text: str) -> str | None:
    """The ``run_id`` of a line rejected for its encoding, when the rest of it is readable JSON."""
    payload, _ = _decode_json(text)
    return _run_id_of(payload)


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
"""The byte-order marks of UTF-16 (little-, big-endian): a file that starts with one is not UTF-8."""


def _binary_file_reason(raw_bytes: bytes, line_number: int) -> str | None:
    """The reason of a file's first line when the file is a known binary file (a workbook, an
    archive, a database: :func:`stef.config_files.binary_kind`), not JSON Lines text; else ``None``.

    >>> _binary_file_reason(b"PK\\x03\\x04\\x14\\x00", 1)
    'the file is a workbook or other zip archive (.xlsx, .ods, .zip), not JSON Lines text (one JSON object per line)'
    """
    if line_number != 1:
        return None
    kind = binary_kind(raw_bytes[:16])
    return None if kind is None else f"the file is {kind}, not JSON Lines text (one JSON object per line)"


def parse_line(raw_bytes: bytes, source: str, line_number: int) -> LogLine | None:
    """Turn one raw line into a :class:`LogLine`; ``None`` for a blank line.

    Never raises for bad content: a line that is not UTF-8, not standard JSON (also ``NaN``,
    out-of-range numbers, integers of more than 4,300 digits), nested deeper than
    :data:`MAX_JSON_DEPTH`, holds a lone surrogate escape, or is not a valid
    :class:`AgentLogRecord` comes back with ``record=None`` and the reason.

    >>> parse_line(b'{"run_id": "r1", "question": "How many?", "sql": "SELECT 1"}', "x.jsonl", 1).record.run_id
    'r1'
    >>> parse_line(b'not json', "x.jsonl", 2).reason
    'not valid JSON: Expecting value (column 1)'
    >>> parse_line(b'{"run_id": "r\\ud800", "question": "q", "sql": "SELECT 1"}', "x.jsonl", 3).reason
    'invalid record: field `run_id`: holds the lone surrogate \\\\ud800, not Unicode text'
    >>> parse_line('{"run_id": "r1"}'.encode("utf-16"), "x.jsonl", 1).reason
    'invalid UTF-8 at byte 0 (the file is UTF-16 text, not UTF-8: save it as UTF-8)'
    """
    if not raw_bytes.strip():
        return None
    if len(raw_bytes) > MAX_LINE_BYTES:
        return LogLine(
            source,
            line_number,
            None,
            f"line longer than {MAX_LINE_BYTES} bytes",
            raw_bytes[:_SCAN_BYTES].decode("utf-8", "replace"),
        )
    if line_number == 1 and raw_bytes.startswith(b"\xef\xbb\xbf"):
        raw_bytes = raw_bytes[3:]  # UTF-8 byte-order mark written by some editors
    binary = _binary_file_reason(raw_bytes, line_number)
    if binary is not None:
        return LogLine(source, line_number, None, binary, raw_bytes[:_SCAN_BYTES].decode("utf-8", "replace"))
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        salvaged = raw_bytes[:_SCAN_BYTES].decode("utf-8", "replace")
        problem = f"invalid UTF-8 at byte {exc.start}"
        if line_number == 1 and raw_bytes.startswith(_UTF16_BOMS):  # PowerShell's `>` and Out-File write UTF-16
            problem += " (the file is UTF-16 text, not UTF-8: save it as UTF-8)"
        return LogLine(source, line_number, None, problem, salvaged, _salvage_run_id(salvaged))
    payload, reason = _decode_json(text)
    if reason is not None:
        # a line rejected as ambiguous keeps the run id it names once (its quarantine row is the agent's)
        run_id = _run_id_of(decode_json_object(text)) if reason.startswith(AMBIGUOUS_JSON) else None
        return LogLine(source, line_number, None, reason, text[:_SCAN_BYTES], run_id)
    if not isinstance(payload, dict):
        return LogLine(source, line_number, None, f"not a JSON object but {json_kind(payload)}", text[:_SCAN_BYTES])
    run_id = _run_id_of(payload)
    source_error = payload.get(SOURCE_ERROR_KEY)
    if isinstance(source_error, str):  # a span `stef pull` could not map (stef.traces.spans)
        return LogLine(source, line_number, None, f"unreadable trace span: {source_error}", text[:_SCAN_BYTES], run_id)
    reason = _structure_problem(payload, text)
    if reason is not None:
        return LogLine(source, line_number, None, reason, text[:_SCAN_BYTES], run_id)
    if isinstance(payload.get("run_id"), int) and not isinstance(payload.get("run_id"), bool):
        payload = {**payload, "run_id": str(payload["run_id"])}
    try:
        record = AgentLogRecord.model_validate(payload)
    except ValidationError as exc:
        return LogLine(source, line_number, None, validation_reason(exc), text[:_SCAN_BYTES], run_id)
    return LogLine(source, line_number, record, None, text, record.run_id)


def read_json_object(raw_bytes: bytes, line_number: int) -> tuple[dict[str, object] | None, str | None, str]:
    """The JSON object of one raw line of any JSONL input, checked as :func:`parse_line` checks a
    log line before validating it (length, UTF-8, standard JSON, an object, nesting depth, lone
    surrogates); never raises for bad content.

    Args:
        raw_bytes: the line without its line break (blank lines are the caller's to skip).
        line_number: 1-based; a UTF-8 byte-order mark is dropped from line 1.

    Returns:
        ``(object, None, text)``, or ``(None, reason, text)`` with the text cut to 64 KiB (and
        decoded with replacement characters when it is not UTF-8).

    >>> read_json_object(b'{"a": 1}', 1)
    ({'a': 1}, None, '{"a": 1}')
    >>> read_json_object(b'[1]', 2)[1]
    'not a JSON object but a list'
    """
    if len(raw_bytes) > MAX_LINE_BYTES:
        return None, f"line longer than {MAX_LINE_BYTES} bytes", raw_bytes[:_SCAN_BYTES].decode("utf-8", "replace")
    if line_number == 1 and raw_bytes.startswith(b"\xef\xbb\xbf"):
        raw_bytes = raw_bytes[3:]
    binary = _binary_file_reason(raw_bytes, line_number)
    if binary is not None:
        return None, binary, raw_bytes[:_SCAN_BYTES].decode("utf-8", "replace")
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"invalid UTF-8 at byte {exc.start}"
        if line_number == 1 and raw_bytes.startswith(_UTF16_BOMS):
            problem += " (the file is UTF-16 text, not UTF-8: save it as UTF-8)"
        return None, problem, raw_bytes[:_SCAN_BYTES].decode("utf-8", "replace")
    payload, reason = _decode_json(text)
    if reason is None and not isinstance(payload, dict):
        reason = f"not a JSON object but {json_kind(payload)}"
    if reason is None:
        reason = _structure_problem(payload, text)
    if reason is not None or not isinstance(payload, dict):
        return None, reason, text[:_SCAN_BYTES]
    return payload, None, text


READ_CHUNK_BYTES = 1024 * 1024
"""Bytes read from a log file at a time (1 MiB)."""


def capped_lines(handle: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number, bytes)`` for every physical line of an open binary file, without its
    line break, holding at most :data:`MAX_LINE_BYTES` + 1 bytes of any one line.

    A line longer than the cap is yielded as its first ``MAX_LINE_BYTES + 1`` bytes (which
    :func:`parse_line` rejects as too long) and the rest of it is read past without being kept,
    so a gigabyte without a newline costs a few megabytes of memory, not a gigabyte.

    Args:
        handle: any binary file object with ``read(n)`` (a local file, an fsspec file).

    Raises:
        OSError: reading fails.

    >>> import io
    >>> list(capped_lines(io.BytesIO(b'{"a": 1}\\r\\n\\nlast')))
    [(1, b'{"a": 1}'), (2, b''), (3, b'last')]
    """
    limit = MAX_LINE_BYTES + 1
    number = 0
    pending: list[bytes] = []  # pieces of the line being read (at most `limit` bytes in all)
    pending_size = 0
    while chunk := handle.read(READ_CHUNK_BYTES):
        pieces = chunk.split(b"\n")
        for piece in pieces[:-1]:  # each piece ends a line
            number += 1
            if pending:
                piece = (b"".join(pending) + piece[: limit - pending_size])[:limit]
                pending.clear()
                pending_size = 0
            elif len(piece) > limit:
                piece = piece[:limit]
            yield number, piece.rstrip(b"\r\n") if len(piece) <= MAX_LINE_BYTES else piece
        tail = pieces[-1]
        if tail and pending_size < limit:
            tail = tail[: limit - pending_size]
            pending.append(tail)
            pending_size += len(tail)
    if pending:
        number += 1
        piece = b"".join(pending)
        yield number, piece.rstrip(b"\r\n") if len(piece) <= MAX_LINE_BYTES else piece


def read_raw_lines(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number, bytes)`` for every physical line of a file, without its line break
    and undecoded (streamed, each line capped as :func:`capped_lines` says; :func:`parse_line`
    turns each into a :class:`LogLine`).

    Raises:
        OSError: the file cannot be opened or read.
    """
    with Path(path).open("rb") as handle:
        yield from capped_lines(handle)


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


def _not_a_log_file(path: Path) -> str | None:
    """What ``path`` is when it cannot be read as a log file (``None``: a regular file, or a
    symlink to one)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if path.is_symlink():
            if exc.errno == errno.ELOOP:
                return "a symlink loop"
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return f"a dangling symlink (to {target})"
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


_LOG_LIKE_NAME = re.compile(r"\.(?:nd)?jsonl?(?:\.(?:gz|bz2|xz|zst|zip))?$", re.IGNORECASE)


def unread_log_like_files(folder: str | Path) -> list[str]:
    """Names of the entries of a day folder that look like logs but are not read: only ``*.jsonl``
    files are, so ``B.JSONL``, ``c.json``, ``d.ndjson`` or ``e.jsonl.gz`` would be left out unsaid.

    Returns:
        The names, sorted; ``[]`` for a folder that cannot be listed.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     for name in ("a.jsonl", "B.JSONL", "c.json", "d.jsonl.gz", "notes.txt"):
    ...         _ = (Path(folder) / name).write_text("")
    ...     unread_log_like_files(folder)
    ['B.JSONL', 'c.json', 'd.jsonl.gz']
    """
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [name for name in names if not name.endswith(".jsonl") and _LOG_LIKE_NAME.search(name)]


def unread_note(names: list[str], limit: int = 5) -> str:
    """The clause naming :func:`unread_log_like_files` in a message.

    >>> unread_note(["B.JSONL", "c.json"])
    'not *.jsonl, so not read: B.JSONL, c.json'
    """
    shown = ", ".join(one_line(name) for name in names[:limit])
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"not *.jsonl, so not read: {shown}{more}"


def log_files(path: str | Path) -> list[Path]:
    """The JSONL files of ``path``: the file itself, or every ``*.jsonl`` entry of a directory (sorted).

    A file named explicitly is returned as given (it may be a stream such as ``/dev/stdin``).
    In a directory, every ``*.jsonl`` entry must be a regular file (or a symlink to one): a
    folder, a dangling or looping symlink, a FIFO or a device named ``*.jsonl`` is an error, so a
    day is never stored as complete with one of its files left out.

    Raises:
        InputError: a ``*.jsonl`` entry of the directory is not a readable regular file (the
            message names it and says what it is).
    """
    path = Path(path)
    if not path.is_dir():
        return [path]
    files = sorted(path.glob("*.jsonl"))
    for candidate in files:
        problem = _not_a_log_file(candidate)
        if problem is not None:
            raise InputError(
                f"{candidate}: cannot read this log file, it is {problem}; fix or remove it, then run again"
            )
    return files
