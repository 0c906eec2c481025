"""A local OpenAI-compatible chat-completions server for LLM judge tests and benchmarks.

No network: it listens on 127.0.0.1 (a free port), answers ``POST …/chat/completions`` after a
fixed delay, and can fail on purpose (scripted statuses, a random share of HTTP 500, a reported
``usage`` of any JSON text, or hanging: accepting requests and never answering). It counts
requests and the largest number in flight, and keeps the request bodies, so tests can check
what the judge sent (temperature, ``response_format``, the templated prompt).

Its default answer is a small deterministic "judge": CORRECT (γ 0.93) when the prompt's filter
alignment lists nothing missing or wrong, else INCORRECT (γ 0.88) with a taxonomy error.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[dict[str, Any]], str]
"""Request body -> the ``message.content`` to answer with."""


def prompt_blocks(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The data blocks of the judge's user message: ``{tag name: parsed JSON}``.

    A block is the lines between a line ``<NAME-NONCE>`` and the line ``</NAME-NONCE>``; read
    here independently of the judge's code. Every tag line must occur once, and no other line
    may look like a tag.

    Raises:
        ValueError: a tag line repeated, a block not closed, or a stray tag-like line.
    """
    lines = str(messages[1]["content"]).split("\n")
    blocks: dict[str, Any] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("</"):
            raise ValueError(f"line {index + 1}: a closing tag outside a block: {line[:80]!r}")
        if line.startswith("<") and line.endswith(">"):
            name = line[1:-1].rsplit("-", 1)[0]
            closing = "</" + line[1:]
            if name in blocks or lines.count(line) != 1 or lines.count(closing) != 1:
                raise ValueError(f"tag {line!r} is not one opening and one closing line")
            end = lines.index(closing, index + 1)
            blocks[name] = json.loads("\n".join(lines[index + 1 : end]))
            index = end + 1
            continue
        index += 1
    return blocks


def judge_answer(body: dict[str, Any]) -> str:
    """The default answer: a verdict read off the prompt's filter alignment (see module docstring)."""
    alignment = prompt_blocks(body.get("messages", []))["stef-record"]["filter_alignment"]
    clean = not alignment["missing"] and not alignment["wrong"]
    if clean:
        return json.dumps(
            {
                "verdict": "CORRECT",
                "confidence": 0.93,
                "rationale": "Every requested filter is applied.",
                "suspected_errors": [],
            }
        )
    return json.dumps(
        {
            "verdict": "INCORRECT",
            "confidence": 0.88,
            "rationale": "A requested filter is missing or has another value.",
            "suspected_errors": [
                {
                    "category": "Condition-Related Errors",
                    "subcategory": "Explicit Condition Missing",
                    "evidence": "filter alignment",
                }
            ],
        }
    )


@dataclass
class StubLLMServer:
    """State and settings of one running stub server (see :func:`stub_llm_server`).

    Attributes:
        delay_s: seconds before each answer.
        fail_share: share of requests answered with HTTP 500, drawn with ``random.Random(seed)``.
        script: HTTP statuses (or ``"ok"``) for the first requests, in order; then normal answers.
        answer: the content of a normal answer.
        usage: JSON text sent as the answer's ``usage`` (``None``: counts from the text lengths);
            any text, e.g. ``'{"prompt_tokens": -5, "total_tokens": NaN}'``.
        error_message: the ``error.message`` of an error answer (``None``: ``stub server: planned HTTP <status>``);
            any text, e.g. with terminal escapes.
        hang: accept every request and never answer it (the connection is closed when the server
            stops): a hung model endpoint.
        url: base URL to give as ``api_base`` (``http://127.0.0.1:PORT/v1``).
        requests: requests received.
        failures: requests answered with an error status.
        max_in_flight: the most requests handled at the same time.
        first_request_at: ``time.perf_counter()`` when the first request arrived (``None`` before it).
        bodies: the request bodies received, in order.
    """

    delay_s: float = 0.2
    fail_share: float = 0.0
    seed: int = 0
    script: Sequence[int | str] = ()
    answer: Answer = judge_answer
    usage: str | None = None
    error_message: str | None = None
    hang: bool = False
    url: str = ""
    requests: int = 0
    failures: int = 0
    max_in_flight: int = 0
    first_request_at: float | None = None
    bodies: list[dict[str, Any]] = field(default_factory=list)
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _released: threading.Event = field(default_factory=threading.Event)
    _random: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def reset_counts(self) -> None:
        """Zero the counters (between two runs against the same server)."""
        with self._lock:
            self.requests = self.failures = self.max_in_flight = 0
            self.first_request_at = None
            self.bodies.clear()

    def _admit(self, body: dict[str, Any]) -> int | str:
        with self._lock:
            if self.first_request_at is None:
                self.first_request_at = time.perf_counter()
            self.requests += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            self.bodies.append(body)
            number = self.requests
            if number <= len(self.script):
                planned = self.script[number - 1]
            else:
                planned = 500 if self._random.random() < self.fail_share else "ok"
            if planned != "ok":
                self.failures += 1
            return planned

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1


def _handler(state: StubLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, payload: dict[str, Any], usage: str | None = None) -> None:
            data = json.dumps(payload).encode()
            if usage is not None:  # raw JSON text (NaN and other values json.dumps would not write)
                data = data[:-1] + b', "usage": ' + usage.encode() + b"}"
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            planned = state._admit(body)
            try:
                if state.hang:
                    state._released.wait()
                    self.close_connection = True
                    return
                time.sleep(state.delay_s)
                if planned != "ok":
                    status = int(planned)
                    kind = "rate_limit_exceeded" if status == 429 else "server_error"
                    self._send(
                        status,
                        {
                            "error": {
                                "message": state.error_message or f"stub server: planned HTTP {status}",
                                "type": kind,
                                "code": kind,
                            }
                        },
                    )
                    return
                content = state.answer(body)
                prompt_tokens = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
                completion_tokens = max(1, len(content) // 4)
                payload: dict[str, Any] = {
                    "id": f"chatcmpl-stub-{state.requests}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "stub"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                    ],
                }
                if state.usage is None:
                    payload["usage"] = {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    }
                self._send(200, payload, state.usage)
            finally:
                state._leave()

    return Handler


class _QuietServer(ThreadingHTTPServer):
    """The stub's HTTP server: a client that hung up before its answer (a judge whose run was
    interrupted abandons its requests in flight) is no error worth a printed traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipeError, ConnectionResetError
            return
        super().handle_error(request, client_address)


@contextmanager
def stub_llm_server(**settings: Any) -> Iterator[StubLLMServer]:
    """Run a :class:`StubLLMServer` on 127.0.0.1 in a background thread for the ``with`` block.

    Args:
        **settings: :class:`StubLLMServer` fields (``delay_s``, ``fail_share``, ``seed``, ``script``, ``answer``).

    Yields:
        The server state; ``url`` is the base URL (``http://127.0.0.1:PORT/v1``).
    """
    state = StubLLMServer(**settings)
    server = _QuietServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, name="stub-llm-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state._released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


CITIES = ("Rome", "Lisbon", "Oslo", "Quito", "Lagos", "Hanoi", "Perth", "Dakar")


def synthetic_records(count: int, agent_version: str = "v1") -> list[dict[str, Any]]:
    """``count`` distinct agent log records (JSON-ready) in five shapes: correct, with a missing
    filter, with a wrong value, with an extra filter, and a sum over a year.

    Every record has its own filter value, so every record has its own judge inputs (and cache key).

    >>> [r["run_id"] for r in synthetic_records(2)], synthetic_records(1)[0]["sql"]
    (['syn-00000', 'syn-00001'], "SELECT COUNT(*) FROM customers WHERE city = 'Rome 0'")
    """
    shapes = (
        ("How many customers live in '{v}'?", "SELECT COUNT(*) FROM customers WHERE city = '{v}'"),
        ("List the names of customers who live in '{v}'.", "SELECT name FROM customers"),
        ("How many orders were shipped to '{v}'?", "SELECT COUNT(*) FROM orders WHERE ship_city = '{w}'"),
        (
            "What is the average price of products sold in '{v}'?",
            "SELECT AVG(price) FROM products WHERE city = '{v}' AND discontinued = 0",
        ),
        (
            "What is the total amount of orders from '{v}' in 2024?",
            "SELECT SUM(amount) FROM orders WHERE city = '{v}' AND order_year = 2024",
        ),
    )
    records = []
    for i in range(count):
        question, sql = shapes[i % len(shapes)]
        value = f"{CITIES[i % len(CITIES)]} {i}"
        other = f"{CITIES[(i + 1) % len(CITIES)]} {i}"
        records.append(
            {
                "run_id": f"syn-{i:05d}",
                "timestamp": "2026-11-20T09:00:00+00:00",
                "agent_id": "bench-agent",
                "agent_version": agent_version,
                "question": question.format(v=value),
                "sql": sql.format(v=value, w=other),
                "dialect": "sqlite",
            }
        )
    return records
