"""CPU seconds of a command's process tree, by role and by second of its run — not run in CI.

Usage::

    python tests/benchmarks/bench_cpu_by_process.py -- stef nightly --date 2026-11-26 --logs-root DIR --warehouse W.duckdb --quiet
    python tests/benchmarks/bench_cpu_by_process.py -- stef evaluate DIR/2026-11-26 --out OUT.jsonl

Runs the command (ephemeral Prefect: ``PREFECT_API_URL`` unset, analytics off) and samples every
process of its tree every 0.1 s with psutil (user + system CPU seconds). Prints the wall time, a
table of CPU seconds per role (``cmd`` the command's process, ``api`` Prefect's temporary server,
``worker`` the scoring processes, ``other``) for each second of the run, and the totals: on two
cores, total CPU / 2 is the least wall time the command could take were both cores busy all the
time (issue 20: the nightly's bound against ``stef evaluate``'s wall time).
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time

import psutil


def role(process: psutil.Process, command_pid: int) -> str:
    """The role of a process of the tree: ``cmd``, ``api``, ``worker`` (a child of the command) or ``other``."""
    if process.pid == command_pid:
        return "cmd"
    try:
        line = " ".join(process.cmdline())
        parent = process.ppid()
    except psutil.Error:
        return "other"
    if "create_app" in line or "uvicorn" in line:
        return "api"
    return "worker" if parent == command_pid else "other"


def main(argv: list[str]) -> int:
    """Run ``argv`` (after ``--``) and print its CPU seconds by role and second; returns its exit code."""
    command = argv[argv.index("--") + 1 :] if "--" in argv else argv
    if not command:
        print(__doc__)
        return 2
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(child.pid)
    seen: dict[int, float] = {}
    roles: dict[int, str] = {}
    by_second: dict[int, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    totals: dict[str, float] = collections.defaultdict(float)
    while child.poll() is None:
        second = int(time.perf_counter() - started)
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        for process in tree:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            cpu = times.user + times.system
            kind = roles.setdefault(process.pid, role(process, child.pid))
            by_second[second][kind] += cpu - seen.get(process.pid, 0.0)
            totals[kind] += cpu - seen.get(process.pid, 0.0)
            seen[process.pid] = cpu
        time.sleep(0.1)
    wall = time.perf_counter() - started
    names = sorted(totals)
    print(f"wall {wall:.2f} s, exit code {child.returncode}; CPU seconds by role and second:")
    print("  s " + " ".join(f"{name:>7}" for name in names))
    for second in sorted(by_second):
        print(f"{second:3d} " + " ".join(f"{by_second[second][name]:7.2f}" for name in names))
    print("tot " + " ".join(f"{totals[name]:7.2f}" for name in names) + f"   all {sum(totals.values()):.2f}")
    print(f"both cores busy all the time: at least {sum(totals.values()) / 2:.2f} s")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
