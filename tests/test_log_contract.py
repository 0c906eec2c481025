"""The log contract is one: the nightly's Great Expectations gate and `stef evaluate` reject the same
lines for the same reasons (issue 17, item 2), whether evaluate runs in one process or several."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flows.cli.evaluate
import stef.log_contract
from stef.log_contract import LOG_EXPECTATIONS, LogContractCheck, is_readable_timestamp
from stef.logs import LogLine, read_log_file
from tasks import validate_logs
from tests.flows.cli.cli_support import invoke, read_jsonl

TIMESTAMPS = [
    "2026-11-20T08:00:00Z",
    "2026-11-20T08:00:00+01:00",
    "2026-11-20 08:00",
    "20 Nov 2026",
    "yesterday-ish",
    "",
    "   ",
    "2026-13-45",
    "2026-02-30T10:00:00Z",
    "25:61",
    "99999999999999999999999",
    "soon",
    "2026-11-20T08:00:00Z trailing words",
    "\u0662\u0660\u0662\u0666-11-20",
    None,
]
"""Readable and unreadable timestamps (ISO 8601 variants, prose, impossible dates, overflow, other digits)."""


def _record(run_id: str, timestamp: str | None) -> str:
    fields: dict[str, object] = {"run_id": run_id, "question": "How many schools?", "sql": "SELECT COUNT(*) FROM t"}
    if timestamp is not None:
        fields["timestamp"] = timestamp
    return json.dumps(fields)


@pytest.fixture
def log_day(tmp_path: Path) -> Path:
    """A day folder of two files: every timestamp of :data:`TIMESTAMPS`, run ids repeated within
    and across the files, a duplicate whose first holder has a bad timestamp, a line that is not
    JSON holding a run id that a later valid line reuses."""
    day = tmp_path / "2026-11-20"
    day.mkdir()
    first = [_record(f"t{i}", ts) for i, ts in enumerate(TIMESTAMPS)]
    first += [_record("dup", "2026-11-20T08:00:00Z"), _record("dup", None), _record("t0", None)]
    first += [_record("late", "never"), _record("late", "2026-11-20T09:00:00Z"), _record("late", None)]
    first += ['{"run_id": "broken", "question": ', _record("broken", None)]
    second = [_record("dup", "2026-11-21T00:00:00Z"), _record("only-b", "2026-11-20T23:59:59-05:00")]
    (day / "a.jsonl").write_text("\n".join(first) + "\n", encoding="utf-8")
    (day / "b.jsonl").write_text("\n".join(second) + "\n", encoding="utf-8")
    return day


def _day_lines(day: Path) -> list[LogLine]:
    return [line for path in sorted(day.glob("*.jsonl")) for line in read_log_file(path)]


def test_the_great_expectations_gate_and_the_python_check_reject_the_same_lines(log_day: Path) -> None:
    lines = _day_lines(log_day)
    gate = validate_logs.fn(lines, max_bad_share=1.0)
    check = list(LogContractCheck().lines(lines))
    assert [(x.source, x.line_number, x.reason) for x in gate] == [(x.source, x.line_number, x.reason) for x in check]
    rejected = {(Path(x.source).name, x.line_number): x.reason for x in check if x.record is None}
    assert rejected[("a.jsonl", 5)] == (
        "timestamp is not a date and time: 'yesterday-ish' (log contract: ISO 8601, e.g. 2026-11-24T09:13:05+00:00)"
    )
    first_dup = f"{log_day / 'a.jsonl'}:16"
    assert (
        rejected[("a.jsonl", 17)]
        == f"run_id is a duplicate: 'dup', first seen at {first_dup} (log contract: run_id is unique)"
    )
    assert rejected[("b.jsonl", 1)].startswith("run_id is a duplicate: 'dup'")
    assert rejected[("a.jsonl", 18)].startswith(f"run_id is a duplicate: 't0', first seen at {log_day / 'a.jsonl'}:1 ")
    # the first "late" has a bad timestamp, so the run id belongs to the second; the third is the duplicate
    assert rejected[("a.jsonl", 19)].startswith("timestamp is not a date and time: 'never'")
    assert ("a.jsonl", 20) not in rejected
    assert rejected[("a.jsonl", 21)].endswith(
        f"first seen at {log_day / 'a.jsonl'}:20 (log contract: run_id is unique)"
    )
    # a line that is not a record holds no run id: the valid line after it keeps "broken"
    assert rejected[("a.jsonl", 22)].startswith("not valid JSON")
    assert ("a.jsonl", 23) not in rejected
    unreadable = {ts for i, ts in enumerate(TIMESTAMPS) if ("a.jsonl", i + 1) in rejected}
    assert unreadable == {ts for ts in TIMESTAMPS if not is_readable_timestamp(ts)}
    assert {"yesterday-ish", "", "   ", "2026-13-45", "2026-02-30T10:00:00Z", "25:61", "soon"} <= unreadable
    assert "2026-11-20T08:00:00Z" not in unreadable and None not in unreadable


def test_great_expectations_gets_only_the_records_an_expectation_could_reject(log_day: Path) -> None:
    """The frame handed to Great Expectations holds the records whose run id another record holds
    too or whose timestamp is not ISO 8601 extended, and no other; in it an ISO 8601 extended
    timestamp is a null (the expectation passes nulls) and every other timestamp is as logged, so
    dateutil still judges the prose, the near-misses and the impossible dates, and names them."""
    from tasks.log_checks import GX_EXPECTATIONS, TIMESTAMP_COLUMNS, _frame

    assert {"timestamp"} == TIMESTAMP_COLUMNS
    for column in TIMESTAMP_COLUMNS:  # only columns whose every GX expectation lets a null pass
        assert {e.kind for e in GX_EXPECTATIONS if e.field == column} == {"dateutil_parseable"}
    lines = _day_lines(log_day)
    frame = _frame(lines)
    assert frame is not None
    valid = {i: line.record for i, line in enumerate(lines) if line.record is not None}
    run_ids = [record.run_id for record in valid.values()]
    not_iso = {
        i
        for i, record in valid.items()
        if record.timestamp is not None and not stef.log_contract.is_extended_iso_timestamp(record.timestamp)
    }
    shared_run_id = {i for i, record in valid.items() if run_ids.count(record.run_id) > 1}
    assert set(frame.index) == not_iso | shared_run_id
    assert {valid[i].run_id for i in shared_run_id} == {
        "dup",
        "t0",
        "late",
    }  # not "broken": its first line is no record
    assert {valid[i].run_id for i in set(valid) - set(frame.index)} >= {"t1", "only-b", "broken"}  # ISO, held once
    handed = {i: value for i, value in frame["timestamp"].items() if value is not None}
    assert handed == {i: valid[i].timestamp for i in not_iso}
    prose_and_impossible = {
        "20 Nov 2026",
        "soon",
        "2026-13-45",
        "2026-02-30T10:00:00Z",
        "2026-11-20T08:00:00Z trailing words",
    }
    assert prose_and_impossible <= set(handed.values())
    assert "2026-11-20T08:00:00Z" not in handed.values() and "2026-11-20 08:00" not in handed.values()
    gate = validate_logs.fn(lines, max_bad_share=1.0)
    reasons = [x.reason for x in gate if x.reason and x.reason.startswith("timestamp")]
    assert (
        "timestamp is not a date and time: '2026-02-30T10:00:00Z' (log contract: ISO 8601, e.g. 2026-11-24T09:13:05+00:00)"
        in reasons
    )


def test_a_day_no_expectation_could_fail_needs_no_great_expectations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ISO 8601 or absent timestamps and run ids held once: nothing to hand over, nothing imported,
    every line kept; one repeated run id on such a day goes to Great Expectations again."""
    import tasks.log_checks

    day = tmp_path / "2026-11-21"
    day.mkdir()
    records = [_record(f"r{i}", ts) for i, ts in enumerate(["2026-11-21T08:00:00Z", None, "2026-11-21T09:30:00+01:00"])]
    (day / "a.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    lines = _day_lines(day)
    assert tasks.log_checks._frame(lines) is None

    def no_import() -> None:
        raise AssertionError("Great Expectations imported for a day no expectation could fail")

    with monkeypatch.context() as patched:
        patched.setattr(tasks.log_checks, "import_great_expectations", no_import)
        assert validate_logs.fn(lines, max_bad_share=0.0) == lines
    (day / "a.jsonl").write_text("\n".join([*records, _record("r1", None)]) + "\n", encoding="utf-8")
    lines = _day_lines(day)
    frame = tasks.log_checks._frame(lines)
    assert frame is not None and list(frame.index) == [1, 3]
    gate = validate_logs.fn(lines, max_bad_share=1.0)
    assert [x.reason for x in gate][:3] == [None, None, None]
    assert (gate[3].reason or "").startswith(f"run_id is a duplicate: 'r1', first seen at {day / 'a.jsonl'}:2 ")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_stef_evaluate_reports_the_rejections_of_the_nightly(
    log_day: Path, tmp_path: Path, workers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flows.cli.evaluate, "BATCH_SIZE", 4)  # duplicates across the workers' batches
    out = tmp_path / "scores.jsonl"
    result = invoke("evaluate", str(log_day), "--out", str(out), "--workers", workers)
    assert result.exit_code == 0, result.output
    rows = read_jsonl(out)
    gate = validate_logs.fn(_day_lines(log_day), max_bad_share=1.0)
    assert len(rows) == len(gate)
    for row, line in zip(rows, gate, strict=True):
        if line.record is None:
            assert row["status"] == "invalid_input"
            assert row["status_reason"] == f"{Path(line.source).name} line {line.line_number}: {line.reason}"
            assert row["run_id"] == line.run_id
        else:
            assert row["status"] == "evaluated", row
    assert any("duplicate run_id" in line and " 4 " in line for line in result.stdout.splitlines())


def test_the_contract_lists_each_expectation_with_a_great_expectations_twin() -> None:
    kinds = {(e.field, e.kind) for e in LOG_EXPECTATIONS}
    assert ("timestamp", "dateutil_parseable") in kinds and ("run_id", "unique") in kinds
    assert LOG_EXPECTATIONS[-1].kind == "unique"  # checked last: see stef/log_contract.py
    assert all(e.gx_type.startswith("expect_column_values_to_") for e in LOG_EXPECTATIONS)


def _dateutil_reads(value: str) -> bool:
    from dateutil.parser import parse

    try:
        parse(value)
    except (ValueError, OverflowError):
        return False
    return True


@pytest.mark.filterwarnings("ignore::dateutil.parser.UnknownTimezoneWarning")
def test_the_iso_fast_path_agrees_with_dateutil() -> None:
    """``is_readable_timestamp`` skips dateutil for ISO 8601 extended timestamps: on every text
    built from ISO pieces and near-misses (other separators, hours 24, offsets with seconds,
    nanoseconds, Arabic-Indic digits, trailing text) its verdict is dateutil's."""
    import itertools

    dates = ["2026-11-24", "2026-02-30", "2024-02-29", "0000-01-01", "9999-12-31", "\u0662\u0660\u0662\u0666-11-24"]
    separators = ["", "T", "t", " ", "X", "\u00a0"]
    times = ["", "09:13", "09:13:05", "09:13:05.123", "09:13:05.123456789", "24:00", "09:60", "0913", "09"]
    offsets = ["", "Z", "z", "+00:00", "-05:30", "+0530", "+24:00", "+05:30:15", " UTC", " trailing"]
    fast = 0
    for date, separator, time_of_day, offset in itertools.product(dates, separators, times, offsets):
        text = f"{date}{separator}{time_of_day}{offset}"
        assert is_readable_timestamp(text) == _dateutil_reads(text), text
        fast += stef.log_contract.is_extended_iso_timestamp(text)
    assert fast > 100  # the fast path decided a good share of them
    # hour 24: Python 3.14's fromisoformat reads it as the next midnight, dateutil rejects it
    assert not stef.log_contract.is_extended_iso_timestamp("2026-11-24T24:00:00Z")
