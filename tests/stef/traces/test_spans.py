"""Spans mapped to log records (stef.traces.spans) and OTLP JSON read (stef.traces.otlp), by hand-built traces."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from stef.logs import parse_line
from stef.traces.otlp import OtlpFileError, evaluation_event_attributes, evaluation_result, read_otlp_json
from stef.traces.spans import SourceSpan, SpanMapping, map_spans

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _trace(
    trace: str, question: object, sql_spans: list[tuple[str, str, dict[str, object]]], **metadata: object
) -> list[SourceSpan]:
    root = SourceSpan(
        trace, f"{trace}-root", None, "AgentExecutor", "CHAIN", T0, T0 + timedelta(seconds=2),
        {"input.value": question, **{f"metadata.{k}": v for k, v in metadata.items()}},
    )  # fmt: skip
    llm = SourceSpan(
        trace, f"{trace}-llm", root.span_id, "ChatOpenAI", "LLM", T0, T0,
        {"llm.model_name": "gpt-4o", "llm.token_count.prompt": 100, "llm.token_count.completion": 7},
    )  # fmt: skip
    spans = [root, llm]
    for offset, (span_id, name, attributes) in enumerate(sql_spans, start=1):
        spans.append(
            SourceSpan(trace, span_id, root.span_id, name, "TOOL", T0 + timedelta(seconds=offset), None, attributes)
        )
    return spans


def test_the_default_mapping_reads_json_and_raw_sql_and_the_root_metadata() -> None:
    spans = _trace(
        "t1",
        json.dumps({"input": "How many singers?"}),
        [("s1", "sql_db_query", {"input.value": '{"query": "SELECT count(*) FROM singer"}'})],
        agent_version="v2",
        app_id="concert",
    )
    spans += _trace("t2", "Oldest singer?", [("s2", "run_sql", {"input.value": "SELECT max(age) FROM singer"})])
    spans += _trace("t3", "Names?", [("s3", "anything", {"db.statement": "SELECT name FROM singer"})])
    lines = map_spans(reversed(spans), "proj")
    assert [line["run_id"] for line in lines] == ["s1", "s2", "s3"]
    first = lines[0]
    assert first["question"] == "How many singers?" and first["sql"] == "SELECT count(*) FROM singer"
    assert (first["agent_id"], first["agent_version"], first["app_id"]) == ("proj", "v2", "concert")
    assert first["tokens"] == {"prompt": 100, "completion": 7, "total": 107} and first["model_version"] == "gpt-4o"
    assert first["latency_ms"] == 2000.0 and first["timestamp"] == "2026-11-30T09:00:01+00:00"
    assert (first["trace_id"], first["span_id"]) == ("t1", "s1")
    assert lines[1]["sql"] == "SELECT max(age) FROM singer" and lines[1]["agent_version"] == "unknown"
    assert lines[2]["sql"] == "SELECT name FROM singer"
    for line in lines:
        record = parse_line(json.dumps(line).encode(), "x.jsonl", 1)
        assert record is not None and record.record is not None, record


def test_a_span_the_mapping_cannot_read_becomes_a_line_the_reader_rejects_with_the_reason() -> None:
    spans = _trace("t1", "Q?", [("s1", "sql_db_query", {"input.value": '{"statement": "SELECT 1"}'})])
    spans += [SourceSpan("t2", "s2", "gone", "execute_sql", "TOOL", T0, None, {"input.value": "SELECT 2"})]
    lines = sorted(map_spans(spans, "proj"), key=lambda line: line["run_id"])
    assert lines[0]["source_error"] == (
        "SQL span 'sql_db_query': 'input.value' is a JSON object without query / sql (keys: statement)"
    )
    assert lines[1]["source_error"] == "SQL span 'execute_sql' has no parent span in the trace (no question)"
    assert (lines[1]["agent_id"], lines[1]["agent_version"]) == ("proj", "unknown")
    line = parse_line(json.dumps(lines[0]).encode(), "phoenix-proj.jsonl", 4)
    assert line is not None and line.record is None and line.run_id == "s1"
    assert line.reason == "unreadable trace span: " + lines[0]["source_error"]


def test_a_trace_with_two_sql_spans_and_a_metadata_run_id_gets_two_distinct_run_ids() -> None:
    spans = _trace(
        "t1",
        "Q?",
        [("s1", "execute_sql", {"input.value": "SELECT 1"}), ("s2", "execute_sql", {"input.value": "SELECT 2"})],
        run_id="r-7",
    )
    assert [line["run_id"] for line in map_spans(spans, "p")] == ["r-7:s1", "r-7:s2"]
    single = _trace("t2", "Q?", [("s3", "execute_sql", {"input.value": "SELECT 3"})], run_id="r-8")
    assert map_spans(single, "p")[0]["run_id"] == "r-8"


def test_a_mapping_file_changes_which_spans_and_keys_hold_what() -> None:
    mapping = SpanMapping(
        sql_span_names=["warehouse.query"],
        sql_json_keys=["statement"],
        question_json_keys=["prompt"],
        dialect="postgres",
    )
    spans = _trace(
        "t1",
        '{"prompt": "Top customers?"}',
        [
            ("s1", "warehouse.query", {"input.value": '{"statement": "SELECT 1"}'}),
            ("s2", "sql_db_query", {"input.value": "SELECT 2"}),
        ],
    )
    lines = map_spans(spans, "p", mapping)
    assert [(line["run_id"], line["sql"], line["question"], line["dialect"]) for line in lines] == [
        ("s1", "SELECT 1", "Top customers?", "postgres")
    ]
    with pytest.raises(ValueError, match="sql_span_nme"):
        SpanMapping.model_validate({"sql_span_nme": ["x"]})


def test_otlp_json_lines_are_read_with_hex_ids_nanosecond_times_and_typed_attributes() -> None:
    export = {
        "resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
            "scopeSpans": [{"spans": [{
                "traceId": "4BF92F3577B34DA6A3CE929D0E0E4736", "spanId": "00f067aa0ba902b7", "name": "run_sql",
                "startTimeUnixNano": "1796029200000000000", "endTimeUnixNano": 1796029201000000000,
                "attributes": [
                    {"key": "input.value", "value": {"stringValue": "SELECT 1"}},
                    {"key": "llm.token_count.prompt", "value": {"intValue": "12"}},
                    {"key": "flag", "value": {"boolValue": True}},
                    {"key": "tags", "value": {"arrayValue": {"values": [{"stringValue": "a"}]}}},
                ],
            }]}],
        }]
    }  # fmt: skip
    ((project, span),) = read_otlp_json(json.dumps(export) + "\n\n")
    assert project == "agent" and span.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736" and span.parent_id is None
    assert span.start_time == datetime(2026, 11, 30, 9, 0, tzinfo=UTC) and span.end_time == datetime(
        2026, 11, 30, 9, 0, 1, tzinfo=UTC
    )
    assert dict(span.attributes) == {
        "input.value": "SELECT 1",
        "llm.token_count.prompt": 12,
        "flag": True,
        "tags": ["a"],
    }
    with pytest.raises(OtlpFileError, match=r"f\.json:2: not JSON"):
        read_otlp_json(json.dumps(export) + "\n{oops\n", "f.json")
    with pytest.raises(OtlpFileError, match=r"f\.json:1: no resourceSpans"):
        read_otlp_json('{"resourceLogs": []}', "f.json")


def test_an_evaluation_becomes_a_label_score_and_explanation_and_the_genai_event_attributes() -> None:
    scored = evaluation_result({
        "span_id": "s1", "trace_id": "t1", "run_id": "r1", "status": "evaluated", "score": 45.0, "verdict": "LIKELY_CORRECT",
        "p_correct": 0.58, "band": "poor", "filter_status": "PARTIALLY_APPLIED", "evaluator_version": "v",
        "rationale": "LIKELY_CORRECT (P=0.58).", "missing_filters": ["year = 2020"], "suspected": ["Condition Errors: year filter missing"],
    })  # fmt: skip
    assert (scored.label, scored.score) == ("LIKELY_CORRECT", 45.0)
    assert (
        scored.explanation
        == "LIKELY_CORRECT (P=0.58). Missing filters: year = 2020. Suspected errors: Condition Errors: year filter missing."
    )
    assert evaluation_event_attributes(scored) == {
        "gen_ai.evaluation.name": "stef",
        "gen_ai.evaluation.score.label": "LIKELY_CORRECT",
        "gen_ai.evaluation.score.value": 45.0,
        "gen_ai.evaluation.explanation": scored.explanation,
        "stef.p_correct": 0.58, "stef.filter_status": "PARTIALLY_APPLIED", "stef.band": "poor",
        "stef.evaluator_version": "v", "stef.run_id": "r1",
    }  # fmt: skip
    unscored = evaluation_result({"span_id": "s2", "status": "parse_error", "score": None, "reason": "not SQL"})
    assert (unscored.label, unscored.score, unscored.explanation) == ("parse_error", None, "not SQL")
    assert "gen_ai.evaluation.score.value" not in evaluation_event_attributes(unscored)


def _span(
    span_id: str, parent: str | None, name: str, seconds: float, kind: str | None = None, **attributes: object
) -> SourceSpan:
    start = T0 + timedelta(seconds=seconds)
    return SourceSpan("t", span_id, parent, name, kind, start, start + timedelta(seconds=1), attributes)


def test_the_question_comes_from_the_outermost_span_above_the_sql_that_has_one() -> None:
    langgraph = [
        _span(
            "r",
            None,
            "LangGraph",
            0,
            "CHAIN",
            **{"input.value": json.dumps({"messages": [["user", "How many singers?"]]})},
        ),
        _span("s", "r", "sql_db_query", 1, "TOOL", **{"input.value": "SELECT count(*) FROM singer"}),
    ]
    assert map_spans(langgraph, "p")[0]["question"] == "How many singers?"
    chat = [
        _span(
            "r", None, "agent", 0, **{"input.value": json.dumps({"messages": [{"role": "user", "content": "Top 3?"}]})}
        ),
        _span("s", "r", "run_sql", 1, **{"input.value": "SELECT 1"}),
    ]
    assert map_spans(chat, "p")[0]["question"] == "Top 3?"
    # the agent runs under a parent in another service, inside the app's own span without input
    remote = [
        _span("http", "remote-parent", "POST /ask", 0, **{"http.route": "/ask"}),
        _span("a", "http", "AgentExecutor", 0.1, "CHAIN", **{"input.value": '{"input": "Oldest singer?"}', "metadata.agent_version": "v9"}),
        _span("s", "a", "sql_db_query", 0.5, "TOOL", **{"input.value": '{"query": "SELECT max(age) FROM singer"}'}),
    ]  # fmt: skip
    (line,) = map_spans(remote, "p")
    assert (line["question"], line["agent_version"], line["latency_ms"]) == ("Oldest singer?", "v9", 1000.0)


def test_driver_spans_under_a_sql_tool_are_not_scored_again_and_retries_split_the_tokens() -> None:
    spans = [
        _span("r", None, "AgentExecutor", 0, "CHAIN", **{"input.value": "How many?"}),
        _span("l1", "r", "ChatOpenAI", 1, "LLM", **{"llm.token_count.prompt": 100, "llm.token_count.completion": 10}),
        _span("s1", "r", "sql_db_query", 2, "TOOL", **{"input.value": "SELECT count(*) FROM singr"}),
        _span("d1", "s1", "SELECT", 2.1, **{"db.statement": "SELECT count(*) FROM singr"}),
        _span("schema", "r", "sql_db_schema", 1.5, "TOOL", **{"db.statement": "SELECT name FROM sqlite_master"}),
        _span("l2", "r", "openai.chat", 3, **{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 150, "gen_ai.usage.output_tokens": 12, "gen_ai.request.model": "gpt-4o"}),
        _span("s2", "r", "sql_db_query", 4, "TOOL", **{"input.value": "SELECT count(*) FROM singer"}),
    ]  # fmt: skip
    spans[2] = SourceSpan(
        "t", "s1", "r", "sql_db_query", "TOOL", spans[2].start_time, spans[2].end_time, spans[2].attributes, "ERROR"
    )
    lines = map_spans(spans, "p")
    assert [
        (line["span_id"], line["sql_attempt"], line["sql_attempts"], line.get("span_status")) for line in lines
    ] == [
        ("s1", 1, 2, "ERROR"),
        ("s2", 2, 2, None),
    ]
    assert lines[0]["tokens"] == {"prompt": 100, "completion": 10, "total": 110}
    assert (
        lines[1]["tokens"] == {"prompt": 150, "completion": 12, "total": 162} and lines[1]["model_version"] == "gpt-4o"
    )
    only_driver = [spans[0], _span("d", "r", "SELECT", 1, **{"db.query.text": "SELECT 1"})]
    assert [line["sql"] for line in map_spans(only_driver, "p")] == ["SELECT 1"]
