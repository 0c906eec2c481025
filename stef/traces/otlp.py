"""OTLP JSON trace files in, evaluation results out (issue 19).

Reading: the OpenTelemetry Collector's file exporter writes one ``ExportTraceServiceRequest`` per
line in the OTLP/JSON encoding (``resourceSpans`` → ``scopeSpans`` → ``spans``; ids as hex
strings, times as Unix nanoseconds, attributes as ``{"key", "value": {"stringValue": …}}``); a
file holding one such object over several lines is read too. The project of a span is its
resource's ``openinference.project.name``, else ``service.name``.

Each level is checked: an element of the wrong JSON type (``"resourceSpans": "x"``, a resource
that is no object), JSON too deeply nested to read, or a span without ids or start time stops the
file with an :class:`OtlpFileError` naming the file, the line and the element's path. An
attribute value that is not a valid ``AnyValue`` (``{"intValue": "lots"}``, nesting beyond
:data:`MAX_VALUE_DEPTH`) affects its span only: the span is read with the reason in
:attr:`~stef.traces.spans.SourceSpan.problem`, and its SQL span's log line carries it as
``source_error``.

Writing: :func:`evaluation_result` turns one stored evaluation into what a trace store shows next
to the SQL span — the label, score and explanation of a Phoenix span annotation and of the
OpenTelemetry GenAI evaluation event ``gen_ai.evaluation.result``.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from stef.config_files import json_lines
from stef.traces.spans import SourceSpan, parse_time

__all__ = [
    "EVALUATION_EVENT",
    "EVALUATION_NAME",
    "MAX_VALUE_DEPTH",
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
    """A trace file that is not OTLP JSON; the message names the file, the line and, for an
    element of the wrong shape, its path (``resourceSpans[0].scopeSpans``)."""


MAX_VALUE_DEPTH = 64
"""``arrayValue`` / ``kvlistValue`` nested deeper than this make an attribute unreadable (an
agent's attributes nest a few levels; the reader must not depend on Python's recursion limit)."""

_INT64 = (-(2**63), 2**63 - 1)
_INT_TEXT = re.compile(r"[+-]?[0-9]{1,20}")
_TOO_DEEP = "not readable JSON: nested too deeply (beyond Python's recursion limit)"


class _BadValue(ValueError):
    """An attribute value that is not an OTLP ``AnyValue``; the message says why."""


def _show(value: object) -> str:
    """A short text for a JSON value in a message (long strings cut, containers named)."""
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:60] + "…")
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)[:40]
    return (
        "an object" if isinstance(value, Mapping) else "an array" if isinstance(value, list) else type(value).__name__
    )


def _int_value(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _INT_TEXT.fullmatch(value):
        number = int(value)
    else:
        raise _BadValue(f"intValue {_show(value)} is not an integer")
    if not _INT64[0] <= number <= _INT64[1]:
        raise _BadValue(f"intValue {_show(value)} is out of the 64-bit range")
    return number


def _double_value(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # OTLP/JSON also writes "NaN", "Infinity", "-Infinity"
        except ValueError:
            pass
    raise _BadValue(f"doubleValue {_show(value)} is not a number")


def _values(container: object, kind: str) -> list[object]:
    """The ``values`` list of an ``arrayValue`` / ``kvlistValue`` (``null`` or ``{}`` is empty)."""
    if container is None:
        return []
    if not isinstance(container, Mapping):
        raise _BadValue(f"{kind} {_show(container)} is not an object")
    values = container.get("values")
    if values is None:
        return []
    if not isinstance(values, list):
        raise _BadValue(f"{kind}.values {_show(values)} is not an array")
    return values


def _any_value(value: object, depth: int = 0) -> Any:
    """An OTLP ``AnyValue`` as a Python value (arrays as lists, kvlists as dicts; ``null``, ``{}``
    and unknown kinds as ``None``).

    Raises:
        _BadValue: not an object, a value of the wrong JSON type (``{"intValue": "lots"}``), or
            nesting deeper than :data:`MAX_VALUE_DEPTH`.

    >>> _any_value({"arrayValue": {"values": [{"intValue": "7"}, {"kvlistValue": {}}]}})
    [7, {}]
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _BadValue(f"value {_show(value)} is not an AnyValue object")
    if depth > MAX_VALUE_DEPTH:
        raise _BadValue(f"arrayValue / kvlistValue nested deeper than {MAX_VALUE_DEPTH} levels")
    if "stringValue" in value:
        text = value["stringValue"]
        if not isinstance(text, str):
            raise _BadValue(f"stringValue {_show(text)} is not a string")
        return text
    if "boolValue" in value:
        flag = value["boolValue"]
        if not isinstance(flag, bool):
            raise _BadValue(f"boolValue {_show(flag)} is not true or false")
        return flag
    if "intValue" in value:
        return _int_value(value["intValue"])
    if "doubleValue" in value:
        return _double_value(value["doubleValue"])
    if "arrayValue" in value:
        return [_any_value(item, depth + 1) for item in _values(value["arrayValue"], "arrayValue")]
    if "kvlistValue" in value:
        return _kvlist(_values(value["kvlistValue"], "kvlistValue"), depth + 1)
    if "bytesValue" in value:
        data = value["bytesValue"]
        if not isinstance(data, str):
            raise _BadValue(f"bytesValue {_show(data)} is not a base64 string")
        return data
    return None


def _entry(item: object) -> tuple[str, object]:
    """``(key, value)`` of an OTLP ``KeyValue``."""
    if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
        raise _BadValue(f"{_show(item)} is not a key/value object with a string key")
    return str(item["key"]), item.get("value")


def _kvlist(items: list[object], depth: int) -> dict[str, Any]:
    """The entries of a nested ``kvlistValue``; any bad entry makes the whole value bad."""
    out: dict[str, Any] = {}
    for item in items:
        key, value = _entry(item)
        out[key] = _any_value(value, depth)
    return out


def _attributes(items: object, what: str = "attribute") -> tuple[dict[str, Any], list[str]]:
    """The readable attributes of a span or resource and the problems of the others.

    An attribute whose value cannot be read is kept as ``None`` (so the span still counts as
    having it) and named in the problems; an entry without a string key is named by its index.

    >>> _attributes([{"key": "n", "value": {"intValue": "lots"}}, {"key": "m", "value": {"intValue": 3}}])
    ({'n': None, 'm': 3}, ["attribute 'n': intValue 'lots' is not an integer"])
    """
    out: dict[str, Any] = {}
    problems: list[str] = []
    if items is None:
        return out, problems
    if not isinstance(items, list):
        return out, [f"{what}s {_show(items)} is not an array"]
    for index, item in enumerate(items):
        try:
            key, value = _entry(item)
        except _BadValue as exc:
            problems.append(f"{what}s[{index}]: {exc}")
            continue
        try:
            out[key] = _any_value(value)
        except _BadValue as exc:
            out[key] = None
            problems.append(f"{what} {key!r}: {exc}")
    return out, problems


def _objects(text: str, source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a file: one per line, or the whole file as one.

    Raises:
        OtlpFileError: a line that is not JSON, not an object, or JSON Python cannot read
            (nested beyond the recursion limit, an integer of more than 4,300 digits).
    """
    stripped = text.strip()
    if not stripped:
        return
    too_deep = False
    try:
        whole = json.loads(stripped)
    except RecursionError:
        whole, too_deep = None, True
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        yield 1, whole
        return
    for number, line in json_lines(text):
        if not line.strip():
            continue
        try:
            payload = json.loads(line)
        except RecursionError:
            raise OtlpFileError(f"{source}:{number}: {_TOO_DEEP}") from None
        except json.JSONDecodeError as exc:
            if too_deep:  # one object over several lines, too deep to read as a whole
                raise OtlpFileError(f"{source}: {_TOO_DEEP}") from None
            raise OtlpFileError(f"{source}:{number}: not JSON ({exc.msg})") from exc
        except ValueError as exc:  # int(): more digits than sys.get_int_max_str_digits()
            raise OtlpFileError(f"{source}:{number}: not readable JSON ({str(exc).split(';')[0]})") from exc
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


def _items(container: Mapping[str, Any], key: str, path: str, where: str) -> list[Any]:
    """The array ``container[key]`` (``null`` or absent: empty).

    Raises:
        OtlpFileError: it is not an array (naming ``where`` and the element's ``path``).
    """
    value = container.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpFileError(f"{where}: {path}.{key} is {_show(value)}, not an array")
    return value


def _object(value: object, path: str, where: str, optional: bool = False) -> Mapping[str, Any]:
    """``value`` as a JSON object (``null`` is ``{}`` when ``optional``).

    Raises:
        OtlpFileError: it is not an object (naming ``where`` and the element's ``path``).
    """
    if optional and value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OtlpFileError(f"{where}: {path} is {_show(value)}, not an object")
    return value


def _span_id(raw: Mapping[str, Any], key: str, path: str, where: str) -> str:
    value = raw.get(key)
    if value is None or value == "":
        raise OtlpFileError(f"{where}: {path} has no {key}")
    if not isinstance(value, str) or value.strip(string.hexdigits):
        raise OtlpFileError(f"{where}: {path}.{key} is {_show(value)}, not a hex string")
    return value.lower()


def _span_time(value: object) -> datetime:
    """A span time; ``ValueError`` when it is none (also for times beyond the datetime range)."""
    try:
        return parse_time(value)
    except (ValueError, OverflowError, OSError) as exc:
        raise ValueError(f"{_show(value)} is not a time") from exc


def _span(raw: Mapping[str, Any], path: str, where: str, resource_problems: list[str]) -> SourceSpan:
    """One OTLP span; what of it cannot be read, short of its ids and start, is its ``problem``.

    Raises:
        OtlpFileError: no ``traceId`` / ``spanId`` / ``startTimeUnixNano``, or one of the wrong
            type (naming the span's path).
    """
    trace_id = _span_id(raw, "traceId", path, where)
    span_id = _span_id(raw, "spanId", path, where)
    parent = raw.get("parentSpanId")
    parent_id = _span_id(raw, "parentSpanId", path, where) if parent is not None and parent != "" else None
    if raw.get("startTimeUnixNano") is None:
        raise OtlpFileError(f"{where}: {path} has no startTimeUnixNano")
    try:
        start_time = _span_time(raw["startTimeUnixNano"])
    except ValueError as exc:
        raise OtlpFileError(f"{where}: {path}.startTimeUnixNano {exc}") from exc
    attributes, problems = _attributes(raw.get("attributes"))
    problems = [*resource_problems, *problems]
    end_time: datetime | None = None
    if raw.get("endTimeUnixNano") is not None:
        try:
            end_time = _span_time(raw["endTimeUnixNano"])
        except ValueError as exc:
            problems.append(f"endTimeUnixNano {exc}")
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        problems.append(f"name {_show(name)} is not a string")
        name = None
    status = raw.get("status")
    if status is not None and not isinstance(status, Mapping):
        problems.append(f"status {_show(status)} is not an object")
    kind = attributes.get("openinference.span.kind")
    return SourceSpan(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name or "",
        kind=None if kind is None else str(kind),
        start_time=start_time,
        end_time=end_time,
        attributes=attributes,
        status=_status(status),
        problem="; ".join(problems) or None,
    )


def read_otlp_json(text: str, source: str = "<otlp>") -> list[tuple[str | None, SourceSpan]]:
    """The spans of an OTLP JSON trace file with their project.

    Args:
        text: the file's text.
        source: its name, for the error messages.

    Returns:
        ``(project, span)`` per span, in file order; ``project`` is ``None`` when the resource
        names none. A span an attribute value of which cannot be read (``{"intValue": "lots"}``,
        an ``arrayValue`` nested deeper than :data:`MAX_VALUE_DEPTH`), or whose resource has
        such an attribute, or whose end time, name or status is of the wrong type, is returned
        with the reason in :attr:`SourceSpan.problem` (the attribute kept as ``None``); the log
        lines built from it carry that reason as ``source_error`` (:func:`stef.traces.spans.map_spans`).

    Raises:
        OtlpFileError: a line that is not JSON (or too deeply nested to read), an object
            without ``resourceSpans``, an element of the wrong JSON type (``resourceSpans``,
            ``scopeSpans``, ``spans`` not arrays; a resource, scope or span not an object), or a
            span without ids or start time — naming the file, the line and the element's path
            (``resourceSpans[0].scopeSpans[1].spans[2]``).

    >>> read_otlp_json('{"resourceSpans": "x"}', "f.json")
    Traceback (most recent call last):
    ...
    stef.traces.otlp.OtlpFileError: f.json:1: resourceSpans is 'x', not an array
    """
    out: list[tuple[str | None, SourceSpan]] = []
    for number, payload in _objects(text, source):
        where = f"{source}:{number}"
        if "resourceSpans" not in payload:
            raise OtlpFileError(f"{where}: no resourceSpans (not an OTLP JSON trace export)")
        resource_spans_list = payload["resourceSpans"]
        if resource_spans_list is not None and not isinstance(resource_spans_list, list):
            raise OtlpFileError(f"{where}: resourceSpans is {_show(resource_spans_list)}, not an array")
        for r, item in enumerate(resource_spans_list or []):
            r_path = f"resourceSpans[{r}]"
            resource_spans = _object(item, r_path, where)
            resource = _object(resource_spans.get("resource"), f"{r_path}.resource", where, optional=True)
            attributes, problems = _attributes(resource.get("attributes"), "resource attribute")
            project = attributes.get("openinference.project.name") or attributes.get("service.name")
            for s, scope_item in enumerate(_items(resource_spans, "scopeSpans", r_path, where)):
                s_path = f"{r_path}.scopeSpans[{s}]"
                scope_spans = _object(scope_item, s_path, where)
                _object(scope_spans.get("scope"), f"{s_path}.scope", where, optional=True)
                for i, raw in enumerate(_items(scope_spans, "spans", s_path, where)):
                    path = f"{s_path}.spans[{i}]"
                    span = _span(_object(raw, path, where), path, where, problems)
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
