"""Pull agent logs from trace stores, push STEF's scores back (issue 19).

- :func:`pull_phoenix`: the day's spans of a Phoenix project through the official client
  (``arize-phoenix-client``, extra ``phoenix``), mapped by :func:`stef.traces.spans.map_spans`,
  written as ``<logs-root>/<day>/phoenix-<project>.jsonl``.
- :func:`pull_otlp`: the same from OTLP JSON trace files (the Collector's file exporter).
- :func:`push_phoenix`: one span annotation ``stef`` per pulled answer of a day (score Φ, label
  the verdict or the status, explanation, metadata), synchronous, with a stable identifier so a
  rerun replaces the annotation.
- :func:`push_otlp`: the OpenTelemetry GenAI evaluation event ``gen_ai.evaluation.result`` per
  answer over OTLP/HTTP (OpenTelemetry SDK log exporter), linked to the SQL span.

A day file is written whole to a temporary file and renamed, so a rerun rewrites it and a crash
never leaves half a file; every SQL span gives one line (a record, or a ``source_error`` line the
nightly quarantines with its reason). A day without SQL span gets no file (an empty one would read
as a pull that found answers to score; ``stef nightly`` treats a missing and an empty day file
alike), and a rerun that finds none removes the file of an earlier pull, as it would rewrite it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from stef.config_files import read_config_text
from stef.errors import InputError
from stef.logs import SOURCE_ERROR_KEY
from stef.traces.otlp import (
    EVALUATION_EVENT,
    EVALUATION_NAME,
    OtlpFileError,
    evaluation_event_attributes,
    evaluation_result,
    read_otlp_json,
)
from stef.traces.spans import SourceSpan, SpanMapping, map_spans, parse_time

__all__ = [
    "ANNOTATION_IDENTIFIER",
    "PHOENIX_PAGE_TIMEOUT_S",
    "PUSH_TARGETS",
    "TRACE_SOURCES",
    "PullResult",
    "PushResult",
    "TraceSource",
    "TraceSourceError",
    "day_window",
    "nothing_to_push",
    "pull_otlp",
    "pull_phoenix",
    "pull_source",
    "push_day",
    "push_otlp",
    "push_phoenix",
    "push_target",
    "read_mapping",
    "write_day_file",
]

PHOENIX_PAGE_TIMEOUT_S = 60
"""Timeout of one Phoenix REST request, seconds (the client's default is 5)."""

PHOENIX_SPAN_LIMIT = 10_000_000
"""Most spans read for one day (the client pages 100 at a time with its cursor until then)."""

ANNOTATION_IDENTIFIER = "stef-nightly"
"""Identifier of STEF's span annotations: Phoenix keeps one annotation per (span, name,
identifier), so pushing a day again replaces them."""

OTLP_FILE_MAX_BYTES = 1024 * 1024 * 1024
"""Largest OTLP JSON trace file read (1 GiB; the file exporter rotates long before)."""

ANNOTATION_BATCH = 500
"""Span annotations per request."""


class TraceSourceError(InputError):
    """A trace store that cannot be read or written (unreachable, refused, not OTLP JSON).

    Attributes:
        transient: the server could not be reached or answered 5xx: worth retrying.
    """

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def is_transient(task: Any, task_run: Any, state: Any) -> bool:
    """``retry_condition_fn`` of the pull and push tasks: retry a transient :class:`TraceSourceError`."""
    return isinstance(state.data, TraceSourceError) and state.data.transient


@dataclass(frozen=True, slots=True)
class PullResult:
    """What ``stef pull`` wrote.

    Attributes:
        path: the day file (written only when ``written``).
        spans: spans of the day read (Phoenix: plus the roots of their traces from the day before).
        records: log records written.
        unreadable: SQL spans written as ``source_error`` lines (quarantined by the nightly).
        written: whether ``path`` was written: not for a day without a SQL span.
        removed: a day without a SQL span whose file an earlier pull had written: it was removed.
    """

    path: Path
    spans: int
    records: int
    unreadable: int
    written: bool = True
    removed: bool = False


@dataclass(frozen=True, slots=True)
class PushResult:
    """What ``stef push`` sent: ``results`` annotations / events, of which ``unscored`` without Φ;
    ``missing_spans``: span ids the server does not have (their annotations were not written)."""

    results: int
    unscored: int
    evaluator_version: str | None
    missing_spans: tuple[str, ...] = ()


def day_window(day: date) -> tuple[datetime, datetime]:
    """``[day 00:00, day + 1 00:00)`` in UTC."""
    start = datetime.combine(day, time(0), tzinfo=UTC)
    return start, start + timedelta(days=1)


def read_mapping(path: Path | None) -> SpanMapping:
    """The ``--mapping`` file as a :class:`SpanMapping` (the defaults without one).

    Raises:
        InputError: unreadable, not JSON, or not a valid mapping (naming the key).
    """
    if path is None:
        return SpanMapping()
    from pydantic import ValidationError

    try:
        payload = json.loads(read_config_text(path))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the mapping ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise InputError(f"{path}: the mapping is not JSON ({exc})") from exc
    try:
        return SpanMapping.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise InputError(f"{path}: invalid mapping at {where}: {first['msg']} ({exc.error_count()} error(s))") from exc


def _safe_name(name: str) -> str:
    """A project name as a file-name part: letters, digits, ``._-``; when others had to go, a
    digest of the whole name follows, so two projects never share a file (``销售`` and ``日本``).

    >>> _safe_name("sql-agent"), _safe_name("a/b") != _safe_name("a_b")
    ('sql-agent', True)
    """
    import hashlib

    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip("._") or "project"
    if cleaned == name:
        return cleaned
    return f"{cleaned[:60]}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def day_file_name(kind: str, project: str | None) -> str:
    """The day file ``stef pull <kind>`` writes for ``project``: ``phoenix-<project>.jsonl``,
    ``otlp-<project or traces>.jsonl``."""
    return f"{kind}-{_safe_name(project or 'traces')}.jsonl"


def write_day_file(logs_root: Path, day: date, name: str, lines: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``lines`` as ``<logs_root>/<day>/<name>.jsonl`` atomically (temporary file, rename).

    A line whose text holds a lone UTF-16 surrogate (a span attribute with ``"\\ud800"``: JSON
    allows it, UTF-8 cannot encode it) is written with every non-ASCII character escaped, so the
    file stays UTF-8 and the log reader rejects that line with its reason (nothing is dropped). A
    failed write leaves no temporary file and the earlier day file as it was.
    """
    folder = logs_root / day.isoformat()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    temporary = folder / f".{name}.jsonl.tmp"
    try:
        with temporary.open("wb") as handle:
            for line in lines:
                text = json.dumps(line, ensure_ascii=False)
                try:
                    encoded = text.encode("utf-8")
                except UnicodeEncodeError:  # a lone surrogate: escaped, as JSON allows
                    encoded = json.dumps(line).encode("ascii")
                handle.write(encoded + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def _day_lines(
    spans: Sequence[SourceSpan], project: str, mapping: SpanMapping, day: date, source: str
) -> list[dict[str, Any]]:
    """The log lines of the SQL spans that started on ``day`` (their traces' other spans may not)."""
    start, end = day_window(day)
    lines = map_spans(spans, project, mapping, source=source)
    starts = {(span.trace_id, span.span_id): span.start_time for span in spans}  # span ids are unique per trace
    return [line for line in lines if start <= starts[(line["trace_id"], line["span_id"])] < end]


def _phoenix_client(endpoint: str, api_key: str | None) -> Any:
    try:
        from phoenix.client import Client
    except ImportError as exc:
        raise TraceSourceError(
            "the Phoenix client is not installed: pip install '.[phoenix]' in the STEF checkout (arize-phoenix-client)"
        ) from exc
    return Client(base_url=endpoint, api_key=api_key)


def _phoenix_span(raw: Mapping[str, Any]) -> SourceSpan:
    context = raw.get("context") or {}
    attributes = dict(raw.get("attributes") or {})
    return SourceSpan(
        trace_id=str(context["trace_id"]),
        span_id=str(context["span_id"]),
        parent_id=str(raw["parent_id"]) if raw.get("parent_id") else None,
        name=str(raw.get("name") or ""),
        kind=str(raw.get("span_kind") or attributes.get("openinference.span.kind") or "") or None,
        start_time=parse_time(raw["start_time"]),
        end_time=parse_time(raw["end_time"]) if raw.get("end_time") else None,
        attributes=attributes,
        status=str(raw["status_code"]) if raw.get("status_code") else None,
    )


def _http_failure(exc: Exception, endpoint: str, what: str) -> TraceSourceError:
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        body = exc.response.text[:300].replace("\n", " ")
        status = exc.response.status_code
        return TraceSourceError(f"{endpoint}: {what} failed with HTTP {status}: {body}", transient=status >= 500)
    return TraceSourceError(f"{endpoint}: {what} failed: {exc}", transient=True)


def pull_phoenix(
    endpoint: str,
    project: str,
    day: date,
    logs_root: Path,
    mapping: SpanMapping | None = None,
    api_key: str | None = None,
) -> PullResult:
    """Read the day's spans of a Phoenix project and write its log file.

    The SQL spans whose start time is in ``[day, day + 1)`` UTC give the records; the roots of
    their traces are fetched by trace id when they started earlier.

    Raises:
        TraceSourceError: the client is missing, the server cannot be reached, or it refuses
            (unknown project, HTTP error), naming the endpoint.
    """
    import httpx

    mapping = mapping or SpanMapping()
    client = _phoenix_client(endpoint, api_key or os.environ.get("PHOENIX_API_KEY"))
    start, end = day_window(day)
    try:
        raw = client.spans.get_spans(
            project_identifier=project,
            start_time=start,
            end_time=end,
            limit=PHOENIX_SPAN_LIMIT,
            timeout=PHOENIX_PAGE_TIMEOUT_S,
        )
        spans = {(span.trace_id, span.span_id): span for span in map(_phoenix_span, raw)}  # ids unique per trace
        have_root = {s.trace_id for s in spans.values() if s.parent_id is None}
        missing = sorted({s.trace_id for s in spans.values()} - have_root)
        for offset in range(0, len(missing), 50):
            for extra in client.spans.get_spans(
                project_identifier=project,
                trace_ids=missing[offset : offset + 50],
                limit=PHOENIX_SPAN_LIMIT,
                timeout=PHOENIX_PAGE_TIMEOUT_S,
            ):
                span = _phoenix_span(extra)
                spans.setdefault((span.trace_id, span.span_id), span)
    except (httpx.HTTPError, OSError) as exc:
        raise _http_failure(exc, endpoint, f"reading the spans of project {project!r}") from exc
    lines = _day_lines(list(spans.values()), project, mapping, day, "phoenix")
    return _pulled_day(logs_root, day, day_file_name("phoenix", project), lines, len(spans))


def _otlp_files(inputs: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for path in inputs:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in {".json", ".jsonl"} and not p.is_dir())
            odd = [p for p in found if not p.is_file()]
            if odd:  # a FIFO or dangling link named *.json is no trace file to skip quietly
                raise InputError(f"{odd[0]}: not a regular file")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        elif path.exists() or path.is_symlink():
            raise InputError(f"{path}: not a regular file or folder")
        else:
            raise InputError(f"{path}: no such file or folder")
    if not files:
        raise InputError("no OTLP JSON files (*.json, *.jsonl) in " + ", ".join(map(str, inputs)))
    return files


def pull_otlp(
    inputs: Sequence[Path],
    day: date,
    logs_root: Path,
    mapping: SpanMapping | None = None,
    project: str | None = None,
) -> PullResult:
    """Read OTLP JSON trace files (files or folders of ``*.json`` / ``*.jsonl``) and write the
    day's log file ``otlp-<project or 'traces'>.jsonl``. A span read twice with the same content
    (an OTLP exporter or Collector retrying a delivery writes the batch again) counts once.

    Args:
        project: keep only this project's spans (resource ``openinference.project.name`` or
            ``service.name``); it is also the default ``agent_id``. Without it every span is
            read and each project names its own records' ``agent_id`` (``unknown`` without one).

    Raises:
        InputError: a missing input or a file that is not OTLP JSON (naming file and line).
    """
    mapping = mapping or SpanMapping()
    by_project: dict[str, list[SourceSpan]] = {}
    seen: dict[tuple[str, str], SourceSpan] = {}
    for path in _otlp_files(inputs):
        try:
            text = read_config_text(path, OTLP_FILE_MAX_BYTES, "an OTLP trace file")
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from exc
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not a UTF-8 text file (invalid byte at offset {exc.start})") from exc
        try:
            for name, span in read_otlp_json(text, str(path)):
                if project is None or name == project:
                    key = (span.trace_id, span.span_id)
                    if seen.get(key) == span:  # the same span delivered twice (an exporter's retry): once
                        continue
                    seen.setdefault(key, span)  # a different span under the same ids stays: its record is a duplicate
                    by_project.setdefault(name or project or "unknown", []).append(span)
        except OtlpFileError as exc:
            raise InputError(str(exc)) from exc
    lines: list[dict[str, Any]] = []
    start, end = day_window(day)
    on_day = sum(1 for spans in by_project.values() for span in spans if start <= span.start_time < end)
    for name, spans in sorted(by_project.items()):
        lines.extend(_day_lines(spans, name, mapping, day, "otlp"))
    lines.sort(key=lambda line: (line.get("timestamp") or "", line["span_id"]))
    return _pulled_day(logs_root, day, day_file_name("otlp", project), lines, on_day)


def _pulled_day(
    logs_root: Path, day: date, file_name: str, lines: Sequence[Mapping[str, Any]], spans: int
) -> PullResult:
    """Write the day file of a pull, or none for a day without SQL span (removing an earlier pull's)."""
    if not lines:
        path = logs_root / day.isoformat() / file_name
        removed = path.is_file()
        if removed:  # a rerun rewrites the day file: with no line, it is gone, not left as it was
            path.unlink()
        return PullResult(path, spans, 0, 0, written=False, removed=removed)
    path = write_day_file(logs_root, day, file_name.removesuffix(".jsonl"), lines)
    unreadable = sum(1 for line in lines if SOURCE_ERROR_KEY in line)
    return PullResult(path, spans, len(lines) - unreadable, unreadable)


def _results(
    warehouse_path: str | None,
    day: date,
    evaluator_version: str | None,
    source_file_name: str | None = None,
    source_file_prefix: str | None = None,
) -> list[dict[str, Any]]:
    from warehouse import connect, existing_warehouse
    from warehouse.traces import read_span_evaluations

    target = existing_warehouse(warehouse_path, "`stef nightly`")
    with connect(target, read_only=True) as conn:
        return read_span_evaluations(conn, day, evaluator_version, source_file_name, source_file_prefix)


def nothing_to_push(
    warehouse_path: str | None,
    day: date,
    evaluator_version: str | None = None,
    source_kind: str | None = None,
    project: str | None = None,
) -> str:
    """Why a push of ``day`` found no result to send, as one sentence that names what to run.

    Args:
        source_kind: the answers the push chose: those of ``stef pull phoenix`` / ``stef pull otlp``
            (``push phoenix``), or ``None``: every pulled answer (``push otlp``).
        project: with ``source_kind``, only its project's day file.
    """
    from warehouse import connect, existing_warehouse
    from warehouse.traces import pulled_answers_by_file

    target = existing_warehouse(warehouse_path, "`stef nightly`")
    with connect(target, read_only=True) as conn:
        stored = conn.execute("SELECT count(*) FROM stored_days WHERE log_date = ?", [day]).fetchall()[0][0]
        files = pulled_answers_by_file(conn, day, evaluator_version)
    head = f"no result to send for {day}"
    if not stored:
        return f"{head}: no run has stored that day in {target}; run `stef nightly --date {day}` first"
    if not files:
        return (
            f"{head}: none of its answers in {target} came from `stef pull` (a trace's span id), so none has a span "
            "to annotate"
        )
    chosen = files
    if source_kind is not None:
        wanted = day_file_name(source_kind, project)
        chosen = {
            name: counts
            for name, counts in files.items()
            if (name == wanted if project is not None or source_kind == "otlp" else name.startswith(f"{source_kind}-"))
        }
        if not chosen:
            others = ", ".join(f"{name} ({answers})" for name, (answers, _) in sorted(files.items()))
            hint = next(
                (f"; add --source {kind}" for kind in TRACE_SOURCES[1:] if kind != source_kind and
                 any(name.startswith(f"{kind}-") for name in files)),
                "",
            )  # fmt: skip
            what = f"`stef pull {source_kind}`" + ("" if project is None else f" of project {project!r}")
            return f"{head}: no answer of that day was pulled by {what}; its pulled answers are in {others}{hint}"
    answers = sum(count for count, _ in chosen.values())
    version = "" if evaluator_version is None else f" of evaluator version {evaluator_version!r}"
    return f"{head}: its {answers} pulled answers have no evaluation{version} in {target}" + (
        " (omit --evaluator-version for the newest)" if evaluator_version else f"; run `stef nightly --date {day}`"
    )


def push_phoenix(
    endpoint: str,
    warehouse_path: str | None,
    day: date,
    evaluator_version: str | None = None,
    api_key: str | None = None,
    project: str | None = None,
    source_kind: str = "phoenix",
) -> PushResult:
    """Annotate every answer of ``day`` pulled by ``stef pull <source_kind>`` (default
    ``phoenix``: the day's ``phoenix-*.jsonl`` files; with ``project``, only its file) on its
    Phoenix span (name ``stef``, annotator
    ``CODE``, identifier :data:`ANNOTATION_IDENTIFIER`; score Φ, label the verdict or the
    status, explanation the rationale and main evidence; metadata ``p_correct``, filter status,
    band, evaluator version), :data:`ANNOTATION_BATCH` per synchronous request.

    Raises:
        TraceSourceError: the client is missing or the server refuses (naming the endpoint).
    """
    import httpx

    if project is not None or source_kind == "otlp":
        rows = _results(warehouse_path, day, evaluator_version, day_file_name(source_kind, project))
    else:
        rows = _results(warehouse_path, day, evaluator_version, source_file_prefix=f"{source_kind}-")
    client = _phoenix_client(endpoint, api_key or os.environ.get("PHOENIX_API_KEY"))
    annotations: list[dict[str, Any]] = []
    unscored = 0
    for row in rows:
        result = evaluation_result(row)
        unscored += result.score is None
        outcome: dict[str, Any] = {"label": result.label, "explanation": result.explanation}
        if result.score is not None:
            outcome["score"] = result.score
        annotations.append(
            {
                "name": EVALUATION_NAME,
                "annotator_kind": "CODE",
                "span_id": result.span_id,
                "identifier": ANNOTATION_IDENTIFIER,
                "result": outcome,
                "metadata": result.metadata,
            }
        )
    missing: list[str] = []
    try:
        for offset in range(0, len(annotations), ANNOTATION_BATCH):
            batch = annotations[offset : offset + ANNOTATION_BATCH]
            try:
                client.spans.log_span_annotations(span_annotations=batch, sync=True)
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code != 404:
                    raise
                # a span the server no longer has (retention, another store) refuses the whole
                # batch: send its annotations one by one and count the missing spans
                for annotation in batch:
                    try:
                        client.spans.log_span_annotations(span_annotations=[annotation], sync=True)
                    except httpx.HTTPStatusError as single:
                        if single.response.status_code != 404:
                            raise
                        missing.append(annotation["span_id"])
    except (httpx.HTTPError, OSError) as exc:
        raise _http_failure(exc, endpoint, "writing the span annotations") from exc
    versions = {row["evaluator_version"] for row in rows}
    return PushResult(
        len(annotations) - len(missing), unscored, versions.pop() if len(versions) == 1 else None, tuple(missing)
    )


def _otlp_logs_endpoint(endpoint: str) -> str:
    """``http://host:4318`` → ``http://host:4318/v1/logs`` (a full ``…/v1/logs`` URL is kept)."""
    trimmed = endpoint.rstrip("/")
    return trimmed if trimmed.endswith("/v1/logs") else trimmed + "/v1/logs"


def push_otlp(
    endpoint: str,
    warehouse_path: str | None,
    day: date,
    evaluator_version: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> PushResult:
    """Emit one ``gen_ai.evaluation.result`` event per pulled answer of ``day`` over OTLP/HTTP
    (protobuf, the OpenTelemetry SDK's log exporter), in the SQL span's trace context, from a
    resource ``service.name=stef``.

    Raises:
        TraceSourceError: the OpenTelemetry SDK or exporter is missing (extra ``otel``) or the
            receiver refused a batch.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import (
            BatchLogRecordProcessor,
            LogRecordExporter,
            LogRecordExportResult,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
    except ImportError as exc:
        raise TraceSourceError(
            "the OpenTelemetry SDK is not installed: pip install '.[otel]' in the STEF checkout "
            "(opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http)"
        ) from exc

    class _Checked(LogRecordExporter):
        """The OTLP exporter, counting the batches it could not deliver."""

        def __init__(self, inner: Any) -> None:
            self.inner, self.failed = inner, 0

        def export(self, batch: Any) -> Any:
            outcome = self.inner.export(batch)
            if outcome != LogRecordExportResult.SUCCESS:
                self.failed += len(batch)
            return outcome

        def shutdown(self) -> None:
            self.inner.shutdown()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return bool(self.inner.force_flush(timeout_millis))

    rows = _results(warehouse_path, day, evaluator_version)
    url = _otlp_logs_endpoint(endpoint)
    exporter = _Checked(OTLPLogExporter(endpoint=url, headers=dict(headers or {}), timeout=30))
    provider = LoggerProvider(resource=Resource.create({"service.name": "stef"}))
    # a queue for every event: the SDK drops what does not fit (its default holds 2,048)
    provider.add_log_record_processor(
        BatchLogRecordProcessor(exporter, max_queue_size=max(2048, len(rows) + 1), max_export_batch_size=512)
    )
    logger = provider.get_logger("stef")
    unscored = 0
    for row in rows:
        result = evaluation_result(row)
        unscored += result.score is None
        context = None
        if (
            result.trace_id
            and re.fullmatch(r"[0-9a-f]{32}", result.trace_id)
            and re.fullmatch(r"[0-9a-f]{16}", result.span_id)
        ):
            span_context = SpanContext(
                int(result.trace_id, 16),
                int(result.span_id, 16),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
            context = set_span_in_context(NonRecordingSpan(span_context))
        logger.emit(
            event_name=EVALUATION_EVENT,
            body=result.explanation,
            attributes=evaluation_event_attributes(result),
            context=context,
        )
    flushed = provider.force_flush(timeout_millis=max(30_000, 20 * len(rows)))
    provider.shutdown()
    if not flushed:
        raise TraceSourceError(f"{url}: the evaluation events were not all sent in time", transient=True)
    if exporter.failed:
        raise TraceSourceError(
            f"{url}: {exporter.failed} of {len(rows)} evaluation events were not accepted", transient=True
        )
    versions = {row["evaluator_version"] for row in rows}
    return PushResult(len(rows), unscored, versions.pop() if len(versions) == 1 else None)


TRACE_SOURCES = ("files", "phoenix", "otlp")
"""Where the nightly flow gets a day's logs (``--source``): the log folder as it is, or pulled first."""

PUSH_TARGETS = ("phoenix", "otlp")
"""Where the nightly flow can send the day's scores at its end (``--push``)."""


@dataclass(frozen=True, slots=True)
class TraceSource:
    """A trace store the nightly flow pulls the day from (``stef nightly --source``).

    Attributes:
        kind: ``phoenix`` or ``otlp``.
        endpoint: the Phoenix URL (``phoenix``).
        project: the Phoenix project (``phoenix``, required) or the OTLP project filter.
        inputs: OTLP JSON files or folders (``otlp``, required).
        mapping: a ``--mapping`` JSON file.
    """

    kind: str
    endpoint: str | None = None
    project: str | None = None
    inputs: tuple[str, ...] = ()
    mapping: str | None = None

    def check(self) -> None:
        """Raise :class:`InputError` for a missing or unknown setting, before any work."""
        if self.kind not in TRACE_SOURCES[1:]:
            raise InputError(f"unknown log source {self.kind!r}: use one of {', '.join(TRACE_SOURCES)}")
        if self.kind == "phoenix" and (not self.endpoint or not self.project):
            raise InputError("--source phoenix needs --source-endpoint URL and --source-project NAME")
        if self.kind == "otlp" and not self.inputs:
            raise InputError("--source otlp needs --source-input PATH (an OTLP JSON file or folder)")
        read_mapping(None if self.mapping is None else Path(self.mapping))


def pull_source(source: TraceSource, day: date, logs_root: str) -> PullResult:
    """Pull ``day`` from ``source`` into ``<logs_root>/<day>/`` (:func:`pull_phoenix`, :func:`pull_otlp`).

    Raises:
        InputError: ``logs_root`` is not a local folder (a pulled file is written locally), or
            what the pull raises.
    """
    if "://" in logs_root:
        raise InputError(f"--source {source.kind} writes the day's file locally: {logs_root} is not a local folder")
    source.check()
    mapping = read_mapping(None if source.mapping is None else Path(source.mapping))
    if source.kind == "phoenix":
        assert source.endpoint is not None and source.project is not None
        return pull_phoenix(source.endpoint, source.project, day, Path(logs_root), mapping)
    return pull_otlp([Path(p) for p in source.inputs], day, Path(logs_root), mapping, source.project)


def push_day(
    target: str,
    endpoint: str,
    warehouse_path: str,
    day: date,
    evaluator_version: str | None = None,
    project: str | None = None,
    source_kind: str = "phoenix",
) -> PushResult:
    """Send the day's scores to ``target`` (:func:`push_phoenix` or :func:`push_otlp`).

    Raises:
        InputError: an unknown target; and what the push raises.
    """
    if target == "phoenix":
        return push_phoenix(endpoint, warehouse_path, day, evaluator_version, project=project, source_kind=source_kind)
    if target == "otlp":
        return push_otlp(endpoint, warehouse_path, day, evaluator_version)
    raise InputError(f"unknown push target {target!r}: use one of {', '.join(PUSH_TARGETS)}")


def push_target(push: str | None, endpoint: str | None) -> tuple[str, str] | None:
    """``(target, endpoint)`` of ``--push``, checked before any work; ``None`` without it."""
    if push is None:
        return None
    if push not in PUSH_TARGETS:
        raise InputError(f"unknown push target {push!r}: use one of {', '.join(PUSH_TARGETS)}")
    if not endpoint:
        raise InputError(f"--push {push} needs --push-endpoint URL")
    return push, endpoint
