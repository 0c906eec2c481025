"""The request pool of a run: at most ``concurrency`` model requests in flight across all its batches.

:class:`RequestSlots` bounds the requests of a whole run, not of one batch: every batch of a run
queues its requests on the same slots, so a batch never waits for the stragglers of another and
``--concurrency N`` means N requests in flight for the run. One :class:`stef.llm.judge.LLMJudge`
keeps one (``stef evaluate`` has one judge for the run); the batches of the nightly flow, each
with its own judge in a thread of one process, share the run's through :func:`shared_slots`.

All model calls of a process run on one event loop (:class:`stef.llm.judge._LoopThread`), so the
slots are an :class:`asyncio.Semaphore` of that loop; the counters are read by tests and summaries.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio
    from types import TracebackType


class RequestSlots:
    """At most ``limit`` requests in flight at once (an async context manager; one event loop).

    Args:
        limit: requests in flight (at least 1).

    Raises:
        ValueError: ``limit`` is below 1.

    >>> import asyncio
    >>> slots = RequestSlots(2)
    >>> async def three() -> None:
    ...     async def one() -> None:
    ...         async with slots:
    ...             await asyncio.sleep(0.01)
    ...     await asyncio.gather(one(), one(), one())
    >>> asyncio.run(three()); slots.max_in_flight, slots.in_flight, slots.entered
    (2, 0, 3)
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a request pool needs at least 1 slot, got {limit}")
        self.limit = limit
        self.in_flight = 0
        """Requests holding a slot now."""
        self.max_in_flight = 0
        """The most requests that held a slot at the same time."""
        self.entered = 0
        """Slots taken so far (one per attempt of a request)."""
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._entered_changed = threading.Condition()

    def _slots(self) -> asyncio.Semaphore:
        """The semaphore of the running loop (made on first use; every model call of a process runs
        on one loop, so another loop only appears when that one was closed and replaced)."""
        import asyncio  # not at module level: the symbolic judge's commands never load it

        loop = asyncio.get_running_loop()
        with self._lock:
            if self._semaphore is None or self._loop is not loop:
                self._semaphore, self._loop = asyncio.Semaphore(self.limit), loop
            return self._semaphore

    async def __aenter__(self) -> RequestSlots:
        await self._slots().acquire()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        with self._entered_changed:
            self.entered += 1
            self._entered_changed.notify_all()
        return self

    def wait_entered(self, count: int, timeout_s: float) -> int:
        """Block the calling thread (not the event loop's) until ``count`` slots were taken in all,
        or ``timeout_s`` seconds passed.

        :meth:`stef.llm.evaluate.LLMEvaluator.submit` waits so for a run's first requests: the
        calling thread then stops competing for the interpreter (it would prepare the next records)
        while the loop takes their slots. A slot taken is a request begun, not yet sent (litellm
        still builds it). Called on the loop's own thread it returns at once: waiting there would
        stop the loop that takes the slots.

        Args:
            count: slots taken (:attr:`entered`) to wait for.
            timeout_s: seconds to wait at most.

        Returns:
            :attr:`entered` when the wait ended (below ``count`` after a timeout).
        """
        import asyncio

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # no loop runs in this thread: the usual caller
            running = None
        if running is not None and running is self._loop:
            return self.entered
        with self._entered_changed:
            self._entered_changed.wait_for(lambda: self.entered >= count, timeout=timeout_s)
            return self.entered

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.in_flight -= 1
        self._slots().release()


_POOLS: weakref.WeakValueDictionary[str, RequestSlots] = weakref.WeakValueDictionary()
_POOLS_LOCK = threading.Lock()


def shared_slots(run_key: str, limit: int) -> RequestSlots:
    """The request pool of the run ``run_key`` in this process (made on first use with ``limit``).

    The batches of one nightly run (threads of one process) get the same pool while any of them
    holds it; it is forgotten when no judge of the run is left (nothing to release). With the
    process or Dask task runner each worker process has its own.

    Raises:
        ValueError: ``limit`` is below 1 (when the pool is made).
    """
    with _POOLS_LOCK:
        slots = _POOLS.get(run_key)
        if slots is None:
            slots = RequestSlots(limit)
            _POOLS[run_key] = slots
        return slots
