"""The cost budget of a run (``--max-cost-usd``): money spent on model calls against an optional limit.

Every request reserves what it may cost before it starts (:meth:`CostBudget.reserve`) and settles
with what it did cost once it ends (:meth:`CostBudget.settle`); a request starts only while the
run's spend, plus the reserves of the requests in flight, plus its own reserve stays within the
limit, and waits for the requests in flight while only their reserves keep it out
(:meth:`CostBudget.may_fit_later`). The batches of one nightly run (threads of one process) share one budget through
:func:`shared_budget`, as they share the circuit breaker and the request pool.
"""

from __future__ import annotations

import math
import threading

BUDGET_REACHED = "cost budget reached"
"""Fallback kind of the records the budget kept from the model."""


def usd(amount: float) -> str:
    """An amount of USD as written in messages: up to 10 decimals, no trailing zeros.

    >>> usd(0.0001), usd(2.0), usd(0.00008100000000000001), usd(1e-9), usd(0.0)
    ('0.0001', '2', '0.000081', '0.000000001', '0')
    """
    text = f"{amount:.10f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _amount(cost_usd: float | None) -> float:
    """``cost_usd`` as a finite amount of 0 or more (anything else counts as nothing)."""
    if (
        isinstance(cost_usd, int | float)
        and not isinstance(cost_usd, bool)
        and math.isfinite(cost_usd)
        and cost_usd > 0
    ):
        return float(cost_usd)
    return 0.0


class CostBudget:
    """Money spent on model calls in one run, against an optional limit (``--max-cost-usd``).

    Thread-safe. A request starts only if :meth:`reserve` accepts its reserve: the spend so far
    plus the reserves held by the requests in flight plus this reserve is at most the limit (and
    the spend plus the reserves held is below it, so a limit of 0 allows no request at all).
    :meth:`settle` then replaces the reserve with the request's actual charge. So the spend
    exceeds the limit only by what requests cost beyond their reserves: never when no request
    costs more than its reserve. The spend only grows: a negative, NaN or infinite amount is
    never added (:mod:`stef.llm.usage` checks what servers report).

    Args:
        max_usd: the limit this budget enforces in USD (``None``: no limit).
        run_max_usd: the user's ``--max-cost-usd`` for the whole run (default ``max_usd``);
            differs from ``max_usd`` only when the run's limit is split over batches that run in
            other processes (``shares``).
        shares: the batches the run's limit was split evenly over (1: one budget for the run).
        backfill_max_usd: the user's ``--max-cost-usd`` for the whole backfill this run is one day
            of (``None``: not a backfill's day); ``run_max_usd`` is then what was left of it when
            the day started, and :meth:`reason` names the backfill's cap and its spend.
        backfill_spent_usd: what the backfill's earlier days spent (USD).

    >>> budget = CostBudget(0.01)
    >>> budget.add(0.004); budget.add(None); budget.add(-5.0); budget.add(float("nan")); budget.exhausted
    False
    >>> held = budget.reserve(0.005); held, budget.reserve(0.002), round(budget.reserved_usd, 4)
    (0.005, None, 0.005)
    >>> budget.may_fit_later(0.002), budget.may_fit_later(0.0061)  # after the reserve in flight settles
    (True, False)
    >>> budget.settle(held, 0.001); round(budget.spent_usd, 4), budget.reserved_usd
    (0.005, 0.0)
    >>> budget.add(0.005); budget.exhausted, round(budget.spent_usd, 4), budget.reserve(0.0)
    (True, 0.01, None)
    >>> budget.reason()
    'cost budget reached: $0.01 spent of --max-cost-usd $0.01 for the run; symbolic judge used'
    >>> day = CostBudget(0.25, backfill_max_usd=1.0, backfill_spent_usd=0.75); day.add(0.25); day.reason()
    'cost budget reached: $1 spent of --max-cost-usd $1 for the backfill ($0.75 by its earlier days, $0.25 by this day); symbolic judge used'
    """

    def __init__(
        self,
        max_usd: float | None = None,
        run_max_usd: float | None = None,
        shares: int = 1,
        backfill_max_usd: float | None = None,
        backfill_spent_usd: float = 0.0,
    ) -> None:
        self.max_usd = max_usd
        self.run_max_usd = run_max_usd if run_max_usd is not None else max_usd
        self.shares = shares
        self.backfill_max_usd = backfill_max_usd
        self.backfill_spent_usd = _amount(backfill_spent_usd)
        self.spent_usd = 0.0
        """Money charged by the requests that ended."""
        self.reserved_usd = 0.0
        """Reserves held by the requests in flight."""
        self._lock = threading.Lock()

    def add(self, cost_usd: float | None) -> None:
        """Count one call's cost (``None``, an unpriced model, counts as nothing; so does
        anything that is not a finite amount of 0 or more)."""
        amount = _amount(cost_usd)
        if amount:
            with self._lock:
                self.spent_usd += amount

    def reserve(self, estimate_usd: float | None) -> float | None:
        """Hold ``estimate_usd`` (a request's reserve in USD; ``None`` or not a finite amount of 0
        or more: 0) for a request about to start.

        Returns:
            The amount held (give it to :meth:`settle` when the request ends), or ``None``: the
            request must not start (the spend plus the reserves held plus this one would pass the
            limit, or the spend plus the reserves held has reached it).
        """
        amount = _amount(estimate_usd)
        with self._lock:
            if self.max_usd is not None:
                committed = self.spent_usd + self.reserved_usd
                if committed >= self.max_usd or committed + amount > self.max_usd:
                    return None
            self.reserved_usd += amount
            return amount

    def settle(self, reserved_usd: float, cost_usd: float | None) -> None:
        """A request that held ``reserved_usd`` (:meth:`reserve`) ended: release it and count its
        charge ``cost_usd`` (``None`` or 0 for a request that failed without an answer)."""
        amount = _amount(cost_usd)
        with self._lock:
            self.reserved_usd = max(0.0, self.reserved_usd - reserved_usd)
            self.spent_usd += amount

    def may_fit_later(self, estimate_usd: float | None) -> bool:
        """Whether a reserve that :meth:`reserve` refused now would fit once the requests in flight
        have settled: reserves are held and the spend plus this reserve stays within the limit
        (the caller then waits for them instead of giving up while most of the budget is unspent)."""
        amount = _amount(estimate_usd)
        with self._lock:
            if self.max_usd is None:
                return False
            return self.reserved_usd > 0 and self.spent_usd < self.max_usd and self.spent_usd + amount <= self.max_usd

    @property
    def exhausted(self) -> bool:
        """The limit is set and the spend plus the reserves held reached it."""
        return self.max_usd is not None and self.spent_usd + self.reserved_usd >= self.max_usd

    def reason(self, requests: int = 0) -> str:
        """The fallback reason of a record kept from the model by the budget: the spend of the
        requests that ended (not the reserves in flight) against the user's ``--max-cost-usd`` for
        the run, and the batch's share when the limit was split (``requests``: those the record
        had made already)."""
        cap = usd(self.run_max_usd or 0.0)
        spent = f"${usd(self.spent_usd)} spent"
        tail = f"; no further request after {requests} request(s)" if requests else ""
        if self.backfill_max_usd is not None:
            total = usd(self.backfill_spent_usd + self.spent_usd)
            this = (
                f"${usd(self.spent_usd)} by this batch of the day, whose share was ${usd(self.max_usd or 0.0)} of the "
                f"${cap} left (split evenly over {self.shares} batches: batches in other processes cannot share one budget)"
                if self.shares > 1
                else f"${usd(self.spent_usd)} by this day"
            )
            # split: the day's other batches (other processes) spent too, unseen from here
            so_far = f"at least ${total}" if self.shares > 1 else f"${total}"
            return (
                f"{BUDGET_REACHED}: {so_far} spent of --max-cost-usd ${usd(self.backfill_max_usd)} for the backfill "
                f"(${usd(self.backfill_spent_usd)} by its earlier days, {this}){tail}; symbolic judge used"
            )
        if self.shares > 1:
            return (
                f"{BUDGET_REACHED}: {spent} of this batch's share ${usd(self.max_usd or 0.0)} of --max-cost-usd "
                f"${cap} for the run (split evenly over {self.shares} batches: batches in other processes "
                f"cannot share one budget){tail}; symbolic judge used"
            )
        return f"{BUDGET_REACHED}: {spent} of --max-cost-usd ${cap} for the run{tail}; symbolic judge used"


_BUDGETS: dict[str, CostBudget] = {}
_BUDGETS_LOCK = threading.Lock()


def shared_budget(
    run_key: str, max_usd: float | None, backfill_max_usd: float | None = None, backfill_spent_usd: float = 0.0
) -> CostBudget:
    """The cost budget of the run ``run_key`` in this process (made on first use with ``max_usd``
    and the backfill's cap and spend, as :class:`CostBudget` takes them).

    The batches of one nightly run (threads of one process) get the same budget, so the run's
    ``--max-cost-usd`` holds for the run, not per batch. :func:`release_budget` ends it.
    """
    with _BUDGETS_LOCK:
        budget = _BUDGETS.get(run_key)
        if budget is None:
            budget = _BUDGETS[run_key] = CostBudget(
                max_usd, backfill_max_usd=backfill_max_usd, backfill_spent_usd=backfill_spent_usd
            )
        return budget


def release_budget(run_key: str) -> CostBudget | None:
    """Forget the budget of run ``run_key``; return it (``None``: no batch of the run used one here)."""
    with _BUDGETS_LOCK:
        return _BUDGETS.pop(run_key, None)


def run_budget(
    max_usd: float | None,
    run_key: str | None = None,
    shares: int = 1,
    backfill_max_usd: float | None = None,
    backfill_spent_usd: float = 0.0,
) -> CostBudget:
    """The budget an evaluator of a run uses.

    Args:
        max_usd: the user's ``--max-cost-usd`` for the run (``None``: no limit); for a backfill's
            day, what is left of the backfill's cap.
        run_key: the run whose batches share one budget in this process (:func:`shared_budget`;
            ``None``: a budget of its own, for a run with one evaluator such as ``stef evaluate``).
        shares: batches the limit is split evenly over, when they run in other processes and
            cannot share one budget (1: no split).
        backfill_max_usd: the user's ``--max-cost-usd`` for the whole backfill the run is a day of
            (``None``: not a backfill's day); named by :meth:`CostBudget.reason`.
        backfill_spent_usd: what the backfill's earlier days spent (USD).

    Returns:
        The run's shared budget, or a new one (of ``max_usd / shares`` when ``shares`` > 1).

    >>> run_budget(1.0, shares=4).max_usd, run_budget(1.0, shares=4).run_max_usd
    (0.25, 1.0)
    >>> run_budget(1.0, "doctest-run") is run_budget(1.0, "doctest-run"), release_budget("doctest-run") is not None
    (True, True)
    """
    if shares > 1 and max_usd is not None:
        return CostBudget(max_usd / shares, max_usd, shares, backfill_max_usd, backfill_spent_usd)
    if run_key is not None:
        return shared_budget(run_key, max_usd, backfill_max_usd, backfill_spent_usd)
    return CostBudget(max_usd, None, 1, backfill_max_usd, backfill_spent_usd)
