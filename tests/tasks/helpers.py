"""Helpers of the tests in tests/tasks: the report week's Monday, an HTML collector, log records and the
drift-event wait of the flow tests, log lines of the task tests."""

from __future__ import annotations

import json
import time
from datetime import date
from html.parser import HTMLParser
from typing import Any

from stef.logs import LogLine, parse_line
from stef.monitor.alerts import DRIFT_EVENT

MONDAY = date(2026, 11, 23)  # 2026-W48


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.tables = 0
        self.worst_rows = 0
        self._in_worst = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "img":
            self.images.append(values.get("src") or "")
        for name in ("href", "src"):
            if tag not in ("img",) and values.get(name):
                self.links.append(values[name] or "")
        if tag == "table":
            self.tables += 1
        if tag == "h2" and values.get("id") == "worst":
            self._in_worst = True
        if tag == "tr" and self._in_worst:
            self.worst_rows += 1


def record(run_id: str, version: str, number: int, correct: bool, agent: str = "shop") -> dict[str, Any]:
    """A log record whose SQL applies the asked filter (scores high) or ignores it and filters another year (scores low)."""
    question = f"How many orders were placed in region 'Region {number}' in 2025?"
    sql = (
        f"SELECT COUNT(*) FROM orders WHERE region = 'Region {number}' AND order_year = 2025"
        if correct
        else "SELECT COUNT(*) FROM orders WHERE order_year = 2024"
    )
    return {
        "run_id": run_id,
        "timestamp": "2026-11-26T10:00:00+00:00",
        "agent_id": agent,
        "agent_version": version,
        "question": question,
        "sql": sql,
        "dialect": "postgres",
        "app_id": "shop",
    }


def _wait_for_drift_event(agent_id: str, candidate: str) -> Any | None:
    """The ``stef.drift.detected`` event of ``agent_id``/``candidate`` stored by the test API (waits up to 10 s)."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all()
    deadline = time.monotonic() + 10.0
    while True:
        with get_client(sync_client=True) as client:
            page = client.read_events(EventFilter(event=EventNameFilter(name=[DRIFT_EVENT])), limit=50)
        for event in page.events:
            if event.resource.id == f"stef.agent.{agent_id}" and event.payload.get("candidate_version") == candidate:
                return event
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)


DAY = date(2026, 11, 20)


def jsonl_line(number: int, **fields: Any) -> LogLine:
    payload = {"question": "How many orders?", "sql": "SELECT COUNT(*) FROM orders", **fields}
    parsed = parse_line(json.dumps(payload).encode(), "day.jsonl", number)
    assert parsed is not None
    return parsed
