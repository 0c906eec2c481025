"""Wall time and peak memory of ``stef nightly`` on one day of 100k records — not run in CI.

Usage:

    python tests/benchmarks/bench_nightly_100k.py [--records 100000] [--task-runner pool] [--workers N]

Builds ``--records`` records in one day folder by replicating the valid records of the bundled
demo logs (real NL2SQL-BUGs / BIRD questions and SQL) with new run ids, then runs the whole
``stef nightly`` command (Prefect temporary server, Great Expectations validation, evaluation,
DuckDB store, metrics, drift) in a child process on a fresh warehouse, and prints:

* wall seconds and records/s of the whole command;
* peak RSS of the largest single process (``getrusage(RUSAGE_CHILDREN)``);
* peak of the summed RSS of the whole process tree (the command, its Prefect server and its
  worker processes), sampled every 0.2 s with psutil when it is installed.

Targets: issue 7, < 5 min wall and < 2 GB on 2 cores; issue 20, the largest process ≤ 1.5 GB
(printed with its verdict; exit 1 when it is above).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.support

from tests.support.demo_records import demo_source_records

DAY = "2026-01-15"


def write_day(logs_root: Path, count: int) -> Path:
    """``<logs_root>/<DAY>/agent-logs.jsonl`` with ``count`` records; returns the file."""
    rows = demo_source_records()
    folder = logs_root / DAY
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "agent-logs.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for index in range(count):
            handle.write(json.dumps({**rows[index % len(rows)], "run_id": f"bench-{index}"}) + "\n")
    return path


class TreeRss:
    """Samples the summed RSS of a process and its descendants in a background thread."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.peak_bytes = 0
        self._pid = pid
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            import psutil
        except ImportError:
            return
        while not self._stop.is_set():
            try:
                root = psutil.Process(self._pid)
                total = 0
                for process in [root, *root.children(recursive=True)]:
                    try:
                        total += process.memory_info().rss
                    except psutil.Error:
                        continue
                self.peak_bytes = max(self.peak_bytes, total)
            except psutil.Error:
                return
            self._stop.wait(self._interval)


def main(argv: list[str] | None = None) -> int:
    """Build the day, run ``stef nightly`` once, print the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--task-runner", choices=("pool", "thread", "process", "dask"), default="pool")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument(
        "--keep", type=Path, default=None, help="Work in this folder and keep it (logs, warehouse, output)."
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        path = write_day(work / "logs", args.records)
        print(
            f"built {args.records} records ({path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        warehouse = work / "bench.duckdb"
        warehouse.unlink(missing_ok=True)
        command = [
            str(Path(sys.executable).with_name("stef")),
            "nightly",
            "--date",
            DAY,
            "--logs-root",
            str(work / "logs"),
            "--warehouse",
            str(warehouse),
            "--task-runner",
            args.task_runner,
        ]
        if args.workers:
            command += ["--workers", str(args.workers)]
        if args.batch_size:
            command += ["--batch-size", str(args.batch_size)]
        env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        started = time.perf_counter()
        with (work / "nightly.out").open("wb") as out, (work / "nightly.err").open("wb") as err:
            child = subprocess.Popen(command, stdout=out, stderr=err, env=env)
            with TreeRss(child.pid) as tree:
                code = child.wait()
        elapsed = time.perf_counter() - started
        largest_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        summary = (work / "nightly.out").read_text(errors="replace").splitlines()[:1]
        if code != 0:
            print((work / "nightly.err").read_text(errors="replace")[-3000:])
            print(f"stef nightly failed with exit code {code}")
            return 1
    print(f"command: {' '.join(command)}")
    print(f"summary: {summary[0] if summary else '(none)'}")
    print(
        f"wall: {elapsed:.1f} s  ({args.records / elapsed:.0f} records/s, task runner {args.task_runner}, {os.cpu_count()} CPUs)"
    )
    print(f"peak RSS, largest process: {largest_kib / 1024:.0f} MiB (target ≤ 1536 MiB)")
    if tree.peak_bytes:
        print(f"peak RSS, whole process tree (sampled): {tree.peak_bytes / 2**20:.0f} MiB")
    return 0 if largest_kib <= 1536 * 1024 else 1


if __name__ == "__main__":
    sys.exit(main())
