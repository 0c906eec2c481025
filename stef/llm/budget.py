"""The cost budget of a run (``--max-cost-usd``): money spent on model calls against an optional limit."""

from __future__ import annotations

import math
import threading


class CostBudget:
    """Money spent on model calls in one run, against an optional limit (``--max-cost-usd``).

    Thread-safe; checked before the first request of each record, so requests already in flight
    may overshoot the limit by at most ``concurrency`` calls. The spend only grows: a negative,
    NaN or infinite amount is never added (:mod:`stef.llm.usage` checks what servers report).

    >>> budget = CostBudget(0.01)
    >>> budget.add(0.004); budget.add(None); budget.add(-5.0); budget.add(float("nan")); budget.exhausted
    False
    >>> budget.add(0.006); budget.exhausted, round(budget.spent_usd, 4)
    (True, 0.01)
    """

    def __init__(self, max_usd: float | None = None) -> None:
        self.max_usd = max_usd
        self.spent_usd = 0.0
        self._lock = threading.Lock()

    def add(self, cost_usd: float | None) -> None:
        """Count one call's cost (``None``, an unpriced model, counts as nothing; so does
        anything that is not a finite amount of 0 or more)."""
        if (
            isinstance(cost_usd, int | float)
            and not isinstance(cost_usd, bool)
            and math.isfinite(cost_usd)
            and cost_usd > 0
        ):
            with self._lock:
                self.spent_usd += float(cost_usd)

    @property
    def exhausted(self) -> bool:
        """The limit is set and reached."""
        return self.max_usd is not None and self.spent_usd >= self.max_usd

    def reason(self) -> str:
        """The fallback reason once exhausted."""
        return f"cost budget reached: ${self.spent_usd:.4f} spent of --max-cost-usd ${self.max_usd:.4f}; symbolic judge used"
