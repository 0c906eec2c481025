"""Reading the files a person points STEF at (rule files, campaign settings and catalogs).

Such a path may name anything: a FIFO that never delivers a byte (``stef ... --rules fifo``
would hang), a device that never ends (``/dev/zero``), a directory, or a file far larger than
any configuration. :func:`read_config_text` opens without blocking, checks that it holds a
regular file, bounds the size, and reports each case as an :class:`OSError` with a readable
``strerror``, which callers already turn into their own error naming the file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

MAX_CONFIG_BYTES = 16 * 1024 * 1024
"""Largest configuration file read (16 MiB): rule files and catalogs are kilobytes."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def read_config_text(path: str | Path, max_bytes: int = MAX_CONFIG_BYTES, kind: str = "a configuration file") -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes`` bytes, without a leading
    byte-order mark (Windows editors and SSMS save one; ``json.loads`` and sqlglot refuse it).

    The file is opened with ``O_NONBLOCK`` and checked with ``fstat`` on the open descriptor,
    so a FIFO is refused at once instead of waiting for a writer, and the check holds for the
    file actually read.

    Args:
        path: the file (a symlink to a regular file is fine).
        max_bytes: size limit in bytes.
        kind: what the file is, for the size message (``an OTLP trace file``).

    Returns:
        The decoded text.

    Raises:
        OSError: the file cannot be opened, is not a regular file (``strerror`` says what it
            is), or is larger than ``max_bytes``.
        UnicodeDecodeError: the file is not UTF-8.

    >>> read_config_text("/dev/null")
    Traceback (most recent call last):
    ...
    OSError: [Errno 22] not a regular file but a device: '/dev/null'
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file but {_kind(info.st_mode)}", str(path))
        if info.st_size > max_bytes:
            raise OSError(
                errno.EFBIG,
                f"{info.st_size} bytes, larger than the {max_bytes}-byte limit for {kind}",
                str(path),
            )
        os.set_blocking(descriptor, True)
        with os.fdopen(descriptor, "rb", closefd=True) as handle:
            descriptor = -1  # owned by the file object now
            content = handle.read(max_bytes + 1)
    finally:
        if descriptor >= 0:
            os.close(descriptor)
    if len(content) > max_bytes:
        raise OSError(errno.EFBIG, f"larger than the {max_bytes}-byte limit for {kind}", str(path))
    return content.decode("utf-8-sig")


BINARY_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a workbook or other zip archive (.xlsx, .ods, .zip)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an Excel 97-2003 workbook (.xls) or other OLE2 file"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"PAR1", "a Parquet file"),
    (b"SQLite format 3\x00", "a SQLite database"),
    (b"%PDF-", "a PDF document"),
)
"""The first bytes of binary files a person may point STEF at instead of text, and what each is."""

SAVE_AS_CSV = 'open it in the spreadsheet and save the sheet as CSV (Excel: File > Save As > "CSV UTF-8")'
"""How to turn a workbook into a file STEF reads."""


def binary_kind(data: bytes) -> str | None:
    """What a file that starts with ``data`` is when it is a known binary file (a workbook, an
    archive, a database), else ``None``.

    >>> binary_kind(b"PK\\x03\\x04\\x14\\x00\\x06\\x00"), binary_kind(b'{"run_id": "r1"}')
    ('a workbook or other zip archive (.xlsx, .ods, .zip)', None)
    """
    return next((kind for signature, kind in BINARY_SIGNATURES if data.startswith(signature)), None)


def not_text_message(data: bytes, expected: str) -> str | None:
    """The reason a file that starts with ``data`` is not the text file ``expected`` names, when it
    is a known binary file (a workbook also says how to save it as CSV); else ``None``.

    >>> not_text_message(b"PK\\x03\\x04", "a JSON rule file")
    'a workbook or other zip archive (.xlsx, .ods, .zip), not a JSON rule file; if it is a workbook, open it in the spreadsheet and save the sheet as CSV (Excel: File > Save As > "CSV UTF-8")'
    >>> not_text_message(b"%PDF-1.7", "a JSON rule file")
    'a PDF document, not a JSON rule file'
    """
    kind = binary_kind(data)
    if kind is None:
        return None
    hint = f"; if it is a workbook, {SAVE_AS_CSV}" if "workbook" in kind else ""
    return f"{kind}, not {expected}{hint}"


def json_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of a JSON Lines text with their 1-based numbers, split at line feeds only.

    JSON Lines separates records with ``\\n`` (a ``\\r`` before it is dropped); a JSON string may
    hold U+2028, U+2029, U+0085, form feeds and the other characters :meth:`str.splitlines`
    also splits at (``json.dumps(..., ensure_ascii=False)`` writes them as they are), so
    splitting there would cut one record in two and shift every later line number.

    >>> list(json_lines('{"note": "a\\u2028b"}\\r\\n\\n{"x": 1}'))
    [(1, '{"note": "a\\u2028b"}'), (2, ''), (3, '{"x": 1}')]
    """
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.removesuffix("\r")
