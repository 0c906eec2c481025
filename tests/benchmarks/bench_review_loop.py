"""The reviewer loop of issue 18 end to end on a labelled file, as a user runs it — not run in CI.

Usage:

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_review_loop.py FILE [--schema-dir DIR]
        [--n 500] [--seed 7] [--strategy random] [--workdir DIR]

FILE is in the NL2SQL-BUGs format (``question``, ``evidence``, ``sql``, ``db_id``, ``label``; e.g.
the Spider multi-system answers ``dev.jsonl``). Its rows become one day of logs
(:func:`stef.monitor.benchmark.bugs_record_to_log`, run id ``r-<id>``); then, each through the
``stef`` command of this environment:

1. ``stef nightly`` stores them (with ``--schema-dir`` when given);
2. ``stef review sample --n N --strategy S --seed K --out review.csv``; the ``label`` column is
   filled from the file's labels; ``stef review import`` twice (the second must change nothing);
3. ``stef review stats --json``, its ``accuracy`` checked against our own computation on the
   sample (Φ ≥ 75 called correct; an unscored answer called incorrect);
4. ``stef review calibrate --out calib.json``;
5. ``stef evaluate`` of the day without and with ``--calibrator calib.json``: accuracy (Φ ≥ 75)
   and AUROC of ``p_correct`` on the answers the reviewers did not see.

Prints one line per step with its wall time and the figures, then a JSON summary.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DAY = "2026-11-30"


def _stef(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``stef ARGS`` of this interpreter's environment; raise with its output on failure."""
    command = [sys.executable, "-m", "flows.cli", *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"stef {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _called_correct(score: object) -> bool:
    return isinstance(score, int | float) and score >= 75


def _figures(rows: list[dict[str, Any]], truth: dict[str, bool]) -> dict[str, float]:
    """Accuracy (Φ ≥ 75) over all rows and AUROC of ``p_correct`` over the scored ones."""
    from stef.classification_metrics import auroc

    accuracy = sum(_called_correct(r["score"]) == truth[r["run_id"]] for r in rows) / len(rows)
    scored = [r for r in rows if r["p_correct"] is not None]
    area = auroc([float(r["p_correct"]) for r in scored], [truth[r["run_id"]] for r in scored])
    return {"n": len(rows), "accuracy": round(accuracy, 4), "auroc": round(area, 4)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the loop; return the summary printed as JSON."""
    from stef.monitor.benchmark import bugs_record_to_log, read_bugs_file

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--schema-dir", type=Path)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--strategy", default="random")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="stef-review-loop-"))
    logs = workdir / "logs" / DAY
    logs.mkdir(parents=True, exist_ok=True)
    warehouse = str(workdir / "stef.duckdb")
    truth: dict[str, bool] = {}
    with (logs / "answers.jsonl").open("w", encoding="utf-8") as handle:
        for row in read_bugs_file(args.file):
            record = bugs_record_to_log({**row, "id": f"r-{row['id']}"})
            truth[record.run_id] = bool(row["label"])
            handle.write(record.model_dump_json(exclude_none=True) + "\n")
    schema = ["--schema-dir", str(args.schema_dir)] if args.schema_dir else []
    summary: dict[str, Any] = {"file": str(args.file), "answers": len(truth), "workdir": str(workdir)}

    started = time.perf_counter()
    _stef("nightly", "--date", DAY, "--logs-root", str(workdir / "logs"), "--warehouse", warehouse, *schema)
    summary["nightly_s"] = round(time.perf_counter() - started, 1)

    review = workdir / "review.csv"
    started = time.perf_counter()
    _stef(
        "review", "sample", "--warehouse", warehouse, "--n", str(args.n), "--strategy", args.strategy,
        "--seed", str(args.seed), "--out", str(review),
    )  # fmt: skip
    summary["sample_s"] = round(time.perf_counter() - started, 1)
    with review.open(encoding="utf-8", newline="") as handle:
        sample = list(csv.DictReader(handle))
    for row in sample:
        row["label"] = "correct" if truth[row["run_id"]] else "incorrect"
    with review.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(sample[0]))
        writer.writeheader()
        writer.writerows(sample)
    summary["imports"] = [
        _stef("review", "import", str(review), "--warehouse", warehouse).stdout.strip().splitlines()[-1]
        for _ in range(2)
    ]
    stats = json.loads(_stef("review", "stats", "--warehouse", warehouse, "--json").stdout)
    own = sum((r["score"] != "" and float(r["score"]) >= 75) == truth[r["run_id"]] for r in sample) / len(sample)
    summary["stats"] = {k: stats[k] for k in ("n", "accuracy", "kappa", "base_rate_incorrect", "auroc", "ece")}
    summary["own_accuracy"] = round(own, 4)

    calib = workdir / "calib.json"
    started = time.perf_counter()
    calibrated = _stef("review", "calibrate", "--warehouse", warehouse, "--out", str(calib), *schema)
    summary["calibrate_s"] = round(time.perf_counter() - started, 1)
    summary["calibrate_output"] = calibrated.stdout.strip().splitlines()

    plain, refit = workdir / "plain.jsonl", workdir / "refit.jsonl"
    _stef("evaluate", str(logs), "--out", str(plain), *schema)
    _stef("evaluate", str(logs), "--calibrator", str(calib), "--out", str(refit), *schema)
    reviewed = {row["run_id"] for row in sample}
    summary["unreviewed_shipped"] = _figures([r for r in _read_jsonl(plain) if r["run_id"] not in reviewed], truth)
    summary["unreviewed_refit"] = _figures([r for r in _read_jsonl(refit) if r["run_id"] not in reviewed], truth)
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    return summary


if __name__ == "__main__":
    main()
