"""A 7-day ``stef backfill`` killed after 3 days, then run again — not run in CI.

Usage:

    python tests/benchmarks/bench_backfill_interrupt.py [--days 7] [--kill-after 3] [--records 60] [--signal KILL]

Writes ``--days`` days of agent logs (real NL2SQL-BUGs questions and SQL from the bundled test
sample, ``--records`` a day, unique run ids per day) to a temporary folder, starts
``stef backfill`` over them in its own process group, and kills the whole group (``SIGKILL`` by
default: no clean-up at all; ``--signal INT`` for Ctrl-C) as soon as the command has printed
``--kill-after`` finished days. Then it runs the same command again and checks that every day is
stored exactly once: one ``stored_days`` row per day, ``--records`` runs and evaluations per day,
no duplicate run id, and that the second run skipped the days done before the kill.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "tests" / "fixtures" / "monitoring" / "nl2sql_bugs_sample.jsonl"
FIRST_DAY = date(2026, 11, 23)
DONE_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2}): \d+ lines, ")


def write_logs(root: Path, days: int, per_day: int) -> list[date]:
    """``days`` days of logs from the bundled NL2SQL-BUGs sample (agent ``bird-analyst``, two versions)."""
    from stef.monitor.benchmark import bugs_record_to_log, read_bugs_file

    rows = read_bugs_file(SAMPLE)
    out: list[date] = []
    for index in range(days):
        day = FIRST_DAY + timedelta(days=index)
        folder = root / day.isoformat()
        folder.mkdir(parents=True)
        with (folder / "agent-logs.jsonl").open("w", encoding="utf-8") as handle:
            for number in range(per_day):
                row = rows[(index * per_day + number) % len(rows)]
                record = bugs_record_to_log(row).model_dump(exclude_none=True)
                record.update(
                    run_id=f"{day}-{number}",
                    agent_id="bird-analyst",
                    timestamp=f"{day}T12:00:00+00:00",
                    agent_version="v1.4.0" if number % 2 else "v1.5.0",
                )
                handle.write(json.dumps(record) + "\n")
        out.append(day)
    return out


def command(logs: Path, warehouse: Path, days: list[date]) -> list[str]:
    stef = Path(sys.executable).parent / "stef"
    base = [str(stef)] if stef.is_file() else [sys.executable, "-c", "from flows.cli.main import app; app()"]
    return [
        *base,
        "backfill",
        "--start",
        days[0].isoformat(),
        "--end",
        days[-1].isoformat(),
        "--logs-root",
        str(logs),
        "--warehouse",
        str(warehouse),
    ]


def stored(warehouse: Path) -> dict[str, object]:
    from warehouse import connect

    with connect(warehouse, read_only=True) as conn:
        return {
            "stored_days": conn.execute(
                "SELECT log_date, count(*) FROM stored_days WHERE metrics_at IS NOT NULL GROUP BY log_date ORDER BY log_date"
            ).fetchall(),
            "runs_per_day": conn.execute(
                "SELECT log_date, count(*), count(DISTINCT run_id) FROM agent_runs GROUP BY log_date ORDER BY log_date"
            ).fetchall(),
            "evaluations": conn.execute(
                "SELECT count(*), count(DISTINCT (run_id, evaluator_version)) FROM evaluations"
            ).fetchall()[0],
            "metrics_rows": conn.execute("SELECT count(*) FROM daily_agent_metrics").fetchall()[0][0],
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--kill-after", type=int, default=3)
    parser.add_argument("--records", type=int, default=60)
    parser.add_argument("--signal", choices=("KILL", "INT", "TERM"), default="KILL")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="stef-backfill-"))
    try:
        logs, warehouse = work / "logs", work / "wh.duckdb"
        days = write_logs(logs, args.days, args.records)
        cmd = command(logs, warehouse, days)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "COLUMNS": "200"}
        env.pop("PREFECT_API_URL", None)
        print("$", " ".join(cmd))
        started = time.perf_counter()
        process = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True
        )
        finished: list[str] = []
        killed_at = 0.0
        if process.stdout is None:
            raise RuntimeError("no stdout pipe")
        for text in process.stdout:  # read to the end: after SIGINT, Prefect still reports the crash
            print("  run 1 |", text.rstrip())
            match = DONE_LINE.match(text)
            if match and not killed_at:
                finished.append(match.group(1))
                if len(finished) == args.kill_after:
                    os.killpg(process.pid, getattr(signal, f"SIG{args.signal}"))
                    killed_at = time.perf_counter()
        process.wait(timeout=900)
        print(
            f"sent SIG{args.signal} after {len(finished)} days ({killed_at - started:.1f} s); the process ended "
            f"{time.perf_counter() - killed_at:.1f} s later with exit code {process.returncode}"
        )
        before = stored(warehouse)
        done_before = [str(d) for d, _ in before["stored_days"]]
        print(f"days done before the restart: {len(done_before)} {done_before}")

        second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, check=False)
        for text in second.stdout.splitlines():
            print("  run 2 |", text)
        after = stored(warehouse)
        skipped = [text[:10] for text in second.stdout.splitlines() if ": skipped (already done" in text]
        ran = [text[:10] for text in second.stdout.splitlines() if DONE_LINE.match(text)]
        expected_days = [(d, 1) for d in days]
        checks = {
            "first run killed before finishing": len(done_before) < args.days,
            "second run exit code 0": second.returncode == 0,
            "second run skipped exactly the days done before the kill": skipped == done_before,
            "second run ran the other days": sorted(ran + skipped) == [d.isoformat() for d in days],
            "one stored_days row per day": after["stored_days"] == expected_days,
            f"{args.records} runs per day, no duplicate run id": after["runs_per_day"]
            == [(d, args.records, args.records) for d in days],
            "one evaluation per run": after["evaluations"] == (args.days * args.records, args.days * args.records),
        }
        print(
            f"after the restart: {after['stored_days']!r}\nruns per day: {after['runs_per_day']!r}\n"
            f"evaluations: {after['evaluations']!r}, daily metric rows: {after['metrics_rows']}"
        )
        for text, ok in checks.items():
            print(f"{'ok  ' if ok else 'FAIL'} {text}")
        return 0 if all(checks.values()) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
