"""The ``stef`` command line: the Typer app with every command group added (DESIGN.md §8).

The CLI is the outermost layer. Importing it loads only typer, rich and the pure ``stef``
package: Prefect, DuckDB, litellm and Great Expectations are imported inside the commands that
need them, so ``stef evaluate`` with the symbolic judge never loads any of them.

Every error STEF raises on purpose (:class:`stef.errors.StefError`) is printed as one line on
stderr and ends the command with exit code 2, without a traceback (:func:`flows.cli.common.user_errors`);
so is every usage error (:class:`flows.cli.common.OneLineUsageErrors`).

Imports point one way: this module -> the command modules -> :mod:`flows.cli.common`.
"""

from __future__ import annotations

import typer

from flows.cli import bench, campaign, catalog, evaluate, monitoring, nightly, review, traces
from flows.cli.common import OneLineUsageErrors

app = typer.Typer(
    cls=OneLineUsageErrors,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="STEF: reference-free quality monitor for Text-to-SQL agents.",
)


def version() -> None:
    """Print the evaluator version."""
    from stef.models import EVALUATOR_VERSION

    typer.echo(EVALUATOR_VERSION)


# Scoring and the nightly flow (flows/cli/evaluate.py, nightly.py, bench.py), in the order of `stef --help`.
app.command("evaluate")(evaluate.evaluate)
app.command("nightly")(nightly.nightly)
app.command("demo")(nightly.demo)
app.command("bench-judge")(bench.bench_judge)
app.command("version")(version)

# Monitoring commands (drift, backfill, report, serve).
monitoring.register(app)

# The reference-based campaign commands (`stef campaign ...`, DESIGN.md §7).
campaign.register(app)

# Database schemas for --schema-dir (`stef catalog ...`).
catalog.register(app)

# Reviewer labels: sample, import, agreement, deployment calibrator (`stef review ...`).
review.register(app)
# Trace stores: logs in from Phoenix / OTLP files, scores out (`stef pull ...`, `stef push ...`).
traces.register(app)


if __name__ == "__main__":
    app()
