"""Result-set comparison of an agent's statement with a gold statement (seed: "comparar com G_i").

Source: the campaign protocol of ``seeds/003`` and issue 6: column-order insensitive, NULL-safe,
float tolerant; row order counts only when the gold has a top-level ORDER BY.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

_MAX_SEARCH_WORK = 4_000_000
"""Cells a column-assignment search may examine beyond one pass over each result (every try
refines the rows of both results by one column: twice the row count); past it the result sets
count as different. Only a search that keeps backtracking (many columns whose values agree as
multisets but not row for row) gets there."""


_EXACT_FLOAT_INTEGERS = 2**53
"""Integers a float holds exactly: an integral float below it is compared as that integer."""


def _canonical(value: Any, digits: int) -> tuple[int, Any]:
    """A sortable, NULL-safe key: integers (bools, and integral floats and decimals) exactly; other
    numbers to ``digits`` significant digits, first rounded to 12 to drop float noise (so
    ``1.000000005`` and ``1.000000004 + 0.000000001`` fall on the same side of a rounding
    boundary); ``Decimal`` (DuckDB's DECIMAL) as a number, not as text.

    >>> _canonical(1234567891, 9) == _canonical(1234567894, 9), _canonical(3, 9) == _canonical(3.0, 9)
    (False, True)
    >>> _canonical(1.000000005, 9) == _canonical(1.000000004 + 0.000000001, 9)
    True
    >>> from decimal import Decimal
    >>> _canonical(Decimal("1.50"), 9) == _canonical(1.5, 9), _canonical(Decimal("2"), 9) == _canonical(2, 9)
    (True, True)
    """
    if value is None:
        return (0, "")
    if isinstance(value, bool | int):
        return (2, int(value))
    if isinstance(value, float | Decimal):
        number = float(value)
        if math.isnan(number):
            return (1, "nan")
        if math.isfinite(number) and number.is_integer() and abs(number) < _EXACT_FLOAT_INTEGERS:
            if isinstance(value, float) or value == int(value):
                return (2, int(number))
        if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
            return (2, int(value))
        if not math.isfinite(number):
            return (2, number)
        return (2, float(f"{float(f'{number:.12g}'):.{digits}g}"))
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
    gold columns is searched (see :func:`_assignment_exists`; bounded by :data:`_MAX_SEARCH_WORK`
    cells beyond a linear pass).

    Args:
        predicted: rows of the agent's statement.
        gold: rows of the gold statement.
        ordered: compare row order too.
        digits: significant digits compared for numbers that are not integers (3 and 3.0000000001
            are equal at 9); integers are compared exactly.

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
    return _assignment_exists(pred_vectors, gold_vectors, candidates)


def _assignment_exists(
    pred_vectors: Sequence[tuple[Any, ...]],
    gold_vectors: Sequence[tuple[Any, ...]],
    candidates: Sequence[Sequence[int]],
) -> bool:
    """Whether predicted columns can be assigned one-to-one to the gold columns so that the row
    multisets agree (both results have the same row count, at least one row).

    Depth-first over the gold columns, those with the most distinct values first. Each row of
    either result carries a class id: the id of its values on the columns assigned so far,
    interned in one table for both results, so a try refines the classes by one column and
    compares their counts in time linear in the rows. Of several free candidates with identical
    values row for row only the first is tried (they are interchangeable). Once every gold row
    has a class of its own the rows are aligned: the remaining columns then match when the
    remaining predicted columns, read in the aligned row order, are the remaining gold columns
    (as multisets of vectors), with no further search. Past :data:`_MAX_SEARCH_WORK` cells
    beyond a linear allowance the sets count as different.

    Args:
        pred_vectors: the agent's columns, canonical values.
        gold_vectors: the gold columns, canonical values (same count and length).
        candidates: for each gold column, the predicted columns with the same value multiset.

    >>> _assignment_exists([(1, 2), (1, 2)], [(1, 2), (2, 1)], [[0, 1], [0, 1]])
    False
    >>> _assignment_exists([("a", "b"), (2, 1)], [(1, 2), ("b", "a")], [[1], [0]])
    True
    """
    width, rows = len(gold_vectors), len(gold_vectors[0])
    order = sorted(range(width), key=lambda g: -len(set(gold_vectors[g])))
    interned: dict[tuple[int, Any], int] = {}
    budget = _MAX_SEARCH_WORK + 4 * width * rows

    def refined(classes: list[int], vector: tuple[Any, ...]) -> list[int]:
        return [interned.setdefault((c, v), len(interned)) for c, v in zip(classes, vector, strict=True)]

    def rest_matches(pred_classes: list[int], gold_classes: list[int], used: set[int], depth: int) -> bool:
        """Rows aligned (every gold class single): the unassigned columns agree as aligned vectors."""
        row_of_class = {c: i for i, c in enumerate(pred_classes)}
        aligned = [row_of_class[c] for c in gold_classes]  # gold row i is predicted row aligned[i]
        free = Counter(tuple(pred_vectors[p][i] for i in aligned) for p in range(width) if p not in used)
        return free == Counter(gold_vectors[g] for g in order[depth:])

    def choices(depth: int, used: set[int]) -> Iterator[int]:
        seen: set[tuple[Any, ...]] = set()
        for p in candidates[order[depth]]:
            if p not in used and pred_vectors[p] not in seen:
                seen.add(pred_vectors[p])
                yield p

    start = [0] * rows
    # the search's frames: (pred classes, gold classes, columns used, the next choices at this depth)
    stack: list[tuple[list[int], list[int], set[int], Iterator[int]]] = [(start, start, set(), choices(0, set()))]
    work = 0
    while stack:
        pred_classes, gold_classes, used, pending = stack[-1]
        p = next(pending, None)
        if p is None:
            stack.pop()
            continue
        work += 2 * rows
        if work > budget:
            return False
        depth = len(used)
        new_pred = refined(pred_classes, pred_vectors[p])
        new_gold = refined(gold_classes, gold_vectors[order[depth]])
        if Counter(new_pred) != Counter(new_gold):
            continue
        now_used = used | {p}
        if len(now_used) == width:
            return True
        if len(set(new_gold)) == rows:  # every row told apart: the alignment decides the rest
            work += width * rows
            if rest_matches(new_pred, new_gold, now_used, depth + 1):
                return True
            continue
        stack.append((new_pred, new_gold, now_used, choices(depth + 1, now_used)))
    return False


__all__ = ["results_match"]
