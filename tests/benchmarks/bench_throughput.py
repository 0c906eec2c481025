"""Throughput of `stef evaluate` (symbolic judge) against the parser's floor — not run in CI.

Usage:

    python tests/benchmarks/bench_throughput.py [--records 20000] [--source FILE.jsonl | geography.json] [--schema-dir DIR] [--observed-catalog FILE]

Builds N records by replicating real agent logs (default: the bundled demo logs, real
NL2SQL-BUGs / BIRD questions and SQL; or any JSONL of agent log records / NL2SQL-BUGs rows), then
times, in the same environment:

1. a whole Python process that only parses every SQL once with ``sqlglot.parse`` (the floor);
2. a whole ``stef evaluate`` process on the same file (symbolic judge, output written);

and prints records/s of both, the ratio (2)/(1) and the peak RSS of (2). Each record gets a new
run_id, but the texts repeat (the bundled logs hold 358 records, 314 distinct questions), so
STEF's memos keyed on text (question specs, parsed hint clauses, token lists of a question) hit
more often than on a day of distinct questions (a question asked again, or answered by several
agent versions, is read once; a day of new questions is not): ``--source`` with a larger file
measures that case. Each side runs ``--repeat`` times
(default 5), alternating, and the fastest run of each counts (as ``timeit`` does): the slower
runs measure the machine's other load, not the program. On a shared machine a lucky fast parse
run can move that ratio by 20 %; the median of the per-pair ratios (parse, then evaluate, back to
back) is printed beside it and is the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

PARSE_ONLY = """
import json, sys
import sqlglot
from sqlglot.errors import SqlglotError
count = 0
with open(sys.argv[1], encoding="utf-8") as handle:
    for line in handle:
        row = json.loads(line)
        try:
            sqlglot.parse(row["sql"], read=row.get("dialect") or None)
        except SqlglotError:
            pass
        count += 1
print(count)
"""


def geoquery_rows(path: Path) -> list[dict]:
    """GeoQuery's ``geography.json`` (text-to-SQL-data format) as records: one per question, its
    variables filled in both the question and the first gold SQL."""
    rows = []
    for query in json.loads(path.read_text(encoding="utf-8")):
        for sentence in query["sentences"]:
            question, sql = sentence["text"], query["sql"][0]
            for name, value in sentence["variables"].items():
                question, sql = question.replace(name, value), sql.replace(name, value)
            rows.append({"question": question, "sql": sql, "dialect": "sqlite", "app_id": "geoquery"})
    return rows


def source_rows(source: Path | None) -> list[dict]:
    """Real records to replicate: the bundled demo logs, a given JSONL file (agent log records or
    NL2SQL-BUGs rows), or GeoQuery's ``geography.json``."""
    if source is not None and source.suffix == ".json":
        return geoquery_rows(source)
    if source is not None:
        lines = source.read_text(encoding="utf-8").splitlines()
    else:
        demo = resources.files("flows.demo_data")
        days = [
            day
            for day in sorted(demo.iterdir(), key=lambda p: p.name)
            if day.is_dir() and day.joinpath("agent-logs.jsonl").is_file()
        ]
        lines = [
            line for day in days for line in day.joinpath("agent-logs.jsonl").read_text(encoding="utf-8").splitlines()
        ]
    rows = []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("sql") and row.get("question"):
            if "evidence" in row:  # NL2SQL-BUGs format
                evidence = (row.get("evidence") or "").strip()
                row = {
                    "question": row["question"],
                    "enriched_question": f"{row['question']} {evidence}" if evidence else None,
                    "sql": row["sql"],
                    "dialect": "sqlite",
                    "app_id": row.get("db_id"),
                }
            rows.append(row)
    return rows


def write_records(rows: list[dict], count: int, path: Path) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for index in range(count):
            row = dict(rows[index % len(rows)])
            row["run_id"] = f"bench-{index}"
            row.setdefault("agent_id", "bench")
            row.setdefault("agent_version", "v1")
            handle.write(json.dumps(row) + "\n")


def timed(command: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(after, before)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--source", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each side; the fastest counts")
    parser.add_argument(
        "--schema-dir", type=Path, default=None, help="passed to stef evaluate (the records' app ids name its files)"
    )
    parser.add_argument("--observed-catalog", type=Path, default=None, help="passed to stef evaluate")
    args = parser.parse_args(argv)
    extra = [
        *(["--schema-dir", str(args.schema_dir)] if args.schema_dir else []),
        *(["--observed-catalog", str(args.observed_catalog)] if args.observed_catalog else []),
    ]
    rows = source_rows(args.source)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "records.jsonl"
        write_records(rows, args.records, data)
        stef = str(Path(sys.executable).with_name("stef"))
        parse_runs, evaluate_runs = [], []
        for _ in range(max(1, args.repeat)):
            parse_runs.append(timed([sys.executable, "-c", PARSE_ONLY, str(data)])[0])
            evaluate_runs.append(timed([stef, "evaluate", str(data), "--out", str(Path(tmp) / "out.jsonl"), *extra]))
        parse_seconds = min(parse_runs)
        evaluate_seconds = min(seconds for seconds, _ in evaluate_runs)
        peak_kib = max(peak for _, peak in evaluate_runs)
    print(
        f"records: {args.records} (replicated from {len(rows)} real records){' with ' + ' '.join(extra) if extra else ''}"
    )
    print(f"parse only (whole process):     {parse_seconds:7.2f} s  {args.records / parse_seconds:8.0f} records/s")
    print(
        f"stef evaluate (whole process):  {evaluate_seconds:7.2f} s  {args.records / evaluate_seconds:8.0f} records/s"
    )
    pair_ratios = sorted(seconds / parse for (seconds, _), parse in zip(evaluate_runs, parse_runs, strict=True))
    print(f"ratio evaluate / parse:         {evaluate_seconds / parse_seconds:7.2f}  (fastest of each side)")
    print(
        f"ratio, median of {len(pair_ratios)} pairs:      {statistics.median(pair_ratios):7.2f}  (each pair run back to back: {', '.join(f'{r:.2f}' for r in pair_ratios)})"
    )
    print(
        f"all runs (s): parse {', '.join(f'{v:.2f}' for v in parse_runs)}; evaluate {', '.join(f'{v:.2f}' for v, _ in evaluate_runs)}"
    )
    print(f"peak RSS of stef evaluate:      {peak_kib / 1024:7.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
