"""A real Arize Phoenix server for the integration tests, and traced agent runs sent to it.

The server (``arize-phoenix``) is a heavy application with pins of its own, so it lives in its own
virtual environment: ``$STEF_TEST_PHOENIX`` is its ``phoenix`` executable (``.ci/run`` builds it),
else ``phoenix`` on ``PATH``. Without one the tests skip, unless ``$STEF_REQUIRE_PHOENIX=1`` (CI),
where they fail. Telemetry off, no external resources, SQLite storage in a temporary folder, bound
to 127.0.0.1 on free ports.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

STARTUP_TIMEOUT_S = 120.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def phoenix_executable() -> str | None:
    """The ``phoenix`` executable to start, or ``None``."""
    return os.environ.get("STEF_TEST_PHOENIX") or shutil.which("phoenix")


@contextmanager
def phoenix_server(workdir: Path) -> Iterator[str]:
    """Start ``phoenix serve``; yield its base URL; stop it. Skips (fails under
    ``$STEF_REQUIRE_PHOENIX=1``) when no server is installed."""
    executable = phoenix_executable()
    if executable is None:
        message = "no Phoenix server: set STEF_TEST_PHOENIX to the `phoenix` of a venv with arize-phoenix"
        if os.environ.get("STEF_REQUIRE_PHOENIX") == "1":
            pytest.fail(message)
        pytest.skip(message)
    port, grpc_port = free_port(), free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    }
    log = (workdir / "phoenix.log").open("wb")
    process = subprocess.Popen([executable, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"phoenix serve exited with {process.returncode}: see {workdir / 'phoenix.log'}")
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"phoenix serve not up after {STARTUP_TIMEOUT_S:.0f} s")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@dataclass
class TracedRun:
    """One agent run to trace: a root CHAIN span (question, metadata), an LLM span, a SQL span."""

    question: str
    sql: str
    start: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    sql_as_json: bool = True
    sql_span_name: str = "sql_db_query"
    model: str = "gpt-4o-mini"
    prompt_tokens: int = 120
    completion_tokens: int = 30
    trace_id: str = ""
    sql_span_id: str = ""


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def send_traces(endpoint: str, project: str, runs: Sequence[TracedRun]) -> None:
    """Trace ``runs`` with the OpenTelemetry SDK over OTLP/HTTP to ``endpoint/v1/traces`` in the
    OpenInference LangChain shape; fill each run's ``trace_id`` and ``sql_span_id``."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import set_span_in_context

    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
    tracer = provider.get_tracer("stef-tests")
    for run in runs:
        t0 = _ns(run.start)
        root = tracer.start_span(
            "AgentExecutor",
            start_time=t0,
            attributes={
                "openinference.span.kind": "CHAIN",
                "input.value": json.dumps({"input": run.question}),
                "metadata": json.dumps(run.metadata),
            },
        )
        context = set_span_in_context(root)
        llm = tracer.start_span(
            "ChatOpenAI",
            context=context,
            start_time=t0 + 1_000_000,
            attributes={
                "openinference.span.kind": "LLM",
                "llm.model_name": run.model,
                "llm.token_count.prompt": run.prompt_tokens,
                "llm.token_count.completion": run.completion_tokens,
            },
        )
        llm.end(end_time=t0 + 400_000_000)
        sql_input = json.dumps({"query": run.sql}) if run.sql_as_json else run.sql
        sql_span = tracer.start_span(
            run.sql_span_name,
            context=context,
            start_time=t0 + 401_000_000,
            attributes={"openinference.span.kind": "TOOL", "input.value": sql_input},
        )
        sql_span.end(end_time=t0 + 450_000_000)
        root.end(end_time=t0 + 500_000_000)
        run.trace_id = format(root.get_span_context().trace_id, "032x")
        run.sql_span_id = format(sql_span.get_span_context().span_id, "016x")
    provider.force_flush()
    provider.shutdown()


def wait_for_spans(endpoint: str, project: str, count: int, timeout_s: float = 60.0) -> None:
    """Wait until Phoenix has stored ``count`` spans of ``project`` (ingestion is asynchronous)."""
    from phoenix.client import Client

    client = Client(base_url=endpoint)
    deadline = time.monotonic() + timeout_s
    seen = 0
    while time.monotonic() < deadline:
        try:
            seen = len(client.spans.get_spans(project_identifier=project, limit=count + 1, timeout=30))
        except Exception:
            seen = 0
        if seen >= count:
            return
        time.sleep(0.5)
    raise AssertionError(f"Phoenix stored {seen} of {count} spans of {project!r} after {timeout_s:.0f} s")
