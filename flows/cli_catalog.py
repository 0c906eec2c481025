"""``stef catalog ...``: the database schemas STEF can check answers against (issue 14).

``stef catalog json-schema`` prints the JSON Schema of the ``<app_id>.json`` catalog format;
``stef catalog show FILE`` reads one schema file (DDL or catalog) the way ``--schema-dir`` does
and prints its tables, so a team can check its file before the nightly run uses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from stef.display import one_line, shorten

catalog_app = typer.Typer(no_args_is_help=True, help="Database schemas (--schema-dir): the catalog format, checking a schema file.")


def register(app: typer.Typer) -> None:
    """Add the ``catalog`` command group to ``app``."""
    app.add_typer(catalog_app, name="catalog")


@catalog_app.command("json-schema")
def json_schema() -> None:
    """Print the JSON Schema of STEF's catalog format (DIR/<app_id>.json of --schema-dir)."""
    from stef.schema import catalog_json_schema

    typer.echo(json.dumps(catalog_json_schema(), indent=2))


@catalog_app.command("show")
def show(
    schema_file: Annotated[Path, typer.Argument(metavar="FILE", help="A DDL file (.sql) or a catalog (.json).")],
    dialect: Annotated[str, typer.Option("--dialect", help="sqlglot dialect of the DDL.")] = "generic",
) -> None:
    """Read one schema file as --schema-dir would and print its tables, keys and described columns."""
    from flows.cli import _user_errors, console, validate_dialect
    from stef.schema import load_schema_file

    with _user_errors():
        resolved = validate_dialect(dialect)
        schema = load_schema_file(schema_file, "" if resolved == "generic" else resolved)
    table = Table(title=Text(f"{one_line(schema_file)}: {len(schema.tables)} tables, {len(schema.key_pairs)} declared join-key pairs"),
                  box=box.SIMPLE_HEAD, title_justify="left")
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
