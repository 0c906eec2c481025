"""Drift decision on real labelled records: detection, false alarms, bias of the error-rate estimate — not run in CI.

Usage:

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_drift_trials.py [--with-schema] [--out-of-fold]
        [--source NAME=FILE[:SCHEMA_DIR] ...] [--trials 100] [--seed 20261129] [--n 700]
        [--baseline-wrong 0.35] [--shift 0.15] [--small-shift 0.10] [--setting NAME=NB:WB:NC:WC ...]
        [--only NAME,...] [--n-resamples 2000] [--verbose]

Measures the decision of :func:`stef.monitor.drift.compare`: drift when the estimated share of
wrong answers (label-shift-corrected from the calibrated ``p_correct``,
:mod:`stef.monitor.error_rate`) moves by at least ``DriftThresholds.error_rate_delta`` (5 points)
with a 95 % interval that excludes 0.

Data: by default both development files of the evaluation team, in the NL2SQL-BUGs format
(``label`` True = correct SQL): NL2SQL-BUGs ``dev_canonical.jsonl`` (``bugs``) and the Spider
multi-system answers ``dev.jsonl`` (``spider``), each with its folder of ``<db_id>.sql`` schemas.
``--source NAME=FILE[:SCHEMA_DIR]`` (repeatable) replaces them.

Pools: every record of a file is scored by the pipeline (``evaluate_many``; with ``--with-schema``
against its database's schema) and filed under its label. A pool entry carries what a warehouse
row gives a drift sample: status, Φ, verdict, filter status, ``p_correct``, calibration key,
suspected error categories and the normalised question (:meth:`DriftSample.from_rows`).

``--out-of-fold``: the shipped calibrators were trained on these same files, so their in-sample
``p_correct`` is optimistic. This mode replaces every scored record's ``p_correct`` by its
out-of-fold prediction of the grouped cross-validation of ``scripts/train_calibrator.py`` (its own
``collect`` and ``cross_validate``, on every given file in the given order: the split the shipped
operating points were measured on when the sources are the two defaults). Φ, verdicts and
suspected errors stay the pipeline's; only ``p_correct`` (which alone decides) changes. Needs
scikit-learn.

Settings, ``--trials`` trials each, per dataset (sizes from ``--n``, shares from
``--baseline-wrong``, ``--shift``, ``--small-shift``):

* ``worse``:        35 % wrong × 700 vs 50 % × 700 — detection rate;
* ``same``:         35 % × 700 vs 35 % × 700 — false-alarm rate;
* ``acceptance``:   35 % × 1,400 vs 50 % × 700 — detection rate;
* ``worse-small``:  35 % × 1,400 vs 45 % × 1,400 — detection rate;
* ``same-unequal``: 35 % × 1,400 vs 35 % × 700 — false-alarm rate at unequal sizes.

``--setting NAME=NB:WB:NC:WC`` replaces the setting of that name or adds one (NB answers with a
share WB wrong on the baseline side, NC with WC on the candidate side); ``--only`` runs some of
the settings. Each answer of a side is wrong with the side's share, then drawn with replacement
from the wrong pool (else from the correct one). Every (dataset, setting) cell has its own
generator, ``numpy.random.default_rng`` seeded with ``(--seed, dataset index, setting index)``
(the index among all settings, so ``--only`` repeats the trials of a full run).

Printed per dataset × setting: the share of trials with verdict ``drift`` and with
``drift``/``worse``; per side the mean estimated share of wrong answers minus the true share (bias),
the RMSE of the estimate and the share of trials whose 95 % interval covers the true share; the
mean delta estimate; for a shift, the information bound of ``p_correct`` (:func:`information_bound`:
the best detection any estimator from the judge's ``p_correct`` can reach). The *true share* is that of the scored answers (the estimate's target: an
unscored answer, e.g. a parse error, has no ``p_correct``), i.e. the nominal share corrected for the
pools' coverage; it differs from the nominal one only where a pool has unscored records. Then a
Markdown table (one row per dataset × setting) and the command line; ``--verbose`` adds one line
per trial. Uses the default :class:`stef.monitor.models.DriftThresholds` and the shipped operating
points; a full default run (2 datasets × 5 settings × 100 trials) takes a few minutes.
"""

from __future__ import annotations

import argparse
import importlib
import math
import shlex
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stef.models import Evaluation
from stef.monitor.benchmark import bugs_record_to_log, read_bugs_file
from stef.monitor.drift import compare
from stef.monitor.error_rate import calibration_key, question_key, shipped_operating_points
from stef.monitor.models import DriftResult, DriftSample, DriftThresholds, DriftVerdict
from stef.pipeline.evaluate import evaluate_many
from stef.pipeline.schema_book import SchemaBook

Entry = tuple[str, float | None, str | None, str | None, float | None, str | None, frozenset[str], str]
"""A pool entry, a warehouse row of a drift sample: (status, score, verdict, filter_status, p_correct,
calibration key, suspected error categories, normalised question)."""

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
DEFAULT_SOURCES = (
    f"bugs={SHARED / 'nl2sql_bugs' / 'dev_canonical.jsonl'}:{SHARED / 'nl2sql_bugs' / 'schemas'}",
    f"spider={SHARED / 'spider_multisys' / 'dev.jsonl'}:{SHARED / 'spider_multisys' / 'schemas'}",
)
FALSE_ALARM_LIMIT = 0.05
BIAS_LIMIT = 0.08


@dataclass(frozen=True)
class Source:
    """One development file in the NL2SQL-BUGs format, optionally with its folder of schemas."""

    name: str
    file: Path
    schema_dir: Path | None

    @classmethod
    def parse(cls, spec: str) -> Source:
        """``NAME=FILE[:SCHEMA_DIR]``, e.g. ``bugs=dev.jsonl:schemas``."""
        name, sep, rest = spec.partition("=")
        file, _, schema_dir = rest.partition(":")
        if not sep or not name or not file:
            raise argparse.ArgumentTypeError(f"{spec!r}: expected NAME=FILE[:SCHEMA_DIR]")
        return cls(name, Path(file), Path(schema_dir) if schema_dir else None)


@dataclass(frozen=True)
class Setting:
    """One comparison: ``n_baseline`` answers with a share ``wrong_baseline`` wrong against ``n_candidate`` with ``wrong_candidate``."""

    name: str
    n_baseline: int
    wrong_baseline: float
    n_candidate: int
    wrong_candidate: float

    @classmethod
    def parse(cls, spec: str) -> Setting:
        """``NAME=NB:WB:NC:WC``, e.g. ``big=2000:0.3:2000:0.4``."""
        name, sep, rest = spec.partition("=")
        parts = rest.split(":")
        try:
            if not sep or not name or len(parts) != 4:
                raise ValueError
            setting = cls(name, int(parts[0]), float(parts[1]), int(parts[2]), float(parts[3]))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{spec!r}: expected NAME=NB:WB:NC:WC, e.g. worse=700:0.35:700:0.5"
            ) from None
        if min(setting.n_baseline, setting.n_candidate) < 1 or not all(
            0.0 <= w <= 1.0 for w in (setting.wrong_baseline, setting.wrong_candidate)
        ):
            raise argparse.ArgumentTypeError(f"{spec!r}: sizes must be positive and shares in [0, 1]")
        return setting

    @property
    def equal_shares(self) -> bool:
        """Both sides have the same share of wrong answers: a ``drift`` verdict is a false alarm."""
        return math.isclose(self.wrong_baseline, self.wrong_candidate)

    def describe(self) -> str:
        return (
            f"baseline {self.wrong_baseline:.0%} wrong × {self.n_baseline}, "
            f"candidate {self.wrong_candidate:.0%} wrong × {self.n_candidate}"
        )


def default_settings(n: int, baseline: float, shift: float, small_shift: float) -> list[Setting]:
    """The five settings of the module docstring."""
    return [
        Setting("worse", n, baseline, n, baseline + shift),
        Setting("same", n, baseline, n, baseline),
        Setting("acceptance", 2 * n, baseline, n, baseline + shift),
        Setting("worse-small", 2 * n, baseline, 2 * n, baseline + small_shift),
        Setting("same-unequal", 2 * n, baseline, n, baseline),
    ]


def score(source: Source, with_schema: bool) -> tuple[list[dict[str, Any]], list[Evaluation]]:
    """The file's records and their pipeline evaluations (same order); no time cap, so runs are repeatable."""
    raws = read_bugs_file(source.file)
    book = SchemaBook(source.schema_dir) if with_schema else None
    return raws, evaluate_many([bugs_record_to_log(raw) for raw in raws], time_cap_s=None, schemas=book)


def key_of(e: Evaluation) -> str | None:
    """The calibration key of an evaluation's ``p_correct``."""
    return calibration_key(e.judge, e.schema_report is not None, e.observed_report is not None)


def out_of_fold(
    sources: Sequence[Source], scored: dict[str, tuple[list[dict[str, Any]], list[Evaluation]]]
) -> dict[str, list[float | None]]:
    """Per source, every record's out-of-fold ``p_correct`` (grouped CV of ``scripts/train_calibrator.py``).

    A record keeps the pipeline's value when it has none, when its calibration key is not a
    feature set of the training script, or when the script did not judge it under that feature set
    (counted and printed). Also checks the mapping row → record: labels and questions agree, and the
    shipped calibrator applied to the script's features gives the pipeline's ``p_correct``.

    Raises:
        SystemExit: the script's rows do not line up with the records.
    """
    sys.path.insert(0, str(REPO / "scripts"))
    tc: Any = importlib.import_module("train_calibrator")
    from stef.pipeline.judge.calibrate import load_calibrator

    started = time.perf_counter()
    rows = tc.collect([(s.name, s.file, s.schema_dir) for s in sources])
    index: list[tuple[str, int]] = [(s.name, i) for s in sources for i in range(len(scored[s.name][0]))]
    if len(rows) != len(index):
        raise SystemExit(f"error: train_calibrator.collect gave {len(rows)} rows for {len(index)} records")
    for row, (name, i) in zip(rows, index, strict=True):
        raw = scored[name][0][i]
        if row.dataset != name or row.label is not bool(raw["label"]) or row.question != f"{name}:{raw['question']}":
            raise SystemExit(f"error: row of {name} record {i} does not match the record (dataset, label or question)")

    keys = {key_of(e) for _, evaluations in scored.values() for e in evaluations if e.p_correct is not None}
    needed = sorted({str(key) for key in keys if key in tc.FILES} & {fs for row in rows for fs in row.features})
    predictions: dict[str, dict[int, float]] = {}
    for fs in needed:
        usable = [row for row in rows if fs in row.features]
        names = sorted({n for row in usable for n in row.features[fs]})
        c, _report, predictions[fs] = tc.cross_validate(rows, fs, names)
        print(f"out-of-fold: feature set {fs!r}, {len(usable)} judged rows, C = {c}")

    out: dict[str, list[float | None]] = {s.name: [] for s in sources}
    kept: Counter[str] = Counter()
    worst = 0.0
    mismatched = 0
    pooled: dict[tuple[str, bool], list[float]] = defaultdict(list)
    shipped = {fs: load_calibrator(tc.FILES[fs]) for fs in needed}
    for row_index, (row, (name, i)) in enumerate(zip(rows, index, strict=True)):
        e = scored[name][1][i]
        key = key_of(e)
        if e.p_correct is None:
            out[name].append(None)
            continue
        if key is None or key not in predictions or key not in row.features:
            kept[str(key)] += 1
            out[name].append(e.p_correct)
            continue
        in_sample = round(tc.scored_probability(row, key, shipped[key].probability(row.features[key])), 4)
        gap = abs(in_sample - e.p_correct)
        worst = max(worst, gap)
        mismatched += gap > 1e-3
        p = round(tc.scored_probability(row, key, predictions[key][row_index]), 4)
        out[name].append(p)
        pooled[(key, row.label)].append(p)
    points = shipped_operating_points()
    for fs in needed:
        correct, wrong = pooled[(fs, True)], pooled[(fs, False)]
        print(
            f"out-of-fold {fs}: mean p of correct answers {statistics.fmean(correct):.4f} (shipped a "
            f"{points[fs].mean_p_correct:.4f}), of wrong answers {statistics.fmean(wrong):.4f} (shipped b "
            f"{points[fs].mean_p_incorrect:.4f}), pooled over {', '.join(s.name for s in sources)}"
        )
    print(
        f"mapping check: shipped calibrator on the script's features vs the pipeline's p_correct: largest gap "
        f"{worst:.4f}, {mismatched} records off by more than 0.001"
    )
    if kept:
        print(f"kept the in-sample p_correct (no out-of-fold prediction): {dict(kept)}")
    print(f"out-of-fold predictions in {time.perf_counter() - started:.0f} s")
    return out


def pools(
    raws: list[dict[str, Any]], evaluations: list[Evaluation], p_correct: Sequence[float | None]
) -> dict[bool, list[Entry]]:
    """The records as warehouse rows, split by label (True = correct SQL)."""
    split: dict[bool, list[Entry]] = {True: [], False: []}
    for raw, e, p in zip(raws, evaluations, p_correct, strict=True):
        split[bool(raw["label"])].append(
            (
                e.status.value,
                e.score,
                e.verdict.value if e.verdict is not None else None,
                e.filter_status.value if e.filter_status is not None else None,
                p,
                key_of(e),
                frozenset(err.category for err in e.suspected_errors),
                question_key(raw.get("question") or ""),
            )
        )
    return split


def scored_share(pool: list[Entry]) -> float:
    """Share of a pool's records that get a score (and so enter the error-rate estimate)."""
    return sum(1 for entry in pool if entry[0] == "evaluated" and entry[1] is not None) / len(pool)


def true_share(split: dict[bool, list[Entry]], wrong: float) -> float:
    """Expected share of wrong answers among the *scored* answers of a side drawn with ``wrong`` wrong."""
    s_wrong, s_correct = wrong * scored_share(split[False]), (1.0 - wrong) * scored_share(split[True])
    return s_wrong / (s_wrong + s_correct)


def draw(split: dict[bool, list[Entry]], n: int, wrong_share: float, rng: np.random.Generator) -> DriftSample:
    """``n`` answers, each wrong with probability ``wrong_share``, drawn with replacement from that pool."""
    wrong = rng.random(n) < wrong_share
    return DriftSample.from_rows(split[not bad][int(rng.integers(len(split[not bad])))] for bad in wrong)


def describe_pools(split: dict[bool, list[Entry]]) -> None:
    """Records, coverage and mean p per pool and calibration key, against the shipped operating points."""
    points = shipped_operating_points()
    for label, name in ((True, "correct"), (False, "wrong")):
        pool = split[label]
        by_key: dict[str, list[float]] = defaultdict(list)
        for entry in pool:
            if entry[0] == "evaluated" and entry[1] is not None and entry[4] is not None:
                by_key[str(entry[5])].append(entry[4])
        parts = []
        for key, ps in sorted(by_key.items()):
            point = points.get(key)
            reference = (
                ""
                if point is None
                else f" (shipped {'a' if label else 'b'} {point.mean_p_correct if label else point.mean_p_incorrect:.3f})"
            )
            parts.append(f"{key}: {len(ps)} with mean p {statistics.fmean(ps):.3f}{reference}")
        print(f"  pool {name:<7}: {len(pool)} records, {scored_share(pool):.1%} scored; " + "; ".join(parts))


@dataclass
class Trial:
    """What one comparison gave."""

    verdict: str
    direction: str | None
    estimate_b: float | None
    ci_b: tuple[float, float] | None
    estimate_c: float | None
    ci_c: tuple[float, float] | None
    delta: float | None
    ci_delta: tuple[float, float] | None

    @classmethod
    def of(cls, result: DriftResult) -> Trial:
        b, c, d = result.error_rate_baseline, result.error_rate_candidate, result.error_rate
        return cls(
            result.verdict.value,
            result.direction.value if result.direction is not None else None,
            b.estimate if b is not None else None,
            (b.ci_low, b.ci_high) if b is not None else None,
            c.estimate if c is not None else None,
            (c.ci_low, c.ci_high) if c is not None else None,
            d.delta if d is not None else None,
            (d.ci_low, d.ci_high) if d is not None else None,
        )

    def line(self, number: int) -> str:
        def fmt(value: float | None, interval: tuple[float, float] | None, spec: str) -> str:
            if value is None or interval is None:
                return f"{'-':<23}"
            return f"{value:{spec}} [{interval[0]:{spec}}, {interval[1]:{spec}}]".ljust(23)

        return (
            f"{number:>5}  {self.verdict:<17} {self.direction or '-':<6}  {fmt(self.estimate_b, self.ci_b, '.3f')}  "
            f"{fmt(self.estimate_c, self.ci_c, '.3f')}  {fmt(self.delta, self.ci_delta, '+.3f')}"
        )


TRIAL_HEADER = f"{'trial':>5}  {'verdict':<17} {'dir':<6}  {'baseline π [95 % CI]':<23}  {'candidate π [95 % CI]':<23}  Δ [95 % CI]"


@dataclass
class Summary:
    """Figures of one dataset × setting over its trials."""

    dataset: str
    setting: Setting
    target_b: float
    target_c: float
    trials: list[Trial]
    seconds: float
    bound: tuple[float, float] = (math.nan, math.nan)
    """:func:`information_bound`: the smallest standard error of the delta and the best detection."""

    @property
    def verdicts(self) -> Counter[str]:
        return Counter(t.verdict + (f"/{t.direction}" if t.direction else "") for t in self.trials)

    def share(self, verdict: str, direction: str | None = None) -> float:
        hits = sum(1 for t in self.trials if t.verdict == verdict and (direction is None or t.direction == direction))
        return hits / len(self.trials)

    @staticmethod
    def _errors(values: list[float | None], target: float) -> list[float]:
        return [v - target for v in values if v is not None]

    def bias(self, side: str) -> float:
        errors = self._errors(self._estimates(side), self._target(side))
        return statistics.fmean(errors) if errors else math.nan

    def rmse(self, side: str) -> float:
        errors = self._errors(self._estimates(side), self._target(side))
        return math.sqrt(statistics.fmean([e * e for e in errors])) if errors else math.nan

    def covered(self, side: str) -> float:
        target = self._target(side)
        intervals = [self._interval(t, side) for t in self.trials]
        known = [ci for ci in intervals if ci is not None]
        return sum(1 for low, high in known if low <= target <= high) / len(known) if known else math.nan

    def mean_estimate(self, side: str) -> float:
        values = [v for v in self._estimates(side) if v is not None]
        return statistics.fmean(values) if values else math.nan

    def missing(self) -> int:
        return sum(1 for t in self.trials if t.delta is None)

    def _target(self, side: str) -> float:
        return {"b": self.target_b, "c": self.target_c, "d": self.target_c - self.target_b}[side]

    def _estimates(self, side: str) -> list[float | None]:
        return [{"b": t.estimate_b, "c": t.estimate_c, "d": t.delta}[side] for t in self.trials]

    @staticmethod
    def _interval(trial: Trial, side: str) -> tuple[float, float] | None:
        return {"b": trial.ci_b, "c": trial.ci_c, "d": trial.ci_delta}[side]

    def report(self) -> None:
        s = self.setting
        kind = "false-alarm rate" if s.equal_shares else "detection rate"
        print(
            f"\n== {self.dataset} × {s.name}: {s.describe()} — among the scored answers {self.target_b:.1%} vs "
            f"{self.target_c:.1%}; {len(self.trials)} trials ({self.seconds:.0f} s)"
        )
        print("verdicts: " + ", ".join(f"{key} {count}" for key, count in sorted(self.verdicts.items())))
        print(
            f"drift in {self.share(DriftVerdict.DRIFT.value):.0%} of the trials ({kind}), "
            f"drift/worse in {self.share(DriftVerdict.DRIFT.value, 'worse'):.0%}"
        )
        for side, name in (("b", "baseline "), ("c", "candidate"), ("d", "delta    ")):
            print(
                f"{name} estimate mean {self.mean_estimate(side):+.3f} (true {self._target(side):+.3f}): "
                f"bias {self.bias(side):+.3f}, RMSE {self.rmse(side):.3f}, "
                f"95 % interval covers the true value in {self.covered(side):.0%} of the trials"
            )
        if self.missing():
            print(f"no error-rate delta in {self.missing()} trials")
        if not s.equal_shares:
            print(
                f"information bound of p_correct: standard error of the delta ≥ {self.bound[0]:.3f}, "
                f"detection at 95 % ≤ {self.bound[1]:.0%}"
            )

    def notes(self) -> list[str]:
        """What falls outside the expected behaviour."""
        found = []
        where = f"{self.dataset} × {self.setting.name}"
        drift = self.share(DriftVerdict.DRIFT.value)
        if self.setting.equal_shares and drift > FALSE_ALARM_LIMIT:
            found.append(f"{where}: false-alarm rate {drift:.1%} above {FALSE_ALARM_LIMIT:.0%}")
        for side, name in (("b", "baseline"), ("c", "candidate")):
            if abs(self.bias(side)) > BIAS_LIMIT:
                found.append(f"{where}: {name} bias {self.bias(side):+.3f} beyond ±{BIAS_LIMIT}")
            if self.covered(side) < 0.9:
                found.append(f"{where}: {name} 95 % interval covers the true share in only {self.covered(side):.0%}")
        if self.share(DriftVerdict.INSUFFICIENT_DATA.value):
            found.append(f"{where}: insufficient_data in {self.share(DriftVerdict.INSUFFICIENT_DATA.value):.0%}")
        return found


def information_bound(split: dict[bool, list[Entry]], setting: Setting, bins: int = 20) -> tuple[float, float]:
    """The best any estimator from ``p_correct`` can do on this setting: (standard error of the delta, detection).

    The share of wrong answers is the weight of a two-component mixture of the judge's ``p_correct``
    distributions over correct and over wrong answers (here: the pools', in ``bins`` quantile bins).
    Its Fisher information per answer is ``I(π) = Σ_j (f1_j − f0_j)² / (π f1_j + (1 − π) f0_j)``, so no
    unbiased estimator has a standard error below ``1 / sqrt(n I(π))`` (Cramér–Rao); the detection of a
    95 % two-sided test with that error is ``Φ(|Δ| / se − 1.96)``. Binning loses a little information:
    a bound, slightly optimistic for the plain bins.
    """
    from scipy.stats import norm

    wrong = np.asarray([e[4] for e in split[False] if e[0] == "evaluated" and e[4] is not None], dtype=float)
    right = np.asarray([e[4] for e in split[True] if e[0] == "evaluated" and e[4] is not None], dtype=float)
    edges = np.unique(np.quantile(np.concatenate([wrong, right]), np.linspace(0.0, 1.0, bins + 1)))
    edges[0], edges[-1] = -np.inf, np.inf
    f1 = np.histogram(wrong, edges)[0] / wrong.size
    f0 = np.histogram(right, edges)[0] / right.size

    def variance(n: int, share: float) -> float:
        mixture = share * f1 + (1.0 - share) * f0
        information = float(np.sum(np.where(mixture > 0, (f1 - f0) ** 2 / np.where(mixture > 0, mixture, 1.0), 0.0)))
        return 1.0 / (n * information)

    se = math.sqrt(
        variance(setting.n_baseline, setting.wrong_baseline) + variance(setting.n_candidate, setting.wrong_candidate)
    )
    shift = abs(setting.wrong_candidate - setting.wrong_baseline)
    return se, float(norm.cdf(shift / se - norm.ppf(0.975))) if shift else 0.0


def run(
    dataset: str,
    split: dict[bool, list[Entry]],
    setting: Setting,
    trials: int,
    rng: np.random.Generator,
    thresholds: DriftThresholds,
    verbose: bool,
) -> Summary:
    """``trials`` comparisons of the setting on one dataset's pools."""
    started = time.perf_counter()
    if verbose:
        print(f"\n-- {dataset} × {setting.name}: {setting.describe()}")
        print(TRIAL_HEADER)
    results: list[Trial] = []
    for number in range(1, trials + 1):
        baseline = draw(split, setting.n_baseline, setting.wrong_baseline, rng)
        candidate = draw(split, setting.n_candidate, setting.wrong_candidate, rng)
        trial = Trial.of(compare(baseline, candidate, thresholds))
        results.append(trial)
        if verbose:
            print(trial.line(number), flush=True)
    return Summary(
        dataset,
        setting,
        true_share(split, setting.wrong_baseline),
        true_share(split, setting.wrong_candidate),
        results,
        time.perf_counter() - started,
        information_bound(split, setting),
    )


def markdown(summaries: Sequence[Summary], caption: str) -> str:
    """One row per dataset × setting, ready to paste into a README."""
    lines = [
        caption,
        "",
        "| data | setting | baseline wrong × n | candidate wrong × n | drift | drift/worse | bias b | bias c "
        "| RMSE b | RMSE c | mean Δ̂ (true) | CI covers b / c | best detection |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        t = s.setting
        drift = s.share(DriftVerdict.DRIFT.value)
        lines.append(
            f"| {s.dataset} | {t.name} | {t.wrong_baseline:.0%} × {t.n_baseline:,} | {t.wrong_candidate:.0%} × {t.n_candidate:,} "
            f"| {drift:.0%}{' (false alarm)' if t.equal_shares else ''} | {s.share(DriftVerdict.DRIFT.value, 'worse'):.0%} "
            f"| {s.bias('b'):+.3f} | {s.bias('c'):+.3f} | {s.rmse('b'):.3f} | {s.rmse('c'):.3f} "
            f"| {s.mean_estimate('d'):+.3f} ({s.target_c - s.target_b:+.3f}) | {s.covered('b'):.0%} / {s.covered('c'):.0%} "
            f"| {'–' if t.equal_shares else f'{s.bound[1]:.0%}'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source",
        action="append",
        type=Source.parse,
        metavar="NAME=FILE[:SCHEMA_DIR]",
        help="an NL2SQL-BUGs-format file, optionally with its schemas (repeatable; default: bugs and spider)",
    )
    parser.add_argument("--with-schema", action="store_true", help="score the records against their schemas")
    parser.add_argument(
        "--out-of-fold", action="store_true", help="use grouped-CV out-of-fold p_correct (needs scikit-learn)"
    )
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--n", type=int, default=700, help="answers per side (the larger sides have twice as many)")
    parser.add_argument("--baseline-wrong", type=float, default=0.35, help="share of wrong answers of the baseline")
    parser.add_argument("--shift", type=float, default=0.15, help="extra wrong share of worse and acceptance")
    parser.add_argument("--small-shift", type=float, default=0.10, help="extra wrong share of worse-small")
    parser.add_argument(
        "--setting",
        action="append",
        type=Setting.parse,
        default=[],
        metavar="NAME=NB:WB:NC:WC",
        help="replace the setting of that name or add one (repeatable)",
    )
    parser.add_argument("--only", help="comma-separated names of the settings to run (default: all)")
    parser.add_argument("--n-resamples", type=int, help="bootstrap resamples per interval (≥ 100; default 2000)")
    parser.add_argument("--verbose", action="store_true", help="print every trial")
    args = parser.parse_args(argv)
    command = shlex.join(["PYTHONPATH=.", ".venv/bin/python", sys.argv[0], *(sys.argv[1:] if argv is None else argv)])

    sources: list[Source] = args.source or [Source.parse(spec) for spec in DEFAULT_SOURCES]
    if len({s.name for s in sources}) != len(sources):
        parser.error("two sources share a name")
    for s in sources:
        if not s.file.is_file():
            parser.error(f"{s.file}: no such file (give --source NAME=FILE[:SCHEMA_DIR], an NL2SQL-BUGs-format JSONL)")
        if args.with_schema and (s.schema_dir is None or not s.schema_dir.is_dir()):
            parser.error(f"--with-schema: source {s.name} has no schema folder ({s.schema_dir})")
    settings = default_settings(args.n, args.baseline_wrong, args.shift, args.small_shift)
    for extra in args.setting:
        names = [s.name for s in settings]
        if extra.name in names:
            settings[names.index(extra.name)] = extra
        else:
            settings.append(extra)
    selected = {s.name for s in settings}
    if args.only:
        wanted = {name.strip() for name in args.only.split(",") if name.strip()}
        if wanted - selected:
            known = ", ".join(s.name for s in settings)
            parser.error(f"--only: unknown settings {', '.join(sorted(wanted - selected))} (known: {known})")
        selected = wanted
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    try:
        thresholds = DriftThresholds() if args.n_resamples is None else DriftThresholds(n_resamples=args.n_resamples)
    except ValueError as exc:
        parser.error(f"--n-resamples: {exc}")

    started = time.perf_counter()
    judge = "symbolic judge with schemas" if args.with_schema else "symbolic judge without schemas"
    mode = "out-of-fold p_correct (grouped CV)" if args.out_of_fold else "in-sample p_correct (shipped calibrators)"
    print(f"mode: {mode}, {judge}")
    if not args.out_of_fold:
        print("  (the shipped calibrators were trained on these files: in-sample p_correct is optimistic)")
    print(f"thresholds: {thresholds.model_dump()}")
    scored = {s.name: score(s, args.with_schema) for s in sources}
    print(f"scored {sum(len(r) for r, _ in scored.values())} records in {time.perf_counter() - started:.0f} s")
    if args.out_of_fold:
        p_correct = out_of_fold(sources, scored)
    else:
        p_correct = {name: [e.p_correct for e in evaluations] for name, (_, evaluations) in scored.items()}

    summaries: list[Summary] = []
    for d, s in enumerate(sources):
        split = pools(*scored[s.name], p_correct[s.name])
        print(f"\n# {s.name}: {s.file}")
        describe_pools(split)
        for k, setting in enumerate(settings):
            if setting.name not in selected:
                continue
            rng = np.random.default_rng([args.seed, d, k])
            summary = run(s.name, split, setting, args.trials, rng, thresholds, args.verbose)
            summary.report()
            summaries.append(summary)

    caption = f"*{mode}, {judge}; {args.trials} trials per row, default drift thresholds.*"
    print("\n== Markdown\n")
    print(markdown(summaries, caption))
    notes = [note for summary in summaries for note in summary.notes()]
    print("\n== notes")
    print("\n".join(notes) if notes else "none: false alarms ≤ 5 %, |bias| ≤ 0.08, interval coverage ≥ 90 %")
    print(f"\ncommand: {command}")
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
