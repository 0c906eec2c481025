"""Speed of ``stef nightly`` against ``stef evaluate`` on the same records, and of a small nightly — not run in CI.

Usage::

    python tests/benchmarks/bench_nightly_speed.py [--records 20000] [--pairs 3] [--small-runs 3] [--source FILE.jsonl]

Measures whole processes of the installed ``stef`` (next to this Python), in ephemeral mode
(``PREFECT_API_URL`` unset: each nightly starts its own temporary Prefect API), side by side:

1. ``--pairs`` back-to-back pairs of ``stef evaluate DAY --out FILE`` and ``stef nightly --date DAY``
   (a new warehouse each time, the default task runner) on ``--records`` records replicated from
   real agent logs (default: the bundled demo logs; new run ids, the texts repeat): the wall time
   of each, the ratio nightly / evaluate of each pair and their median (target ≤ 1.5), and the
   last nightly's ``--timings`` table;
2. ``--small-runs`` nightly runs of the bundled 120-record demo day (``flows/demo_data/2026-11-26``):
   the wall time of each and their median (target ≤ 8 s).

Exits 1 when a median misses its target (issue 20's acceptance).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_throughput import source_rows, write_records

DAY = "2026-11-26"
RATIO_TARGET = 1.5
SMALL_TARGET_S = 8.0


def environment() -> dict[str, str]:
    """The benchmark's environment: no configured Prefect API (ephemeral mode), no analytics."""
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    return env


def wall(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds and stdout of one child process (it must succeed)."""
    started = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    return time.perf_counter() - started, done.stdout


def timings_table(stdout: str) -> str:
    """The ``--timings`` table of a nightly's output."""
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if "Timings" in line), None)
    if start is None:
        return ""
    end = next((i for i in range(start, len(lines)) if lines[i].strip().startswith("total")), len(lines) - 1)
    return "\n".join(lines[start : end + 1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--small-runs", type=int, default=3)
    parser.add_argument("--source", type=Path, default=None, help="JSONL of records to replicate (bench_throughput's)")
    args = parser.parse_args(argv)
    stef = str(Path(sys.executable).with_name("stef"))
    env = environment()
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        big = root / "big" / DAY
        big.mkdir(parents=True)
        rows = source_rows(args.source)
        write_records(rows, args.records, big / "agent-logs.jsonl")
        ratios, evaluate_runs, nightly_runs, table = [], [], [], ""
        for pair in range(max(1, args.pairs)):
            evaluate_s, _ = wall([stef, "evaluate", str(big), "--out", str(root / "out.jsonl")], env)
            nightly_s, stdout = wall(
                [
                    stef,
                    "nightly",
                    "--date",
                    DAY,
                    "--logs-root",
                    str(big.parent),
                    "--warehouse",
                    str(root / f"big-{pair}.duckdb"),
                    "--quiet",
                    "--timings",
                ],
                env,
            )
            evaluate_runs.append(evaluate_s)
            nightly_runs.append(nightly_s)
            ratios.append(nightly_s / evaluate_s)
            table = timings_table(stdout)
        median_ratio = statistics.median(ratios)
        print(f"records: {args.records} (replicated from {len(rows)} real records), {os.cpu_count()} CPUs")
        print(f"stef evaluate (whole process), s: {', '.join(f'{v:.2f}' for v in evaluate_runs)}")
        print(f"stef nightly (whole process), s:  {', '.join(f'{v:.2f}' for v in nightly_runs)}")
        print(
            f"ratio nightly / evaluate per pair: {', '.join(f'{r:.2f}' for r in ratios)}; "
            f"median {median_ratio:.2f} (target ≤ {RATIO_TARGET})"
        )
        print(table)
        failed |= median_ratio > RATIO_TARGET

        small = root / "small"
        shutil.copytree(str(resources.files("flows.demo_data").joinpath(DAY)), small / DAY)
        small_runs = []
        for run in range(max(1, args.small_runs)):
            seconds, _ = wall(
                [
                    stef,
                    "nightly",
                    "--date",
                    DAY,
                    "--logs-root",
                    str(small),
                    "--warehouse",
                    str(root / f"small-{run}.duckdb"),
                    "--quiet",
                ],
                env,
            )
            small_runs.append(seconds)
        lines = sum(1 for line in (small / DAY / "agent-logs.jsonl").read_text(encoding="utf-8").splitlines() if line)
        median_small = statistics.median(small_runs)
        print(
            f"stef nightly, {lines} records (bundled demo day {DAY}), s: {', '.join(f'{v:.2f}' for v in small_runs)}; "
            f"median {median_small:.2f} (target ≤ {SMALL_TARGET_S:.0f} s)"
        )
        failed |= median_small > SMALL_TARGET_S
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
