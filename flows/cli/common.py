"""What every ``stef`` command shares: the consoles, the one-line errors and exit code 2, the
validation of ``--dialect`` and ``--judge``, and small formatters.

The command modules (:mod:`flows.cli.evaluate`, :mod:`flows.cli.nightly`, :mod:`flows.cli.bench`,
:mod:`flows.cli.monitoring`, :mod:`flows.cli.campaign`, :mod:`flows.cli.catalog`) import from here;
nothing here imports them. Like the CLI, this module loads only typer, rich and the pure ``stef`` package.
"""

from __future__ import annotations

import errno
import inspect
import logging
import os
import re
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from stef import stop_signals
from stef.days import DAY_FORM, parse_day
from stef.display import one_line, quoted, visible_lines
from stef.errors import InputError, StefError, UnknownDialectError
from stef.llm import request_stop

try:  # Typer 0.2x vendors click as typer._click; older Typer uses click itself
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - older Typer
    from click.exceptions import ClickException, UsageError  # type: ignore[assignment]

if TYPE_CHECKING:
    from flows.nightly import NightlySummary
    from stef.llm.settings import JudgeSettings

EXIT_USAGE = 2
"""Exit code of every error a person can fix (bad option, bad rule file, missing input)."""

JUDGES = ("symbolic", "MODEL", "hybrid:MODEL")
"""Forms of ``--judge``: the deterministic judge, any litellm model string, or hybrid (STEF paper §2.D)."""
JUDGE_HELP = (
    "Judge that gives the semantic verdict: 'symbolic' (default, deterministic), a litellm model string "
    "(openai/gpt-4o-mini, anthropic/..., ollama/..., hosted_vllm/...), or 'hybrid:MODEL' (the model only "
    "for the records the symbolic judge hedges on: LIKELY_CORRECT or POTENTIALLY_INCORRECT, p_correct 0.35-0.65)."
)
SCHEMA_DIR_HELP = (
    "Folder of database schemas, one per app: <app_id>.sql (DDL in the app's dialect) or <app_id>.json "
    "(catalog; `stef catalog json-schema` prints its format). Apps with one are also checked against it."
)
OBSERVED_HELP = (
    "Observed catalog file (`stef catalog learn`): apps without a schema are also compared with what their "
    "earlier answers used (tables, columns, join pairs)."
)
BATCH_SIZE_HELP = (
    "Records per evaluation task (default: with the pool runner and the symbolic judge, as few even tasks of at "
    "most 1,000 records as fit, a multiple of the scoring processes on days of at least 1,000 records per process, "
    "one task up to 500 records; otherwise 500)."
)
BatchSizeOption = Annotated[int | None, typer.Option("--batch-size", min=1, show_default=False, help=BATCH_SIZE_HELP)]
"""``--batch-size`` of ``stef nightly`` and ``stef backfill`` (``None``: the flow chooses)."""
API_BASE_HELP = (
    "OpenAI-compatible endpoint for the model (default: $STEF_LLM_API_BASE). Keys are read only from the environment."
)
BREAKER_HELP = (
    "Circuit breaker: after this many consecutive model timeouts/connection failures, the rest of the run gets the "
    "symbolic verdict without calling the model, and each such record says so (0: never)."
)
ApiBaseOption = Annotated[str | None, typer.Option("--api-base", metavar="URL", help=API_BASE_HELP)]
"""``--api-base`` of ``stef nightly`` and ``stef backfill`` (``None``: ``$STEF_LLM_API_BASE``)."""
ConcurrencyOption = Annotated[
    int,
    typer.Option(
        "--concurrency",
        min=1,
        help="Model requests in flight for the whole run (its batches share them; a backfill runs its days one by one).",
    ),
]
"""``--concurrency`` of ``stef nightly`` and ``stef backfill`` (default 8)."""
TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        min=0.001,
        help="Seconds per model request (then retried: 429/5xx/timeouts, exponential backoff).",
    ),
]
"""``--timeout`` of ``stef nightly`` and ``stef backfill`` (default 60.0)."""
BreakerFailuresOption = Annotated[int, typer.Option("--breaker-failures", min=0, help=BREAKER_HELP)]
"""``--breaker-failures`` of ``stef nightly`` and ``stef backfill`` (default 5)."""
PIPE_WIDTH = 200
"""Width of the consoles when the output is not a terminal (cron logs, CI, ``| tee``) and ``$COLUMNS`` is
unset: rich's default of 80 would cut the tables; a terminal keeps its own width."""


def _width() -> int | None:
    if os.environ.get("COLUMNS") or sys.stdout.isatty():
        return None  # rich reads $COLUMNS or the terminal
    return PIPE_WIDTH


def suggested_program() -> str:
    """How a follow-up command that ``stef`` prints should call ``stef``: ``stef`` when that name on
    ``$PATH`` is the running program (an activated venv, a tool install), or when the program was
    not started as a ``stef`` script by path (``python -m flows.cli``, tests); else the path it was
    started by, shell-quoted: ``.venv/bin/stef`` after the README's install with the venv not activated.
    """
    started = sys.argv[0] if sys.argv else ""
    if Path(started).name != "stef" or os.sep not in started:
        return "stef"
    on_path = shutil.which("stef")
    if on_path is not None and Path(on_path).resolve() == Path(started).resolve():
        return "stef"
    return shlex.quote(started)


class _StdoutConsole(Console):
    """A rich console of standard output whose closed reader ends the command as :meth:`OneLineUsageErrors.invoke`
    does (rich's own handling exits 1)."""

    def on_broken_pipe(self) -> None:
        """Stop writing and end the command quietly with :data:`BROKEN_PIPE_EXIT`."""
        self.quiet = True
        discard_stdout()
        raise SystemExit(BROKEN_PIPE_EXIT)


console = _StdoutConsole(markup=False, emoji=False, highlight=False, width=_width())
"""Standard output. Markup and emoji codes are off: a ``[/x]``, ``[link=…]`` or ``:smile:`` in a
run id, an agent id, a version, a reason or a file name prints as those characters (a ``str``
table cell is rendered with the console's markup setting). Styles are set on :class:`rich.text.Text`."""
err_console = Console(stderr=True, markup=False, emoji=False, highlight=False, width=_width())
"""Standard error (errors, warnings, progress), with the settings of :data:`console`."""


class CliError(StefError):
    """A command-line problem outside the STEF method (e.g. an output file that cannot be written)."""


def day_option(value: str) -> date:
    """The ``parser`` of every option that takes a day (``--date``, ``--start``, ``--end``): ISO
    ``YYYY-MM-DD`` only (:func:`stef.days.parse_day`), so ``2026-12-1`` is a usage error naming the
    value instead of the day 2026-12-01.

    Raises:
        ValueError: not a day of that form (Typer prints it as the option's invalid value).

    >>> day_option("2026-12-01")
    datetime.date(2026, 12, 1)
    """
    try:
        return parse_day(value)
    except InputError as exc:
        raise ValueError(f"{exc}.") from exc


DAY_METAVAR = DAY_FORM
"""The ``metavar`` of the day options in ``--help``."""


def check_day_range(start: date | None, end: date | None, what: str) -> None:
    """Refuse ``--end`` before ``--start`` (when both are given), before anything is opened.

    Raises:
        CliError: ``<what> end <end> is before its start <start>``.

    >>> check_day_range(date(2026, 12, 5), date(2026, 12, 1), "export")
    Traceback (most recent call last):
    ...
    flows.cli.common.CliError: export end 2026-12-01 is before its start 2026-12-05
    """
    if start is not None and end is not None and end < start:
        raise CliError(f"{what} end {end} is before its start {start}")


MAX_WORKERS_PER_CORE = 4
"""``--workers`` may ask for at most this many scoring processes per usable core."""
MAX_THREADS_PER_CORE = 32
"""... and this many threads per usable core with ``--task-runner thread`` (a model judge waits on I/O)."""


SPREADSHEET_SUFFIXES = frozenset({".xlsx", ".xlsm", ".xls", ".ods", ".numbers"})
"""``--out`` suffixes of spreadsheet workbooks, which ``stef export`` and ``stef review sample`` do not
write: a CSV file under such a name is refused by the spreadsheet ("file format or extension is not
valid")."""


def check_evaluator_version(target: Path, evaluator_version: str | None, read_only: bool = True) -> None:
    """Refuse an ``--evaluator-version`` of which ``target`` stores no evaluation (a typo), naming the
    stored versions; ``None`` (the default: the newest stored) passes. ``read_only=False`` opens the
    warehouse as the command then does (a command that writes migrates an older warehouse; a
    read-only open of one is refused).

    Raises:
        CliError: no evaluation of ``evaluator_version`` is stored.
        WarehouseError: the warehouse cannot be read.
    """
    if evaluator_version is None:
        return
    from warehouse import connect
    from warehouse.monitoring import stored_evaluator_versions

    with connect(target, read_only=read_only, existing_tables=True) as conn:
        versions = stored_evaluator_versions(conn)
    if evaluator_version not in versions:
        shown = ", ".join(one_line(version) for version in versions[:6]) + (" …" if len(versions) > 6 else "")
        raise CliError(
            f"--evaluator-version {quoted(evaluator_version)}: no evaluation of that version is stored in "
            f"{one_line(target)} (stored, newest first: {shown or 'none'})"
        )


STDOUT_NAME = "-"
"""The ``--out`` value that means standard output (``stef evaluate … --out - | jq``), by convention."""


def output_file(name: str, example: str, *, stdout: bool = False) -> Path:
    """An ``--out`` file name, checked before any work.

    Args:
        name: the option's value as given (a ``str`` keeps a trailing ``/``, which :class:`Path` drops).
        example: a file name for the message (``scores.jsonl``).
        stdout: whether the command can write to standard output: then ``-`` (:data:`STDOUT_NAME`)
            is returned as ``Path("-")`` for the caller to treat as stdout; otherwise ``-`` is refused
            (it would write a file named ``-``; ``./-`` still names one).

    Raises:
        CliError: ``name`` is empty, ends in ``/`` (a folder: as a :class:`Path` it would name a
            file of the folder's name, and that file would be written), or is ``-`` without ``stdout``.

    >>> output_file("scores/day.jsonl", "scores.jsonl")
    PosixPath('scores/day.jsonl')
    >>> output_file("scores/", "scores.jsonl")
    Traceback (most recent call last):
    ...
    flows.cli.common.CliError: scores/: is a folder; give --out a file name (e.g. scores/scores.jsonl)
    >>> output_file("-", "scores.jsonl", stdout=True)
    PosixPath('-')
    """
    if not name:
        raise CliError(f"--out is empty; give a file name, e.g. {example}")
    if name == STDOUT_NAME and not stdout:
        raise CliError(f"--out -: this command writes a file, not standard output; give a file name, e.g. {example}")
    if name.endswith(("/", os.sep)):
        raise CliError(f"{one_line(name)}: is a folder; give --out a file name (e.g. {one_line(name)}{example})")
    return Path(name)


def same_file(first: str | Path, second: str | Path) -> bool:
    """Whether two paths name one file: the same device and inode when both exist (hard and
    symbolic links, ``./`` spellings), else the same absolute path with symbolic links resolved.

    >>> same_file("a/../w.duckdb", "w.duckdb"), same_file("w.duckdb", "x.duckdb")
    (True, False)
    """
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet)
        return Path(first).resolve() == Path(second).resolve()


def schema_files(schema_dir: str | Path | None) -> list[Path]:
    """The schema files a run with ``--schema-dir`` may read (``*.sql`` and ``*.json`` of the folder)."""
    if schema_dir is None or not Path(schema_dir).is_dir():
        return []
    return sorted(path for path in Path(schema_dir).iterdir() if path.suffix.lower() in (".sql", ".json"))


def check_not_overwriting(out: Path, **read: str | Path | Sequence[Path] | None) -> None:
    """Refuse an ``--out`` that names a file the command reads: the warehouse, a log file, the
    judge cache. Writing it replaced the warehouse with a CSV (``stef export --out w.duckdb``) or a
    day's log with a catalog (``stef catalog learn DAY.jsonl --out DAY.jsonl``).

    Args:
        out: the output file.
        **read: what the command reads, by name (``warehouse=...``, ``log_file=[...]``): a path,
            several, or ``None`` (nothing of that kind).

    Raises:
        CliError: ``out`` is one of them (the message names which).
    """
    for what, value in read.items():
        paths = [] if value is None else [value] if isinstance(value, (str, Path)) else list(value)
        for path in paths:
            if same_file(out, path):
                raise CliError(
                    f"--out {one_line(out)} is the {what.replace('_', ' ')} this command reads: writing it there "
                    "would destroy it; give --out another file name"
                )


def check_workers(workers: int | None, threads: bool = False) -> None:
    """Reject a ``--workers`` above :data:`MAX_WORKERS_PER_CORE` (processes) or
    :data:`MAX_THREADS_PER_CORE` (``threads``) times the usable cores (CPU affinity aware): each
    scoring process holds about 150 MB, so ``--workers 100000`` would start processes until the
    machine runs out of memory.

    Raises:
        CliError: ``workers`` is above the limit (``None`` and 0 mean the default: never rejected).
    """
    if not workers:
        return
    from flows.cli.parallel import default_workers

    cores = default_workers()  # the usable cores
    per_core = MAX_THREADS_PER_CORE if threads else MAX_WORKERS_PER_CORE
    limit = per_core * cores
    if workers > limit:
        what = "threads" if threads else "processes"
        raise CliError(
            f"--workers {workers} is more than {limit} ({per_core} {what} per usable core, {cores} here); "
            "leave --workers out for the runner's default"
        )


def environment_error_message(exc: BaseException) -> str | None:
    """The one-line message of an error of the machine rather than of STEF, or ``None``.

    Such errors are a person's to fix, like a :class:`StefError`: an :class:`OSError` (disk
    full, no permission, a file that vanished), a date pushed past year 1 or 9999 by the options
    (``stef drift --temporal --start 0001-01-01``, ``--week 9999-W52``) and a DuckDB error (a truncated or corrupted
    warehouse or cache file, a read-only file system). Other exceptions are bugs and keep their
    traceback.

    >>> environment_error_message(OSError(28, "No space left on device", "/data/out.jsonl"))
    '/data/out.jsonl: No space left on device'
    >>> environment_error_message(ValueError("bug")) is None
    True
    """
    if isinstance(exc, OSError):
        if exc.strerror:
            return f"{exc.filename}: {exc.strerror}" if exc.filename is not None else exc.strerror
        return str(exc) or type(exc).__name__
    if isinstance(exc, OverflowError) and "date value out of range" in str(exc):  # datetime's own message
        return "a date out of range: the options put a day before 0001-01-01 or after 9999-12-31"
    duckdb = sys.modules.get("duckdb")  # only loaded when a command opened a DuckDB file
    if duckdb is not None and isinstance(exc, duckdb.Error):
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return (
            f"DuckDB could not read or write its file: {first_line}. If the file is damaged (truncated, "
            "corrupted blocks), restore it from a backup, or move it away and rebuild it "
            "(stef backfill re-scores the days from their logs)"
        )
    return None


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn :class:`StefError` and errors of the machine (:func:`environment_error_message`)
    into ``error: <message>`` on stderr and exit code 2."""
    try:
        yield
    except StefError as exc:
        err_console.print(Text.assemble(("error: ", "bold red"), visible_lines(exc)), soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None
    except Exception as exc:
        message = environment_error_message(exc)
        if message is None:
            raise
        err_console.print(Text.assemble(("error: ", "bold red"), visible_lines(message)), soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None


def _flags_show_no_type() -> None:
    """``--help`` lists a flag (``--json``, ``--force`` …) without a ``<bool>`` value: it takes none.

    Typer's rich help shows every option's type, flags included, which reads as if ``--json true``
    were the way to use it. Its option class's type display is wrapped once so that a flag has none.
    """
    from typer.core import TyperOption

    original = TyperOption.display_type_rich
    if getattr(original, "_stef_flags", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if getattr(self, "is_flag", False) else original(self, ctx)

    display_type_rich._stef_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_show_no_type()


def command_help(doc: str) -> str:
    r"""A command's docstring as its ``--help`` text: each paragraph one line, for the terminal to wrap.

    Typer keeps the line breaks of a docstring's later paragraphs, so a docstring wrapped at 100
    columns showed in an 80-column terminal as a long line and a short one in turn. Paragraphs stay
    apart (a blank line), and an RST literal (a name between double backquotes) reads as a quoted name.

    >>> print(command_help("Score every record.\n\nLines that are not valid get an\n    ``invalid_input`` row."))
    Score every record.
    <BLANKLINE>
    Lines that are not valid get an 'invalid_input' row.
    """
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(block.split()).replace("``", "'") for block in paragraphs if block.strip())


def reflow_command_help(app: typer.Typer) -> None:
    """Set the help of every command of ``app`` and its sub-apps without one to :func:`command_help` of its docstring."""
    for command in app.registered_commands:
        if command.help is None and command.callback is not None and command.callback.__doc__:
            command.help = command_help(command.callback.__doc__)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            reflow_command_help(group.typer_instance)


EMPTY_ALLOWED = frozenset({"--api-base", "--notify-webhook", "--header"})
"""Options whose empty value means something (``--api-base ""``: the environment's;
``--notify-webhook ""``: no webhook, as a script passes an unset variable; ``--header K=``)."""
BLANK_ALLOWED = frozenset(
    {"--agent", "--app", "--baseline", "--candidate", "--evaluator-version", "--project", "--source-project"}
)
"""Options naming what logs or stores hold, where a value of white space can be a real name (the log
contract accepts an ``agent_id`` of one space): only an empty one is refused."""


def empty_value(args: Sequence[str], flags: frozenset[str] = frozenset()) -> str | None:
    """What in a command line's arguments is an empty or blank (only white space) value, or ``None``:
    ``--warehouse ""`` and ``--warehouse=`` name the option (``--reviewer " "`` too, not ``--agent " "``:
    :data:`BLANK_ALLOWED`); ``""``
    elsewhere (after a flag, after ``--``) is an argument. :data:`EMPTY_ALLOWED` options may be empty.

    Every other option and argument of ``stef`` needs a text: an empty path read as ``.`` (``stef
    evaluate ""`` scored every log file of the working folder, ``--schema-dir ""`` read it as the
    schema folder), an empty ``--warehouse`` fell back to ``./stef.duckdb``, an empty
    ``--reviewer`` to the login name, each without a word; a blank ``--reviewer`` was stored as
    the reviewer's name.

    Args:
        args: the arguments after ``stef``.
        flags: the options that take no value (a ``""`` after one is an argument).

    >>> empty_value(["nightly", "--warehouse", "", "--quiet"]), empty_value(["export", "--out="])
    ('--warehouse', '--out')
    >>> empty_value(["evaluate", ""]), empty_value(["push", "--header=X-Empty=", "--api-base", ""])
    ('an argument', None)
    >>> empty_value(["drift", "--json", ""], flags=frozenset({"--json"})), empty_value(["evaluate", "--", ""])
    ('an argument', 'an argument')
    >>> empty_value(["review", "import", "a.csv", "--reviewer", " \\t"]), empty_value(["export", "--agent=  "])
    ('--reviewer', None)
    >>> empty_value(["export", "--agent="]), empty_value(["export", "--agent", ""])
    ('--agent', '--agent')
    """
    options_done = False
    for index, arg in enumerate(args):
        if options_done:
            if _blank(arg):
                return "an argument"
            continue
        if arg == "--":
            options_done = True
            continue
        if arg.startswith("--") and "=" in arg:
            name, _, value = arg.partition("=")
            if _refused(name, value):
                return name
            continue
        if _blank(arg):
            before = args[index - 1] if index else ""
            if before.startswith("-") and before != "--" and "=" not in before and before not in flags:
                return before if _refused(before, arg) else None
            return "an argument"
    return None


def _refused(option: str, value: str) -> bool:
    """Whether ``value`` of ``option`` is refused: empty (unless :data:`EMPTY_ALLOWED`) or blank (unless
    :data:`BLANK_ALLOWED` too)."""
    if option in EMPTY_ALLOWED:
        return False
    return not value if option in BLANK_ALLOWED else _blank(value)


def _blank(value: str) -> bool:
    """Whether ``value`` is empty or only white space."""
    return not value.strip()


def _flag_names(command: Any) -> frozenset[str]:
    """The option names of ``command`` and its subcommands (a group) that take no value."""
    names: set[str] = set()
    stack = [command]
    while stack:
        current = stack.pop()
        for param in getattr(current, "params", ()):
            if getattr(param, "is_flag", False) or getattr(param, "count", False):
                names.update(getattr(param, "opts", ()))
                names.update(getattr(param, "secondary_opts", ()))
        stack.extend(getattr(current, "commands", {}).values())
    return frozenset(names)


BROKEN_PIPE_EXIT = 141
"""Exit code when the reader of a command's standard output closed it: as a shell reports a process
ended by SIGPIPE (``head`` took what it needed)."""


def discard_stdout() -> None:
    """Point standard output at ``/dev/null`` after its reader closed it, so that no later write or the
    interpreter's final flush fails again (a second ``BrokenPipeError`` message at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (a test's)
        pass
    finally:
        os.close(devnull)


class OneLineUsageErrors(TyperGroup):
    """The ``stef`` group: a usage error (unknown option, bad value, missing argument, extra argument,
    an empty value: :func:`empty_value`) is one ``error: <message>`` line on stderr with exit code 2,
    like every other error a person fixes — not click's usage lines and a framed box. ``--help``
    and everything else are unchanged.
    """

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Click's resolution of the subcommand, after refusing an empty value anywhere in its arguments."""
        empty = empty_value(args, _flag_names(self))
        if empty is not None:
            what = "an argument is empty or blank" if empty == "an argument" else f"{empty} is empty or blank"
            raise UsageError(f"{what}: give a value, or leave the option out for its default", ctx)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        """Click's invocation of the subcommand; a reader that closed standard output (``stef
        quarantine --json | head -1``, ``stef version | true``) ends the command quietly with
        :data:`BROKEN_PIPE_EXIT`, as ``stef evaluate --out -`` does (click's own handling exited 1)."""
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            discard_stdout()
            raise typer.Exit(BROKEN_PIPE_EXIT) from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the command line; usage errors as one line (class docstring)."""
        standalone = kwargs.pop("standalone_mode", True)
        kwargs["standalone_mode"] = False  # errors come back here, to be printed as one line
        try:
            result = super().main(*args, **kwargs)
        except UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "stef"
            message = " ".join(exc.format_message().split()).replace("Value error, ", "")
            if message:  # a group called without its command printed its help instead: nothing to add
                err_console.print(
                    Text.assemble(("error: ", "bold red"), f"{one_line(message)} (see `{command} --help`)"),
                    soft_wrap=True,
                )
            if not standalone:
                raise
            sys.exit(EXIT_USAGE)
        except typer.Abort:
            if not standalone:
                raise
            err_console.print("Aborted.")
            sys.exit(1)
        except ClickException as exc:  # other click errors (e.g. a file it could not open): one line too
            err_console.print(Text.assemble(("error: ", "bold red"), one_line(" ".join(exc.format_message().split()))))
            if not standalone:
                raise
            sys.exit(exc.exit_code)
        if standalone:
            sys.exit(result if isinstance(result, int) else 0)
        return result


def drift_sentences(checks: Sequence[Mapping[str, Any]]) -> list[Text]:
    """The sentence of every drift check of a night worth reading at the end of a command: every version
    check, and a temporal check that drifted (recomputed checks only when they newly turned worse)."""
    shown = []
    for check in checks:
        if check.get("recomputed") and not (check.get("verdict") == "drift" and check.get("direction") == "worse"):
            continue
        if check.get("kind") == "version" or check.get("verdict") == "drift":
            style = "bold red" if check.get("direction") == "worse" else ""
            shown.append(Text.assemble(("drift: ", "bold"), (one_line(check.get("sentence") or ""), style)))
    return shown


class _NoStefTraceback(logging.Filter):
    """Console-log filter: keep Prefect's "task run failed" line for a StefError (or an error of the
    machine, :func:`environment_error_message`, or any error once the command was interrupted),
    drop its traceback.

    The CLI prints the error's message itself (:func:`user_errors`); the traceback of an error
    raised on purpose only hides it. After Ctrl-C or SIGTERM (:func:`interruptible`) an error is
    the interrupt's consequence: DuckDB turns the KeyboardInterrupt of a running query into
    ``RuntimeError('Query interrupted')``, which Prefect logged with its traceback above the
    command's one line; the same for a SIGTERM that Prefect's own handler took during a flow
    (:mod:`stef.stop_signals`). Other exceptions keep their traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and (
            isinstance(error, StefError)
            or environment_error_message(error) is not None
            or _INTERRUPTED.is_set()
            or stop_signals.received() is not None
        ):
            record.exc_info = None
            record.exc_text = None
        return True


class _NoStefErrorLines(logging.Filter):
    """Console-log filter of ``--quiet``: drop Prefect's lines of a run that failed with an error
    the command prints itself as its one ``error: …`` line (a :class:`StefError`, an error of the
    machine), which repeated that line's text above it. Other errors keep their lines; the Prefect
    API still receives every line."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is None:  # a task run's "Finished in state Failed('… WarehouseError: …')" names it only
            failed = _FAILED_STATE_LINE.match(record.getMessage()) if record.levelno >= logging.ERROR else None
            return failed is None or failed.group(1) not in _stef_error_names()
        return not (isinstance(error, StefError) or environment_error_message(error) is not None)


_FAILED_STATE_LINE = re.compile(r"Finished in state Failed\(['\"](?:Task|Flow) run encountered an exception:? (\w+): ")
"""Prefect's line of a run that failed (``Finished in state Failed('Task run encountered an exception
WarehouseError: …')``, its state's message: ``prefect.states.exception_to_failed_state``), which carries
no exception: group 1 is the error's class name."""


def _stef_error_names() -> frozenset[str]:
    """Names of :class:`StefError` and of every subclass of it imported so far."""
    names: set[str] = set()
    pending: list[type[BaseException]] = [StefError]
    while pending:
        kind = pending.pop()
        if kind.__name__ not in names:
            names.add(kind.__name__)
            pending.extend(kind.__subclasses__())
    return frozenset(names)


class _NoBatchLines(logging.Filter):
    """Console-log filter: drop the INFO lines of the ``evaluate-batch`` task runs (one per batch:
    a 100k-record day has 200); the progress bar (:class:`_ProgressBar`) and the flow's
    "evaluated N records" line say it instead. Their warnings and errors stay; the Prefect API
    still receives every line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or getattr(record, "task_name", None) != "evaluate-batch"


class _ProgressBar:
    """A rich progress bar on stderr for each day a flow evaluates (:class:`flows.progress.EvaluationProgress`)."""

    def __init__(self) -> None:
        self._progress: Any = None
        self._task: Any = None

    def started(self, log_date: date, records: int, batches: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.finished()
        self._progress = Progress(
            TextColumn("evaluating {task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("records"),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(log_date.isoformat(), total=records)

    def advanced(self, records: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, records)

    def finished(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


class CommandClock:
    """Wall seconds of a command's phases, from the command's start (``stef nightly --timings``).

    :meth:`lap` closes the phase running since the previous lap (the first phase starts when
    the command line was imported: :data:`flows.cli.COMMAND_STARTED`); a phase may list its
    parts (the flow's own phases), and :meth:`timed` measures a part inside the next phase.
    """

    def __init__(self) -> None:
        from flows.cli import COMMAND_STARTED

        self._since = COMMAND_STARTED
        self._started = COMMAND_STARTED
        self._parts: dict[str, float] = {}
        self.phases: list[tuple[str, float, dict[str, float]]] = []

    def timed(self, part: str, work: Callable[[], object]) -> Callable[[], None]:
        """``work`` wrapped so that its seconds count as ``part`` of the next phase."""

        def run() -> None:
            started = time.perf_counter()
            try:
                work()
            finally:
                self._parts[part] = time.perf_counter() - started

        return run

    def lap(self, phase: str, parts: Mapping[str, float] | None = None) -> None:
        """Close ``phase``: the seconds since the previous lap, with its ``parts`` (seconds each)."""
        now = time.perf_counter()
        self.phases.append((phase, now - self._since, {**self._parts, **(parts or {})}))
        self._parts = {}
        self._since = now

    def table(self) -> Table:
        """The phases as a table: each phase, its parts indented (and what the parts leave
        unaccounted), and the total since the command started."""
        table = Table(title="Timings (wall seconds)", box=box.SIMPLE_HEAD)
        table.add_column("phase")
        table.add_column("s", justify="right")
        for phase, seconds, parts in self.phases:
            table.add_row(Text(phase), f"{seconds:.2f}")
            for part, part_seconds in parts.items():
                table.add_row(Text(f"  {part}"), f"{part_seconds:.2f}")
            if parts:
                table.add_row(Text("  other"), f"{seconds - sum(parts.values()):.2f}")
        table.add_row(Text("total"), f"{self._since - self._started:.2f}")
        return table


def nightly_preparation(
    task_runner: str = "pool", workers: int | None = None, symbolic: bool = True
) -> Callable[[], None]:
    """The ``prepare`` of :func:`running_flows` for commands that run nightly flows (``stef demo``,
    ``stef backfill``): :func:`flows.nightly.prepare_process` (scoring pool, Great Expectations)."""

    def prepare() -> None:
        from flows.nightly import prepare_process

        prepare_process(task_runner, workers, symbolic)  # type: ignore[arg-type]

    return prepare


@contextmanager
def running_flows(quiet: bool = False, prepare: Callable[[], object] | None = None) -> Iterator[None]:
    """Around the flow runs of one command: Prefect's console without the tracebacks of errors a
    person fixes nor one line per evaluation batch (:func:`_quiet_stef_tracebacks`), a progress
    bar of the evaluation on a terminal (:class:`_ProgressBar`), and a temporary Prefect API
    that dies with this process (:func:`flows.prefect_api.temporary_prefect_api`) unless one is
    configured.

    Args:
        quiet: show only Prefect's warnings and errors on the console (``--quiet``), without the
            lines of an error the command prints as its ``error: …`` line; the Prefect API still
            receives every run's logs.
        prepare: the command's own start-up work (imports, warm caches), done while the
            temporary API server boots.
    """
    from flows.prefect_api import temporary_prefect_api
    from flows.progress import showing_progress

    previous: dict[logging.Handler, int] = {}
    no_error_lines = _NoStefErrorLines()

    def prepare_then_console() -> None:
        if prepare is not None:
            prepare()
        import prefect.main  # noqa: F401 - sets up Prefect's logging: its console handlers exist from here on

        _quiet_stef_tracebacks()
        if quiet:
            previous.update(_console_level(logging.WARNING))
            for handler in previous:  # first: _NoStefTraceback takes the error off the record
                if no_error_lines not in handler.filters:
                    handler.filters.insert(0, no_error_lines)

    try:
        with ExitStack() as stack:
            if err_console.is_terminal:
                stack.enter_context(showing_progress(_ProgressBar()))
            stack.enter_context(temporary_prefect_api(prepare_then_console))
            yield
    finally:
        for handler, level in previous.items():
            handler.setLevel(level)
            handler.removeFilter(no_error_lines)


EXIT_INTERRUPTED = {signal.SIGINT: 130, signal.SIGTERM: 143}
"""Exit code of a command stopped by a signal, as a shell reports a process killed by it (128 + its number)."""


class CommandInterrupted(KeyboardInterrupt):
    """A SIGTERM, raised in the main thread as Ctrl-C raises :class:`KeyboardInterrupt`, so that
    both unwind the command the same way (flows reported as crashed, the temporary Prefect API stopped).

    Args:
        signum: the signal's number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _signal_of(exc: BaseException) -> int | None:
    """The signal that ``exc`` stands for: SIGINT for a :class:`KeyboardInterrupt`, the signal of a
    :class:`CommandInterrupted` or of Prefect's ``TerminationSignal``; ``None`` for anything else."""
    if isinstance(exc, CommandInterrupted):
        return exc.signum
    if isinstance(exc, KeyboardInterrupt):
        return signal.SIGINT
    prefect_exceptions = sys.modules.get("prefect.exceptions")
    termination = getattr(prefect_exceptions, "TerminationSignal", None)
    if termination is not None and isinstance(exc, termination):
        return int(getattr(exc, "signal", signal.SIGTERM))
    return None


def _unless_ignored(signum: int, handler: Callable[[int, Any], None]) -> Any:
    """``handler``, or :data:`signal.SIG_IGN` when ``signum`` is ignored now (a job started in the
    background by a non-interactive shell ignores SIGINT, and ``nohup`` SIGHUP: a Ctrl-C meant for
    the script that started it must not stop it)."""
    return signal.SIG_IGN if signal.getsignal(signum) is signal.SIG_IGN else handler


_INTERRUPTED = threading.Event()
"""Set once :func:`interruptible` received SIGINT or SIGTERM: the errors logged while the command
unwinds are its consequence (:class:`_NoStefTraceback`)."""


@contextmanager
def interruptible(kept: Callable[[], str]) -> Iterator[None]:
    """Around a command's work: Ctrl-C (SIGINT) and SIGTERM stop it promptly and say so.

    SIGINT is raised as :class:`KeyboardInterrupt` (as Python does), SIGTERM as
    :class:`CommandInterrupted` (a :class:`KeyboardInterrupt`), so both
    signals unwind the command alike: Prefect reports its flow runs as crashed, the model requests
    are stopped the moment the signal arrives (:func:`stef.llm.request_stop.stop_for_signal`:
    however long the unwinding takes, none of the queued ones starts; for SIGTERM during a flow
    run, when the interrupt reaches the flow: :func:`flows.nightly.interruptible_result`), the
    temporary Prefect API is stopped. (While a flow runs, Prefect's own SIGTERM handler raises its
    ``TerminationSignal`` first and sends the signal again to this one once its flows are reported;
    when DuckDB swallowed that exception in a running query, the signal is still known:
    :mod:`stef.stop_signals`.) Then one line on stderr, ``interrupted by SIGINT: <kept()>``, and
    the exit code of :data:`EXIT_INTERRUPTED` (130, 143) instead of a traceback.

    Args:
        kept: what the command kept and how to resume, as a sentence (called after the interrupt).

    Raises:
        typer.Exit: with code 130 (SIGINT) or 143 (SIGTERM) after an interrupt.
    """

    received: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        request_stop.stop_for_signal()  # first: lock-free, whatever the main thread holds
        received.append(signum)
        _INTERRUPTED.set()
        raise CommandInterrupted(signum) if signum != signal.SIGINT else KeyboardInterrupt

    try:
        # a signal the process was started ignoring (`stef nightly &` in a script: SIGINT) stays ignored
        previous: Any = signal.signal(signal.SIGTERM, _unless_ignored(signal.SIGTERM, on_signal))
        previous_int: Any = signal.signal(signal.SIGINT, _unless_ignored(signal.SIGINT, on_signal))
    except ValueError:  # not the main thread (a test harness): the signals keep their handlers
        previous = previous_int = None
    try:
        with stop_signals.recording():
            try:
                yield
            except Exception:
                # A signal taken by another handler (Prefect's, while a flow runs) whose exception
                # was lost on the way (DuckDB turns it into RuntimeError('Query interrupted')).
                if not received and (late := stop_signals.received()) is not None:
                    received.append(late)
                raise
    except BaseException as exc:
        # An error raised while the interrupt unwinds is its consequence, not a bug: e.g. pydantic
        # turns a KeyboardInterrupt inside a serializer into a PydanticSerializationError.
        signum = _signal_of(exc) or (received[0] if received and isinstance(exc, Exception) else None)
        if signum is None:
            raise
        if previous is not None:  # a second signal now ends the process at once, as it would have
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)
            previous = previous_int = None
        name = signal.Signals(signum).name
        err_console.print(Text.assemble((f"interrupted by {name}: ", "bold red"), one_line(kept())), soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED.get(signal.Signals(signum), 128 + signum)) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)
        request_stop.clear_signal()  # the command is over: a later one in this process (a test's) may call the model


def _console_level(level: int) -> dict[logging.Handler, int]:
    """Raise the console handlers of the root logger and Prefect's loggers to ``level``; return their levels before."""
    previous: dict[logging.Handler, int] = {}
    for name in ("", "prefect", "prefect.flow_runs", "prefect.task_runs"):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                previous.setdefault(handler, handler.level)
                handler.setLevel(max(level, handler.level))
    return previous


def _quiet_stef_tracebacks() -> None:
    """Add :class:`_NoStefTraceback` and :class:`_NoBatchLines` to the root logger's console handlers (Prefect's console).

    Prefect's API log handler sits on its run loggers and sees the record first, so the Prefect
    UI keeps the full traceback.
    """
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not any(
            isinstance(f, _NoStefTraceback) for f in handler.filters
        ):
            handler.addFilter(_NoStefTraceback())
    for name in ("", "prefect", "prefect.flow_runs", "prefect.task_runs"):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler) and not any(
                isinstance(f, _NoBatchLines) for f in handler.filters
            ):
                handler.addFilter(_NoBatchLines())


# --------------------------------------------------------------------------- validation


def read_calibrator_option(path: Path | None) -> tuple[tuple[str | None, str], ...]:
    """``--calibrator FILE.json`` as :attr:`stef.llm.settings.JudgeSettings.calibrators`: the
    artifact for the app it was fitted for (``metadata.app_id``, from ``stef review calibrate
    --app``), else for every app (``()`` without the option).

    Raises:
        CliError: the file cannot be read or is not a calibrator artifact.
    """
    if path is None:
        return ()
    from stef.config_files import read_config_text
    from stef.pipeline.judge.deployment import is_deployment_calibrator, parse_calibrator

    try:
        document = read_config_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"--calibrator {path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from exc
    try:
        calibrator = parse_calibrator(document, f"--calibrator {path}")
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    if not is_deployment_calibrator(calibrator):
        raise CliError(
            f"--calibrator {path}: {calibrator.version} is not a deployment calibrator "
            "(write one with `stef review calibrate --out FILE.json`)"
        )
    app_id = calibrator.metadata.get("app_id")
    return ((None if app_id is None else str(app_id), document),)


def validate_dialect(name: str) -> str:
    """Check a ``--dialect`` value with :func:`stef.pipeline.dialects.resolve_dialect`; return its normal form.

    >>> validate_dialect("SQLite")
    'sqlite'

    Raises:
        UnknownDialectError: sqlglot does not know the dialect (the message names it and lists
            the known ones).
    """
    from stef.pipeline.dialects import resolve_dialect

    try:
        return resolve_dialect(name) or "generic"
    except UnknownDialectError as exc:
        raise UnknownDialectError(f"--dialect: {exc}") from None


def validate_judge(name: str, **options: Any) -> JudgeSettings:
    """Read ``--judge`` (one of :data:`JUDGES`) and its companion options, and check them before any work.

    A model is checked with :func:`stef.llm.settings.preflight` (litellm knows its provider, its
    ``*_API_KEY`` is in the environment); other missing variables are printed as warnings.
    The symbolic judge imports no litellm.

    Args:
        name: the ``--judge`` value.
        **options: ``api_base``, ``concurrency``, ``timeout_s``, ``max_cost_usd`` (see
            :meth:`stef.llm.settings.JudgeSettings.parse`).

    Returns:
        The parsed :class:`stef.llm.settings.JudgeSettings`.

    Raises:
        JudgeConfigError: an unusable setting (the message names it and the fix).

    >>> validate_judge("symbolic").is_symbolic
    True
    """
    from stef.llm.settings import JudgeSettings, preflight

    settings = JudgeSettings.parse(name, **options)
    for warning in preflight(settings):
        err_console.print(Text.assemble(("warning: ", "bold yellow"), visible_lines(warning)), soft_wrap=True)
    return settings


# --------------------------------------------------------------------------- formatters


def percent(value: float | None) -> str:
    """A share as a percentage with one decimal (``–`` when unknown).

    >>> percent(0.9876), percent(None)
    ('98.8%', '–')
    """
    return "–" if value is None else f"{value:.1%}"


def number(value: float | None, spec: str = ".1f") -> str:
    """A number in the format ``spec`` (``–`` when unknown).

    >>> number(46.04), number(0.8766, ".3f"), number(None)
    ('46.0', '0.877', '–')
    """
    return "–" if value is None else format(value, spec)


def usd(value: float | None) -> str:
    """An amount in US dollars with six decimals (``–`` when unknown).

    >>> usd(0.00012), usd(None)
    ('$0.000120', '–')
    """
    return "–" if value is None else f"${value:.6f}"


def summary_line(summary: NightlySummary) -> str:
    """One line on a stored day of the nightly flow: lines, scored, unscored, quarantined, and the
    coverage of all lines, quarantined ones included (the metrics table's coverage is of each
    version's records, which a quarantined line is not)."""
    unscored = summary.records - summary.evaluated - summary.quarantined
    return (
        f"{summary.log_date}: {summary.records} lines, {summary.evaluated} scored, "
        f"{unscored} unscored (typed status), {summary.quarantined} quarantined, "
        f"coverage {percent(summary.coverage)} of all lines"
    )
