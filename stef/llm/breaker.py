"""The circuit breaker of a run: stops calling a model that does not answer, shared by the run's
batches in one process (:func:`shared_breaker`).
"""

from __future__ import annotations

import threading

DEFAULT_BREAKER_FAILURES = 5
"""Consecutive timeouts / connection failures after which the run stops calling the model."""


BREAKER_OPEN = "circuit breaker open"
"""Fallback kind of the records the run's circuit breaker kept from the model."""
MODEL_DISABLED = "model disabled after an error"
"""Fallback kind of the records not asked after an authentication / permission / not-found error."""
UNREACHABLE = "unreachable"
"""Cause of an open breaker (:attr:`CircuitBreaker.cause`): consecutive timeouts / connection failures."""
RETRIES_EXHAUSTED = "retries exhausted"
"""Cause of an open breaker (:attr:`CircuitBreaker.cause`): records in a row whose retries all ended in
server errors (HTTP 429 / 5xx)."""


class CircuitBreaker:
    """Stops a run from calling a model that does not answer (one per run, shared by its batches).

    Every request that times out or cannot connect counts one failure; any answer from the
    server (an HTTP error too: the endpoint is alive) sets the count back to 0. After
    ``failures`` consecutive failures the breaker opens and stays open for the rest of the run;
    so it does after ``failures`` records in a row whose retries all ended in server errors
    (HTTP 429 / 5xx) with no successful answer between them:
    no request starts any more, and every record still waiting (or between retries) gets the
    symbolic verdict with the breaker's reason. :meth:`disable` opens it at once (an error that
    every request would repeat, such as a wrong key).

    Thread-safe: batches of the nightly flow run in threads and share one breaker through
    :func:`shared_breaker`.

    Args:
        failures: consecutive failures that open it (0: it never opens on failures).

    >>> breaker = CircuitBreaker(2)
    >>> breaker.started(); breaker.failed("Timeout"); breaker.answered(); breaker.failed("Timeout"); breaker.is_open
    False
    >>> breaker.started(); breaker.failed("Timeout"); breaker.is_open, breaker.opened_after_records
    (True, 2)
    >>> breaker.summary()
    'circuit breaker opened after 2 records (2 consecutive timeouts/connection failures; last: Timeout); 0 records then judged symbolically without asking the model'
    >>> tired = CircuitBreaker(2)
    >>> tired.started(); tired.exhausted("RateLimitError (HTTP 429)"); tired.started(); tired.exhausted("RateLimitError (HTTP 429)")
    >>> tired.summary()
    'circuit breaker opened after 2 records (2 records in a row ran out of retries on server errors; last: RateLimitError (HTTP 429)); 0 records then judged symbolically without asking the model'
    """

    def __init__(self, failures: int = DEFAULT_BREAKER_FAILURES) -> None:
        self.failures = failures
        self.consecutive = 0
        self.consecutive_exhausted = 0
        self.records_started = 0
        self.opened_after_records: int | None = None
        self.not_asked = 0
        self.kind: str | None = None
        self.reason: str | None = None
        self.last_failure: str | None = None
        self.cause: str | None = None
        """What opened the breaker as :attr:`kind` ``circuit breaker open``: :data:`UNREACHABLE` or
        :data:`RETRIES_EXHAUSTED` (``None``: closed, or disabled)."""
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        """No request may start."""
        return self.reason is not None

    def started(self) -> None:
        """A record makes its first request."""
        with self._lock:
            self.records_started += 1

    def answered(self) -> None:
        """The server answered (with a verdict or an HTTP error)."""
        with self._lock:
            self.consecutive = 0

    def succeeded(self) -> None:
        """A request got an answer: records whose retries ran out no longer count."""
        with self._lock:
            self.consecutive_exhausted = 0

    def exhausted(self, what: str) -> None:
        """A record's retries all failed with server errors (HTTP 429 / 5xx): after ``failures``
        such records in a row, with no answer between them, the breaker opens too."""
        with self._lock:
            self.consecutive_exhausted += 1
            if self.reason is None and self.failures and self.consecutive_exhausted >= self.failures:
                self.kind, self.opened_after_records, self.last_failure = BREAKER_OPEN, self.records_started, what
                self.cause = RETRIES_EXHAUSTED
                self.reason = (
                    f"{BREAKER_OPEN} after {self.consecutive_exhausted} records in a row ran out of retries "
                    f"(opened after {self.records_started} records; last: {what})"
                )

    def failed(self, what: str) -> None:
        """A request timed out or could not connect (``what``: its description)."""
        with self._lock:
            self.consecutive += 1
            if self.reason is None and self.failures and self.consecutive >= self.failures:
                self.kind, self.opened_after_records, self.last_failure = BREAKER_OPEN, self.records_started, what
                self.cause = UNREACHABLE
                self.reason = (
                    f"{BREAKER_OPEN} after {self.consecutive} consecutive timeouts/connection failures "
                    f"(opened after {self.records_started} records; last: {what})"
                )

    def disable(self, what: str) -> None:
        """Open for good after an error every request would repeat (``what``: its description)."""
        with self._lock:
            if self.reason is None:
                self.kind, self.opened_after_records = MODEL_DISABLED, self.records_started
                self.reason = f"{what} (the model is not asked again in this run)"

    def kept(self, requests: int = 0) -> str:
        """The fallback reason of a record stopped by the open breaker (``requests``: those it
        had made already; a record that made none is counted in :attr:`not_asked`)."""
        if requests:
            return f"{self.reason}; no further request after {requests} request(s); symbolic judge used"
        with self._lock:
            self.not_asked += 1
        return f"not asked: {self.reason}; symbolic judge used"

    def summary(self) -> str | None:
        """One line for the run summary (``None`` while closed): what opened the breaker (timeouts /
        connection failures, or records that ran out of retries on server errors) and the last
        failure. The last failure quotes the server's error text as received: a caller that shows
        the line passes it through :func:`stef.display.one_line`."""
        if self.reason is None:
            return None
        if self.kind == BREAKER_OPEN:
            what = (
                "records in a row ran out of retries on server errors"
                if self.cause == RETRIES_EXHAUSTED
                else "consecutive timeouts/connection failures"
            )
            head = (
                f"circuit breaker opened after {self.opened_after_records} records ({self.failures} {what}; "
                f"last: {self.last_failure})"
            )
        else:
            head = f"model disabled after {self.opened_after_records} records: {self.reason}"
        return f"{head}; {self.not_asked} records then judged symbolically without asking the model"


_BREAKERS: dict[str, CircuitBreaker] = {}
_BREAKERS_LOCK = threading.Lock()


def shared_breaker(run_key: str, failures: int = DEFAULT_BREAKER_FAILURES) -> CircuitBreaker:
    """The circuit breaker of the run ``run_key`` in this process (made on first use).

    The batches of one nightly run (threads of one process) get the same breaker; with the
    process or Dask task runner each worker process has its own. :func:`release_breaker` ends it.
    """
    with _BREAKERS_LOCK:
        breaker = _BREAKERS.get(run_key)
        if breaker is None:
            breaker = _BREAKERS[run_key] = CircuitBreaker(failures)
        return breaker


def release_breaker(run_key: str) -> CircuitBreaker | None:
    """Forget the breaker of run ``run_key``; return it (``None``: no batch of the run used one here)."""
    with _BREAKERS_LOCK:
        return _BREAKERS.pop(run_key, None)
