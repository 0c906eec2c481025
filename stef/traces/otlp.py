"""OTLP JSON trace files in, evaluation results out (issue 19).

Reading: the OpenTelemetry Collector's file exporter writes one ``ExportTraceServiceRequest`` per
line in the OTLP/JSON encoding (``resourceSpans`` → ``scopeSpans`` → ``spans``; ids as hex
strings, times as Unix nanoseconds, attributes as ``{"key", "value": {"stringValue": …}}``); a
file holding one such object over several lines is read too. The project of a span is its
resource's ``openinference.project.name``, else ``service.name``.

Writing: :func:`evaluation_result` turns one stored evaluation into what a trace store shows next
to the SQL span — the label, score and explanation of a Phoenix span annotation and of the
OpenTelemetry GenAI evaluation event ``gen_ai.evaluation.result``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from stef.traces.spans import SourceSpan, parse_time

__all__ = [
    "EVALUATION_EVENT",
    "EVALUATION_NAME",
    "EvaluationResult",
    "OtlpFileError",
    "evaluation_event_attributes",
    "evaluation_result",
    "read_otlp_json",
]

EVALUATION_NAME = "stef"
"""Name of STEF's annotation / evaluation on a span."""

EVALUATION_EVENT = "gen_ai.evaluation.result"
"""The OpenTelemetry GenAI semantic conventions' evaluation event."""


class OtlpFileError(ValueError):
    """A trace file that is not OTLP JSON; the message names the file and line."""


def _any_value(value: object) -> Any:
    """An OTLP ``AnyValue`` as a Python value (arrays as lists, kvlists as dicts)."""
    if not isinstance(value, Mapping):
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [_any_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return _attributes((value["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _attributes(items: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(items, list):
        for item in items:
            if isinstance(item, Mapping) and isinstance(item.get("key"), str):
                out[item["key"]] = _any_value(item.get("value"))
    return out


def _objects(text: str, source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a file: one per line, or the whole file as one."""
    stripped = text.strip()
    if not stripped:
        return
    try:
        whole = json.loads(stripped)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        yield 1, whole
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            payload = json.loads(line)
        except json.JSONDecodeError as exc:
            raise OtlpFileError(f"{source}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(payload, dict):
            raise OtlpFileError(f"{source}:{number}: not an OTLP JSON object")
        yield number, payload


_STATUS_CODES = {0: "UNSET", 1: "OK", 2: "ERROR"}


def _status(value: object) -> str | None:
    """An OTLP span status (``{"code": 2}`` or ``{"code": "STATUS_CODE_ERROR"}``) as ``UNSET`` / ``OK`` / ``ERROR``."""
    if not isinstance(value, Mapping) or "code" not in value:
        return None
    code = value["code"]
    if isinstance(code, int):
        return _STATUS_CODES.get(code)
    return str(code).removeprefix("STATUS_CODE_") or None


def read_otlp_json(text: str, source: str = "<otlp>") -> list[tuple[str | None, SourceSpan]]:
    """The spans of an OTLP JSON trace file with their project.

    Args:
        text: the file's text.
        source: its name, for the error messages.

    Returns:
        ``(project, span)`` per span, in file order; ``project`` is ``None`` when the resource
        names none.

    Raises:
        OtlpFileError: a line that is not JSON, an object without ``resourceSpans``, or a span
            without ids or start time (naming the line).
    """
    out: list[tuple[str | None, SourceSpan]] = []
    for number, payload in _objects(text, source):
        if "resourceSpans" not in payload:
            raise OtlpFileError(f"{source}:{number}: no resourceSpans (not an OTLP JSON trace export)")
        for resource_spans in payload.get("resourceSpans") or []:
            resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
            project = resource.get("openinference.project.name") or resource.get("service.name")
            for scope_spans in resource_spans.get("scopeSpans") or []:
                for raw in scope_spans.get("spans") or []:
                    try:
                        attributes = _attributes(raw.get("attributes"))
                        span = SourceSpan(
                            trace_id=str(raw["traceId"]).lower(),
                            span_id=str(raw["spanId"]).lower(),
                            parent_id=str(raw["parentSpanId"]).lower() if raw.get("parentSpanId") else None,
                            name=str(raw.get("name") or ""),
                            kind=attributes.get("openinference.span.kind"),
                            start_time=parse_time(raw["startTimeUnixNano"]),
                            end_time=parse_time(raw["endTimeUnixNano"]) if raw.get("endTimeUnixNano") else None,
                            attributes=attributes,
                            status=_status(raw.get("status")),
                        )
                    except (KeyError, ValueError, TypeError) as exc:
                        raise OtlpFileError(
                            f"{source}:{number}: a span without {exc} (traceId, spanId, startTimeUnixNano)"
                        ) from exc
                    out.append((None if project is None else str(project), span))
    return out


@dataclass(frozen=True, slots=True)
class EvaluationResult:
    """STEF's result on one SQL span, as trace stores take it.

    Attributes:
        span_id, trace_id: the SQL span.
        score: Φ in [0, 100]; ``None`` for an answer without a score.
        label: the verdict (``CORRECT`` …), or the status for an unscored answer (``parse_error`` …).
        explanation: the rationale and the main evidence, plain text.
        metadata: ``p_correct``, ``filter_status``, ``band``, ``evaluator_version``, ``run_id``.
    """

    span_id: str
    trace_id: str | None
    score: float | None
    label: str
    explanation: str
    metadata: dict[str, Any]


def evaluation_result(row: Mapping[str, Any]) -> EvaluationResult:
    """One stored evaluation (keys ``span_id``, ``trace_id``, ``run_id``, ``status``, ``score``,
    ``verdict``, ``p_correct``, ``filter_status``, ``band``, ``evaluator_version``,
    ``rationale``, ``missing_filters``, ``extra_filters``, ``suspected``) as an
    :class:`EvaluationResult`.

    >>> r = evaluation_result({"span_id": "ab", "status": "evaluated", "score": 80.0, "verdict": "CORRECT",
    ...     "rationale": "Filters match.", "missing_filters": ["year = 2020"]})
    >>> r.label, r.score, r.explanation
    ('CORRECT', 80.0, 'Filters match. Missing filters: year = 2020.')
    """
    status = str(row.get("status") or "unknown")
    score = row.get("score") if status == "evaluated" else None
    label = str(row.get("verdict") or status) if status == "evaluated" else status
    parts = [str(row.get("rationale") or row.get("reason") or "").strip()]
    for key, title in (
        ("missing_filters", "Missing filters"),
        ("extra_filters", "Extra filters"),
        ("suspected", "Suspected errors"),
    ):
        values = [str(v) for v in row.get(key) or [] if str(v).strip()]
        if values:
            parts.append(f"{title}: {'; '.join(values[:5])}.")
    metadata = {
        key: row.get(key)
        for key in ("p_correct", "filter_status", "band", "evaluator_version", "run_id")
        if row.get(key) is not None
    }
    return EvaluationResult(
        span_id=str(row["span_id"]),
        trace_id=None if row.get("trace_id") is None else str(row["trace_id"]),
        score=None if score is None else float(score),
        label=label,
        explanation=" ".join(part for part in parts if part),
        metadata=metadata,
    )


def evaluation_event_attributes(result: EvaluationResult) -> dict[str, Any]:
    """The attributes of the ``gen_ai.evaluation.result`` event (OpenTelemetry GenAI semantic
    conventions: ``gen_ai.evaluation.name``, ``.score.value``, ``.score.label``, ``.explanation``)
    plus ``stef.*`` metadata."""
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": EVALUATION_NAME,
        "gen_ai.evaluation.score.label": result.label,
        "gen_ai.evaluation.explanation": result.explanation,
    }
    if result.score is not None:
        attributes["gen_ai.evaluation.score.value"] = result.score
    for key, value in result.metadata.items():
        if isinstance(value, str | int | float | bool):
            attributes[f"stef.{key}"] = value
    return attributes


def spans_by_project(spans: Iterable[tuple[str | None, SourceSpan]], project: str | None) -> list[SourceSpan]:
    """The spans of one project (all of them when ``project`` is ``None``)."""
    return [span for name, span in spans if project is None or name == project]
