"""Benchmark of the LLM judge (issue 4): ``stef evaluate --judge MODEL`` against a local server.

Starts the OpenAI-compatible stub of ``tests/support/llm_server.py`` on 127.0.0.1 (each answer after
``--delay`` seconds, 0.2 by default), writes ``--records`` distinct agent log records and runs the
real ``stef evaluate`` of this checkout (``python -m flows.cli`` with the checkout first on
``PYTHONPATH``) three times in a subprocess:

1. ``--judge openai/gpt-4o-mini --concurrency 16 --cache FILE`` with an empty cache: wall time
   and request count (target: at most 20 s for 1,000 records at 200 ms and 16 in flight; the
   bound is 1000 / 16 × 0.2 s = 12.5 s of waiting plus start-up, about 5 s of it importing litellm);
2. the same command again: every verdict from the cache, zero requests;
3. a server that answers HTTP 500 to a third of the requests at random, with a fresh cache:
   every record still has a status, and those that fell back to the symbolic judge say so.

With ``--nightly``, a fourth run scores the same records as one day with ``stef nightly --judge
MODEL`` in ephemeral mode (a fresh warehouse, so an empty judge cache): its wall time and when its
first request came. That figure has no target; it shows what the nightly adds to the model's
waiting, chiefly the start of Prefect's temporary API, which the first model request waits for.

No network beyond the loopback; the API key is a placeholder set for the subprocess only when
``OPENAI_API_KEY`` is unset. Usage::

    python tests/benchmarks/bench_llm_judge.py [--records 1000] [--concurrency 16] [--delay 0.2] [--nightly]

Exits 1 when a target is missed. Source of the method: STEF paper §2.D.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support

from tests.support.llm_server import StubLLMServer, stub_llm_server, synthetic_records

MODEL = "openai/gpt-4o-mini"
TARGET_S = 20.0
"""Wall seconds allowed for the whole ``stef evaluate`` process of scenario 1 (1,000 records)."""
NIGHTLY_DAY = "2026-11-26"
"""The day the records are scored as with ``--nightly``."""
CHECKOUT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Run:
    """One ``stef evaluate`` run: wall time, what the server saw, what was written."""

    seconds: float
    first_request_s: float | None
    """Seconds from the process start to the server's first request (``None``: no request)."""
    requests: int
    failures: int
    max_in_flight: int
    rows: list[dict[str, Any]]
    returncode: int
    stderr: str


def stef_command() -> list[str]:
    """``python -m flows.cli`` with this interpreter: the ``stef`` command of this checkout (run with
    :data:`CHECKOUT` first on ``PYTHONPATH``, so an installed ``stef`` of another checkout is never measured)."""
    return [sys.executable, "-m", "flows.cli"]


def checkout_env() -> dict[str, str]:
    """The subprocess environment: this checkout first on ``PYTHONPATH``, no Prefect analytics nor
    configured Prefect API (a nightly runs in ephemeral mode), and a placeholder API key when
    ``OPENAI_API_KEY`` is unset (the stub needs none; litellm wants one)."""
    path = os.pathsep.join(p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PYTHONPATH": path}
    env.pop("PREFECT_API_URL", None)
    env.setdefault("OPENAI_API_KEY", "sk-local-placeholder")
    return env


def judge_options(server: StubLLMServer, concurrency: int) -> list[str]:
    """The model judge's options of a measured command: :data:`MODEL` at ``server``, ``concurrency`` in flight."""
    return ["--judge", MODEL, "--api-base", server.url, "--concurrency", str(concurrency)]


def timed(server: StubLLMServer, arguments: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Run ``stef ARGUMENTS`` once with ``server``'s counters zeroed first.

    Returns:
        ``time.perf_counter()`` at the start, the wall seconds, and the finished process.
    """
    server.reset_counts()
    command = [*stef_command(), *arguments]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=checkout_env(), check=False, cwd=CHECKOUT)
    return started, time.perf_counter() - started, done


def figures(
    server: StubLLMServer,
    started: float,
    seconds: float,
    rows: list[dict[str, Any]],
    done: subprocess.CompletedProcess[str],
) -> Run:
    """The :class:`Run` of a process started at ``started`` (``time.perf_counter()``), as ``server`` saw it."""
    first = None if server.first_request_at is None else server.first_request_at - started
    return Run(
        seconds, first, server.requests, server.failures, server.max_in_flight, rows, done.returncode, done.stderr
    )


def run_evaluate(server: StubLLMServer, logs: Path, out: Path, cache: Path, concurrency: int) -> Run:
    """Run ``stef evaluate`` once against ``server`` and collect the figures."""
    arguments = ["evaluate", str(logs), "--out", str(out), *judge_options(server, concurrency), "--cache", str(cache)]
    started, seconds, done = timed(server, arguments)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] if out.exists() else []
    return figures(server, started, seconds, rows, done)


def run_nightly(server: StubLLMServer, records: list[dict[str, Any]], work: Path, concurrency: int) -> Run:
    """Run ``stef nightly --judge MODEL`` once on ``records`` as the day :data:`NIGHTLY_DAY`, with a
    fresh warehouse and no configured Prefect API (ephemeral mode); its rows are read back from the
    warehouse (read-only)."""
    import duckdb

    logs_root = work / "nightly-logs"
    (logs_root / NIGHTLY_DAY).mkdir(parents=True)
    (logs_root / NIGHTLY_DAY / "logs.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in records), encoding="utf-8"
    )
    warehouse = work / "nightly.duckdb"
    arguments = ["nightly", "--date", NIGHTLY_DAY, "--logs-root", str(logs_root), "--warehouse", str(warehouse)]
    started, seconds, done = timed(server, [*arguments, *judge_options(server, concurrency)])
    rows: list[dict[str, Any]] = []
    if warehouse.exists():
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            cursor = conn.execute(
                "SELECT status, judge, judge_fallback_reason, cost_usd FROM evaluations WHERE log_date = ?",
                [NIGHTLY_DAY],
            )
            names = [column[0] for column in cursor.description]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return figures(server, started, seconds, rows, done)


def describe(name: str, run: Run, command: str = "evaluate") -> None:
    """Print one run's figures, one per line: wall time, first request, requests, most in flight,
    records/s, statuses (``command``: the ``stef`` command measured)."""
    statuses = Counter(row.get("status") for row in run.rows)
    fell_back = [row for row in run.rows if row.get("judge_fallback_reason")]
    cost = sum(row.get("cost_usd") or 0.0 for row in run.rows)
    rate = len(run.rows) / run.seconds if run.seconds else 0.0
    print(f"{name}")
    print(f"    wall time      {run.seconds:8.2f} s   (whole stef {command} process)")
    if run.first_request_s is not None:
        print(f"    first request  {run.first_request_s:8.2f} s   after the process started")
    print(f"    requests       {run.requests:8d}     ({run.failures} answered with an error)")
    print(f"    max in flight  {run.max_in_flight:8d}")
    print(f"    records/s      {rate:8.1f}     ({len(run.rows)} rows)")
    print(f"    statuses       {dict(statuses)}")
    print(
        f"    fell back      {len(fell_back):8d}     to the symbolic judge; cost_usd sum ${cost:.4f}; exit code {run.returncode}"
    )
    for reason, count in Counter(row["judge_fallback_reason"] for row in fell_back).most_common(3):
        print(f"        {count} x {reason}")
    if run.returncode:
        print(run.stderr[-2000:])


def main(argv: list[str] | None = None) -> int:
    """Run the three scenarios; return 0 when every target is met."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds before each answer of the stub server")
    parser.add_argument("--fail-share", type=float, default=1 / 3, help="share of HTTP 500 answers in scenario 3")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument(
        "--nightly", action="store_true", help="also score the records as one day with stef nightly (no target)"
    )
    args = parser.parse_args(argv)

    ok = True
    with tempfile.TemporaryDirectory(prefix="stef-bench-") as tmp:
        work = Path(tmp)
        logs = work / "logs.jsonl"
        records = synthetic_records(args.records)
        logs.write_text("".join(json.dumps(row) + "\n" for row in records), encoding="utf-8")
        print(
            f"{args.records} records, stub server delay {args.delay * 1000:.0f} ms, --concurrency {args.concurrency}, judge {MODEL}"
        )
        print(
            f"command: PYTHONPATH={CHECKOUT} {' '.join(stef_command())} evaluate {logs} --out OUT --judge {MODEL} --api-base http://127.0.0.1:PORT/v1 "
            f"--concurrency {args.concurrency} --cache CACHE"
        )

        with stub_llm_server(delay_s=args.delay) as server:
            cold = run_evaluate(server, logs, work / "cold.jsonl", work / "cache.duckdb", args.concurrency)
            describe("1. empty cache", cold)
            warm = run_evaluate(server, logs, work / "warm.jsonl", work / "cache.duckdb", args.concurrency)
            describe("2. rerun, same cache", warm)
        in_time = cold.seconds <= TARGET_S
        print(
            f"   target: wall <= {TARGET_S:.0f} s for scenario 1: {'met' if in_time else 'MISSED'} ({cold.seconds:.2f} s)"
        )
        ok &= cold.returncode == 0 and cold.requests == args.records and in_time
        ok &= cold.max_in_flight <= args.concurrency
        ok &= warm.returncode == 0 and warm.requests == 0 and len(warm.rows) == args.records
        same = [(r["run_id"], r["verdict"], r["confidence"], r["cost_usd"]) for r in cold.rows] == [
            (r["run_id"], r["verdict"], r["confidence"], r["cost_usd"]) for r in warm.rows
        ]
        print(f"   rerun rows equal the first run's (verdict, γ, cost): {same}")
        ok &= same

        with stub_llm_server(delay_s=args.delay, fail_share=args.fail_share, seed=args.seed) as flaky:
            errors = run_evaluate(flaky, logs, work / "flaky.jsonl", work / "flaky-cache.duckdb", args.concurrency)
            describe(f"3. HTTP 500 for {args.fail_share:.0%} of requests", errors)
        with_status = sum(1 for row in errors.rows if row.get("status"))
        fell_back = [row for row in errors.rows if row.get("judge_fallback_reason")]
        say_so = all(row["judge"] == "symbolic" and "HTTP 500" in row["judge_fallback_reason"] for row in fell_back)
        model_rows = sum(1 for row in errors.rows if row.get("judge") == MODEL)
        print(
            f"   every record has a status: {with_status == args.records} ({with_status}/{args.records}); "
            f"model verdicts {model_rows}, fallbacks {len(fell_back)}, every fallback names HTTP 500: {say_so}"
        )
        ok &= (
            errors.returncode == 0
            and with_status == args.records
            and say_so
            and model_rows + len(fell_back) == args.records
            and errors.max_in_flight <= args.concurrency
        )
        if args.nightly:
            with stub_llm_server(delay_s=args.delay) as server:
                nightly = run_nightly(server, records, work, args.concurrency)
                describe(
                    f"4. stef nightly --judge {MODEL}, the same records as one day (no target)", nightly, "nightly"
                )
            ok &= nightly.returncode == 0 and nightly.max_in_flight <= args.concurrency
            ok &= nightly.requests == args.records and len(nightly.rows) == args.records
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
