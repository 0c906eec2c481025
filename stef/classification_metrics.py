"""Figures of a probability or a score against labels: AUROC and expected calibration error.

Shared by the judge benchmark (:mod:`stef.monitor.benchmark`), the reviewer statistics
(:mod:`stef.monitor.review`) and the deployment calibrator (:mod:`stef.pipeline.judge.deployment`).
"""

from __future__ import annotations

from collections.abc import Sequence


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve of ``scores`` for positive ``labels`` (ties count one half).

    Mann–Whitney formulation via average ranks (scipy.stats.rankdata).

    >>> auroc([0.1, 0.4, 0.35, 0.8], [False, False, True, True])
    0.75
    """
    from scipy.stats import rankdata

    positives = sum(1 for label in labels if label)
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    ranks = rankdata(scores)
    rank_sum = sum(rank for rank, label in zip(ranks, labels, strict=True) if label)
    return float((rank_sum - positives * (positives + 1) / 2) / (positives * negatives))


def expected_calibration_error(probabilities: Sequence[float], labels: Sequence[bool], bins: int = 10) -> float:
    """ECE over ``bins`` equal-width bins of p: Σ_b (n_b / n) · |mean p_b − share of positives_b|.

    >>> round(expected_calibration_error([0.1, 0.1, 0.9, 0.9], [False, True, True, True]), 3)  # 2/4 · 0.4 + 2/4 · 0.1
    0.25
    """
    totals: dict[int, list[float]] = {}
    for p, y in zip(probabilities, labels, strict=True):
        entry = totals.setdefault(min(bins - 1, int(p * bins)), [0.0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += p
        entry[2] += float(y)
    n = len(labels)
    return sum(count / n * abs(sum_p - sum_y) / count for count, sum_p, sum_y in totals.values()) if n else float("nan")
