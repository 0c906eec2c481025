"""The task that validates one day of agent logs with Great Expectations and quarantines the failing lines."""

from __future__ import annotations

import os
import shlex
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from prefect import task
from prefect.cache_policies import NO_CACHE

from stef.errors import StefError
from stef.log_contract import (
    LOG_EXPECTATIONS,
    LogExpectation,
    duplicate_reason,
    is_extended_iso_timestamp,
    missing_reason,
    rejection_detail,
    rejection_kind,
    timestamp_reason,
)
from stef.logs import LogLine
from stef.models import AgentLogRecord
from stef.module_import import import_uncollected
from tasks._runtime import run_logger

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]


def _model_guarantees(expectation: LogExpectation) -> bool:
    """Whether every :class:`stef.models.AgentLogRecord` meets ``expectation`` by its type alone:
    a ``not_null`` expectation on a field whose annotation admits no ``None`` (pydantic rejects
    such a line before validation: :func:`stef.logs.parse_line`)."""
    if expectation.kind != "not_null":
        return False
    annotation = AgentLogRecord.model_fields[expectation.field].annotation
    return type(None) not in get_args(annotation) and annotation is not type(None)


GX_EXPECTATIONS: tuple[LogExpectation, ...] = tuple(e for e in LOG_EXPECTATIONS if not _model_guarantees(e))
"""The expectations of the log contract Great Expectations checks: those the record model does
not already guarantee (today ``timestamp`` readable and ``run_id`` unique; a ``not_null`` on a
field the model makes non-nullable can never fail, so it costs GX a column scan for nothing)."""

GX_COLUMNS: tuple[str, ...] = tuple(dict.fromkeys(e.field for e in GX_EXPECTATIONS))
"""Record fields handed to Great Expectations (one pandas row per valid record, only these columns)."""


class LogQualityError(StefError):
    """Too large a share of a day's log lines is bad (quarantined); the flow stops before storing."""


TIMESTAMP_COLUMNS: frozenset[str] = frozenset(
    e.field
    for e in GX_EXPECTATIONS
    if all(other.kind == "dateutil_parseable" for other in GX_EXPECTATIONS if other.field == e.field)
)
"""Columns Great Expectations checks with ``expect_column_values_to_be_dateutil_parseable`` only
(a column with another expectation too, ``not_null`` or ``unique``, is handed over as logged: a
null would fail the one or escape the other)."""


def _may_fail(expectation: LogExpectation, value: object, repeated: set[object]) -> bool:
    """Whether ``expectation`` could reject a record whose ``expectation.field`` holds ``value``:
    a null for ``not_null``; for ``dateutil_parseable`` any value but a null or an ISO 8601
    extended timestamp (:func:`stef.log_contract.is_extended_iso_timestamp`, which implies that
    dateutil reads it); for ``unique`` a value in ``repeated`` (held by two records or more)."""
    if expectation.kind == "not_null":
        return value is None
    if expectation.kind == "dateutil_parseable":
        return value is not None and not (isinstance(value, str) and is_extended_iso_timestamp(value))
    if expectation.kind == "unique":
        return value in repeated
    return True  # an expectation this function does not know: Great Expectations judges every row


def _frame(lines: Sequence[LogLine]) -> pd.DataFrame | None:
    """One pandas row per valid record that some expectation of :data:`GX_EXPECTATIONS` could
    reject (:func:`_may_fail`), indexed by the line's position in ``lines``; ``None`` when none
    could (then pandas is not imported either).

    A record every expectation passes by construction is not handed over: a run id held by that
    record alone, a null or ISO 8601 extended timestamp. In a :data:`TIMESTAMP_COLUMNS` column of
    a row handed over, such a timestamp is a null, which the expectation passes: Great
    Expectations parses only the other values with dateutil (about 50 µs each, 1 s for a day of
    20k records otherwise). Its verdict on every row is the one it would give on the whole day:
    a uniqueness expectation sees every record of each repeated value. A day no expectation can
    fail needs no frame, and no Great Expectations import (2.5 s).
    """
    records = [(i, line.record) for i, line in enumerate(lines) if line.record is not None]
    repeated: dict[str, set[object]] = {}
    for expectation in GX_EXPECTATIONS:
        if expectation.kind == "unique":
            counts = Counter(getattr(record, expectation.field) for _, record in records)
            repeated[expectation.field] = {value for value, count in counts.items() if count > 1}
    index: list[int] = []
    columns: dict[str, list[Any]] = {name: [] for name in GX_COLUMNS}
    for i, record in records:
        if not any(_may_fail(e, getattr(record, e.field), repeated.get(e.field, set())) for e in GX_EXPECTATIONS):
            continue
        index.append(i)
        for name in GX_COLUMNS:
            value = getattr(record, name)
            if name in TIMESTAMP_COLUMNS and isinstance(value, str) and is_extended_iso_timestamp(value):
                value = None
            columns[name].append(value)
    if not index:
        return None
    import pandas as pd

    return pd.DataFrame(columns, index=index, dtype=object)


def _expectations() -> list[Any]:
    """The Great Expectations suite of the log contract (:data:`stef.log_contract.LOG_EXPECTATIONS`)."""
    from great_expectations.expectations.core.expect_column_values_to_be_dateutil_parseable import (
        ExpectColumnValuesToBeDateutilParseable,
    )
    from great_expectations.expectations.core.expect_column_values_to_be_unique import ExpectColumnValuesToBeUnique
    from great_expectations.expectations.core.expect_column_values_to_not_be_null import (
        ExpectColumnValuesToNotBeNull,
    )

    classes = {
        "not_null": ExpectColumnValuesToNotBeNull,
        "dateutil_parseable": ExpectColumnValuesToBeDateutilParseable,
        "unique": ExpectColumnValuesToBeUnique,
    }
    return [classes[expectation.kind](column=expectation.field) for expectation in GX_EXPECTATIONS]


def import_great_expectations() -> Any:
    """Import Great Expectations (about 2.5 s, once per process) with its analytics off; return the module.

    Called by the first validation that hands Great Expectations a record (:func:`_frame`).
    """
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    return import_uncollected("great_expectations")  # 0.4 s less than a plain import


def _gx_failures(lines: Sequence[LogLine]) -> dict[int, str]:
    """Position in ``lines`` -> quarantine reason, for the records Great Expectations rejects.

    Duplicated run ids keep their first line; the later ones are reported.
    """
    frame = _frame(lines)
    if frame is None:  # no record can fail an expectation
        return {}
    gx = import_great_expectations()
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    context = gx.get_context(mode="ephemeral", project_config=config)
    batch = (
        context.data_sources.add_pandas("stef_logs")
        .add_dataframe_asset("log_day")
        .add_batch_definition_whole_dataframe("whole_day")
        .get_batch(batch_parameters={"dataframe": frame})
    )
    suite = gx.ExpectationSuite(name="stef_log_day", expectations=_expectations())
    result = batch.validate(suite, result_format={"result_format": "COMPLETE"})
    failures: dict[int, str] = {}
    # Uniqueness last: a run_id belongs to its first line that passes every other expectation,
    # so a valid line is not a "duplicate" of an earlier line that is quarantined anyway.
    outcomes = sorted(
        result.results,
        key=lambda o: (
            o.expectation_config is not None and o.expectation_config.type == "expect_column_values_to_be_unique"
        ),
    )
    for outcome in outcomes:
        if outcome.success:
            continue
        expectation = outcome.expectation_config
        if expectation is None:
            raise StefError("Great Expectations returned a failed result without its expectation")
        column = expectation.kwargs.get("column")
        name = f"{expectation.type}(column={column})"
        if outcome.exception_info.get("raised_exception"):
            raise StefError(
                f"Great Expectations could not run {name}: {outcome.exception_info.get('exception_message')}"
            )
        indexes = [int(i) for i in outcome.result.get("unexpected_index_list") or ()]
        if expectation.type == "expect_column_values_to_be_unique":
            first_seen: dict[str, int] = {}
            for i in sorted(indexes):
                if i in failures:
                    continue  # quarantined for another reason: it does not hold the run_id
                run_id = str(frame.at[i, "run_id"])
                if run_id not in first_seen:
                    first_seen[run_id] = i
                    continue
                first = lines[first_seen[run_id]]
                failures.setdefault(i, duplicate_reason(run_id, first.source, first.line_number))
        elif expectation.type == "expect_column_values_to_not_be_null":
            for i in indexes:
                failures.setdefault(i, missing_reason(str(column)))
        elif expectation.type == "expect_column_values_to_be_dateutil_parseable":
            for i in indexes:
                failures.setdefault(i, timestamp_reason(str(frame.at[i, column])))
        else:
            raise StefError(f"Great Expectations reported {name}, which is not an expectation of the log contract")
    return failures


def _top_reasons(lines: Sequence[LogLine], limit: int = 3) -> Iterator[str]:
    """``"<count> x <kind>"`` for the most common kinds of rejection (:func:`stef.log_contract.rejection_kind`),
    with the counts of the details that tell a kind's reasons apart when it has some
    (:func:`stef.log_contract.rejection_detail`): ``3 x duplicate run_id (2 stored for another day, 1 within the day)``."""
    reasons = [line.reason for line in lines if line.record is None]
    counts = Counter(rejection_kind(reason) for reason in reasons)
    details: dict[str, Counter[str]] = {}
    for reason in reasons:
        detail = rejection_detail(reason)
        if detail is not None:
            details.setdefault(rejection_kind(reason), Counter())[detail] += 1
    for kind, count in counts.most_common(limit):
        parts = details.get(kind)
        suffix = f" ({', '.join(f'{n} {detail}' for detail, n in parts.most_common())})" if parts else ""
        yield f"{count} x {kind}{suffix}"


@task(name="validate-logs", cache_policy=NO_CACHE, persist_result=False)
def validate_logs(lines: list[LogLine], max_bad_share: float = 0.05, raise_on_bad_share: bool = True) -> list[LogLine]:
    """Check a day's records against the log contract with Great Expectations; quarantine the rows that fail.

    The expectations are :data:`stef.log_contract.LOG_EXPECTATIONS`: ``run_id``, ``agent_id``,
    ``agent_version``, ``question``, ``sql`` not null; ``timestamp`` readable as a date and time
    (when present); ``run_id`` unique within the day (the first line meeting the others keeps
    it, later ones are quarantined). Great Expectations checks those the record model does not
    guarantee already (:data:`GX_EXPECTATIONS`) on a frame of their columns and of the records
    one of them could reject (:func:`_frame`: not a record whose run id no other record holds and
    whose timestamp is ISO 8601 or absent). The reasons are worded by :mod:`stef.log_contract`,
    as ``stef evaluate`` words them. Great Expectations is imported on first use, not at module
    import (it costs seconds), and not at all for a day none of whose records could fail.

    Args:
        lines: the day's lines from :func:`tasks.logs.load_logs`.
        max_bad_share: the largest share of bad lines (rejected by the reader + failed here)
            accepted, in [0, 1].
        raise_on_bad_share: raise when the share is above it (``False``: the caller checks with
            :func:`bad_share_error`, e.g. to store the rejected lines first).

    Returns:
        ``lines`` in the same order, with every failing record turned into a quarantined line
        (``record=None``, the failed expectation as ``reason``, same line number and run_id).

    Raises:
        LogQualityError: the bad share exceeds ``max_bad_share`` (message: counts, share, the
            most common reasons).
        ValueError: ``max_bad_share`` is outside [0, 1].
    """
    if not 0.0 <= max_bad_share <= 1.0:
        raise ValueError(f"max_bad_share must be within [0, 1], got {max_bad_share}")
    failures = _gx_failures(lines)
    checked = [line.rejected(failures[i]) if i in failures else line for i, line in enumerate(lines)]
    bad = sum(1 for line in checked if line.record is None)
    share = bad / len(checked) if checked else 0.0
    logger = run_logger()
    logger.info(
        "validated %d lines: %d failed expectations, %d bad in total (%.1f%%)",
        len(lines),
        len(failures),
        bad,
        100 * share,
    )
    error = bad_share_error(checked, max_bad_share)
    if error is not None and raise_on_bad_share:
        raise error
    return checked


def bad_share_error(
    checked: Sequence[LogLine], max_bad_share: float, stored: int = 0, listing: str = "stef quarantine --date DAY"
) -> LogQualityError | None:
    """The :class:`LogQualityError` of a day whose share of bad lines is above ``max_bad_share``, else ``None``.

    The message gives the counts and share, the most common reasons and the first bad lines as
    ``file:line: reason``, so the logs can be fixed without reading the quarantine first.

    Args:
        checked: the day's lines after :func:`validate_logs` (``record is None``: bad).
        max_bad_share: the limit, in [0, 1].
        stored: rejected lines already stored in ``quarantine`` (said in the message when > 0).
        listing: the command that lists them (the run's day and warehouse: :func:`quarantine_command`).
    """
    bad_lines = [line for line in checked if line.record is None]
    share = len(bad_lines) / len(checked) if checked else 0.0
    if share <= max_bad_share:
        return None
    folder = str(Path(checked[0].source).parent) if checked else "the logs"
    first = "; ".join(f"{line.source}:{line.line_number}: {line.reason or 'rejected'}" for line in bad_lines[:3])
    where = (
        f" The {stored} rejected lines are stored in the warehouse's quarantine table (`{listing}`)." if stored else ""
    )
    return LogQualityError(
        f"{len(bad_lines)} of {len(checked)} log lines in {folder} are bad ({share:.1%}), above the limit of "
        f"{max_bad_share:.1%}; most common reasons: {'; '.join(_top_reasons(checked))}; first bad lines: {first}.{where} "
        "Fix the logs, or raise --max-bad-share to store the day with these lines quarantined."
    )


def quarantine_command(log_date: date, warehouse_path: str | Path) -> str:
    """The ``stef quarantine`` command that lists a day's rejected lines, to run as printed.

    >>> quarantine_command(date(2026, 11, 26), "/data/my wh.duckdb")
    "stef quarantine --date 2026-11-26 --warehouse '/data/my wh.duckdb'"
    """
    return f"stef quarantine --date {log_date.isoformat()} --warehouse {shlex.quote(str(warehouse_path))}"
