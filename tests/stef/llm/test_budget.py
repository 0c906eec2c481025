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


def test_a_backfill_days_budget_names_the_backfill_cap_and_its_spend() -> None:
    from stef.llm.budget import run_budget

    # --max-cost-usd 1 for the backfill, 0.75 spent by earlier days: this day has 0.25 left.
    day = run_budget(0.25, backfill_max_usd=1.0, backfill_spent_usd=0.75)
    held = day.reserve(0.2)
    assert held == 0.2 and day.reserve(0.1) is None  # 0.2 held + 0.1 > the 0.25 left
    day.settle(held, 0.125)
    assert day.reason(1) == (
        "cost budget reached: $0.875 spent of --max-cost-usd $1 for the backfill ($0.75 by its earlier days, "
        "$0.125 by this day); no further request after 1 request(s); symbolic judge used"
    )
    # the day's batches in other processes: 0.25 left split over 2, each batch names its share too
    batch = run_budget(0.25, shares=2, backfill_max_usd=1.0, backfill_spent_usd=0.75)
    batch.add(0.125)
    assert (batch.max_usd, batch.exhausted) == (0.125, True)
    assert batch.reason() == (
        "cost budget reached: at least $0.875 spent of --max-cost-usd $1 for the backfill ($0.75 by its earlier days, "
        "$0.125 by this batch of the day, whose share was $0.125 of the $0.25 left (split evenly over 2 batches: "
        "batches in other processes cannot share one budget)); symbolic judge used"
    )
    # outside a backfill the message is unchanged
    assert (
        run_budget(0.25).reason()
        == "cost budget reached: $0 spent of --max-cost-usd $0.25 for the run; symbolic judge used"
    )
