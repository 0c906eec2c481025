"""Spans of a traced Text-to-SQL agent mapped to STEF log records (issue 19).

The default :class:`SpanMapping` reads the shape an OpenInference-instrumented LangChain or
LlamaIndex SQL agent produces, and the OpenTelemetry database conventions:

- the **SQL span** is a span named ``sql_db_query`` (also ``query_sql_db``, ``execute_sql``,
  ``run_sql``) whose ``input.value`` is JSON ``{"query": SQL}`` (or ``{"sql": SQL}``) or the raw
  SQL text; in a trace without one, any span carrying ``db.statement`` / ``db.query.text`` (so a
  database driver's own spans under a SQL tool are not scored twice);
- the **question** is the ``input.value`` of the outermost span above the SQL span that has one
  (the text itself, or the ``input`` / ``question`` / ``query`` key of a JSON object, or the
  first message of a LangGraph ``messages`` list); an app's outer span without one, or a parent
  in another service, is passed over;
- ``agent_id``, ``agent_version``, ``app_id``, ``enriched_question``, ``run_id``, ``dialect``
  come from the ``metadata`` of that span and the SQL span's other ancestors (OpenInference: a
  JSON object in the ``metadata`` attribute, or flattened ``metadata.<key>`` attributes as
  Phoenix returns them); ``run_id`` defaults to the SQL span's id, ``agent_id`` to the project;
- tokens (``llm.token_count.*``, ``gen_ai.usage.*``) and the model name (``llm.model_name``,
  ``gen_ai.request.model``) from the trace's LLM spans (kind ``LLM``, or GenAI attributes), each
  counted for one SQL span; latency from the question's span; a retried query gives one record
  per SQL span with ``sql_attempt`` / ``sql_attempts`` and the span's status.

Every SQL span gives one line of the day's log file: a record, or — when the mapping cannot read
it (no question, SQL JSON without the key), or a span it is built from could not be read
(:attr:`SourceSpan.problem`) — a line with ``source_error`` that the nightly
quarantines with that reason (:func:`stef.logs.parse_line`). The record keeps ``trace_id`` and
``span_id`` so the scores can be pushed back to the span (:mod:`tasks.traces`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from stef.logs import SOURCE_ERROR_KEY
from stef.pipeline.values import parse_count

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
        status: the span status (``OK``, ``ERROR``, ``UNSET``) when known.
        problem: why part of the span could not be read (an attribute value of the wrong type,
            kept as ``None`` in ``attributes``), or ``None``; a log line built from the span is
            written with it as :data:`SOURCE_ERROR_KEY`.
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str | None
    start_time: datetime
    end_time: datetime | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    status: str | None = None
    problem: str | None = None


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
        default=["query", "sql"],
        description="Keys (dotted paths) of that JSON object that hold the SQL, first found wins.",
    )
    sql_attributes: list[str] = Field(
        default=["db.statement", "db.query.text"],
        description="Attributes holding SQL (OpenTelemetry DB conventions); read in traces without a named SQL span.",
    )
    question_attribute: str = Field(
        default="input.value",
        description="Attribute holding the question: the outermost span above the SQL span that has one.",
    )
    question_json_keys: list[str] = Field(
        default=["input", "question", "query", "messages.0.content", "messages.0.1"],
        description="Keys (dotted paths, list indices as numbers) of a JSON question attribute that hold the "
        "question text, first found wins (messages.0.content: LangGraph / chat inputs).",
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
        except (ValueError, RecursionError):  # not JSON, or nested too deep to read: text
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


def _first_number(span: SourceSpan, names: Sequence[str]) -> int | None:
    for name in names:
        value = span.attributes.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf:
            return int(value)
        if isinstance(value, str) and (count := parse_count(value.strip())) is not None:
            return count  # "12" from an SDK that writes every attribute as text; not "²" (a digit int() refuses)
    return None


def _lookup(value: object, path: str) -> object:
    """``path`` (dotted keys and list indices: ``messages.0.content``) inside a JSON value."""
    for part in path.split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _named_sql(span: SourceSpan, mapping: SpanMapping) -> tuple[str | None, str | None]:
    """``(sql, None)`` for a span named as a SQL span, ``(None, reason)`` when its SQL cannot be
    read, ``(None, None)`` for another span."""
    if span.name not in mapping.sql_span_names:
        return None, None
    value = span.attributes.get(mapping.sql_input_attribute)
    parsed = _json_object(value)
    if parsed is None:
        if isinstance(value, str) and value.strip():
            return value, None
        return None, f"SQL span {span.name!r} has no text in {mapping.sql_input_attribute!r}"
    for key in mapping.sql_json_keys:
        sql = _lookup(parsed, key)
        if isinstance(sql, str) and sql.strip():
            return sql, None
    keys = ", ".join(sorted(map(str, parsed))) or "none"
    wanted = " / ".join(mapping.sql_json_keys)
    return (
        None,
        f"SQL span {span.name!r}: {mapping.sql_input_attribute!r} is a JSON object without {wanted} (keys: {keys})",
    )


def _attribute_sql(span: SourceSpan, mapping: SpanMapping) -> str | None:
    for name in mapping.sql_attributes:
        value = span.attributes.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _sql_spans(members: Sequence[SourceSpan], mapping: SpanMapping) -> list[tuple[SourceSpan, str | None, str | None]]:
    """The trace's SQL spans as ``(span, sql, problem)``, in start order: the named SQL spans
    (``sql_span_names``); only in a trace without one, the spans with a SQL attribute (a database
    driver's own spans under a SQL tool, or its schema introspection, are not the agent's answer)."""
    named = [(span, *_named_sql(span, mapping)) for span in members]
    found = [item for item in named if item[1:] != (None, None)]
    if not found:
        found = [(span, sql, None) for span in members if (sql := _attribute_sql(span, mapping)) is not None]
    return sorted(found, key=lambda item: (item[0].start_time, item[0].span_id))


def _question_text(span: SourceSpan, mapping: SpanMapping) -> str | None:
    value = span.attributes.get(mapping.question_attribute)
    parsed: object = _json_object(value)
    if parsed is None and isinstance(value, str) and value.lstrip().startswith("["):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to read: text
            parsed = None
    if parsed is not None:
        for key in mapping.question_json_keys:
            text = _lookup(parsed, key)
            if isinstance(text, str) and text.strip():
                return text
        return None
    return value if isinstance(value, str) and value.strip() else None


def _ancestors(span: SourceSpan, by_id: Mapping[str, SourceSpan]) -> list[SourceSpan]:
    """The span's ancestors present in the trace, nearest first (a remote or missing parent ends it)."""
    chain: list[SourceSpan] = []
    seen = {span.span_id}
    current = span
    while current.parent_id is not None and current.parent_id in by_id and current.parent_id not in seen:
        current = by_id[current.parent_id]
        seen.add(current.span_id)
        chain.append(current)
    return chain


def _question_span(
    span: SourceSpan, by_id: Mapping[str, SourceSpan], mapping: SpanMapping
) -> tuple[SourceSpan | None, str | None, str | None]:
    """``(question span, question, problem)``: the outermost ancestor of the SQL span that holds a
    question (an app's own outer span without one, or a parent in another service, is skipped)."""
    chain = _ancestors(span, by_id)
    for ancestor in reversed(chain):
        text = _question_text(ancestor, mapping)
        if text is not None:
            return ancestor, text, None
    if not chain:
        return None, None, f"SQL span {span.name!r} has no parent span in the trace (no question)"
    top = chain[-1]
    return (
        None,
        None,
        f"no span above SQL span {span.name!r} has a question in {mapping.question_attribute!r} (top: {top.name!r})",
    )


def _is_llm_span(span: SourceSpan, mapping: SpanMapping) -> bool:
    if span.kind in mapping.llm_span_kinds or "gen_ai.operation.name" in span.attributes:
        return True
    return any(
        name in span.attributes for name in (*mapping.prompt_token_attributes, *mapping.completion_token_attributes)
    )


def _llm_fields(spans: Sequence[SourceSpan], mapping: SpanMapping) -> dict[str, Any]:
    """Tokens summed over LLM spans and the first model name."""
    prompt = completion = 0
    counted = False
    model: str | None = None
    for span in spans:
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
        ``span_status``, ``sql_attempt`` / ``sql_attempts`` (its place among the trace's SQL spans:
        a retried query gives several), ``source``) or, when it cannot be read, an object with
        ``run_id``, ``agent_id``, ``agent_version``, ``trace_id``, ``span_id`` and
        :data:`SOURCE_ERROR_KEY` (the reason: the SQL span's, its question's, or the
        :attr:`SourceSpan.problem` of a span it is built from — the SQL span, its ancestors, its
        LLM spans). Nothing is dropped. The LLM spans' tokens are
        split between the SQL spans: each gets those that started after the previous SQL span
        (the last also those after it), so a trace's tokens are counted once.
    """
    mapping = mapping or SpanMapping()
    traces: dict[str, list[SourceSpan]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    lines: list[tuple[datetime, str, dict[str, Any]]] = []
    for trace_id, members in traces.items():
        by_id = {span.span_id: span for span in members}
        sql_spans = _sql_spans(members, mapping)
        llm = sorted((s for s in members if _is_llm_span(s, mapping)), key=lambda s: s.start_time)
        for index, (span, sql, problem) in enumerate(sql_spans):
            after = sql_spans[index - 1][0].start_time if index else None
            last = index == len(sql_spans) - 1
            own_llm = [
                s for s in llm if (after is None or s.start_time >= after) and (last or s.start_time < span.start_time)
            ]
            holder, question, question_problem = _question_span(span, by_id, mapping)
            metadata: dict[str, Any] = {}
            for ancestor in [*([holder] if holder else []), *_ancestors(span, by_id)]:
                for key, value in _metadata(ancestor, mapping).items():
                    metadata.setdefault(key, value)
            unreadable = next((s for s in (span, *_ancestors(span, by_id), *own_llm) if s.problem), None)
            if unreadable is not None:
                problem = f"span {unreadable.name!r} ({unreadable.span_id}): {unreadable.problem}"
            problem = problem or question_problem
            run_id = metadata.get(mapping.metadata_fields.get("run_id", "run_id"))
            # a metadata run id names the trace: with several SQL spans each gets its span id appended
            run_id = f"{run_id}:{span.span_id}" if run_id and len(sql_spans) > 1 else run_id
            line: dict[str, Any] = {
                "run_id": str(run_id or span.span_id),
                "trace_id": trace_id,
                "span_id": span.span_id,
                "agent_id": project,
                "agent_version": "unknown",
            }
            for target in ("agent_id", "agent_version"):
                value = metadata.get(mapping.metadata_fields.get(target, target))
                if value is not None and str(value).strip():
                    line[target] = str(value)
            if problem is not None:
                line[SOURCE_ERROR_KEY] = problem
                lines.append((span.start_time, span.span_id, line))
                continue
            line.update(timestamp=span.start_time.isoformat(), question=question, sql=sql)
            if mapping.dialect:
                line["dialect"] = mapping.dialect
            for target, key in mapping.metadata_fields.items():
                value = metadata.get(key)
                if target not in ("run_id", "agent_id", "agent_version") and value is not None and str(value).strip():
                    line[target] = str(value)
            line.update(_llm_fields(own_llm, mapping))
            if holder is not None and holder.end_time is not None:
                line["latency_ms"] = round(max((holder.end_time - holder.start_time).total_seconds(), 0.0) * 1000, 3)
            if span.status:
                line["span_status"] = span.status
            line.update(sql_attempt=index + 1, sql_attempts=len(sql_spans), source=source)
            lines.append((span.start_time, span.span_id, line))
    lines.sort(key=lambda item: (item[0], item[1]))
    return [line for _, _, line in lines]
