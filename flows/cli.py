"""The ``stef`` command line (stub, being written)."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, help="STEF: quality monitor for Text-to-SQL agents.")


@app.command()
def version() -> None:
    """Print the evaluator version."""
    from stef.models import EVALUATOR_VERSION

    typer.echo(EVALUATOR_VERSION)
