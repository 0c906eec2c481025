"""Result-set comparison of an agent's statement with a gold statement (seed: "comparar com G_i").

Source: the campaign protocol of ``seeds/003`` and issue 6: column-order insensitive, NULL-safe,
float tolerant; row order counts only when the gold has a top-level ORDER BY.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

_MAX_SEARCH_WORK = 1_000_000
"""Most rows projected while matching predicted columns to gold columns (each candidate tried
projects every row); past it the result sets count as different."""


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
    Columns of ``predicted`` may be in any order: with ``ordered`` each gold column must equal a
    distinct predicted column value for value; otherwise a one-to-one assignment of predicted to
    gold columns is searched (see :func:`_assignment_exists`; bounded by :data:`_MAX_SEARCH_WORK`).

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
    pred_vectors = [tuple(r[i] for r in pred_rows) for i in range(width)]
    gold_vectors = [tuple(r[i] for r in gold_rows) for i in range(width)]
    if Counter(pred_vectors) == Counter(gold_vectors):  # same columns value for value: the rows match in order
        return True
    if ordered:  # row i against row i: each gold column must be some predicted column value for value
        return False
    pred_cols = [sorted(v) for v in pred_vectors]
    gold_cols = [sorted(v) for v in gold_vectors]
    if Counter(map(tuple, pred_cols)) != Counter(map(tuple, gold_cols)):  # no one-to-one column assignment
        return False
    candidates = [[p for p in range(width) if pred_cols[p] == gold_cols[g]] for g in range(width)]
    return _assignment_exists(pred_rows, pred_vectors, gold_rows, candidates)


def _assignment_exists(
    pred_rows: Sequence[tuple[Any, ...]],
    pred_vectors: Sequence[tuple[Any, ...]],
    gold_rows: Sequence[tuple[Any, ...]],
    candidates: Sequence[Sequence[int]],
) -> bool:
    """Whether predicted columns can be assigned one-to-one to the gold columns so the row multisets agree.

    Depth-first over the gold columns in order, with an explicit stack (a result may have
    thousands of columns). Column ``k`` takes a free candidate only if the rows projected on the
    first ``k + 1`` assigned columns equal the gold's rows on its first ``k + 1`` columns as
    multisets; of several free candidates with identical values row for row only the first is
    tried (they are interchangeable), so equal columns cost one try each instead of ``width!``.
    Past :data:`_MAX_SEARCH_WORK` projected rows the sets count as different.

    Args:
        pred_rows: the agent's rows, canonical values (same width as ``gold_rows``).
        pred_vectors: the agent's columns (``pred_vectors[p][i] == pred_rows[i][p]``).
        gold_rows: the gold rows, canonical values.
        candidates: for each gold column, the predicted columns with the same value multiset.
    """
    width = len(candidates)
    gold_prefixes: dict[int, list[tuple[Any, ...]]] = {}

    def _fits(chosen: list[int]) -> bool:
        k = len(chosen)
        if k not in gold_prefixes:
            gold_prefixes[k] = sorted(row[:k] for row in gold_rows)
        return sorted(tuple(row[p] for p in chosen) for row in pred_rows) == gold_prefixes[k]

    def _choices(k: int) -> Iterator[int]:
        seen: set[tuple[Any, ...]] = set()
        for p in candidates[k]:
            if p in used:
                continue
            if pred_vectors[p] not in seen:
                seen.add(pred_vectors[p])
                yield p

    chosen: list[int] = []
    used: set[int] = set()  # the columns in chosen
    stack = [_choices(0)]
    work = 0
    while stack:
        p = next(stack[-1], None)
        if p is None:
            stack.pop()
            if chosen:
                used.discard(chosen.pop())
            continue
        work += len(pred_rows)
        if work > _MAX_SEARCH_WORK:
            return False
        chosen.append(p)
        if not _fits(chosen):
            chosen.pop()
            continue
        if len(chosen) == width:
            return True
        used.add(p)
        stack.append(_choices(len(chosen)))
    return False


__all__ = ["results_match"]
