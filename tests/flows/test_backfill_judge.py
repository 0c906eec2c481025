"""``stef backfill`` with a model judge, against the local OpenAI-compatible stub server
(tests/support/llm_server.py, 127.0.0.1 only): days whose records fell back to the symbolic verdict
are rerun, the model options reach every day, ``--max-cost-usd`` caps the whole backfill; and a
day "folder" that is a file is named as such."""

from __future__ import annotations

import json
import math
import re
from datetime import date, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from stef.llm.budget import usd
from tests.support.llm_server import judge_answer, stub_llm_server
from tests.support.monitoring_support import write_log_day
from tests.tasks.helpers import MONDAY, record
from warehouse import connect

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

MODEL = "openai/gpt-4o-mini"


@pytest.fixture(autouse=True)
def placeholder_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stub needs no key, but litellm's openai/ provider wants one in the environment."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-placeholder")
    monkeypatch.delenv("STEF_LLM_API_BASE", raising=False)


def _write_days(logs: Path, days: list[date], per_day: int = 4) -> None:
    for index, day in enumerate(days):  # distinct questions: no verdict of one day is cached for another
        number = 100 * index
        write_log_day(logs, day, [record(f"{day}-{i}", "v1.0", number + i, correct=i != 3) for i in range(per_day)])


def _fallbacks(warehouse_path: Path) -> list[tuple[date, str, int]]:
    """Per day and judge: the evaluated records, and how many fell back."""
    with connect(warehouse_path, read_only=True) as conn:
        rows = conn.execute(
            "SELECT log_date, judge, count(*) FILTER (WHERE judge_fallback_reason IS NOT NULL) FROM evaluations "
            "WHERE status = 'evaluated' GROUP BY log_date, judge ORDER BY log_date, judge"
        ).fetchall()
    return [(row[0], str(row[1]), int(row[2])) for row in rows]


def test_a_day_stored_with_fallbacks_is_rerun_by_the_backfill_and_only_its_fallbacks_are_asked(
    tmp_path: Path,
) -> None:
    logs, warehouse_path = tmp_path / "logs", tmp_path / "wh.duckdb"
    day = MONDAY
    _write_days(logs, [day])
    common = ["--logs-root", str(logs), "--warehouse", str(warehouse_path), "--judge", MODEL]
    with stub_llm_server(delay_s=0.0, answer=lambda body: "not a verdict") as server:
        # The model answers nothing usable: every record falls back, the day is stored (exit 0).
        nightly = CliRunner().invoke(app, ["nightly", "--date", day.isoformat(), *common, "--api-base", server.url])
        assert nightly.exit_code == 0, nightly.output
        assert f"judge {MODEL}: 0 model verdicts, 4 fallbacks to symbolic" in nightly.stdout
        assert _fallbacks(warehouse_path) == [(day, "symbolic", 4)]
        server.answer = judge_answer  # the model is healthy again
        server.reset_counts()
        backfill = ["backfill", "--start", day.isoformat(), "--end", day.isoformat(), *common, "--api-base", server.url]
        first = CliRunner().invoke(app, backfill)
        asked = server.requests
        server.reset_counts()
        second = CliRunner().invoke(app, backfill)
        asked_again = server.requests
    assert first.exit_code == 0, first.output
    lines = first.stdout.splitlines()
    assert (
        f"{day}: 4 lines, 4 scored, 0 unscored (typed status), 0 quarantined, coverage 100.0% of all lines; "
        "rerun: 4 records fell back to the symbolic verdict, none now"
    ) in lines
    assert (
        f"backfill {day} … {day} into {warehouse_path}: 1 days run (1 rerun for records that fell back to the "
        "symbolic verdict), 0 skipped (already done), 0 without logs"
    ) in lines
    assert asked == 4  # --api-base reached the day's run, which asked the model for every fallback
    assert _fallbacks(warehouse_path) == [(day, MODEL, 0)]
    with connect(warehouse_path, read_only=True) as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT log_date) FROM stored_days").fetchall() == [(1, 1)]
        assert conn.execute("SELECT sum(n_judge_fallback), sum(n_llm_judged) FROM daily_agent_metrics").fetchall() == [
            (0, 4)
        ]
    assert second.exit_code == 0, second.output
    assert asked_again == 0  # now done: skipped
    assert [line for line in second.stdout.splitlines() if line.startswith(f"{day}: ")] == [
        f"{day}: skipped (already done with {_version(warehouse_path)}; --force redoes it)"
    ]


def _version(warehouse_path: Path) -> str:
    with connect(warehouse_path, read_only=True) as conn:
        return str(conn.execute("SELECT DISTINCT evaluator_version FROM stored_days").fetchall()[0][0])


def test_max_cost_usd_caps_the_whole_backfill_and_days_left_with_fallbacks_are_rerun_and_said_so(
    tmp_path: Path,
) -> None:
    logs, warehouse_path = tmp_path / "logs", tmp_path / "wh.duckdb"
    days = [MONDAY, MONDAY + timedelta(days=1)]
    _write_days(logs, days)
    # Room for one request of either day: its reserve fits, one answer plus any other reserve does not.
    # A cap per day would let the second day ask once too.
    from stef.models import AgentLogRecord
    from tests.stef.llm.mocked import reserves
    from tests.stef.llm.test_run_budget import USAGE, answer_cost

    held = reserves(
        [
            AgentLogRecord.model_validate(record(f"{day}-{i}", "v1.0", 100 * index + i, correct=i != 3))
            for index, day in enumerate(days)
            for i in range(4)
        ]
    )
    cap = math.ceil(max(held) * 1e9) / 1e9
    assert answer_cost() + min(held) > cap and answer_cost() < min(held)
    with stub_llm_server(delay_s=0.0, usage=USAGE) as server:
        arguments = [
            "backfill",
            "--start",
            days[0].isoformat(),
            "--end",
            days[1].isoformat(),
            "--logs-root",
            str(logs),
            "--warehouse",
            str(warehouse_path),
            "--judge",
            MODEL,
            "--api-base",
            server.url,
            "--concurrency",
            "1",
            "--batch-size",
            "4",
            "--timeout",
            "5",
            "--breaker-failures",
            "0",
            "--max-cost-usd",
            f"{cap:.9f}",
        ]
        first = CliRunner().invoke(app, arguments)
        asked = server.requests
        second_day_asked = sum(1 for body in server.bodies if re.search(r"Region 10[0-3]\b", json.dumps(body)))
        first_day_asked = sum(1 for body in server.bodies if re.search(r"Region [0-3]\b", json.dumps(body)))
        assert first.exit_code == 0, first.output
        with connect(warehouse_path, read_only=True) as conn:
            judged = dict(
                conn.execute(
                    "SELECT log_date, count(*) FILTER (WHERE judge = $model) FROM evaluations "
                    "WHERE status = 'evaluated' GROUP BY log_date",
                    {"model": MODEL},
                ).fetchall()
            )
            budget_fallbacks = conn.execute(
                "SELECT count(*) FROM evaluations WHERE log_date = $d AND judge_fallback_reason LIKE '%cost budget reached%'",
                {"d": days[1]},
            ).fetchall()[0][0]
            reasons = dict(
                conn.execute(
                    "SELECT log_date, list(DISTINCT judge_fallback_reason) FROM evaluations "
                    "WHERE judge_fallback_reason IS NOT NULL GROUP BY log_date"
                ).fetchall()
            )
        assert judged[days[0]] == 1 and asked == first_day_asked == 1  # the first day used the budget ...
        # ... so the second asked nothing (with a cap per day it would have asked once too)
        assert second_day_asked == 0 and judged[days[1]] == 0 and budget_fallbacks == 4
        # Every record kept from the model names the user's cap for the whole backfill and what the
        # backfill spent (one answer, by the first day), never the day's remainder: the summary's figures.
        spent = usd(answer_cost())
        assert reasons[days[0]] == [
            f"{MODEL}: cost budget reached: ${spent} spent of --max-cost-usd ${usd(cap)} for the backfill "
            f"($0 by its earlier days, ${spent} by this day); symbolic judge used"
        ]
        assert reasons[days[1]] == [
            f"{MODEL}: cost budget reached: ${spent} spent of --max-cost-usd ${usd(cap)} for the backfill "
            f"(${spent} by its earlier days, $0 by this day); symbolic judge used"
        ]
        server.reset_counts()
        second = CliRunner().invoke(app, arguments)
    lines = first.stdout.splitlines()
    fell = 4 - judged[days[0]]
    assert any(
        line.startswith(f"{days[0]}: 4 lines, ")
        and line.endswith(f"; {fell} records fell back to the symbolic verdict (the next backfill reruns the day)")
        for line in lines
    ), lines
    assert any(
        line.startswith(f"{days[1]}: 4 lines, ")
        and line.endswith("; 4 records fell back to the symbolic verdict (the next backfill reruns the day)")
        for line in lines
    ), lines
    assert any(line == f"judge {MODEL}: spent ${answer_cost():.6f} of --max-cost-usd ${cap:.6f}" for line in lines)
    assert (
        f"2 days still have records that fell back to the symbolic verdict ({days[0]}, {days[1]}): every backfill "
        "reruns them until the model judges those records; a permanent cause (a --max-cost-usd used up every time, "
        "a record the model never answers) reruns them every time"
    ) in lines
    # The same backfill again: both days are rerun (not skipped), and the summary says they still fall back.
    assert second.exit_code == 0, second.output
    again = second.stdout.splitlines()
    assert any(
        line.startswith(f"{days[1]}: 4 lines, ")
        and "; rerun: 4 records fell back to the symbolic verdict; " in line
        and line.endswith("records still fell back to the symbolic verdict (the next backfill reruns the day)")
        for line in again
    ), again
    assert any("2 days run (2 rerun for records that fell back to the symbolic verdict)" in line for line in again)
    assert any(line.startswith("2 days still have records that fell back") for line in again)


def test_a_day_folder_that_is_a_file_is_named_as_such(tmp_path: Path) -> None:
    logs, warehouse_path = tmp_path / "logs", tmp_path / "wh.duckdb"
    _write_days(logs, [MONDAY])
    second = MONDAY + timedelta(days=1)
    (logs / second.isoformat()).write_text('{"run_id": "x"}\n', encoding="utf-8")
    result = CliRunner().invoke(
        app,
        [
            "backfill",
            "--start",
            MONDAY.isoformat(),
            "--end",
            second.isoformat(),
            "--logs-root",
            str(logs),
            "--warehouse",
            str(warehouse_path),
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        f"{second}: no logs for this day ({logs / second.isoformat()} is a file, not a folder), nothing stored" in lines
    )
    assert any(line.endswith(f"1 days run, 0 skipped (already done), 1 without logs ({second})") for line in lines)
