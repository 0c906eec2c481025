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


def _nested_array(levels: int) -> dict[str, object]:
    value: dict[str, object] = {"stringValue": "x"}
    for _ in range(levels):
        value = {"arrayValue": {"values": [value]}}
    return value


def _otlp_export(*spans: dict[str, object], resource: object = None) -> dict[str, object]:
    resource_spans: dict[str, object] = {"scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}
    if resource is not None:
        resource_spans["resource"] = resource
    return {"resourceSpans": [resource_spans]}


def _otlp_span(span_id: str, name: str, seconds: int, parent: str | None = None, **values: object) -> dict[str, object]:
    span: dict[str, object] = {
        "traceId": "ab" * 16,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": str(int((T0 + timedelta(seconds=seconds)).timestamp() * 1e9)),
        "attributes": [{"key": key, "value": value} for key, value in values.items()],
    }
    if parent is not None:
        span["parentSpanId"] = parent
    return span


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"resourceSpans": "x"}, "f.json:1: resourceSpans is 'x', not an array"),
        ({"resourceSpans": [7]}, "f.json:1: resourceSpans[0] is 7, not an object"),
        ({"resourceSpans": [{"resource": 5}]}, "f.json:1: resourceSpans[0].resource is 5, not an object"),
        ({"resourceSpans": [{"scopeSpans": {"a": 1}}]}, "f.json:1: resourceSpans[0].scopeSpans is an object, not an array"),
        ({"resourceSpans": [{"scopeSpans": [{"scope": []}]}]}, "f.json:1: resourceSpans[0].scopeSpans[0].scope is an array, not an object"),
        ({"resourceSpans": [{"scopeSpans": [{"spans": {"a": 1}}]}]}, "f.json:1: resourceSpans[0].scopeSpans[0].spans is an object, not an array"),
        ({"resourceSpans": [{"scopeSpans": [{"spans": ["s"]}]}]}, "f.json:1: resourceSpans[0].scopeSpans[0].spans[0] is 's', not an object"),
        (_otlp_export({"spanId": "cd", "startTimeUnixNano": "1"}), "f.json:1: resourceSpans[0].scopeSpans[0].spans[0] has no traceId"),
        (_otlp_export({"traceId": 5, "spanId": "cd", "startTimeUnixNano": "1"}), "f.json:1: resourceSpans[0].scopeSpans[0].spans[0].traceId is 5, not a hex string"),
        (_otlp_export({"traceId": "4bf9-2f35", "spanId": "cd", "startTimeUnixNano": "1"}), "f.json:1: resourceSpans[0].scopeSpans[0].spans[0].traceId is '4bf9-2f35', not a hex string"),
        (_otlp_export({"traceId": "ab", "spanId": "S/pcqguukrc=", "startTimeUnixNano": "1"}), "f.json:1: resourceSpans[0].scopeSpans[0].spans[0].spanId is 'S/pcqguukrc=', not a hex string"),
        (_otlp_export({"traceId": "ab", "spanId": "cd"}), "f.json:1: resourceSpans[0].scopeSpans[0].spans[0] has no startTimeUnixNano"),
        (_otlp_export({"traceId": "ab", "spanId": "cd", "startTimeUnixNano": "soon"}), "f.json:1: resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano 'soon' is not a time"),
        (_otlp_export({"traceId": "ab", "spanId": "cd", "startTimeUnixNano": "9" * 30}), "f.json:1: resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano '999999999999999999999999999999' is not a time"),
    ],
)  # fmt: skip
def test_otlp_json_of_the_wrong_shape_is_an_error_naming_the_file_and_the_element(
    payload: dict[str, object], message: str
) -> None:
    with pytest.raises(OtlpFileError) as raised:
        read_otlp_json(json.dumps(payload), "f.json")
    assert str(raised.value) == message


def test_otlp_json_nested_beyond_the_recursion_limit_is_an_error_naming_the_file() -> None:
    too_deep = "not readable JSON: nested too deeply (beyond Python's recursion limit)"
    with pytest.raises(OtlpFileError) as raised:
        read_otlp_json("[" * 100_000, "f.json")
    assert str(raised.value) == f"f.json:1: {too_deep}"
    # 5,000 nested arrayValue levels (json.dumps itself cannot write them: spliced in as text)
    deep_value = '{"arrayValue": {"values": [' * 5000 + '{"stringValue": "x"}' + "]}}" * 5000
    deep_span = _otlp_span("cd" * 8, "execute_sql", 0, **{"input.value": "DEEP"})
    deep = json.dumps(_otlp_export(deep_span)).replace('"DEEP"', deep_value)
    good = json.dumps(_otlp_export(_otlp_span("ef" * 8, "execute_sql", 0)))
    with pytest.raises(OtlpFileError) as raised:  # JSON lines: the line is named
        read_otlp_json(good + "\n" + deep + "\n", "f.json")
    assert str(raised.value) == f"f.json:2: {too_deep}"
    with pytest.raises(OtlpFileError) as raised:  # one object over several lines
        read_otlp_json(json.dumps(_otlp_export(deep_span), indent=1).replace('"DEEP"', deep_value), "f.json")
    assert str(raised.value) == f"f.json: {too_deep}"
    with pytest.raises(OtlpFileError) as raised:  # json.loads' other ValueError: an int of 5,000 digits
        read_otlp_json(good + "\n" + '{"resourceSpans": [' + "7" * 5000 + "]}\n", "f.json")
    assert str(raised.value).startswith("f.json:2: not readable JSON (Exceeds the limit (4300 digits)")


def test_an_attribute_value_that_cannot_be_read_marks_its_span_and_its_record_only() -> None:
    root, llm, sql, other = "1" * 16, "2" * 16, "3" * 16, "4" * 16
    trace = [
        _otlp_span(root, "AgentExecutor", 0, **{"input.value": {"stringValue": "How many?"}}),
        _otlp_span(llm, "ChatOpenAI", 1, root, **{
            "openinference.span.kind": {"stringValue": "LLM"}, "llm.token_count.prompt": {"intValue": "lots"},
            "llm.token_count.completion": {"intValue": "7"},
        }),
        _otlp_span(sql, "execute_sql", 2, root, **{"input.value": {"stringValue": "SELECT 1"}}),
    ]  # fmt: skip
    second = [
        {**_otlp_span("5" * 16, "AgentExecutor", 3, **{"input.value": {"stringValue": "Which?"}}), "traceId": "cd" * 16},
        {**_otlp_span(other, "execute_sql", 4, "5" * 16, **{
            "input.value": {"stringValue": "SELECT 2"}, "llm.token_count.prompt": {"intValue": "12"},
            "tags": _nested_array(65),
        }), "traceId": "cd" * 16},
    ]  # fmt: skip
    read = read_otlp_json(json.dumps(_otlp_export(*trace, *second)), "f.json")
    spans = [span for _, span in read]
    assert [span.problem for span in spans] == [
        None,
        "attribute 'llm.token_count.prompt': intValue 'lots' is not an integer",
        None,
        None,
        "attribute 'tags': arrayValue / kvlistValue nested deeper than 64 levels",
    ]
    assert dict(spans[1].attributes) == {
        "openinference.span.kind": "LLM",
        "llm.token_count.prompt": None,  # kept, unread: the span still counts as an LLM span
        "llm.token_count.completion": 7,
    }
    lines = map_spans(spans, "p")
    assert lines == [
        {
            "run_id": sql, "trace_id": "ab" * 16, "span_id": sql, "agent_id": "p", "agent_version": "unknown",
            "source_error": f"span 'ChatOpenAI' ({llm}): attribute 'llm.token_count.prompt': intValue 'lots' is not an integer",
        },
        {
            "run_id": other, "trace_id": "cd" * 16, "span_id": other, "agent_id": "p", "agent_version": "unknown",
            "source_error": f"span 'execute_sql' ({other}): attribute 'tags': arrayValue / kvlistValue nested deeper than 64 levels",
        },
    ]  # fmt: skip
    rejected = parse_line(json.dumps(lines[0]).encode(), "otlp.jsonl", 1)
    assert rejected.record is None and rejected.reason is not None and "intValue 'lots'" in rejected.reason
    # 64 levels are read; a readable trace next to the bad one keeps its record and its tokens
    fine = _otlp_span(other, "execute_sql", 4, "5" * 16, **{"input.value": {"stringValue": "SELECT 2"},
                      "llm.token_count.prompt": {"intValue": "12"}, "tags": _nested_array(64)})  # fmt: skip
    spans = [
        span for _, span in read_otlp_json(json.dumps(_otlp_export(*trace, second[0], {**fine, "traceId": "cd" * 16})))
    ]
    (bad, good) = map_spans(spans, "p")
    assert (
        "source_error" in bad
        and good["sql"] == "SELECT 2"
        and good["tokens"] == {"prompt": 12, "completion": 0, "total": 12}
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"intValue": 1.5}, "attribute 'a': intValue 1.5 is not an integer"),
        ({"intValue": True}, "attribute 'a': intValue true is not an integer"),
        ({"intValue": str(2**63)}, "attribute 'a': intValue '9223372036854775808' is out of the 64-bit range"),
        ({"doubleValue": "x"}, "attribute 'a': doubleValue 'x' is not a number"),
        ({"boolValue": "false"}, "attribute 'a': boolValue 'false' is not true or false"),
        ({"stringValue": 5}, "attribute 'a': stringValue 5 is not a string"),
        ({"arrayValue": {"values": {"x": 1}}}, "attribute 'a': arrayValue.values an object is not an array"),
        ({"kvlistValue": {"values": [{"key": "k", "value": {"intValue": "x"}}]}}, "attribute 'a': intValue 'x' is not an integer"),
        ("plain", "attribute 'a': value 'plain' is not an AnyValue object"),
    ],
)  # fmt: skip
def test_each_anyvalue_kind_is_type_checked_and_named_with_its_attribute(value: object, problem: str) -> None:
    export = _otlp_export(_otlp_span("cd" * 8, "s", 0, a=value, b={"intValue": "3"}))
    ((_, span),) = read_otlp_json(json.dumps(export), "f.json")
    assert span.problem == problem and dict(span.attributes) == {"a": None, "b": 3}


def test_a_bad_resource_attribute_or_entry_marks_every_span_of_the_resource() -> None:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}, {"value": {}}, "odd"]}
    export = _otlp_export(_otlp_span("cd" * 8, "s", 0), _otlp_span("ef" * 8, "t", 1), resource=resource)
    read = read_otlp_json(json.dumps(export), "f.json")
    problem = (
        "resource attributes[1]: an object is not a key/value object with a string key; "
        "resource attributes[2]: 'odd' is not a key/value object with a string key"
    )
    assert [(project, span.problem) for project, span in read] == [("agent", problem), ("agent", problem)]
    ((_, span),) = read_otlp_json(
        json.dumps(_otlp_export({**_otlp_span("cd" * 8, "s", 0), "endTimeUnixNano": "later"}))
    )
    assert span.problem == "endTimeUnixNano 'later' is not a time" and span.end_time is None


def test_a_non_finite_double_token_count_is_no_count() -> None:
    export = _otlp_export(
        _otlp_span("1" * 16, "AgentExecutor", 0, **{"input.value": {"stringValue": "How many?"}}),
        _otlp_span("2" * 16, "ChatOpenAI", 1, "1" * 16, **{"gen_ai.usage.input_tokens": {"doubleValue": "Infinity"},
                   "gen_ai.usage.output_tokens": {"doubleValue": 4.0}}),
        _otlp_span("3" * 16, "execute_sql", 2, "1" * 16, **{"input.value": {"stringValue": "SELECT 1"}}),
    )  # fmt: skip
    (line,) = map_spans([span for _, span in read_otlp_json(json.dumps(export))], "p")
    assert line["tokens"] == {"prompt": 0, "completion": 4, "total": 4}


def test_otlp_json_lines_split_at_line_feeds_only() -> None:
    """U+2028, U+0085 and a form feed are valid raw characters inside a JSON string (``json.dumps(...,
    ensure_ascii=False)`` writes them so): a record holding them stays one record, and a bad line
    after it is named by its real number."""
    text_value = "SELECT 1 -- a\u2028b\u0085c\x0cd"
    first = _otlp_export(_otlp_span("00f067aa0ba902b7", "run_sql", 0, **{"input.value": {"stringValue": text_value}}))
    second = _otlp_export(_otlp_span("00f067aa0ba902b8", "run_sql", 1))
    lines = json.dumps(first, ensure_ascii=False) + "\r\n" + json.dumps(second, ensure_ascii=False) + "\n"
    spans = read_otlp_json(lines, "f.jsonl")
    assert [span.span_id for _, span in spans] == ["00f067aa0ba902b7", "00f067aa0ba902b8"]
    assert spans[0][1].attributes["input.value"] == text_value
    with pytest.raises(OtlpFileError, match=r"^f\.jsonl:3: not JSON"):
        read_otlp_json(lines + "{oops\n", "f.jsonl")


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [("12", 12), (" 7 ", 7), ("\uff11\uff12", 12), ("\u00b2", 0), ("9" * 5000, 0), ("-3", 0), ("1e3", 0)],
)
def test_a_token_count_written_as_text_counts_only_when_it_is_a_decimal_number(prompt: str, expected: int) -> None:
    """An SDK that writes every attribute as a string gives "12"; a superscript digit (``str.isdigit``
    but not ``int()``) or 5,000 digits (beyond ``int()``'s limit) is no count, never a crash."""
    export = _otlp_export(
        _otlp_span("1" * 16, "AgentExecutor", 0, **{"input.value": {"stringValue": "How many?"}}),
        _otlp_span("2" * 16, "ChatOpenAI", 1, "1" * 16, **{"gen_ai.usage.input_tokens": {"stringValue": prompt},
                   "gen_ai.usage.output_tokens": {"intValue": "4"}}),
        _otlp_span("3" * 16, "execute_sql", 2, "1" * 16, **{"input.value": {"stringValue": "SELECT 1"}}),
    )  # fmt: skip
    (line,) = map_spans([span for _, span in read_otlp_json(json.dumps(export))], "p")
    assert line["tokens"] == {"prompt": expected, "completion": 4, "total": expected + 4}
