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

import atexit
import logging
import os
import stat
import sys
import threading

import typer

from flows.cli import bench, campaign, catalog, evaluate, monitoring, nightly, review, traces
from flows.cli.common import BROKEN_PIPE_EXIT, OneLineUsageErrors, reflow_command_help

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
# Docstrings are wrapped at 100 columns; the help shows each paragraph as one line the terminal wraps.
reflow_command_help(app)


def exit_code(code: object) -> int:
    """The process exit code of ``SystemExit(code)``, as Python computes it (a message is printed on stderr, code 1).

    >>> exit_code(None), exit_code(2)
    (0, 2)
    """
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def stdout_is_pipe() -> bool:
    """Whether standard output (descriptor 1) is a pipe (``False`` when it is closed or unknown): only
    a pipe's reader can close it (a closed standard error makes rich point descriptor 1 at
    /dev/null too, and a command writing to a file keeps its exit code)."""
    try:
        return stat.S_ISFIFO(os.fstat(1).st_mode)
    except OSError:
        return False


def stdout_is_null() -> bool:
    """Whether standard output (descriptor 1) is ``/dev/null`` (``False`` when it is closed or unknown)."""
    try:
        output, null = os.fstat(1), os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(output.st_mode) and output.st_rdev == null.st_rdev


def main() -> None:
    """The ``stef`` script: run the app, then end the process without tearing it down object by object.

    When a command has returned, its files are closed, its warehouse connections committed and
    its logs sent to Prefect; what Python's exit still does after its exit handlers is to free
    every module and object one at a time, about a second after a nightly run (Prefect, Great
    Expectations, pandas, the pipeline are loaded). So the non-daemon threads are joined and the
    exit handlers run as at a normal exit, stdout and stderr are flushed, and the process ends
    with :func:`os._exit`. An exception other than ``SystemExit`` (Ctrl-C) takes Python's normal path.
    """
    # sqlglot warns on stderr, quoting the SQL, for every statement it parses as a raw Command
    # (``EXPLAIN …``): STEF gives such answers their own status, and an agent's SQL is user data
    # that never reaches the terminal unescaped. Its errors still show.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    stdout_was_pipe = stdout_is_pipe()
    try:
        app(prog_name="stef")
        code = 0
    except SystemExit as stop:
        code = exit_code(stop.code)
        if code == 1 and stdout_was_pipe and stdout_is_null():
            # rich's console of Typer's help (``stef --help | true``) met a closed reader: it points
            # standard output at /dev/null and exits 1 (``Console.on_broken_pipe``); STEF's own
            # output ends such a command with 141 (``OneLineUsageErrors.invoke``), so does the help
            code = BROKEN_PIPE_EXIT
    join_threads = getattr(
        threading, "_shutdown", None
    )  # what Py_Finalize runs first: non-daemon threads, threading atexit
    if join_threads is not None:
        join_threads()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be written
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
