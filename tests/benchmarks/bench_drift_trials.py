"""Drift decision rule on real records: 100 random trials per scenario — not run in CI.

Usage:

    python tests/benchmarks/bench_drift_trials.py [--source FILE.jsonl] [--n 5000] [--trials 100]
        [--baseline-incorrect 0.30] [--shift 0.15] [--seed 20261129] [--sweep 100,300,1000,2000]

Scores every record of an NL2SQL-BUGs-format file (default: the evaluation team's shared
``dev_canonical.jsonl``) with the symbolic judge, splits the scores by the records' ``label``
into a pool of correct and a pool of incorrect SQL, and draws versions of an agent from them: each
answer of a version is incorrect with the version's share (then drawn from the incorrect pool,
else from the correct one; with replacement). Three scenarios, ``--trials`` trials each, every
trial printed:

* ``worse``:     baseline ``--baseline-incorrect`` incorrect, candidate ``--shift`` more (default
  30 % vs 45 %), ``--n`` answers per side — expected verdict ``drift`` / ``worse``;
* ``same``:      both versions drawn with the baseline's share — ``drift`` in at most 5 % of trials;
* ``thirty``:    30 answers per side (the worse scenario) — ``insufficient_data``.

``--sweep`` adds the share of ``drift`` verdicts of the first two scenarios at other sample sizes.
Uses the default :class:`stef.monitor.models.DriftThresholds` (the ones ``stef drift`` and the nightly flow use).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from stef.monitor.benchmark import bugs_record_to_log, read_bugs_file
from stef.monitor.drift import compare
from stef.monitor.models import DriftResult, DriftSample, DriftThresholds
from stef.pipeline.evaluate import evaluate_many

Row = tuple[str, "float | None", "str | None", "str | None"]
DEFAULT_SOURCE = Path(__file__).resolve().parents[3] / "shared" / "data" / "nl2sql_bugs" / "dev_canonical.jsonl"


def pools(source: Path) -> dict[bool, list[Row]]:
    """The file's records scored by the symbolic judge, split by label (True = correct SQL)."""
    rows = read_bugs_file(source)
    evaluations = evaluate_many([bugs_record_to_log(row) for row in rows])
    split: dict[bool, list[Row]] = {True: [], False: []}
    for row, e in zip(rows, evaluations, strict=True):
        split[bool(row["label"])].append(
            (
                e.status.value,
                e.score,
                e.verdict.value if e.verdict else None,
                e.filter_status.value if e.filter_status else None,
            )
        )
    return split


def draw(split: dict[bool, list[Row]], n: int, incorrect_share: float, rng: np.random.Generator) -> DriftSample:
    """``n`` answers, each incorrect with probability ``incorrect_share``, drawn with replacement."""
    incorrect = rng.random(n) < incorrect_share
    return DriftSample.from_rows(split[not bad][int(rng.integers(len(split[not bad])))] for bad in incorrect)


def line(trial: int, result: DriftResult) -> str:
    s = result.summary()
    ci = s["mean_delta_ci"]

    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    return (
        f"{trial:>5}  {s['verdict']:<17} {s['direction'] or '-':<6} {s['n_baseline']:>5} {s['n_candidate']:>5}  "
        f"{fmt(s['mean_delta'], '+7.2f')}  [{fmt(ci[0] if ci else None, '+6.2f')}, {fmt(ci[1] if ci else None, '+6.2f')}]  "
        f"{fmt(s['ks_pvalue'], '9.3g')}  {fmt(s['psi'], '6.3f')}  {fmt(s['wasserstein_norm'], '6.3f')}"
    )


HEADER = f"{'trial':>5}  {'verdict':<17} {'dir':<6} {'n_b':>5} {'n_c':>5}  {'mean Δ':>7}  {'95 % CI':^16}  {'KS p':>9}  {'PSI':>6}  {'W/σ':>6}"


def run(
    split: dict[bool, list[Row]],
    name: str,
    n: int,
    shares: tuple[float, float],
    trials: int,
    seed: int,
    thresholds: DriftThresholds,
    verbose: bool = True,
) -> Counter[str]:
    rng = np.random.default_rng(seed)
    outcomes: Counter[str] = Counter()
    if verbose:
        print(
            f"\n== {name}: n = {n} per side, incorrect share {shares[0]:.0%} (baseline) vs {shares[1]:.0%} (candidate)"
        )
        print(HEADER)
    for trial in range(1, trials + 1):
        result = compare(draw(split, n, shares[0], rng), draw(split, n, shares[1], rng), thresholds)
        outcomes[result.verdict.value + (f"/{result.direction.value}" if result.direction else "")] += 1
        if verbose:
            print(line(trial, result), flush=True)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument(
        "--n", type=int, default=5000, help="answers per version in the window (default 5000: ~700 a day over 7 days)"
    )
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--baseline-incorrect", type=float, default=0.30)
    parser.add_argument("--shift", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--sweep", default="", help="comma-separated sample sizes for a summary of both scenarios")
    args = parser.parse_args(argv)
    if not args.source.is_file():
        print(f"error: {args.source}: no such file (give --source, an NL2SQL-BUGs-format JSONL)", file=sys.stderr)
        return 2

    started = time.perf_counter()
    split = pools(args.source)
    thresholds = DriftThresholds()
    for label, name in ((True, "correct"), (False, "incorrect")):
        scores = [row[1] for row in split[label] if row[1] is not None]
        print(
            f"pool {name:<9}: {len(split[label])} records, {len(scores)} scored, mean Φ {statistics.fmean(scores):.2f}, "
            f"sd {statistics.pstdev(scores):.2f}"
        )
    print(f"thresholds: {thresholds.model_dump()}")
    base, worse = args.baseline_incorrect, args.baseline_incorrect + args.shift
    results = {
        "worse": run(
            split, f"worse ({args.shift:+.0%} incorrect)", args.n, (base, worse), args.trials, args.seed, thresholds
        ),
        "same": run(split, "same pool", args.n, (base, base), args.trials, args.seed + 1, thresholds),
        "thirty": run(split, "30 per side", 30, (base, worse), args.trials, args.seed + 2, thresholds),
    }
    print("\n== summary (verdict counts over the trials)")
    for name, outcomes in results.items():
        print(f"{name:<7} " + ", ".join(f"{key}: {count}" for key, count in sorted(outcomes.items())))
    checks = {
        f"worse: drift/worse in {results['worse']['drift/worse']} of {args.trials}": results["worse"]["drift/worse"]
        >= 0.8 * args.trials,
        f"same pool: drift in {sum(v for k, v in results['same'].items() if k.startswith('drift'))} of {args.trials} (at most 5 %)": sum(
            v for k, v in results["same"].items() if k.startswith("drift")
        )
        <= 0.05 * args.trials,
        f"30 per side: insufficient_data in {results['thirty']['insufficient_data']} of {args.trials}": results[
            "thirty"
        ]["insufficient_data"]
        == args.trials,
    }
    for text, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {text}")

    if args.sweep:
        print("\n== sweep: share of trials with verdict drift")
        print(f"{'n per side':>10}  {'same pool':>10}  {'worse (drift/worse)':>20}")
        for n in (int(v) for v in args.sweep.split(",") if v.strip()):
            same = run(split, "same", n, (base, base), args.trials, args.seed + 10 * n, thresholds, verbose=False)
            shifted = run(
                split, "worse", n, (base, worse), args.trials, args.seed + 10 * n + 1, thresholds, verbose=False
            )
            drifted = sum(v for k, v in same.items() if k.startswith("drift"))
            print(f"{n:>10}  {drifted / args.trials:>10.0%}  {shifted['drift/worse'] / args.trials:>20.0%}", flush=True)
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
