"""``stef catalog ...``: the database schemas STEF can check answers against (issue 14).

``stef catalog json-schema`` prints the JSON Schema of the ``<app_id>.json`` catalog format;
``stef catalog show FILE`` reads one schema file (DDL or catalog) the way ``--schema-dir`` does
and prints its tables, so a team can check its file before the nightly run uses it;
``stef catalog learn`` learns observed catalogs from logs or a warehouse (``--observed-catalog``).
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from flows.cli.common import (
    DAY_METAVAR,
    CliError,
    check_day_range,
    check_not_overwriting,
    console,
    day_option,
    output_file,
    user_errors,
    validate_dialect,
)
from stef.display import one_line, shorten

catalog_app = typer.Typer(
    no_args_is_help=True, help="Database schemas (--schema-dir) and observed catalogs (--observed-catalog)."
)


def register(app: typer.Typer) -> None:
    """Add the ``catalog`` command group to ``app``."""
    app.add_typer(catalog_app, name="catalog")


@catalog_app.command("json-schema")
def json_schema() -> None:
    """Print the JSON Schema of STEF's catalog format (DIR/<app_id>.json of --schema-dir)."""
    from stef.pipeline.schema import catalog_json_schema

    typer.echo(json.dumps(catalog_json_schema(), indent=2))


@catalog_app.command("show")
def show(
    schema_file: Annotated[Path, typer.Argument(metavar="FILE", help="A DDL file (.sql) or a catalog (.json).")],
    dialect: Annotated[str, typer.Option("--dialect", help="sqlglot dialect of the DDL.")] = "generic",
) -> None:
    """Read one schema file as --schema-dir would and print its tables, keys and described columns."""
    from stef.pipeline.schema_book import load_schema_file

    with user_errors():
        resolved = validate_dialect(dialect)
        schema = load_schema_file(schema_file, "" if resolved == "generic" else resolved)
    table = Table(
        title=Text(
            f"{one_line(schema_file)}: {len(schema.tables)} tables, {len(schema.key_pairs)} declared join-key pairs"
        ),
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    for header in ("table", "columns", "primary key", "foreign keys", "described"):
        table.add_column(header, justify="right" if header in ("columns", "described") else "left", overflow="fold")
    for entry in schema.tables:
        table.add_row(
            Text(shorten(entry.name)),
            str(len(entry.columns)) if entry.columns_known else "?",
            Text(", ".join(entry.primary_key)),
            Text("; ".join(f"{', '.join(k.columns)} -> {k.ref_table}" for k in entry.foreign_keys)),
            str(sum(1 for c in entry.columns if c.description)),
        )
    console.print(table)


@catalog_app.command("learn")
def learn(
    inputs: Annotated[
        list[Path] | None,
        typer.Argument(metavar="[LOGS]...", help="JSONL log files or folders of *.jsonl (searched recursively)."),
    ] = None,
    out_name: Annotated[
        str, typer.Option("--out", "-o", metavar="FILE", help="The observed catalog file to write (JSON).")
    ] = "observed-catalog.json",
    warehouse: Annotated[
        str | None,
        typer.Option("--warehouse", help="Learn from the answers stored in this warehouse instead of log files."),
    ] = None,
    start: Annotated[
        date | None,
        typer.Option(
            "--start",
            parser=day_option,
            metavar=DAY_METAVAR,
            help="With --warehouse: first day (default: 30 days before --end).",
        ),
    ] = None,
    end: Annotated[
        date | None,
        typer.Option(
            "--end",
            parser=day_option,
            metavar=DAY_METAVAR,
            help="With --warehouse: last day (default: the newest stored day).",
        ),
    ] = None,
) -> None:
    """Learn each app's observed catalog (tables, columns, join pairs, literal values, with counts)
    from its answers' SQL, for --observed-catalog."""
    from stef.models import MIN_QUERIES
    from stef.pipeline.observed import learn_catalogs

    with user_errors():
        out = output_file(out_name, "observed-catalog.json")
        if warehouse is not None:
            if inputs:
                raise CliError("give log files or --warehouse, not both")
            check_day_range(start, end, "catalog learn")
            from warehouse import connect, existing_warehouse
            from warehouse.observed import read_answers_for_learning

            target = existing_warehouse(warehouse)
            check_not_overwriting(out, warehouse=target)
            with connect(target, read_only=True) as conn:
                records, source = read_answers_for_learning(conn, start, end)
        else:
            if not inputs:
                raise CliError("give the log files (or folders) to learn from, or --warehouse")
            check_not_overwriting(out, log_file=_log_files(inputs))
            records, source = _log_records(inputs), ", ".join(str(p) for p in inputs)
        book = learn_catalogs(records, source)
        if not book.catalogs:  # an empty catalog would make every later run "+observed" with nothing to check
            raise CliError(
                f"nothing to learn from {one_line(source)}: no answer with an app_id and SQL"
                + ("" if warehouse is None else " (--start/--end choose other days)")
                + f"; {one_line(out)} is not written"
            )
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(book.to_json(), encoding="utf-8")
        except OSError as exc:
            raise CliError(f"{out}: cannot write the observed catalog ({exc.strerror or exc})") from exc
    table = Table(
        title=Text(f"Observed catalog {one_line(out)} (learned from {one_line(source)})"),
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    for header in ("app", "answers", "tables", "columns", "join pairs", "used"):
        table.add_column(header, justify="left" if header in ("app", "used") else "right")
    for app_id, catalog in book.catalogs.items():
        table.add_row(
            Text(shorten(app_id)),
            str(catalog.queries),
            str(len(catalog.tables)),
            str(len(catalog.columns)),
            str(len(catalog.joins)),
            "yes" if catalog.queries >= MIN_QUERIES else f"no (fewer than {MIN_QUERIES} answers)",
        )
    console.print(table)


def _log_files(inputs: list[Path]) -> list[Path]:
    """The files :func:`_log_records` may read: each input file, every ``*.jsonl`` under an input folder."""
    return [file for path in inputs for file in ([path] if not path.is_dir() else sorted(path.rglob("*.jsonl")))]


def _log_records(inputs: list[Path]) -> list[dict[str, object]]:
    """The valid records of JSONL log files / folders (read as ``stef evaluate`` reads them)."""
    from stef.errors import InputError
    from stef.logs import log_files, read_log_file

    records: list[dict[str, object]] = []
    for path in inputs:
        if not path.exists():
            raise InputError(f"{path}: no such file or directory")
        folders = [path] if path.is_file() else sorted({p.parent for p in path.rglob("*.jsonl")})
        for folder in folders:
            for file in log_files(folder):
                try:
                    records.extend(line.record.model_dump() for line in read_log_file(file) if line.record is not None)
                except OSError as exc:
                    raise InputError(f"{file}: cannot read ({exc.strerror or exc})") from exc
    return records
