"""Result-set comparison with the gold statements (issue 6): column order, NULLs, float digits, ordered gold."""

from __future__ import annotations

from typing import Any

import pytest

from stef.campaign.compare import results_match


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
