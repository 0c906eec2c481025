"""``stef pull ...`` / ``stef push ...``: logs from trace stores, scores back to them (issue 19).

``pull phoenix`` reads a day's spans of an Arize Phoenix project (the official client) and
``pull otlp`` reads OTLP JSON trace files; both write ``<logs-root>/<day>/<source>-<name>.jsonl``
for ``stef nightly``. ``push phoenix`` writes one ``stef`` span annotation per scored SQL span;
``push otlp`` emits the OpenTelemetry GenAI evaluation event per SQL span over OTLP/HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from flows.cli.common import DAY_METAVAR, CliError, console, day_option, user_errors
from stef.display import one_line, quoted

pull_app = typer.Typer(no_args_is_help=True, help="Write a day's log file from a trace store (Phoenix, OTLP JSON).")
push_app = typer.Typer(no_args_is_help=True, help="Send a day's scores back to the trace store (Phoenix, OTLP).")

_DAY = typer.Option(
    "--date", parser=day_option, metavar=DAY_METAVAR, help="The day (UTC): spans that started in [D, D+1)."
)
_LOGS_ROOT = typer.Option("--logs-root", help="Logs root: the file goes to <logs-root>/<day>/.")
_MAPPING = typer.Option(
    "--mapping", help="JSON file: which spans and attributes hold what (`stef pull json-schema` prints its schema)."
)
_WAREHOUSE = typer.Option("--warehouse", help="DuckDB file (default: $STEF_WAREHOUSE, else ./stef.duckdb).")
_VERSION = typer.Option(
    "--evaluator-version", help="Push this evaluator version's scores (default: the newest per answer)."
)
_API_KEY = typer.Option("--api-key", help="Phoenix API key (default: $PHOENIX_API_KEY).")


SourceOption = Annotated[
    str,
    typer.Option(
        "--source",
        metavar="files|phoenix|otlp",
        help="files: the day folder as it is; phoenix / otlp: pull the day's spans into it first (`stef pull`).",
    ),
]
SourceEndpointOption = Annotated[
    str | None, typer.Option("--source-endpoint", metavar="URL", help="Phoenix server URL (--source phoenix).")
]
SourceProjectOption = Annotated[
    str | None,
    typer.Option("--source-project", help="Phoenix project (--source phoenix); project filter for --source otlp."),
]
SourceInputOption = Annotated[
    list[str] | None,
    typer.Option("--source-input", metavar="PATH", help="OTLP JSON file or folder (--source otlp); repeatable."),
]
SourceMappingOption = Annotated[
    str | None, typer.Option("--source-mapping", metavar="FILE", help="Span mapping JSON (`stef pull json-schema`).")
]
PushOption = Annotated[
    str | None,
    typer.Option("--push", metavar="phoenix|otlp", help="Send each day's scores there at the end (`stef push`)."),
]
PushEndpointOption = Annotated[
    str | None,
    typer.Option("--push-endpoint", metavar="URL", help="Receiver of --push (default for phoenix: --source-endpoint)."),
]


def check_trace_options(
    source: str,
    source_endpoint: str | None,
    source_project: str | None,
    source_input: list[str] | None,
    source_mapping: str | None,
    push: str | None,
    push_endpoint: str | None,
) -> None:
    """Check ``--source …`` and ``--push …`` of ``stef nightly`` / ``stef backfill`` before Prefect starts.

    Raises:
        InputError: a missing or unknown setting.
    """
    if source == "files" and push is None and push_endpoint is None:
        return  # nothing to check (and Prefect, which tasks.traces loads, is not imported yet)
    from tasks.traces import TraceSource, push_target

    if source != "files":
        TraceSource(source, source_endpoint, source_project, tuple(source_input or ()), source_mapping).check()
    push_target(push, push_endpoint or (source_endpoint if push == "phoenix" else None))


def register(app: typer.Typer) -> None:
    """Add the ``pull`` and ``push`` command groups to ``app``."""
    app.add_typer(pull_app, name="pull")
    app.add_typer(push_app, name="push")


def _pulled(result: object, day: date, where: str) -> None:
    """Print what a pull wrote; a day without SQL span is an error naming the day and ``where`` the
    spans were read (nothing written: ``stef nightly`` would find no logs for it either)."""
    from tasks.traces import PullResult

    assert isinstance(result, PullResult)
    if not result.written:
        removed = f"; {one_line(str(result.path))} of an earlier pull was removed" if result.removed else ""
        if not result.spans:
            raise CliError(f"no span started on {day} (UTC) in {where}: check --date; no day file written{removed}")
        raise CliError(
            f"no SQL span among the {result.spans} spans of {day} (UTC) in {where}: check the span names and "
            f"attributes (`--mapping`, README 'Trace stores'); no day file written{removed}"
        )
    console.print(
        Text(
            f"{result.path}: {result.records} records from {result.spans} spans"
            + (
                f"; {result.unreadable} SQL spans the mapping cannot read (quarantined by the nightly)"
                if result.unreadable
                else ""
            )
        ),
        soft_wrap=True,
    )


@pull_app.command("phoenix")
def pull_phoenix(
    endpoint: Annotated[str, typer.Option("--endpoint", help="Phoenix server URL, e.g. http://127.0.0.1:6006.")],
    project: Annotated[str, typer.Option("--project", help="Phoenix project name (the default agent_id).")],
    day: Annotated[date, _DAY],
    logs_root: Annotated[Path, _LOGS_ROOT] = Path("logs"),
    mapping: Annotated[Path | None, _MAPPING] = None,
    api_key: Annotated[str | None, _API_KEY] = None,
) -> None:
    """Write <logs-root>/<day>/phoenix-<project>.jsonl from the day's spans of a Phoenix project."""
    from tasks.traces import pull_phoenix as pull
    from tasks.traces import read_mapping

    with user_errors():
        pulled = pull(endpoint, project, day, logs_root, read_mapping(mapping), api_key)
        _pulled(pulled, day, f"Phoenix project {quoted(project)} of {one_line(endpoint)}")


@pull_app.command("otlp")
def pull_otlp(
    inputs: Annotated[
        list[Path], typer.Option("--input", help="OTLP JSON trace file or folder (*.json, *.jsonl); repeatable.")
    ],
    day: Annotated[date, _DAY],
    logs_root: Annotated[Path, _LOGS_ROOT] = Path("logs"),
    mapping: Annotated[Path | None, _MAPPING] = None,
    project: Annotated[
        str | None,
        typer.Option(
            "--project", help="Only this project's spans (resource openinference.project.name or service.name)."
        ),
    ] = None,
) -> None:
    """Write <logs-root>/<day>/otlp-<project or traces>.jsonl from OTLP JSON trace files."""
    from tasks.traces import pull_otlp as pull
    from tasks.traces import read_mapping

    with user_errors():
        pulled = pull(inputs, day, logs_root, read_mapping(mapping), project)
        of_project = "" if project is None else f" (project {quoted(project)})"
        _pulled(pulled, day, ", ".join(one_line(str(path)) for path in inputs) + of_project)


@pull_app.command("json-schema")
def mapping_json_schema() -> None:
    """Print the JSON Schema of a --mapping file."""
    from stef.traces.spans import SpanMapping

    typer.echo(json.dumps(SpanMapping.model_json_schema(), indent=2))


def _pushed(result: object, where: str, nothing: Callable[[], str]) -> None:
    """Print what a push sent; nothing to send is an error saying why (``nothing()``, e.g. the day
    is not stored yet: run `stef nightly` first), as `stef export` of a window without evaluations."""
    from tasks.traces import PushResult

    assert isinstance(result, PushResult)
    if not result.results and not result.missing_spans:
        raise CliError(nothing())
    version = f" (evaluator {one_line(result.evaluator_version)})" if result.evaluator_version else ""
    missing = (
        f"; {len(result.missing_spans)} spans not found on the server, not annotated: "
        + ", ".join(result.missing_spans[:5])
        + (" …" if len(result.missing_spans) > 5 else "")
        if result.missing_spans
        else ""
    )
    console.print(
        Text(f"{where}: {result.results} results sent, {result.unscored} of them unscored{version}{missing}"),
        soft_wrap=True,
    )


@push_app.command("phoenix")
def push_phoenix(
    endpoint: Annotated[str, typer.Option("--endpoint", help="Phoenix server URL, e.g. http://127.0.0.1:6006.")],
    day: Annotated[date, _DAY],
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            help="Only the answers pulled from this project (default: every phoenix-*.jsonl answer of the day; "
            "with --source otlp, otlp-traces.jsonl).",
        ),
    ] = None,
    source: Annotated[
        str,
        typer.Option(
            "--source",
            metavar="phoenix|otlp",
            help="Whose answers: pulled by `stef pull phoenix`, or by `stef pull otlp` from the OTLP files of "
            "spans the agent also sent to Phoenix (as `stef nightly --source otlp --push phoenix`).",
        ),
    ] = "phoenix",
    warehouse: Annotated[str | None, _WAREHOUSE] = None,
    evaluator_version: Annotated[str | None, _VERSION] = None,
    api_key: Annotated[str | None, _API_KEY] = None,
) -> None:
    """Annotate each pulled SQL span of the day with STEF's score (annotation `stef`; a rerun replaces it)."""
    from tasks.traces import TRACE_SOURCES, nothing_to_push
    from tasks.traces import push_phoenix as push

    with user_errors():
        if source not in TRACE_SOURCES[1:]:
            raise CliError(f"--source {quoted(source)}: use phoenix or otlp (the `stef pull` of the answers)")
        _pushed(
            push(endpoint, warehouse, day, evaluator_version, api_key, project=project, source_kind=source),
            endpoint,
            lambda: nothing_to_push(warehouse, day, evaluator_version, source, project),
        )


@push_app.command("otlp")
def push_otlp(
    endpoint: Annotated[str, typer.Option("--endpoint", help="OTLP/HTTP receiver, e.g. http://127.0.0.1:4318.")],
    day: Annotated[date, _DAY],
    warehouse: Annotated[str | None, _WAREHOUSE] = None,
    evaluator_version: Annotated[str | None, _VERSION] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", help="HTTP header KEY=VALUE for the receiver; repeatable.")
    ] = None,
) -> None:
    """Emit the OpenTelemetry GenAI evaluation event (gen_ai.evaluation.result) of each pulled SQL span of the day."""
    from tasks.traces import nothing_to_push
    from tasks.traces import push_otlp as push

    with user_errors():
        headers: dict[str, str] = {}
        for item in header or []:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise CliError(f"--header {item!r}: expected KEY=VALUE")
            headers[key.strip()] = value
        _pushed(
            push(endpoint, warehouse, day, evaluator_version, headers),
            endpoint,
            lambda: nothing_to_push(warehouse, day, evaluator_version),
        )
