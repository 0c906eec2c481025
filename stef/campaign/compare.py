"""Result-set comparison of an agent's statement with a gold statement (seed: "comparar com G_i").

Source: the campaign protocol of ``seeds/003`` and issue 6: column-order insensitive, NULL-safe,
float tolerant; row order counts only when the gold has a top-level ORDER BY.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product
from typing import Any


def _canonical(value: Any, digits: int) -> tuple[int, Any]:
    """A sortable, NULL-safe key: numbers compared to ``digits`` significant digits, bools as numbers."""
    if value is None:
        return (0, "")
    if isinstance(value, bool | int | float):
        number = float(value)
        if math.isnan(number):
            return (1, "nan")
        return (2, float(f"{number:.{digits}g}"))
    if isinstance(value, bytes):
        return (4, value.hex())
    return (3, str(value))


def results_match(
    predicted: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]], *, ordered: bool = False, digits: int = 9
) -> bool:
    """Whether two result sets are equal: column-order insensitive, NULL-safe, float tolerant.

    Rows are compared as a multiset unless ``ordered`` (the gold has a top-level ORDER BY).
    Columns of ``predicted`` may be in any order: every assignment of predicted columns to gold
    columns whose value multisets agree is tried.

    Args:
        predicted: rows of the agent's statement.
        gold: rows of the gold statement.
        ordered: compare row order too.
        digits: significant digits compared for numbers (3 and 3.0000000001 are equal at 9).

    Returns:
        ``True`` when they match.

    >>> results_match([("b", 2), ("a", 1.0)], [(1, "a"), (2, "b")])
    True
    >>> results_match([("b", 2), ("a", 1)], [(1, "a"), (2, "b")], ordered=True)
    False
    >>> results_match([(None,)], [(None,)]), results_match([(None,)], [(0,)])
    (True, False)
    """
    if len(predicted) != len(gold):
        return False
    if not gold:
        return True
    width = len(gold[0])
    if any(len(r) != width for r in gold) or any(len(r) != width for r in predicted):
        return False
    pred_rows = [tuple(_canonical(v, digits) for v in row) for row in predicted]
    gold_rows = [tuple(_canonical(v, digits) for v in row) for row in gold]
    pred_cols = [sorted(r[i] for r in pred_rows) for i in range(width)]
    gold_cols = [sorted(r[i] for r in gold_rows) for i in range(width)]
    candidates = [[p for p in range(width) if pred_cols[p] == gold_cols[g]] for g in range(width)]
    if any(not c for c in candidates):
        return False
    tried = 0
    for assignment in product(*candidates):
        if len(set(assignment)) != width:
            continue
        tried += 1
        if tried > 5040:  # 7! assignments: give up on pathological all-equal columns
            return False
        reordered = [tuple(row[p] for p in assignment) for row in pred_rows]
        if (reordered == gold_rows) if ordered else (sorted(reordered) == sorted(gold_rows)):
            return True
    return False


__all__ = ["results_match"]
