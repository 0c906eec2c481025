"""`stef pull` / `stef push` against a real local Arize Phoenix server and a local OTLP receiver
(issue 19): traces sent with the OpenTelemetry SDK in the OpenInference LangChain shape, pulled
into a day's log file, scored by `stef nightly`, pushed back as span annotations and as
`gen_ai.evaluation.result` events; nothing leaves 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.flows.cli.cli_support import invoke, read_jsonl
from tests.support.phoenix_server import TracedRun, free_port, phoenix_server, send_traces, wait_for_spans
from warehouse import connect

DAY = "2026-11-30"
PROJECT = "sql-agent"


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with phoenix_server(tmp_path_factory.mktemp("phoenix")) as url:
        yield url


def _runs() -> list[TracedRun]:
    start = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
    runs = [
        TracedRun(
            question=f"How many singers are older than {18 + i % 40} in country {i % 7}?",
            sql=f"SELECT count(*) FROM singer WHERE age > {18 + i % 40} AND country = 'c{i % 7}'",
            start=start + timedelta(seconds=30 * i),
            metadata={"agent_version": "v1" if i % 2 else "v2", "app_id": "concert_singer"},
            sql_as_json=i % 3 != 0,
        )
        for i in range(240)
    ]
    # a trace whose root starts the day before, its SQL span on the day: fetched by trace id
    runs.append(
        TracedRun("Name every singer.", "SELECT name FROM singer", datetime(2026, 11, 29, 23, 59, 59, 800_000, tzinfo=UTC), {"agent_version": "v2"})
    )  # fmt: skip
    # another day: not pulled
    runs.append(TracedRun("Oldest singer?", "SELECT max(age) FROM singer", datetime(2026, 11, 29, 12, 0, tzinfo=UTC)))
    return runs


@pytest.mark.flow
def test_pull_nightly_push_twice_leaves_one_stef_annotation_per_sql_span(
    phoenix: str, tmp_path: Path, prefect_harness: None
) -> None:
    runs = _runs()
    unreadable = TracedRun(
        "Broken?", "SELECT 1", datetime(2026, 11, 30, 20, 0, tzinfo=UTC), sql_span_name="execute_sql"
    )
    send_traces(phoenix, PROJECT, [*runs, unreadable])
    # the unreadable span: JSON input without the SQL key
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import set_span_in_context

    provider = TracerProvider(resource=Resource.create({"openinference.project.name": PROJECT}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces")))
    tracer = provider.get_tracer("stef-tests")
    t0 = int(datetime(2026, 11, 30, 21, 0, tzinfo=UTC).timestamp() * 1e9)
    root = tracer.start_span("AgentExecutor", start_time=t0, attributes={"input.value": "Top singers?"})
    bad = tracer.start_span("sql_db_query", context=set_span_in_context(root), start_time=t0 + 1000, attributes={"input.value": '{"statement": "SELECT 1"}'})  # fmt: skip
    bad.end(end_time=t0 + 2000)
    root.end(end_time=t0 + 3000)
    provider.shutdown()
    bad_id = format(bad.get_span_context().span_id, "016x")
    wait_for_spans(phoenix, PROJECT, 3 * (len(runs) + 1) + 2)

    logs = tmp_path / "logs"
    pulled = invoke(
        "pull", "phoenix", "--endpoint", phoenix, "--project", PROJECT, "--date", DAY, "--logs-root", str(logs)
    )
    assert pulled.exit_code == 0, pulled.output
    day_file = logs / DAY / f"phoenix-{PROJECT}.jsonl"
    assert "242 records" in pulled.stdout and "1 SQL spans the mapping cannot read" in pulled.stdout
    lines = read_jsonl(day_file)
    records = {line["run_id"]: line for line in lines if "source_error" not in line}
    on_day = [*runs[:241], unreadable]
    assert set(records) == {run.sql_span_id for run in on_day}
    for run in on_day:
        record = records[run.sql_span_id]
        assert (record["question"], record["sql"]) == (run.question, run.sql)
        assert record["agent_version"] == run.metadata.get("agent_version", "unknown")
        assert record["trace_id"] == run.trace_id and record["agent_id"] == PROJECT
    assert records[runs[0].sql_span_id]["tokens"] == {"prompt": 120, "completion": 30, "total": 150}
    (broken,) = [line for line in lines if "source_error" in line]
    assert broken["span_id"] == bad_id and "without query / sql" in broken["source_error"]
    first_text = day_file.read_bytes()
    again = invoke(
        "pull", "phoenix", "--endpoint", phoenix, "--project", PROJECT, "--date", DAY, "--logs-root", str(logs)
    )
    assert again.exit_code == 0 and day_file.read_bytes() == first_text  # a rerun rewrites the same file

    warehouse = str(tmp_path / "stef.duckdb")
    night = invoke("nightly", "--date", DAY, "--logs-root", str(logs), "--warehouse", warehouse)
    assert night.exit_code == 0, night.output
    with connect(warehouse, read_only=True) as conn:
        (reason,) = conn.execute("SELECT reason FROM quarantine WHERE run_id = ?", [bad_id]).fetchall()[0]
        stored = dict(conn.execute("SELECT run_id, score FROM evaluations").fetchall())
    assert reason.startswith("unreadable trace span: SQL span 'sql_db_query'")

    for _ in range(2):
        pushed = invoke(
            "push", "phoenix", "--endpoint", phoenix, "--project", PROJECT, "--date", DAY, "--warehouse", warehouse
        )
        assert pushed.exit_code == 0, pushed.output
        assert "243 results sent, 1 of them unscored" in pushed.stdout
    from phoenix.client import Client

    span_ids = [run.sql_span_id for run in on_day] + [bad_id]
    annotations = Client(base_url=phoenix).spans.get_span_annotations(
        span_ids=span_ids, project_identifier=PROJECT, include_annotation_names=["stef"], limit=10_000
    )
    by_span: dict[str, list[dict[str, Any]]] = {}
    for annotation in annotations:
        by_span.setdefault(annotation["span_id"], []).append(dict(annotation))
    assert sorted(by_span) == sorted(span_ids) and all(len(v) == 1 for v in by_span.values())
    for span_id, (annotation,) in by_span.items():
        assert annotation["annotator_kind"] == "CODE"
        assert annotation["result"].get("score") == stored[span_id]
    assert by_span[bad_id][0]["result"]["label"] == "invalid_input"
    assert by_span[runs[0].sql_span_id][0]["metadata"]["evaluator_version"]


def test_an_unreachable_phoenix_is_one_error_line_naming_the_endpoint(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    result = invoke(
        "pull", "phoenix", "--endpoint", endpoint, "--project", "p", "--date", DAY, "--logs-root", str(tmp_path)
    )
    assert result.exit_code == 2
    assert f"error: {endpoint}: reading the spans of project 'p' failed" in result.output
    assert not (tmp_path / DAY).exists() or not list((tmp_path / DAY).iterdir())


def test_a_bad_mapping_file_is_refused_naming_the_key(tmp_path: Path) -> None:
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps({"sql_span_names": "execute_sql"}), encoding="utf-8")
    bundled = Path(__file__).parents[3] / "flows" / "demo_data" / "traces" / "otlp-traces.jsonl"
    result = invoke(
        "pull", "otlp", "--input", str(bundled), "--date", DAY, "--logs-root", str(tmp_path), "--mapping", str(mapping)
    )
    assert result.exit_code == 2 and "invalid mapping at sql_span_names" in result.output
    schema = json.loads(invoke("pull", "json-schema").stdout)
    assert "sql_span_names" in schema["properties"]


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver on 127.0.0.1 that keeps every request body it is sent."""

    bodies: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        type(self).bodies.append((self.path, self.rfile.read(length)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.flow
def test_otlp_file_pull_nightly_and_evaluation_events_to_a_local_receiver(
    tmp_path: Path, prefect_harness: None
) -> None:
    bundled = Path(__file__).parents[3] / "flows" / "demo_data" / "traces" / "otlp-traces.jsonl"
    logs = tmp_path / "logs"
    pulled = invoke("pull", "otlp", "--input", str(bundled), "--date", DAY, "--logs-root", str(logs))
    assert pulled.exit_code == 0, pulled.output
    lines = read_jsonl(logs / DAY / "otlp-traces.jsonl")
    assert [line["run_id"] for line in lines] == ["a1b2c3d4e5f60718", "run-0002", "c1b2c3d4e5f6071a"]
    assert lines[2]["sql"].startswith("SELECT DISTINCT T1.creation FROM department")  # db.query.text
    assert {line["agent_id"] for line in lines} == {"sql-agent"} and lines[0]["latency_ms"] == 1200.0
    warehouse = str(tmp_path / "stef.duckdb")
    assert invoke("nightly", "--date", DAY, "--logs-root", str(logs), "--warehouse", warehouse).exit_code == 0
    with connect(warehouse, read_only=True) as conn:
        scores = dict(conn.execute("SELECT run_id, score FROM evaluations").fetchall())

    _Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        pushed = invoke(
            "push", "otlp", "--endpoint", endpoint, "--date", DAY, "--warehouse", warehouse, "--header", "x-team=sql"
        )
        assert pushed.exit_code == 0, pushed.output
        assert "3 results sent" in pushed.stdout
    finally:
        server.shutdown()
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    events = []
    for path, body in _Receiver.bodies:
        assert path == "/v1/logs"
        request = ExportLogsServiceRequest()
        request.ParseFromString(body)
        for resource_logs in request.resource_logs:
            for scope_logs in resource_logs.scope_logs:
                events.extend(scope_logs.log_records)
    assert len(events) == 3
    by_span = {event.span_id.hex(): event for event in events}
    for line in lines:
        event = by_span[line["span_id"]]
        assert event.event_name == "gen_ai.evaluation.result" and event.trace_id.hex() == line["trace_id"]
        attributes = {a.key: a.value for a in event.attributes}
        assert attributes["gen_ai.evaluation.name"].string_value == "stef"
        assert attributes["gen_ai.evaluation.score.value"].double_value == scores[line["run_id"]]
        assert attributes["stef.run_id"].string_value == line["run_id"]


class _PhoenixAnnotations(BaseHTTPRequestHandler):
    """The span-annotation endpoint of a Phoenix server on 127.0.0.1 (``POST /v1/span_annotations``, what
    the official client calls), keeping the annotations it is sent; the real server is in the tests above."""

    annotations: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        assert self.path.startswith("/v1/span_annotations")
        type(self).annotations.extend(body["data"])
        reply = json.dumps({"data": [{"id": f"a{i}"} for i, _ in enumerate(body["data"])]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.flow
def test_push_phoenix_of_a_day_pulled_from_otlp_files_sends_with_source_otlp_and_says_why_not_without(
    tmp_path: Path, prefect_harness: None
) -> None:
    """`stef push phoenix` of an OTLP-pulled day printed "0 results sent" with exit code 0: it reads only
    the answers of phoenix-*.jsonl files; the nightly's --source otlp --push phoenix sent them."""
    bundled = Path(__file__).parents[3] / "flows" / "demo_data" / "traces" / "otlp-traces.jsonl"
    logs, warehouse = tmp_path / "logs", str(tmp_path / "w.duckdb")
    assert invoke("pull", "otlp", "--input", str(bundled), "--date", DAY, "--logs-root", str(logs)).exit_code == 0
    assert invoke("nightly", "--date", DAY, "--logs-root", str(logs), "--warehouse", warehouse).exit_code == 0
    with connect(warehouse, read_only=True) as conn:
        scores = dict(conn.execute("SELECT run_id, score FROM evaluations").fetchall())
    lines = read_jsonl(logs / DAY / "otlp-traces.jsonl")

    _PhoenixAnnotations.annotations = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PhoenixAnnotations)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        bare = invoke("push", "phoenix", "--endpoint", endpoint, "--date", DAY, "--warehouse", warehouse)
        otlp = invoke("push", "phoenix", "--endpoint", endpoint, "--date", DAY, "--warehouse", warehouse, "--source", "otlp")  # fmt: skip
        unstored = invoke("push", "phoenix", "--endpoint", endpoint, "--date", "2026-11-29", "--warehouse", warehouse)
    finally:
        server.shutdown()
    assert (bare.exit_code, bare.stdout, bare.stderr.splitlines()) == (
        2,
        "",
        [
            f"error: no result to send for {DAY}: no answer of that day was pulled by `stef pull phoenix`; "
            "its pulled answers are in otlp-traces.jsonl (3); add --source otlp"
        ],
    )
    assert otlp.exit_code == 0, otlp.output
    assert otlp.stdout.startswith(f"{endpoint}: 3 results sent, 0 of them unscored")
    sent = {annotation["span_id"]: annotation for annotation in _PhoenixAnnotations.annotations}
    assert len(_PhoenixAnnotations.annotations) == 3 and sorted(sent) == sorted(line["span_id"] for line in lines)
    for line in lines:
        annotation = sent[line["span_id"]]
        assert annotation["name"] == "stef" and annotation["result"]["score"] == scores[line["run_id"]]
    assert (unstored.exit_code, unstored.stderr.splitlines()) == (
        2,
        [
            f"error: no result to send for 2026-11-29: no run has stored that day in {warehouse}; "
            "run `stef nightly --date 2026-11-29` first"
        ],
    )


def test_push_of_a_day_without_pulled_answers_says_why_nothing_is_sent(tmp_path: Path) -> None:
    """A day of plain log files has no span to annotate: "0 results sent" with exit code 0 said nothing of it."""
    from tests.support.monitoring_support import answers, store_answers

    warehouse = tmp_path / "w.duckdb"
    with connect(warehouse) as conn:
        store_answers(conn, date(2026, 11, 20), answers("plain", "bird", "v1", [80.0, 60.0]))
    for target in ("phoenix", "otlp"):
        result = invoke("push", target, "--endpoint", "http://127.0.0.1:9", "--date", "2026-11-20", "--warehouse", str(warehouse))  # fmt: skip
        assert (result.exit_code, result.stdout, result.stderr.splitlines()) == (
            2,
            "",
            [
                f"error: no result to send for 2026-11-20: none of its answers in {warehouse} came from `stef pull` "
                "(a trace's span id), so none has a span to annotate"
            ],
        )


def test_a_receiver_that_refuses_is_an_error(tmp_path: Path, prefect_harness: None) -> None:
    bundled = Path(__file__).parents[3] / "flows" / "demo_data" / "traces" / "otlp-traces.jsonl"
    logs = tmp_path / "logs"
    assert invoke("pull", "otlp", "--input", str(bundled), "--date", DAY, "--logs-root", str(logs)).exit_code == 0
    warehouse = str(tmp_path / "stef.duckdb")
    assert invoke("nightly", "--date", DAY, "--logs-root", str(logs), "--warehouse", warehouse).exit_code == 0

    class Refusing(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(400)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        result = invoke("push", "otlp", "--endpoint", endpoint, "--date", DAY, "--warehouse", warehouse)
    finally:
        server.shutdown()
    assert result.exit_code == 2 and "3 of 3 evaluation events were not accepted" in result.output


@pytest.mark.flow
def test_the_nightly_flow_pulls_from_phoenix_and_pushes_back(
    phoenix: str, tmp_path: Path, prefect_harness: None
) -> None:
    project = "nightly-agent"
    start = datetime(2026, 11, 28, 8, 0, tzinfo=UTC)
    runs = [
        TracedRun(f"How many singers are from country {i}?", f"SELECT count(*) FROM singer WHERE country = 'c{i}'", start + timedelta(minutes=i), {"agent_version": "v3"})
        for i in range(5)
    ]  # fmt: skip
    send_traces(phoenix, project, runs)
    wait_for_spans(phoenix, project, 15)
    warehouse, logs = str(tmp_path / "stef.duckdb"), str(tmp_path / "logs")
    night = invoke(
        "nightly", "--date", "2026-11-28", "--logs-root", logs, "--warehouse", warehouse,
        "--source", "phoenix", "--source-endpoint", phoenix, "--source-project", project, "--push", "phoenix",
    )  # fmt: skip
    assert night.exit_code == 0, night.output
    assert "pulled " in night.stdout and "5 records from 15 spans" in night.stdout
    assert f"pushed 5 results sent to phoenix {phoenix} (0 unscored)" in night.stdout
    from phoenix.client import Client

    annotations = Client(base_url=phoenix).spans.get_span_annotations(
        span_ids=[run.sql_span_id for run in runs], project_identifier=project, include_annotation_names=["stef"]
    )
    assert sorted(a["span_id"] for a in annotations) == sorted(run.sql_span_id for run in runs)


def test_nightly_source_and_push_settings_are_checked_before_any_work(tmp_path: Path) -> None:
    args = ("nightly", "--date", DAY, "--logs-root", str(tmp_path), "--warehouse", str(tmp_path / "w.duckdb"))
    missing = invoke(*args, "--source", "phoenix", "--source-endpoint", "http://127.0.0.1:1")
    assert (
        missing.exit_code == 2
        and "--source phoenix needs --source-endpoint URL and --source-project NAME" in missing.output
    )
    unknown = invoke(*args, "--source", "kafka")
    assert unknown.exit_code == 2 and "unknown log source 'kafka'" in unknown.output
    no_endpoint = invoke(*args, "--push", "otlp")
    assert no_endpoint.exit_code == 2 and "--push otlp needs --push-endpoint URL" in no_endpoint.output
    assert not (tmp_path / "w.duckdb").exists()


@pytest.mark.flow
def test_the_nightly_flow_pulls_otlp_files_and_pushes_evaluation_events(tmp_path: Path, prefect_harness: None) -> None:
    bundled = Path(__file__).parents[3] / "flows" / "demo_data" / "traces" / "otlp-traces.jsonl"
    _Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        night = invoke(
            "nightly", "--date", DAY, "--logs-root", str(tmp_path / "logs"), "--warehouse", str(tmp_path / "w.duckdb"),
            "--source", "otlp", "--source-input", str(bundled), "--push", "otlp", "--push-endpoint", endpoint,
        )  # fmt: skip
    finally:
        server.shutdown()
    assert night.exit_code == 0, night.output
    assert "3 records from 9 spans" in night.stdout and "pushed 3 results sent to otlp" in night.stdout
    assert [path for path, _ in _Receiver.bodies] == ["/v1/logs"]


@pytest.mark.flow
def test_backfill_pulls_each_day_from_the_otlp_files(tmp_path: Path, prefect_harness: None) -> None:
    bundled = Path(__file__).parents[3] / "flows" / "demo_data" / "traces" / "otlp-traces.jsonl"
    result = invoke(
        "backfill", "--start", "2026-11-29", "--end", DAY, "--logs-root", str(tmp_path / "logs"),
        "--warehouse", str(tmp_path / "w.duckdb"), "--source", "otlp", "--source-input", str(bundled),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "logs" / "2026-11-29").exists()  # no span that day: no (empty) day file
    assert len(read_jsonl(tmp_path / "logs" / DAY / "otlp-traces.jsonl")) == 3
    with connect(str(tmp_path / "w.duckdb"), read_only=True) as conn:
        days = dict(conn.execute("SELECT log_date::VARCHAR, count(*) FROM evaluations GROUP BY 1").fetchall())
        stored = [row[0] for row in conn.execute("SELECT log_date::VARCHAR FROM stored_days ORDER BY 1").fetchall()]
    assert days == {DAY: 3}
    assert stored == ["2026-11-29", DAY]  # the store's empty day is a day: a later backfill skips it


@pytest.mark.flow
def test_a_nightly_day_without_spans_says_it_has_no_metrics_instead_of_an_empty_table(
    tmp_path: Path, prefect_harness: None
) -> None:
    bundled = Path(__file__).parents[3] / "flows" / "demo_data" / "traces" / "otlp-traces.jsonl"
    night = invoke(
        "nightly", "--date", "2026-11-29", "--logs-root", str(tmp_path / "logs"), "--warehouse", str(tmp_path / "w.duckdb"),
        "--source", "otlp", "--source-input", str(bundled), "--quiet",
    )  # fmt: skip
    assert night.exit_code == 0, night.output
    lines = night.stdout.splitlines()
    assert lines[-1] == "no daily metrics for 2026-11-29: no record of that day was stored"
    assert "pulled no SQL span of 2026-11-29 in 0 spans: no day file" in night.stdout
    assert not (tmp_path / "logs" / "2026-11-29").exists()
    assert "2026-11-29: 0 lines, 0 scored" in night.stdout and "Daily metrics" not in night.stdout


def test_push_otlp_delivers_every_event_beyond_the_sdk_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    import tasks.traces as traces

    rows = [
        {"run_id": f"r{i}", "span_id": f"{i:016x}", "trace_id": f"{i:032x}", "status": "evaluated", "score": 80.0,
         "verdict": "CORRECT", "evaluator_version": "v", "rationale": "ok"}
        for i in range(1, 5001)
    ]  # fmt: skip
    monkeypatch.setattr(traces, "_results", lambda *args, **kwargs: rows)
    _Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = traces.push_otlp(f"http://127.0.0.1:{server.server_address[1]}", None, date(2026, 11, 30))
    finally:
        server.shutdown()
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    received = 0
    for _, body in _Receiver.bodies:
        request = ExportLogsServiceRequest()
        request.ParseFromString(body)
        received += sum(len(s.log_records) for r in request.resource_logs for s in r.scope_logs)
    assert result.results == 5000 and received == 5000


@pytest.mark.flow
def test_push_phoenix_annotates_the_spans_it_finds_and_names_the_missing_ones(
    phoenix: str, tmp_path: Path, prefect_harness: None
) -> None:
    run = TracedRun("How many concerts?", "SELECT count(*) FROM concert", datetime(2026, 11, 27, 9, 0, tzinfo=UTC))
    send_traces(phoenix, "gone-agent", [run])
    wait_for_spans(phoenix, "gone-agent", 3)
    logs = tmp_path / "logs"
    assert invoke("pull", "phoenix", "--endpoint", phoenix, "--project", "gone-agent", "--date", "2026-11-27", "--logs-root", str(logs)).exit_code == 0  # fmt: skip
    day_file = logs / "2026-11-27" / "phoenix-gone-agent.jsonl"
    (line,) = read_jsonl(day_file)
    ghost = {**line, "run_id": "ghost", "span_id": "abcdefabcdefabcd"}  # a span the server does not have
    day_file.write_text(json.dumps(line) + "\n" + json.dumps(ghost) + "\n", encoding="utf-8")
    warehouse = str(tmp_path / "w.duckdb")
    assert invoke("nightly", "--date", "2026-11-27", "--logs-root", str(logs), "--warehouse", warehouse).exit_code == 0
    pushed = invoke("push", "phoenix", "--endpoint", phoenix, "--date", "2026-11-27", "--warehouse", warehouse)
    assert pushed.exit_code == 0, pushed.output
    assert (
        "1 results sent" in pushed.stdout
        and "1 spans not found on the server, not annotated: abcdefabcdefabcd" in pushed.stdout
    )


def _otlp_trace(
    trace_id: str, sql_span: str, question: str, sql: str, metadata: dict[str, str], hour: int
) -> dict[str, Any]:
    def kv(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    t0 = int(datetime(2026, 11, 30, hour, tzinfo=UTC).timestamp() * 1e9)
    root = "f" * 15 + trace_id[-1]
    spans = [
        {"traceId": trace_id, "spanId": root, "name": "AgentExecutor", "startTimeUnixNano": str(t0), "endTimeUnixNano": str(t0 + 10**9),
         "attributes": [kv("input.value", question), kv("metadata", json.dumps(metadata))]},
        {"traceId": trace_id, "spanId": sql_span, "parentSpanId": root, "name": "execute_sql", "startTimeUnixNano": str(t0 + 10**8),
         "attributes": [kv("input.value", sql)]},
    ]  # fmt: skip
    return {
        "resourceSpans": [
            {"resource": {"attributes": [kv("service.name", "dup-agent")]}, "scopeSpans": [{"spans": spans}]}
        ]
    }


@pytest.mark.flow
def test_a_retried_request_with_the_same_run_id_scores_only_its_own_span(tmp_path: Path, prefect_harness: None) -> None:
    traces_file = tmp_path / "traces.jsonl"
    first = _otlp_trace("1" * 32, "5" * 16, "How many?", "SELECT 1", {"run_id": "req-1"}, 9)
    second = _otlp_trace(
        "2" * 32, "6" * 16, "How many?", "SELECT count(*) FROM t WHERE x = 'oops'", {"run_id": "req-1"}, 10
    )
    traces_file.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n", encoding="utf-8")
    logs, warehouse = tmp_path / "logs", str(tmp_path / "w.duckdb")
    assert invoke("pull", "otlp", "--input", str(traces_file), "--date", DAY, "--logs-root", str(logs)).exit_code == 0
    night = invoke(
        "nightly", "--date", DAY, "--logs-root", str(logs), "--warehouse", warehouse, "--max-bad-share", "0.6"
    )
    assert night.exit_code == 0, night.output
    from warehouse.traces import read_span_evaluations

    with connect(warehouse, read_only=True) as conn:
        rows = read_span_evaluations(conn, date(2026, 11, 30))
        (reason,) = conn.execute("SELECT reason FROM quarantine").fetchall()[0]
    assert [(row["run_id"], row["span_id"]) for row in rows] == [("req-1", "5" * 16)]  # the first line keeps the id
    assert "duplicate" in reason


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_mapping_calibrator_or_label_path_that_is_no_regular_file_is_refused_at_once(
    tmp_path: Path, kind: str
) -> None:
    import os

    target = tmp_path / "odd.json"
    if kind == "fifo":
        os.mkfifo(target)  # reading would wait for a writer forever
    else:
        target.mkdir()
    bundled = Path(__file__).parents[3] / "flows" / "demo_data" / "traces" / "otlp-traces.jsonl"
    pulled = invoke(
        "pull", "otlp", "--input", str(bundled), "--date", DAY, "--logs-root", str(tmp_path), "--mapping", str(target)
    )
    assert pulled.exit_code == 2 and "cannot read the mapping" in pulled.output
    scored = invoke("evaluate", str(bundled), "--calibrator", str(target), "--out", str(tmp_path / "o.jsonl"))
    assert scored.exit_code == 2 and f"--calibrator {target}: cannot read" in scored.output
    (tmp_path / "w.duckdb").touch()
    imported = invoke("review", "import", str(target), "--warehouse", str(tmp_path / "w.duckdb"))
    assert imported.exit_code == 2 and "cannot read" in imported.output
    if kind == "fifo":
        otlp = invoke("pull", "otlp", "--input", str(target), "--date", DAY, "--logs-root", str(tmp_path))
        assert otlp.exit_code == 2 and "not a regular file or folder" in otlp.output
        folder = tmp_path / "traces"
        folder.mkdir()
        os.mkfifo(folder / "live.jsonl")
        otlp = invoke("pull", "otlp", "--input", str(folder), "--date", DAY, "--logs-root", str(tmp_path))
        assert otlp.exit_code == 2 and "live.jsonl: not a regular file" in otlp.output


def test_a_day_without_spans_says_so_instead_of_blaming_the_mapping_and_writes_no_file(tmp_path: Path) -> None:
    """An empty day file was written: it looked like a pull with answers, and `stef nightly` then
    failed on it as a day whose logs were "empty or blank" (run it "once its logs are written")."""
    bundled = Path(__file__).parents[3] / "flows" / "demo_data" / "traces" / "otlp-traces.jsonl"
    logs = tmp_path / "logs"
    result = invoke("pull", "otlp", "--input", str(bundled), "--date", "2026-11-29", "--logs-root", str(logs))
    assert (result.exit_code, result.stdout, result.stderr.splitlines()) == (
        2,
        "",
        [f"error: no span started on 2026-11-29 (UTC) in {bundled}: check --date; no day file written"],
    )
    assert not logs.exists()  # no day folder, no empty file
    night = invoke(
        "nightly", "--date", "2026-11-29", "--logs-root", str(logs), "--warehouse", str(tmp_path / "w.duckdb")
    )
    assert night.exit_code == 2 and night.stderr.startswith("error: no logs for 2026-11-29 in ")
    assert not (tmp_path / "w.duckdb").exists()


def test_a_rerun_that_finds_no_sql_span_removes_the_earlier_day_file(tmp_path: Path) -> None:
    """A rerun rewrites the day file: with no SQL span left, the earlier pull's answers are not kept
    under the same name as if they were this pull's."""
    bundled = Path(__file__).parents[3] / "flows" / "demo_data" / "traces" / "otlp-traces.jsonl"
    logs = tmp_path / "logs"
    assert invoke("pull", "otlp", "--input", str(bundled), "--date", DAY, "--logs-root", str(logs)).exit_code == 0
    day_file = logs / DAY / "otlp-traces.jsonl"
    assert len(read_jsonl(day_file)) == 3
    root_only = tmp_path / "root-only.json"  # a trace of the day without any SQL span
    t0 = int(datetime(2026, 11, 30, 9, tzinfo=UTC).timestamp() * 1e9)
    span = {"traceId": "7" * 32, "spanId": "8" * 16, "name": "AgentExecutor", "startTimeUnixNano": str(t0)}
    root_only.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}), encoding="utf-8")
    result = invoke("pull", "otlp", "--input", str(root_only), "--date", DAY, "--logs-root", str(logs))
    assert (result.exit_code, result.stdout, result.stderr.splitlines()) == (
        2,
        "",
        [
            f"error: no SQL span among the 1 spans of {DAY} (UTC) in {root_only}: check the span names and attributes "
            f"(`--mapping`, README 'Trace stores'); no day file written; {day_file} of an earlier pull was removed"
        ],
    )
    assert list((logs / DAY).iterdir()) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"resourceSpans": "x"}', "resourceSpans is 'x', not an array"),
        ('{"resourceSpans": [{"resource": 5}]}', "resourceSpans[0].resource is 5, not an object"),
        ('{"resourceSpans": [{"scopeSpans": [{"spans": {"a": 1}}]}]}', "resourceSpans[0].scopeSpans[0].spans is an object, not an array"),
        ("[" * 100_000, "not readable JSON: nested too deeply (beyond Python's recursion limit)"),
    ],
)  # fmt: skip
def test_an_otlp_file_of_the_wrong_shape_is_an_error_naming_file_and_element(
    tmp_path: Path, text: str, message: str
) -> None:
    traces_file = tmp_path / "bad.json"
    traces_file.write_text(text + "\n", encoding="utf-8")
    result = invoke("pull", "otlp", "--input", str(traces_file), "--date", DAY, "--logs-root", str(tmp_path / "logs"))
    assert result.exit_code == 2 and result.exception is not None and isinstance(result.exception, SystemExit)
    assert result.output.strip() == f"error: {traces_file}:1: {message}"
    assert not (tmp_path / "logs").exists()  # nothing half-written


def test_a_bad_token_count_quarantines_its_own_record_only_and_names_the_attribute(
    tmp_path: Path, prefect_harness: None
) -> None:
    bad = _otlp_trace("1" * 32, "5" * 16, "How many?", "SELECT 1", {"run_id": "req-1"}, 9)
    llm = {"traceId": "1" * 32, "spanId": "7" * 16, "parentSpanId": "f" * 15 + "1", "name": "ChatOpenAI",
           "startTimeUnixNano": str(int(datetime(2026, 11, 30, 9, tzinfo=UTC).timestamp() * 1e9) + 5 * 10**7),
           "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": "LLM"}},
                          {"key": "llm.token_count.prompt", "value": {"intValue": "lots"}}]}  # fmt: skip
    bad["resourceSpans"][0]["scopeSpans"][0]["spans"].append(llm)
    good = _otlp_trace("2" * 32, "6" * 16, "How many?", "SELECT 2", {"run_id": "req-2"}, 10)
    traces_file = tmp_path / "traces.jsonl"
    traces_file.write_text(json.dumps(bad) + "\n" + json.dumps(good) + "\n", encoding="utf-8")
    logs = tmp_path / "logs"
    pulled = invoke("pull", "otlp", "--input", str(traces_file), "--date", DAY, "--logs-root", str(logs))
    assert pulled.exit_code == 0, pulled.output
    reason = f"span 'ChatOpenAI' ({'7' * 16}): attribute 'llm.token_count.prompt': intValue 'lots' is not an integer"
    assert "1 records from 5 spans; 1 SQL spans the mapping cannot read" in pulled.stdout
    first, second = read_jsonl(logs / DAY / "otlp-traces.jsonl")
    assert first == {
        "run_id": "req-1", "trace_id": "1" * 32, "span_id": "5" * 16, "agent_id": "dup-agent",
        "agent_version": "unknown", "source_error": reason,
    }  # fmt: skip
    assert (second["run_id"], second["sql"], second["question"]) == ("req-2", "SELECT 2", "How many?")
    warehouse = str(tmp_path / "w.duckdb")
    night = invoke(
        "nightly", "--date", DAY, "--logs-root", str(logs), "--warehouse", warehouse, "--max-bad-share", "0.6"
    )
    assert night.exit_code == 0, night.output
    with connect(warehouse, read_only=True) as conn:
        (stored,) = conn.execute("SELECT reason FROM quarantine").fetchall()
    assert stored[0] == f"unreadable trace span: {reason}"


def test_an_otlp_file_over_the_size_limit_is_named_as_a_trace_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasks import traces

    bundled = Path(__file__).parents[3] / "flows" / "demo_data" / "traces" / "otlp-traces.jsonl"
    monkeypatch.setattr(traces, "OTLP_FILE_MAX_BYTES", 100)
    result = invoke("pull", "otlp", "--input", str(bundled), "--date", DAY, "--logs-root", str(tmp_path))
    size = bundled.stat().st_size
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: {bundled}: cannot read ({size} bytes, larger than the 100-byte limit for an OTLP trace file)"
    )


def test_a_pull_keeps_every_sql_span_of_hostile_or_colliding_traces(tmp_path: Path) -> None:
    """Three ways one span lost the others or itself: metadata nested too deep for ``json.loads``
    (a RecursionError ended `stef pull` with a traceback, nothing written), a lone surrogate in a
    question (UnicodeEncodeError mid-write, the temporary file left behind), and a span id that
    another trace on another day reuses (the day filter looked spans up by span id alone: one
    record silently missing)."""
    from stef.logs import parse_line

    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    first = _otlp_trace("1" * 32, "a" * 16, "How many?", "SELECT 1", {"run_id": "r-a"}, 9)
    other_day = _otlp_trace("2" * 32, "a" * 16, "How many?", "SELECT 2", {"run_id": "r-b"}, 9)
    for span in other_day["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        span["startTimeUnixNano"] = str(int(span["startTimeUnixNano"]) + 86_400 * 10**9)
    nested = _otlp_trace("3" * 32, "c" * 16, "How many?", "SELECT 3", {"run_id": "r-c"}, 10)
    nested["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"][1]["value"]["stringValue"] = deep
    surrogate = _otlp_trace("4" * 32, "d" * 16, "bad \ud800 question", "SELECT 4", {"run_id": "r-d"}, 11)
    traces_file = tmp_path / "traces.jsonl"
    traces_file.write_text(
        "".join(json.dumps(trace) + "\n" for trace in (first, other_day, nested, surrogate)), encoding="utf-8"
    )
    logs = tmp_path / "logs"
    pulled = invoke("pull", "otlp", "--input", str(traces_file), "--date", DAY, "--logs-root", str(logs))
    assert pulled.exit_code == 0, pulled.output
    assert "3 records from 6 spans" in " ".join(pulled.stdout.split())
    (day_file,) = (logs / DAY).iterdir()  # no temporary file beside it
    lines = [parse_line(raw, str(day_file), number) for number, raw in enumerate(day_file.read_bytes().splitlines(), 1)]
    # the deep metadata is no object to read a run id from: the span id names the record
    assert [line.run_id for line in lines if line is not None] == ["r-a", "c" * 16, "r-d"]
    by_id = {line.run_id: line for line in lines if line is not None}
    assert by_id["r-a"].record is not None and by_id["c" * 16].record is not None
    assert by_id["r-d"].record is None and "lone surrogate \\ud800" in (by_id["r-d"].reason or "")


def test_a_span_delivered_twice_is_one_record(tmp_path: Path) -> None:
    """An exporter or Collector that retries writes the same batch again: each of its spans was
    read twice, its second record quarantined as a duplicate run id (enough of them fail the
    nightly's --max-bad-share). The same ids with other content still give two lines."""
    first = _otlp_trace("1" * 32, "a" * 16, "How many?", "SELECT 1", {"run_id": "r-a"}, 9)
    second = _otlp_trace("2" * 32, "b" * 16, "How many?", "SELECT 2", {"run_id": "r-b"}, 10)
    changed = _otlp_trace("2" * 32, "b" * 16, "How many?", "SELECT 3", {"run_id": "r-b"}, 10)
    traces_file = tmp_path / "traces.jsonl"
    batches = (first, second, first, second)
    traces_file.write_text("".join(json.dumps(trace) + "\n" for trace in batches), encoding="utf-8")
    logs = tmp_path / "logs"
    pulled = invoke("pull", "otlp", "--input", str(traces_file), "--date", DAY, "--logs-root", str(logs))
    assert pulled.exit_code == 0, pulled.output
    assert "2 records from 4 spans" in " ".join(pulled.stdout.split())
    day_file = logs / DAY / "otlp-traces.jsonl"
    assert [json.loads(line)["run_id"] for line in day_file.read_text(encoding="utf-8").splitlines()] == ["r-a", "r-b"]
    traces_file.write_text("".join(json.dumps(trace) + "\n" for trace in (first, second, changed)), encoding="utf-8")
    pulled = invoke("pull", "otlp", "--input", str(traces_file), "--date", DAY, "--logs-root", str(logs))
    assert pulled.exit_code == 0, pulled.output
    sqls = [json.loads(line)["sql"] for line in day_file.read_text(encoding="utf-8").splitlines()]
    assert sorted(sqls) == ["SELECT 1", "SELECT 2", "SELECT 3"]  # not the same span: both kept, the store decides
