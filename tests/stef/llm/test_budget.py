"""Tests of the cost budget (stef/llm/budget.py)."""

from __future__ import annotations

import pytest

from stef.llm.budget import CostBudget

pytestmark = pytest.mark.usefixtures("warm_litellm")


def test_cost_budget_counts_only_priced_calls() -> None:
    budget = CostBudget(None)
    budget.add(None)
    budget.add(0.5)
    assert (budget.spent_usd, budget.exhausted) == (0.5, False)
