"""Result-set comparison with the gold statements (issue 6): column order, NULLs, float digits, ordered gold."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest

from stef.campaign.compare import results_match
from tests.support.checkout import checkout_env


@pytest.mark.parametrize(
    ("predicted", "gold", "ordered", "expected"),
    [
        pytest.param([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], False, True, id="row_order_ignored"),
        pytest.param([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], True, False, id="row_order_kept_with_gold_order_by"),
        pytest.param([("a", 1), ("b", 2)], [(1, "a"), (2, "b")], False, True, id="column_order_ignored"),
        pytest.param([(0.1 + 0.2,)], [(0.3,)], False, True, id="float_tolerance"),
        pytest.param([(3,)], [(3.0,)], False, True, id="int_equals_float"),
        pytest.param([(0.3001,)], [(0.3,)], False, False, id="float_difference_counts"),
        pytest.param([(None, 1)], [(None, 1)], False, True, id="null_equals_null"),
        pytest.param([(None,)], [("",)], False, False, id="null_is_not_empty_string"),
        pytest.param([(1,), (1,)], [(1,)], False, False, id="duplicates_count"),
        pytest.param([(1, 1)], [(1,)], False, False, id="column_count_differs"),
        pytest.param([(1234567894,)], [(1234567891,)], False, False, id="integers_exactly_not_to_9_digits"),
        pytest.param([(1700000000456,)], [(1700000000123,)], False, False, id="epoch_milliseconds_exactly"),
        pytest.param([(1700000000123.0,)], [(1700000000123,)], False, True, id="an_integral_float_is_its_integer"),
        pytest.param([(1.000000004 + 0.000000001,)], [(1.000000005,)], False, True, id="float_noise_at_a_boundary"),
        pytest.param([(Decimal("1.50"),)], [(1.5,)], False, True, id="decimal_equals_its_float"),
        pytest.param([(Decimal("12"), "a")], [(12, "a")], False, True, id="integral_decimal_equals_int"),
        pytest.param([(Decimal("1.51"),)], [(1.5,)], False, False, id="decimal_difference_counts"),
        pytest.param(
            [("x", "y"), ("y", "x")],
            [("x", "x"), ("y", "y")],
            False,
            False,
            id="columns_with_same_values_but_different_rows",
        ),
    ],
)
def test_results_match(
    predicted: list[tuple[Any, ...]], gold: list[tuple[Any, ...]], ordered: bool, expected: bool
) -> None:
    assert results_match(predicted, gold, ordered=ordered) is expected


def test_the_one_column_assignment_is_found_however_late() -> None:
    """8 columns with equal value multisets, only the reversed assignment matches (rank 40,319 of 8!):
    the search used to give up after 5,040 assignments and call a right answer wrong."""
    import random

    rng = random.Random(0)
    columns = [rng.sample(range(8), 8) for _ in range(8)]
    gold = [tuple(column[i] for column in columns) for i in range(8)]
    predicted = [row[::-1] for row in reversed(gold)]
    assert results_match(predicted, gold) is True
    assert results_match(predicted, gold, ordered=True) is False
    wrong = [list(row) for row in predicted]
    wrong[0][0], wrong[1][0] = wrong[1][0], wrong[0][0]  # same column multisets, other rows: no assignment fits
    assert results_match([tuple(row) for row in wrong], gold) is False


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        pytest.param([(0,) * 12], [(0,) * 12], True, id="one_row_of_12_equal_columns"),
        pytest.param([(None,) * 40] * 3, [(None,) * 40] * 3, True, id="40_null_columns"),
        pytest.param(
            [(i,) * 30 for i in range(500)][::-1], [(i,) * 30 for i in range(500)], True, id="500_rows_30_equal"
        ),
        pytest.param([(0,) * 12], [(0,) * 11 + (1,)], False, id="one_value_differs"),
        pytest.param([(1,) + (0,) * 11], [(0,) * 11 + (1,)], True, id="equal_columns_reordered"),
    ],
)
def test_equal_columns_do_not_make_the_comparison_hang(
    predicted: list[tuple[Any, ...]], gold: list[tuple[Any, ...]], expected: bool
) -> None:
    """Columns with equal values used to be assigned by trying every tuple of ``itertools.product``:
    12 equal columns meant ~10^11 tuples before the first permutation (the campaign hung, no timeout)."""
    code = (
        "import json, sys; from stef.campaign.compare import results_match; "
        "p, g = json.loads(sys.stdin.read()); print(results_match([tuple(r) for r in p], [tuple(r) for r in g]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps([predicted, gold]),
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
        env=checkout_env(),
    )
    assert done.stdout.strip() == str(expected)


def test_a_wide_result_in_another_row_order_matches() -> None:
    """101 distinct columns × 10,000 rows (inside the default row cap), rows reversed: the same
    result. A search whose cap counted rows per try called it different after 16 s."""
    gold = [tuple(row * 101 + column for column in range(101)) for row in range(10_000)]
    assert results_match(gold[::-1], gold)
    assert not results_match([(-1, *gold[-1][1:]), *gold[-2::-1]], gold)


def test_rank_like_columns_in_another_column_and_row_order_match() -> None:
    """12 columns that are each a permutation of 1..10,000 (RANK() columns): every predicted column
    has every gold column's value multiset, so only rows tell them apart; columns reversed and rows
    shuffled is still the same result, and one swapped pair of values is not."""
    rng = random.Random(3)
    columns = [rng.sample(range(1, 10_001), 10_000) for _ in range(12)]
    gold = [tuple(column[row] for column in columns) for row in range(10_000)]
    predicted = [tuple(reversed(row)) for row in gold]
    rng.shuffle(predicted)
    assert results_match(predicted, gold)
    first, second = predicted[0], predicted[1]
    predicted[0], predicted[1] = (second[0], *first[1:]), (first[0], *second[1:])
    assert not results_match(predicted, gold)


def test_the_search_agrees_with_trying_every_column_permutation() -> None:
    """2,000 random small results (1-5 columns, 1-6 rows, few distinct values, NULLs, 1 and 1.0),
    each a column and row shuffle of the gold, with or without one changed cell, or unrelated:
    the verdict is the one of trying every permutation of the columns."""
    rng = random.Random(7)
    for _ in range(2000):
        width, rows = rng.randint(1, 5), rng.randint(1, 6)
        values = rng.choice([[0, 1], [0, 1, 2], [0, 1, None, 1.0], ["a", "b", 0]])
        gold = [tuple(rng.choice(values) for _ in range(width)) for _ in range(rows)]
        permutation = rng.sample(range(width), width)
        predicted = [tuple(row[p] for p in permutation) for row in gold]
        rng.shuffle(predicted)
        if rng.random() < 0.5:
            row, column = rng.randrange(rows), rng.randrange(width)
            predicted[row] = tuple(rng.choice(values) if c == column else v for c, v in enumerate(predicted[row]))
        for ordered in (False, True):
            expected = any(
                (lambda moved: moved == gold if ordered else Counter(moved) == Counter(gold))(
                    [tuple(row[p] for p in order) for row in predicted]
                )
                for order in itertools.permutations(range(width))
            )
            assert results_match(predicted, gold, ordered=ordered) == expected, (predicted, gold, ordered)
