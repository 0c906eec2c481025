"""Spans of a traced Text-to-SQL agent mapped to STEF log records (issue 19).

The default :class:`SpanMapping` reads the shape an OpenInference-instrumented LangChain or
LlamaIndex SQL agent produces, and the OpenTelemetry database conventions:

- the **SQL span** is a span named ``sql_db_query`` (also ``query_sql_db``, ``execute_sql``,
  ``run_sql``) whose ``input.value`` is JSON ``{"query": SQL}`` (or ``{"sql": SQL}``) or the raw
  SQL text, or any span carrying ``db.statement`` / ``db.query.text``;
- the **question** is the ``input.value`` of the trace's root span (the text itself, or the
  ``input`` / ``question`` / ``query`` key of a JSON object);
- ``agent_id``, ``agent_version``, ``app_id``, ``enriched_question``, ``run_id``, ``dialect``
  come from the root span's ``metadata`` (OpenInference: a JSON object in the ``metadata``
  attribute, or flattened ``metadata.<key>`` attributes as Phoenix returns them);
  ``run_id`` defaults to the SQL span's id, ``agent_id`` to the project name;
- tokens (``llm.token_count.*``, ``gen_ai.usage.*``) and the model name (``llm.model_name``,
  ``gen_ai.request.model``) from the trace's LLM spans; latency from the root span.

Every SQL span gives one line of the day's log file: a record, or — when the mapping cannot read
it (no question, SQL JSON without the key) — a line with ``source_error`` that the nightly
quarantines with that reason (:func:`stef.logs.parse_line`). The record keeps ``trace_id`` and
``span_id`` so the scores can be pushed back to the span (:mod:`tasks.traces`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from stef.logs import SOURCE_ERROR_KEY

__all__ = [
    "SOURCE_ERROR_KEY",
    "SourceSpan",
    "SpanMapping",
    "map_spans",
    "parse_time",
]


@dataclass(frozen=True, slots=True)
class SourceSpan:
    """One span as read from a trace store.

    Attributes:
        trace_id, span_id: hex ids (32 and 16 characters in OpenTelemetry).
        parent_id: the parent span's id; ``None`` for a root span.
        name: the span name.
        kind: the OpenInference span kind (``LLM``, ``TOOL``, ``CHAIN`` …) when known.
        start_time, end_time: timezone-aware UTC times (``end_time`` ``None`` when unknown).
        attributes: flattened attributes, dotted keys (``input.value``, ``metadata.app_id``).
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str | None
    start_time: datetime
    end_time: datetime | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)


class SpanMapping(BaseModel):
    """Which spans and attributes hold what (``--mapping FILE``: a JSON object with any of these
    keys; ``stef pull json-schema`` prints its JSON Schema). The defaults read OpenInference
    LangChain / LlamaIndex SQL agents and the OpenTelemetry database conventions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sql_span_names: list[str] = Field(
        default=["sql_db_query", "query_sql_db", "execute_sql", "run_sql"],
        description="Names of the spans that run the agent's SQL.",
    )
    sql_input_attribute: str = Field(
        default="input.value", description="Attribute of a SQL span holding the SQL (raw text or a JSON object)."
    )
    sql_json_keys: list[str] = Field(
        default=["query", "sql"], description="Keys of that JSON object that hold the SQL, first found wins."
    )
    sql_attributes: list[str] = Field(
        default=["db.statement", "db.query.text"],
        description="Attributes that make any span a SQL span and hold its SQL (OpenTelemetry DB conventions).",
    )
    question_attribute: str = Field(
        default="input.value", description="Attribute of the trace's root span holding the question."
    )
    question_json_keys: list[str] = Field(
        default=["input", "question", "query"],
        description="Keys of a JSON-object question attribute that hold the question text.",
    )
    metadata_attribute: str = Field(
        default="metadata", description="Root-span attribute (JSON object or dotted prefix) of the record fields."
    )
    metadata_fields: dict[str, str] = Field(
        default={
            "run_id": "run_id",
            "agent_id": "agent_id",
            "agent_version": "agent_version",
            "app_id": "app_id",
            "enriched_question": "enriched_question",
            "dialect": "dialect",
            "prompt_version": "prompt_version",
        },
        description="Log record field -> metadata key.",
    )
    llm_span_kinds: list[str] = Field(default=["LLM"], description="Span kinds of the model calls.")
    model_attributes: list[str] = Field(
        default=["llm.model_name", "gen_ai.request.model", "gen_ai.response.model"],
        description="Attributes of an LLM span naming its model.",
    )
    prompt_token_attributes: list[str] = Field(
        default=["llm.token_count.prompt", "gen_ai.usage.input_tokens"],
        description="Attributes of an LLM span counting its prompt tokens.",
    )
    completion_token_attributes: list[str] = Field(
        default=["llm.token_count.completion", "gen_ai.usage.output_tokens"],
        description="Attributes of an LLM span counting its completion tokens.",
    )
    dialect: str | None = Field(default=None, description="Dialect of every record (when the metadata has none).")


def parse_time(value: object) -> datetime:
    """An ISO-8601 time or Unix nanoseconds (int or digit string, OTLP) as a UTC datetime.

    Raises:
        ValueError: neither.

    >>> parse_time("2026-11-30T10:00:00+00:00").isoformat(), parse_time("1764496800000000000").isoformat()
    ('2026-11-30T10:00:00+00:00', '2025-11-30T10:00:00+00:00')
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1e9, tz=UTC)
    if isinstance(value, str) and value.isdigit():
        return datetime.fromtimestamp(int(value) / 1e9, tz=UTC)
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    raise ValueError(f"not a time: {value!r}")


def _json_object(value: object) -> dict[str, Any] | None:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _metadata(span: SourceSpan, mapping: SpanMapping) -> dict[str, Any]:
    """The root span's metadata: the JSON object attribute merged with flattened ``<prefix>.<key>``."""
    prefix = mapping.metadata_attribute
    merged = _json_object(span.attributes.get(prefix)) or {}
    for key, value in span.attributes.items():
        if key.startswith(prefix + "."):
            merged.setdefault(key[len(prefix) + 1 :], value)
    return merged


def _sql_of(span: SourceSpan, mapping: SpanMapping) -> tuple[str | None, str | None]:
    """``(sql, None)`` for a SQL span, ``(None, reason)`` for one the mapping cannot read,
    ``(None, None)`` for a span that is not a SQL span."""
    for name in mapping.sql_attributes:
        value = span.attributes.get(name)
        if isinstance(value, str) and value.strip():
            return value, None
    if span.name not in mapping.sql_span_names:
        return None, None
    value = span.attributes.get(mapping.sql_input_attribute)
    if not isinstance(value, str) or not value.strip():
        return None, f"SQL span {span.name!r} has no text in {mapping.sql_input_attribute!r}"
    parsed = _json_object(value)
    if parsed is None:
        return value, None
    for key in mapping.sql_json_keys:
        sql = parsed.get(key)
        if isinstance(sql, str) and sql.strip():
            return sql, None
    keys = ", ".join(sorted(map(str, parsed))) or "none"
    wanted = " / ".join(mapping.sql_json_keys)
    return (
        None,
        f"SQL span {span.name!r}: {mapping.sql_input_attribute!r} is a JSON object without {wanted} (keys: {keys})",
    )


def _question_of(root: SourceSpan | None, mapping: SpanMapping) -> tuple[str | None, str | None]:
    if root is None:
        return None, "the trace's root span is missing (no question)"
    value = root.attributes.get(mapping.question_attribute)
    parsed = _json_object(value)
    if parsed is not None:
        for key in mapping.question_json_keys:
            text = parsed.get(key)
            if isinstance(text, str) and text.strip():
                return text, None
        return None, f"root span {root.name!r}: {mapping.question_attribute!r} is a JSON object without a question"
    if isinstance(value, str) and value.strip():
        return value, None
    return None, f"root span {root.name!r} has no question in {mapping.question_attribute!r}"


def _first_number(span: SourceSpan, names: Sequence[str]) -> int | None:
    for name in names:
        value = span.attributes.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return int(value)
        if isinstance(value, str) and value.isdigit():
            return int(value)
    return None


def _llm_fields(spans: Sequence[SourceSpan], mapping: SpanMapping) -> dict[str, Any]:
    """Tokens summed over the trace's LLM spans and the first model name."""
    prompt = completion = 0
    counted = False
    model: str | None = None
    for span in spans:
        if span.kind not in mapping.llm_span_kinds:
            continue
        p = _first_number(span, mapping.prompt_token_attributes)
        c = _first_number(span, mapping.completion_token_attributes)
        if p is not None or c is not None:
            counted = True
            prompt += p or 0
            completion += c or 0
        if model is None:
            for name in mapping.model_attributes:
                value = span.attributes.get(name)
                if isinstance(value, str) and value:
                    model = value
                    break
    out: dict[str, Any] = {}
    if counted:
        out["tokens"] = {"prompt": prompt, "completion": completion, "total": prompt + completion}
    if model is not None:
        out["model_version"] = model
    return out


def map_spans(
    spans: Iterable[SourceSpan], project: str, mapping: SpanMapping | None = None, source: str = "traces"
) -> list[dict[str, Any]]:
    """The log lines of a set of traces: one JSON-ready object per SQL span, in start-time order.

    Args:
        spans: every span of the traces (a trace's spans may come in any order).
        project: the project name (default ``agent_id``).
        mapping: which spans and attributes hold what (default :class:`SpanMapping`).
        source: the record's ``source`` key (``phoenix``, ``otlp``).

    Returns:
        Per SQL span a log record (``run_id``, ``timestamp`` = the SQL span's start, ``agent_id``,
        ``agent_version``, ``question``, ``sql``, optional fields, plus ``trace_id``, ``span_id``,
        ``source``) or, when it cannot be read, an object with ``run_id``, ``trace_id``,
        ``span_id`` and :data:`SOURCE_ERROR_KEY` (the reason). Nothing is dropped.
    """
    mapping = mapping or SpanMapping()
    traces: dict[str, list[SourceSpan]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    lines: list[tuple[datetime, str, dict[str, Any]]] = []
    for trace_id, members in traces.items():
        ids = {span.span_id for span in members}
        roots = [span for span in members if span.parent_id is None or span.parent_id not in ids]
        roots.sort(key=lambda span: (span.parent_id is not None, span.start_time))
        root = roots[0] if roots and roots[0].parent_id is None else None
        metadata = _metadata(root, mapping) if root is not None else {}
        extras = _llm_fields(members, mapping)
        if root is not None and root.end_time is not None:
            extras["latency_ms"] = round(max((root.end_time - root.start_time).total_seconds(), 0.0) * 1000, 3)
        sql_spans = [(span, *_sql_of(span, mapping)) for span in members]
        sql_spans = [item for item in sql_spans if item[1:] != (None, None)]
        question, question_problem = _question_of(root, mapping)
        for span, sql, problem in sql_spans:
            problem = problem or question_problem
            run_id = metadata.get(mapping.metadata_fields.get("run_id", "run_id"))
            # a metadata run id names the trace: with several SQL spans each gets its span id appended
            run_id = f"{run_id}:{span.span_id}" if run_id and len(sql_spans) > 1 else run_id
            line: dict[str, Any] = {
                "run_id": str(run_id or span.span_id),
                "trace_id": trace_id,
                "span_id": span.span_id,
            }
            if problem is not None:
                line[SOURCE_ERROR_KEY] = problem
                lines.append((span.start_time, span.span_id, line))
                continue
            line.update(
                timestamp=span.start_time.isoformat(),
                agent_id=project,
                agent_version="unknown",
                question=question,
                sql=sql,
            )
            if mapping.dialect:
                line["dialect"] = mapping.dialect
            for target, key in mapping.metadata_fields.items():
                value = metadata.get(key)
                if target != "run_id" and value is not None and str(value).strip():
                    line[target] = str(value)
            line.update(extras)
            line["source"] = source
            lines.append((span.start_time, span.span_id, line))
    lines.sort(key=lambda item: (item[0], item[1]))
    return [line for _, _, line in lines]
