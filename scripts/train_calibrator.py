"""Train the symbolic judge's calibrator (stef/calibrators/symbolic-v1.json) — reproducibly.

Usage (needs the `calibrate` extra: pip install '.[calibrate]'):

    python scripts/train_calibrator.py ../shared/data/nl2sql_bugs/dev_canonical.jsonl \
        --out stef/calibrators/symbolic-v1.json

Trains ONLY on the given NL2SQL-BUGs development file (Liu et al., KDD 2025; questions and SQL
from BIRD, CC BY-SA 4.0). Steps:

1. every row is evaluated with the *uncalibrated* symbolic judge; the calibrator features
   (stef.calibrate.feature_vector) of each judged row are recorded;
2. 5-fold cross-validation grouped by question (rows of one question never on both sides):
   a standardised L2 logistic regression (C = 0.3) is fitted on 4 folds and scored on the 5th;
   accuracy / AUROC of Φ (through stef.calibrate.verdict_from_probability and stef.score) are
   reported as mean ± standard deviation over folds;
3. the final model is fitted on all rows and written as JSON with the training file's SHA-256,
   the row count and the cross-validation figures.

Deterministic: no random state is involved (GroupKFold and lbfgs are deterministic).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path

C_REGULARISATION = 0.3
FOLDS = 5
VERSION = "calib-symbolic-v1"


def collect(path: Path) -> tuple[list[dict[str, float]], list[bool], list[str], list[object]]:
    """Features, labels, question groups and judge inputs' alignments of every judged row."""
    from stef.benchmark import bugs_record_to_log, read_bugs_file
    from stef.calibrate import feature_vector
    from stef.evaluate import evaluate
    from stef.judge import JudgeInput, SymbolicJudge
    from stef.models import JudgeResult

    class Recorder:
        name = "symbolic"

        def __init__(self) -> None:
            self.inner = SymbolicJudge(calibrator=None)
            self.last: tuple[dict[str, float], object] | None = None

        def judge(self, judge_input: JudgeInput) -> JudgeResult:
            result = self.inner.judge(judge_input)
            self.last = (feature_vector(judge_input, self.inner.findings(judge_input)), judge_input.alignment)
            return result

    recorder = Recorder()
    features, labels, groups, alignments = [], [], [], []
    for row in read_bugs_file(path):
        recorder.last = None
        evaluate(bugs_record_to_log(row), judge=recorder)
        if recorder.last is None:
            continue  # not evaluated (parse error ...): nothing to calibrate
        features.append(recorder.last[0])
        alignments.append(recorder.last[1])
        labels.append(bool(row["label"]))
        groups.append(row["question"])
    return features, labels, groups, alignments


def fit(matrix: list[list[float]], labels: list[bool]) -> tuple[list[float], list[float], list[float], float]:
    """Standardise, fit L2 logistic regression; return means, scales, coefficients, intercept."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(matrix, dtype=float)
    means = x.mean(axis=0)
    scales = x.std(axis=0)
    scales[scales == 0] = 1.0
    model = LogisticRegression(C=C_REGULARISATION, max_iter=5000).fit((x - means) / scales, np.asarray(labels))
    return means.tolist(), scales.tolist(), model.coef_[0].tolist(), float(model.intercept_[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dev_file", type=Path)
    parser.add_argument("--out", type=Path, default=Path("stef/calibrators/symbolic-v1.json"))
    args = parser.parse_args(argv)

    from sklearn import __version__ as sklearn_version
    from sklearn.model_selection import GroupKFold

    from stef.benchmark import auroc
    from stef.calibrate import Calibrator, verdict_from_probability
    from stef.rules import default_rules
    from stef.score import compute_score

    features, labels, groups, alignments = collect(args.dev_file)
    names = sorted(features[0])
    matrix = [[row[name] for name in names] for row in features]
    scoring = default_rules().scoring

    def phi(model: Calibrator, index: int) -> float:
        verdict, gamma = verdict_from_probability(model.probability(features[index]))
        return compute_score(alignments[index], verdict, gamma, scoring).score  # type: ignore[arg-type]

    accuracies, aurocs = [], []
    for train, test in GroupKFold(n_splits=FOLDS).split(matrix, labels, groups):
        means, scales, coefficients, intercept = fit([matrix[i] for i in train], [labels[i] for i in train])
        model = Calibrator(VERSION, tuple(names), tuple(means), tuple(scales), tuple(coefficients), intercept, {})
        scores = [phi(model, i) for i in test]
        truth = [labels[i] for i in test]
        accuracies.append(sum((s >= 75) == t for s, t in zip(scores, truth)) / len(test))
        aurocs.append(auroc(scores, truth))
    means, scales, coefficients, intercept = fit(matrix, labels)
    payload = {
        "version": VERSION,
        "features": names,
        "means": means,
        "scales": scales,
        "coefficients": coefficients,
        "intercept": intercept,
        "metadata": {
            "trained_on": args.dev_file.name,
            "trained_on_sha256": hashlib.sha256(args.dev_file.read_bytes()).hexdigest(),
            "rows": len(labels),
            "model": f"standardised L2 logistic regression, C={C_REGULARISATION} (scikit-learn {sklearn_version})",
            "cross_validation": {
                "folds": FOLDS,
                "grouped_by": "question",
                "accuracy_mean": round(statistics.mean(accuracies), 4),
                "accuracy_std": round(statistics.pstdev(accuracies), 4),
                "auroc_mean": round(statistics.mean(aurocs), 4),
                "auroc_std": round(statistics.pstdev(aurocs), 4),
                "accuracy_per_fold": [round(a, 4) for a in accuracies],
                "auroc_per_fold": [round(a, 4) for a in aurocs],
            },
            "source": "NL2SQL-BUGs development split (Liu et al., KDD 2025); questions and SQL from BIRD (CC BY-SA 4.0)",
        },
    }
    args.out.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    cv = payload["metadata"]["cross_validation"]
    print(
        f"wrote {args.out}: {len(labels)} rows; grouped {FOLDS}-fold CV accuracy {cv['accuracy_mean']:.3f} ± {cv['accuracy_std']:.3f}, "
        f"AUROC {cv['auroc_mean']:.3f} ± {cv['auroc_std']:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
