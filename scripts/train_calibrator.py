"""Train the symbolic judge's calibrators (stef/pipeline/judge/calibrators/*.json) — reproducibly.

Usage (needs the `calibrate` extra: pip install '.[calibrate]'):

    python scripts/train_calibrator.py \
        --dataset bugs=../shared/data/nl2sql_bugs/dev_canonical.jsonl:../shared/data/nl2sql_bugs/schemas \
        --dataset spider=../shared/data/spider_multisys/dev.jsonl:../shared/data/spider_multisys/schemas \
        --out-dir stef/pipeline/judge/calibrators

Trains two artifacts on every given development file together (NL2SQL-BUGs: Liu et al., KDD 2025,
questions and SQL from BIRD, CC BY-SA 4.0; Spider multi-system answers: Spider 1.0, CC BY-SA 4.0,
predictions from HKUSTDial/NL2SQL360):

* ``symbolic-v2.json``: records judged without a schema;
* ``schema-v1.json``: records checked against their database's schema (``<schema dir>/<db_id>.sql``);
* ``observed-v1.json``: records compared with an observed catalog of their database, learned from
  the answers of the other cross-validation folds (never from their own question);
* ``schema-observed-v1.json``: records checked against both.

Steps, for each of the two feature sets:

1. every row is evaluated with the *uncalibrated* symbolic judge (with or without its schema); the
   calibrator features (stef.pipeline.judge.calibrate.feature_vector) of each judged row are recorded;
2. 5-fold cross-validation grouped by (dataset, question): rows of one question are never on
   both sides; a standardised L2 logistic regression is fitted on 4 folds and predicts the 5th,
   for each regularisation strength in C_GRID; the C with the best mean log-loss is kept;
3. the out-of-fold predictions give, per dataset: accuracy at Φ ≥ 75 (Φ from the verdict and γ
   of stef.pipeline.judge.calibrate.verdict_from_probability and the paper's formula), AUROC of p_correct and of
   Φ, expected calibration error over 10 equal-width bins, and recall of wrong answers per
   NL2SQL-BUGs error category. Rows that get no score (parse errors) count as predicted
   incorrect with p = 0; rows with a non-SELECT statement get p = 0 and rows the schema says
   cannot run get p ≤ stef.pipeline.judge.calibrate.CANNOT_RUN_P, as the pipeline does;
4. the same out-of-fold predictions give the judge's operating characteristics for estimating a share
   of wrong answers under label shift (``metadata.quantification``, read by stef.monitor.error_rate):
   the mean p of the correct and of the wrong scored answers, pooled over the datasets (soft
   specificity and 1 − soft sensitivity), their sampling standard errors, the per-dataset means and
   their spread between datasets (how far the figures move from one benchmark to another);
5. the final model is fitted on all rows and written as JSON with the training files' SHA-256,
   the row counts and the cross-validation figures.

Deterministic: GroupKFold and lbfgs involve no random state.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stef.pipeline.judge.calibrate import Calibrator

C_GRID = (0.03, 0.1, 0.3, 1.0)
FOLDS = 5
VERSIONS = {
    "symbolic": "calib-symbolic-v2",
    "schema": "calib-schema-v1",
    "observed": "calib-observed-v1",
    "schema-observed": "calib-schema-observed-v1",
}
FILES = {
    "symbolic": "symbolic-v2.json",
    "schema": "schema-v1.json",
    "observed": "observed-v1.json",
    "schema-observed": "schema-observed-v1.json",
}


@dataclass
class Row:
    """One labelled record of a development file, as the uncalibrated pipeline saw it."""

    dataset: str
    question: str
    label: bool
    categories: tuple[str, ...]
    features: dict[str, dict[str, float]] = field(default_factory=dict)
    """Feature set name -> features (absent: the record got no score)."""
    alignment: dict[str, Any] = field(default_factory=dict)
    forced_incorrect: dict[str, bool] = field(default_factory=dict)
    cannot_run: dict[str, bool] = field(default_factory=dict)
    """The schema says the answer reads a table or column the database lacks (p capped, as the judge does)."""


def collect(datasets: list[tuple[str, Path, Path | None]]) -> list[Row]:
    """Run every record through the pipeline without a calibrator, with and without its schema."""
    from stef.models import JudgeResult
    from stef.monitor.benchmark import bugs_record_to_log, read_bugs_file
    from stef.pipeline.evaluate import evaluate
    from stef.pipeline.judge.calibrate import feature_vector
    from stef.pipeline.judge.models import JudgeInput
    from stef.pipeline.judge.symbolic import SymbolicJudge
    from stef.pipeline.schema_book import SchemaBook

    class Recorder:
        name = "symbolic"

        def __init__(self) -> None:
            self.inner = SymbolicJudge(calibrator=None)
            self.last: tuple[dict[str, float], Any] | None = None

        def judge(self, judge_input: JudgeInput) -> JudgeResult:
            result = self.inner.judge(judge_input)
            self.last = (feature_vector(judge_input, self.inner.findings(judge_input)), judge_input.alignment)
            return result

    recorder = Recorder()
    rows: list[Row] = []
    records: list[Any] = []
    schemas: list[Any] = []
    for name, path, schema_dir in datasets:
        book = SchemaBook(schema_dir) if schema_dir is not None else None
        for raw in read_bugs_file(path):
            record = bugs_record_to_log(raw)
            categories = tuple(
                sorted({e.get("error_type", "") for e in raw.get("error_types") or () if isinstance(e, dict)})
            )
            row = Row(name, f"{name}:{raw['question']}", bool(raw["label"]), categories)
            for feature_set, schema in (
                ("symbolic", None),
                ("schema", book.for_app(record.app_id, "sqlite") if book is not None else None),
            ):
                if feature_set == "schema" and schema is None:
                    continue
                recorder.last = None
                evaluation = evaluate(record, judge=recorder, schema=schema)
                if recorder.last is None:
                    continue
                row.features[feature_set] = recorder.last[0]
                row.alignment[feature_set] = recorder.last[1]
                report = evaluation.schema_report
                cannot_run = report is not None and bool(
                    report.unknown_tables or report.unknown_columns or report.ambiguous_columns
                )
                row.forced_incorrect[feature_set] = any(f.startswith("non_select_statement") for f in evaluation.flags)
                row.cannot_run[feature_set] = cannot_run
            rows.append(row)
            records.append(record)
            schemas.append(book.for_app(record.app_id, "sqlite") if book is not None else None)
    _observed_features(rows, records, schemas, recorder)
    return rows


def _observed_features(rows: list[Row], records: list[Any], schemas: list[Any], recorder: Any) -> None:
    """The ``observed`` feature set: each row judged against observed catalogs learned from the
    answers of the *other* folds on the same database (grouped by question, as the CV), so no
    answer is compared with a catalog that learned from its own question."""
    from sklearn.model_selection import GroupKFold

    from stef.models import ObservedCatalogBook
    from stef.pipeline.evaluate import evaluate
    from stef.pipeline.observed import learn_catalog

    groups = [row.question for row in rows]
    for train, test in GroupKFold(n_splits=FOLDS).split(rows, groups=groups):
        by_app: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
        for i in train:
            by_app[f"{rows[i].dataset}:{records[i].app_id}"].append((records[i].sql, records[i].dialect))
        book = ObservedCatalogBook({app: learn_catalog(app, texts) for app, texts in by_app.items()})
        for i in test:
            catalog = book.for_app(f"{rows[i].dataset}:{records[i].app_id}")
            for feature_set, schema in (("observed", None), ("schema-observed", schemas[i])):
                if feature_set == "schema-observed" and schema is None:
                    continue
                recorder.last = None
                evaluation = evaluate(records[i], judge=recorder, observed=catalog, schema=schema)
                if recorder.last is None:
                    continue
                rows[i].features[feature_set] = recorder.last[0]
                rows[i].alignment[feature_set] = recorder.last[1]
                rows[i].forced_incorrect[feature_set] = any(
                    f.startswith("non_select_statement") for f in evaluation.flags
                )
                report = evaluation.schema_report
                rows[i].cannot_run[feature_set] = report is not None and bool(
                    report.unknown_tables or report.unknown_columns or report.ambiguous_columns
                )


def fit(matrix: list[list[float]], labels: list[bool], c: float) -> Calibrator:
    """Standardise, fit L2 logistic regression; the model with each feature's training range
    (values outside it are clipped at scoring time: :class:`Calibrator`)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(matrix, dtype=float)
    means = x.mean(axis=0)
    scales = x.std(axis=0)
    scales[scales == 0] = 1.0
    model = LogisticRegression(C=c, max_iter=5000).fit((x - means) / scales, np.asarray(labels))
    return Calibrator(
        "fit",
        (),
        tuple(means.tolist()),
        tuple(scales.tolist()),
        tuple(model.coef_[0].tolist()),
        float(model.intercept_[0]),
        {},
        lower=tuple(x.min(axis=0).tolist()),
        upper=tuple(x.max(axis=0).tolist()),
    )


def expected_calibration_error(probabilities: list[float], labels: list[bool], bins: int = 10) -> float:
    """ECE over ``bins`` equal-width bins of p: Σ (n_b / n) · |mean p_b − share correct_b|."""
    totals: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for p, y in zip(probabilities, labels, strict=True):
        b = min(bins - 1, int(p * bins))
        totals[b][0] += 1
        totals[b][1] += p
        totals[b][2] += float(y)
    n = len(labels)
    return sum(count / n * abs(sum_p / count - sum_y / count) for count, sum_p, sum_y in totals.values())


def phi(alignment: Any, p: float) -> float:
    from stef.pipeline.judge.calibrate import verdict_from_probability
    from stef.pipeline.rules import default_rules
    from stef.pipeline.score import compute_score

    verdict, gamma = verdict_from_probability(p)
    return compute_score(alignment, verdict, gamma, default_rules().scoring).score


def evaluate_set(rows: list[Row], feature_set: str, predictions: dict[int, float]) -> dict[str, Any]:
    """Figures per dataset from out-of-fold predictions (index into ``rows`` -> p)."""
    from stef.monitor.benchmark import auroc

    report: dict[str, Any] = {}
    for dataset in sorted({row.dataset for row in rows}):
        indexes = [i for i, row in enumerate(rows) if row.dataset == dataset]
        ps, phis, labels = [], [], []
        caught: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        scored = 0
        for i in indexes:
            row = rows[i]
            if feature_set in row.features:
                scored += 1
                p = scored_probability(row, feature_set, predictions[i])
                score = phi(row.alignment[feature_set], p)
            else:
                p, score = 0.0, 0.0
            ps.append(p)
            phis.append(score)
            labels.append(row.label)
            if not row.label:
                for category in row.categories or ("(none)",):
                    caught[category][0] += int(score < 75)
                    caught[category][1] += 1
        report[dataset] = {
            "rows": len(indexes),
            "coverage": round(scored / len(indexes), 4),
            "accuracy_phi75": round(sum((s >= 75) == y for s, y in zip(phis, labels, strict=True)) / len(labels), 4),
            "accuracy_p50": round(sum((p >= 0.5) == y for p, y in zip(ps, labels, strict=True)) / len(labels), 4),
            "auroc_p": round(auroc(ps, labels), 4),
            "auroc_phi": round(auroc(phis, labels), 4),
            "ece": round(expected_calibration_error(ps, labels), 4),
            "mean_p": round(sum(ps) / len(ps), 4),
            "base_rate_correct": round(sum(labels) / len(labels), 4),
            "recall_incorrect_per_category": {k: round(c / n, 3) for k, (c, n) in sorted(caught.items()) if n >= 10},
        }
    return report


def scored_probability(row: Row, feature_set: str, prediction: float) -> float:
    """The p the pipeline gives a scored row: 0 for a non-SELECT statement, capped when the schema says it cannot run."""
    from stef.pipeline.judge.calibrate import CANNOT_RUN_P

    p = 0.0 if row.forced_incorrect[feature_set] else prediction
    return min(p, CANNOT_RUN_P) if row.cannot_run[feature_set] else p


def quantification(rows: list[Row], feature_set: str, predictions: dict[int, float]) -> dict[str, Any]:
    """Operating characteristics of the judge from out-of-fold predictions of the scored rows (step 4).

    ``mean_p_correct`` (a) and ``mean_p_incorrect`` (b) are the mean p of the correct and of the wrong
    answers pooled over the datasets; ``se_*`` their sampling standard errors; ``transfer_sd_*`` the
    standard deviation of the per-dataset means (ddof 1; 0 with one dataset). An observed mean p ``m``
    then estimates the share of wrong answers as ``(a - m) / (a - b)`` whatever that share is.
    """
    import statistics

    def moments(indexes: list[int]) -> dict[str, float]:
        ps = [scored_probability(rows[i], feature_set, predictions[i]) for i in indexes]
        mean = sum(ps) / len(ps)
        sd = statistics.stdev(ps) if len(ps) > 1 else 0.0
        return {"n": len(ps), "mean": mean, "se": sd / math.sqrt(len(ps))}

    scored = [i for i, row in enumerate(rows) if feature_set in row.features]
    out: dict[str, Any] = {"method": "probabilistic adjusted classify-and-count (Bella et al. 2010)"}
    per_dataset: dict[str, dict[str, float]] = {}
    for label, name in ((True, "correct"), (False, "incorrect")):
        pooled = moments([i for i in scored if rows[i].label is label])
        out[f"mean_p_{name}"] = round(pooled["mean"], 6)
        out[f"se_p_{name}"] = round(pooled["se"], 6)
        out[f"rows_{name}"] = int(pooled["n"])
        means = []
        for dataset in sorted({rows[i].dataset for i in scored}):
            part = moments([i for i in scored if rows[i].label is label and rows[i].dataset == dataset])
            per_dataset.setdefault(dataset, {})[f"mean_p_{name}"] = round(part["mean"], 6)
            means.append(part["mean"])
        out[f"transfer_sd_p_{name}"] = round(statistics.stdev(means), 6) if len(means) > 1 else 0.0
    out["per_dataset"] = per_dataset
    return out


def cross_validate(
    rows: list[Row], feature_set: str, names: list[str]
) -> tuple[float, dict[str, Any], dict[int, float]]:
    """Best C by grouped CV log-loss; its out-of-fold predictions and figures."""
    from sklearn.model_selection import GroupKFold

    usable = [i for i, row in enumerate(rows) if feature_set in row.features]
    matrix = [[rows[i].features[feature_set].get(name, 0.0) for name in names] for i in usable]
    labels = [rows[i].label for i in usable]
    groups = [rows[i].question for i in usable]
    best: tuple[float, float, dict[int, float]] | None = None
    for c in C_GRID:
        predictions: dict[int, float] = {}
        for train, test in GroupKFold(n_splits=FOLDS).split(matrix, labels, groups):
            model = replace(fit([matrix[j] for j in train], [labels[j] for j in train], c), names=tuple(names))
            for j in test:
                predictions[usable[j]] = model.probability(rows[usable[j]].features[feature_set])
        loss = -sum(math.log(max(1e-9, predictions[i] if rows[i].label else 1 - predictions[i])) for i in usable) / len(
            usable
        )
        if best is None or loss < best[0]:
            best = (loss, c, predictions)
    assert best is not None
    return best[1], evaluate_set(rows, feature_set, best[2]), best[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dataset",
        action="append",
        required=True,
        metavar="NAME=FILE[:SCHEMA_DIR]",
        help="a development file in the NL2SQL-BUGs format, optionally with its folder of <db_id>.sql schemas",
    )
    parser.add_argument("--out-dir", type=Path, default=Path("stef/pipeline/judge/calibrators"))
    parser.add_argument("--report", type=Path, help="also write the cross-validation figures as JSON here")
    args = parser.parse_args(argv)

    from sklearn import __version__ as sklearn_version

    datasets: list[tuple[str, Path, Path | None]] = []
    for spec in args.dataset:
        name, _, rest = spec.partition("=")
        file, _, schema_dir = rest.partition(":")
        datasets.append((name, Path(file), Path(schema_dir) if schema_dir else None))
    rows = collect(datasets)
    figures: dict[str, Any] = {}
    for feature_set in ("symbolic", "schema", "observed", "schema-observed"):
        usable = [row for row in rows if feature_set in row.features]
        if not usable:
            continue
        names = sorted({name for row in usable for name in row.features[feature_set]})
        c, report, predictions = cross_validate(rows, feature_set, names)
        final = fit(
            [[row.features[feature_set].get(n, 0.0) for n in names] for row in usable], [row.label for row in usable], c
        )
        figures[feature_set] = {"C": c, **report}
        payload = {
            "version": VERSIONS[feature_set],
            "features": names,
            "means": list(final.means),
            "scales": list(final.scales),
            "coefficients": list(final.coefficients),
            "intercept": final.intercept,
            "lower": list(final.lower or ()),
            "upper": list(final.upper or ()),
            "metadata": {
                "feature_set": feature_set,
                "trained_on": {
                    name: {
                        "file": path.name,
                        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                        "schemas": bool(schema),
                    }
                    for name, path, schema in datasets
                },
                "rows": len(usable),
                "model": f"standardised L2 logistic regression, C={c} chosen from {list(C_GRID)} by grouped CV log-loss (scikit-learn {sklearn_version})",
                "cross_validation": {"folds": FOLDS, "grouped_by": "dataset and question", **report},
                "quantification": quantification(rows, feature_set, predictions),
                "source": "NL2SQL-BUGs development split (Liu et al., KDD 2025; BIRD, CC BY-SA 4.0) and Spider 1.0 multi-system answers "
                "(Yu et al., EMNLP 2018, CC BY-SA 4.0; predictions from HKUSTDial/NL2SQL360)",
            },
        }
        args.out_dir.mkdir(parents=True, exist_ok=True)
        out = args.out_dir / FILES[feature_set]
        out.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        for dataset, numbers in report.items():
            print(
                f"{feature_set:8} {dataset:7} C={c}: accuracy(Φ≥75) {numbers['accuracy_phi75']:.3f} (p≥0.5 {numbers['accuracy_p50']:.3f}), "
                f"AUROC p {numbers['auroc_p']:.3f} / Φ {numbers['auroc_phi']:.3f}, ECE {numbers['ece']:.3f}, coverage {numbers['coverage']:.3f}"
            )
        print(f"wrote {out}")
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
