"""The log contract: the expectations every agent log record must meet beyond its JSON shape.

:class:`stef.models.AgentLogRecord` fixes the fields and their types (a line that does not fit
is rejected by :func:`stef.logs.parse_line`); this module states what is checked across the
records of one input (a day folder for ``stef nightly``, the files given to ``stef evaluate``):

- ``run_id``, ``agent_id``, ``agent_version``, ``question``, ``sql`` are not null;
- ``timestamp``, when present, is a date and time :func:`dateutil.parser.parse` can read;
- ``run_id`` is unique: the first line that meets every other expectation keeps it, every
  later line with the same ``run_id`` is rejected.

Great Expectations is the nightly's data-quality gate (:mod:`tasks.log_checks` builds its suite
from :data:`LOG_EXPECTATIONS`); ``stef evaluate`` runs the same expectations without it
(:class:`LogContractCheck`, pure Python, streaming). Both word a rejection with the functions
here, so a line is rejected by both commands or by neither, for the same reason, and the reason
names the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from stef.display import quoted
from stef.logs import LogLine

ExpectationKind = Literal["not_null", "dateutil_parseable", "unique"]


@dataclass(frozen=True, slots=True)
class LogExpectation:
    """One expectation of the log contract.

    Attributes:
        field: the record field it checks.
        kind: ``not_null``, ``dateutil_parseable`` (nulls pass) or ``unique``.
        gx_type: the Great Expectations expectation that checks it in the nightly.
        statement: the expectation in words (README "Log records").
    """

    field: str
    kind: ExpectationKind
    gx_type: str
    statement: str


LOG_EXPECTATIONS: tuple[LogExpectation, ...] = (
    *(
        LogExpectation(name, "not_null", "expect_column_values_to_not_be_null", f"`{name}` is present")
        for name in ("run_id", "agent_id", "agent_version", "question", "sql")
    ),
    LogExpectation(
        "timestamp",
        "dateutil_parseable",
        "expect_column_values_to_be_dateutil_parseable",
        "`timestamp`, when present, is a date and time (ISO 8601, e.g. 2026-11-24T09:13:05+00:00)",
    ),
    LogExpectation(
        "run_id",
        "unique",
        "expect_column_values_to_be_unique",
        "`run_id` is unique within the input (a day): later lines with the same run_id are rejected",
    ),
)
"""The expectations, in the order they are checked (uniqueness last: see the module docstring)."""


def missing_reason(field: str) -> str:
    """The rejection reason of a record whose ``field`` is null.

    >>> missing_reason("sql")
    'sql is missing (log contract: `sql` is present)'
    """
    return f"{field} is missing (log contract: `{field}` is present)"


def timestamp_reason(value: str) -> str:
    """The rejection reason of a record whose ``timestamp`` is not a readable date and time.

    >>> timestamp_reason("yesterday")
    "timestamp is not a date and time: 'yesterday' (log contract: ISO 8601, e.g. 2026-11-24T09:13:05+00:00)"
    """
    return (
        f"timestamp is not a date and time: {quoted(value, 80)} "
        "(log contract: ISO 8601, e.g. 2026-11-24T09:13:05+00:00)"
    )


def duplicate_reason(run_id: str, first_source: str, first_line_number: int) -> str:
    """The rejection reason of a record whose ``run_id`` an earlier valid line already holds.

    >>> duplicate_reason("r-1", "logs/a.jsonl", 3)
    "run_id is a duplicate: 'r-1', first seen at logs/a.jsonl:3 (log contract: run_id is unique)"
    """
    return (
        f"run_id is a duplicate: {quoted(run_id, 80)}, first seen at {first_source}:{first_line_number} "
        "(log contract: run_id is unique)"
    )


def is_readable_timestamp(value: object) -> bool:
    """Whether a ``timestamp`` meets the contract: ``None``, or a string
    :func:`dateutil.parser.parse` reads (the check of Great Expectations'
    ``expect_column_values_to_be_dateutil_parseable``: a ``ValueError`` or ``OverflowError``
    fails it).

    >>> is_readable_timestamp("2026-11-24T09:13:05+00:00"), is_readable_timestamp("2026-13-45"), is_readable_timestamp(None)
    (True, False, True)
    """
    if value is None:
        return True
    if not isinstance(value, str):
        return False
    if is_extended_iso_timestamp(value):
        return True  # dateutil reads every such text; checked in ~1 µs instead of dateutil's ~50 µs
    from dateutil.parser import parse

    try:
        parse(value)
    except (ValueError, OverflowError):
        return False
    return True


_EXTENDED_ISO = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[Tt ](?:[01]\d|2[0-3]):\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:[Zz]|[+-]\d{2}:\d{2})?)?", re.ASCII
)
"""ISO 8601 extended format: a date, optionally a time to the microsecond and a UTC offset. Hours
stop at 23: ``fromisoformat`` reads ``24:00`` as the next midnight from Python 3.14 on, dateutil
never does."""


def is_extended_iso_timestamp(value: str) -> bool:
    """Whether ``value`` is an ISO 8601 date or timestamp in the extended format
    (:data:`_EXTENDED_ISO`: ``2026-11-24``, ``2026-11-24T09:13:05.123+00:00``, ``... 09:13Z``)
    whose fields are in range (:meth:`datetime.datetime.fromisoformat` reads it): the shape agents
    log, and one :func:`dateutil.parser.parse` reads too, checked without dateutil's tokenizer
    (other shapes are left to dateutil).

    >>> is_extended_iso_timestamp("2026-11-24T09:13:05+00:00"), is_extended_iso_timestamp("2026-02-30")
    (True, False)
    """
    if _EXTENDED_ISO.fullmatch(value) is None:
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def record_problem(line: LogLine) -> str | None:
    """Why a valid record breaks a per-record expectation of the contract (``None``: it meets
    them all; uniqueness is checked by :class:`LogContractCheck`).

    Args:
        line: a line with ``record`` set (a rejected line has no record to check: ``None``).
    """
    record = line.record
    if record is None:
        return None
    for expectation in LOG_EXPECTATIONS:
        value = getattr(record, expectation.field)
        if expectation.kind == "not_null" and value is None:
            return missing_reason(expectation.field)
        if expectation.kind == "dateutil_parseable" and not is_readable_timestamp(value):
            return timestamp_reason(str(value))
    return None


DUPLICATE_KIND = "duplicate run_id"
"""The kind of both duplicate reasons: a ``run_id`` stored for another day
(``duplicate run_id: already stored for log date D``, :func:`warehouse.store_day`) and one an
earlier line of the same input holds (:func:`duplicate_reason`)."""

_DUPLICATE_SCOPES = (
    ("duplicate run_id: already stored", "stored for another day"),
    ("run_id is a duplicate", "within the day"),
)


def rejection_kind(reason: str | None) -> str:
    """The kind of a rejection reason, for counting: its text up to the first ``:`` or `` (``;
    both duplicate reasons are one kind, :data:`DUPLICATE_KIND` (:func:`rejection_detail` tells
    them apart).

    >>> rejection_kind("timestamp is not a date and time: 'soon' (log contract: ISO 8601)")
    'timestamp is not a date and time'
    >>> rejection_kind("not valid JSON: Expecting value (column 1)"), rejection_kind(None)
    ('not valid JSON', 'rejected')
    >>> rejection_kind(duplicate_reason("r-1", "a.jsonl", 3)), rejection_kind("duplicate run_id: already stored for log date 2026-11-25")
    ('duplicate run_id', 'duplicate run_id')
    """
    if rejection_detail(reason) is not None:
        return DUPLICATE_KIND
    return (reason or "rejected").split(":")[0].split(" (")[0]


def rejection_detail(reason: str | None) -> str | None:
    """What tells apart reasons of one kind: for a duplicate ``run_id``, ``stored for another day``
    or ``within the day`` (an earlier line of the day's files holds it); else ``None``.

    >>> rejection_detail(duplicate_reason("r-1", "a.jsonl", 3)), rejection_detail("not valid JSON: x")
    ('within the day', None)
    """
    text = reason or ""
    return next((scope for prefix, scope in _DUPLICATE_SCOPES if text.startswith(prefix)), None)


class LogContractCheck:
    """Applies the log contract to the lines of one input, streaming, in input order.

    Keeps the ``run_id`` of every line that met the per-record expectations (memory: one entry
    per distinct run_id), so a later line with the same run_id is rejected naming the first.

    >>> from stef.models import AgentLogRecord
    >>> def line(n, **fields):
    ...     return LogLine("day.jsonl", n, AgentLogRecord(question="q", sql="SELECT 1", **fields), None, "")
    >>> check = LogContractCheck()
    >>> checked = list(check.lines([line(1, run_id="a", timestamp="soon"), line(2, run_id="a"), line(3, run_id="a")]))
    >>> [l.reason.split(" (")[0] if l.reason else None for l in checked]
    ["timestamp is not a date and time: 'soon'", None, "run_id is a duplicate: 'a', first seen at day.jsonl:2"]
    """

    def __init__(self) -> None:
        self._first_seen: dict[str, tuple[str, int]] = {}

    def admit_run_id(self, run_id: str, source: str, line_number: int) -> str | None:
        """Record that a line meeting the per-record expectations holds ``run_id``; the duplicate
        reason when an earlier such line holds it already (``None``: the first)."""
        first = self._first_seen.setdefault(run_id, (source, line_number))
        if first == (source, line_number):
            return None
        return duplicate_reason(run_id, *first)

    def check(self, line: LogLine) -> LogLine:
        """``line`` unchanged when it meets the contract (or was rejected already), else the
        same line rejected (``record=None``) with the reason; the run_id is kept."""
        if line.record is None:
            return line
        reason = record_problem(line) or self.admit_run_id(line.record.run_id, line.source, line.line_number)
        if reason is None:
            return line
        return line.rejected(reason)

    def lines(self, lines: Iterable[LogLine]) -> Iterator[LogLine]:
        """:meth:`check` over ``lines``, lazily."""
        for line in lines:
            yield self.check(line)
