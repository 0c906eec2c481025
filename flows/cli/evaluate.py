"""``stef evaluate``: score log files without a warehouse, one output row per input line (DESIGN.md §8).

Reads JSONL log files, evaluates them in this process or in a pool of worker processes
(:mod:`flows.cli.parallel`), writes one JSON line per input line and prints a summary (and the
judge's figures with a model judge). Loads only typer, rich and the pure ``stef`` package unless
the judge is a model.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO, cast

import typer
from rich.table import Table
from rich.text import Text

from flows.cli.common import (
    API_BASE_HELP,
    BREAKER_HELP,
    BROKEN_PIPE_EXIT,
    JUDGE_HELP,
    OBSERVED_HELP,
    SCHEMA_DIR_HELP,
    STDOUT_NAME,
    CliError,
    check_not_overwriting,
    check_workers,
    console,
    discard_stdout,
    err_console,
    interruptible,
    number,
    output_file,
    percent,
    read_calibrator_option,
    schema_files,
    usd,
    user_errors,
    validate_dialect,
    validate_judge,
)
from flows.cli.parallel import OutputRow
from stef.display import one_line, shorten
from stef.errors import InputError
from stef.models import BATCH_SIZE, Band, EvaluationStatus, FilterStatus, Verdict
from stef.monitor.statistics import p90_score

if TYPE_CHECKING:
    from stef.llm.evaluate import JudgeRunStats
    from stef.logs import LogLine
    from stef.models import Evaluation, ObservedCatalogBook
    from stef.pipeline.judge.models import Judge
    from stef.pipeline.rules import RuleBook
    from stef.pipeline.schema_book import SchemaBook

PROGRESS_EVERY = 100
"""``stef evaluate`` refreshes its progress line every this many records."""
NOT_EVALUATED_SHOWN = 5
"""How many not-evaluated records ``stef evaluate`` lists with their reason."""


def input_files(path: Path, exclude: Path | None = None) -> list[Path]:
    """The JSONL files to evaluate: ``path`` itself, or the ``*.jsonl`` files in a directory.

    Args:
        path: a JSONL file or a directory of them.
        exclude: a file to leave out (the output file when it sits in the input directory).

    Raises:
        InputError: ``path`` does not exist, is the file ``exclude`` names, or is a directory without
            ``*.jsonl`` files (the error names the files that look like logs but are not ``*.jsonl``:
            ``B.JSONL``, ``c.json``, ``d.jsonl.gz``; beside ``*.jsonl`` files each is named as skipped).
    """
    from stef.logs import log_files, unread_log_like_files, unread_note

    if not path.exists():
        raise InputError(f"{path}: no such file or directory (give a JSONL file or a directory of *.jsonl files)")
    files = log_files(path)
    if exclude is not None and not path.is_dir() and path.resolve() == exclude.resolve():
        raise InputError(f"{path}: the input and --out are the same file; give --out another name")
    if exclude is not None:
        files = [f for f in files if f.resolve() != exclude.resolve()]
    unread = unread_log_like_files(path) if path.is_dir() else []  # B.JSONL, c.json, d.jsonl.gz
    if not files:
        raise InputError(f"{path}: directory holds no *.jsonl files" + (f"; {unread_note(unread)}" if unread else ""))
    if not path.is_dir():
        return files  # a file named explicitly is read whatever it holds (its bad lines are reported)
    for name in unread:
        err_console.print(Text(f"skipped {one_line(path / name)}: not a *.jsonl file"), soft_wrap=True)
    logs = [f for f in files if looks_like_agent_logs(f)]
    skipped = [f for f in files if f not in logs]
    for other in skipped:
        err_console.print(
            Text(
                f"skipped {one_line(other)}: not agent logs but labels or scores (its first records have "
                "a label or status field and no question or sql; give the file itself to score it)"
            ),
            soft_wrap=True,
        )
    if not logs:
        below = sorted({str(f.parent) for f in path.glob("*/**/*.jsonl")})  # e.g. <dir>/logs/<day>/
        hint = f"; folders of *.jsonl below it: {', '.join(below[:3])}{' …' if len(below) > 3 else ''}" if below else ""
        raise InputError(f"{path}: no agent log files among its *.jsonl files{hint}")
    return logs


def looks_like_agent_logs(path: Path, sniff_lines: int = 50) -> bool:
    """Whether ``path`` holds agent logs, i.e. is not a labels or scores file: among its first
    ``sniff_lines`` non-blank lines (and first MB), one is a JSON object with a ``question``,
    ``sql`` or ``enriched_question`` key, or one without a ``label`` and a ``status`` key, or one is
    not a JSON object at all (its lines are then read and rejected with their reasons). A labels
    or scores file (``{"run_id": …, "label": …}`` or ``stef evaluate``'s ``{"run_id": …,
    "status": …}`` on every line) is not; a log whose first records are bad (a span ``stef pull``
    could not map, a record without a question) still is: its bad lines get their
    ``invalid_input`` rows, as always.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "labels.jsonl").write_text('{"run_id": "a", "label": true}\\n')
    >>> looks_like_agent_logs(folder / "labels.jsonl")
    False
    >>> _ = (folder / "logs.jsonl").write_text('{"run_id": "a", "prompt": "?"}\\n{"question": "q", "sql": "SELECT 1"}\\n')
    >>> looks_like_agent_logs(folder / "logs.jsonl")
    True
    >>> _ = (folder / "pulled.jsonl").write_text('{"run_id": "a", "source_error": "no SQL attribute"}\\n')
    >>> looks_like_agent_logs(folder / "pulled.jsonl")
    True
    """
    import json

    seen = 0
    try:
        with path.open("rb") as handle:
            for raw in handle:
                if raw.strip():
                    try:
                        record = json.loads(raw)
                    except ValueError:
                        return True
                    if not isinstance(record, dict) or {"question", "sql", "enriched_question"} & set(record):
                        return True
                    if not {"label", "status"} & set(record):  # neither a label nor a score: a bad log line
                        return True
                    seen += 1
                    if seen >= sniff_lines:
                        return False
                if handle.tell() > 1_000_000:
                    break
    except OSError:
        return True  # read and reported as the other files are
    return seen == 0


def _read_lines(files: Sequence[Path]) -> Iterator[LogLine]:
    from stef.logs import read_log_file

    for path in files:
        try:
            yield from read_log_file(path)
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def checked_lines(files: Sequence[Path]) -> Iterator[LogLine]:
    """The lines of ``files`` in order, with the log contract applied: a record that breaks it
    (unreadable ``timestamp``, a ``run_id`` an earlier line holds) becomes a rejected line with
    the reason the nightly's Great Expectations gate gives (:mod:`stef.log_contract`).

    Raises:
        InputError: a file cannot be read.
    """
    from stef.log_contract import LogContractCheck

    return LogContractCheck().lines(_read_lines(files))


def evaluate_lines(
    lines: Iterable[LogLine],
    rulebook: RuleBook,
    dialect: str | None = None,
    judge: object | None = None,
    batch_size: int | None = None,
    schemas: SchemaBook | None = None,
    observed: ObservedCatalogBook | None = None,
) -> Iterator[OutputRow]:
    """Evaluate log lines in this process in batches, yielding exactly one output row per line, in order.

    A rejected line (not JSON, invalid record) yields the row of
    :func:`flows.cli.parallel.rejected_row` at its position; a record without a dialect is
    evaluated in ``dialect`` when one is given. Several processes:
    :func:`flows.cli.parallel.evaluate_files_in_processes`.

    Args:
        lines: the lines of one or more log files (:func:`stef.logs.read_log_file`).
        rulebook: resolves each record's ``app_id`` to its rules.
        dialect: default dialect for records that name none (``None``: the rules decide).
        judge: the judge (``None``: the default symbolic judge), or an object that evaluates whole
            batches (:class:`stef.llm.evaluate.LLMEvaluator`: it has ``evaluate_batches``; the
            model's requests of the next batch are queued while this one's are answered).
        batch_size: records per :func:`stef.pipeline.evaluate.evaluate_many` call (default :data:`BATCH_SIZE`).
        schemas: the apps' schemas (``--schema-dir``; a model judge takes them from its settings).
        observed: the apps' observed catalogs (``--observed-catalog``; likewise).

    Returns:
        :class:`flows.cli.parallel.OutputRow` items: the evaluation's JSON line and its counted fields.
    """
    from flows.cli.parallel import rejected_row, with_dialect
    from stef.pipeline.evaluate import evaluate_many

    batch_size = batch_size or BATCH_SIZE
    iterator = iter(lines)
    batches = iter(lambda: list(islice(iterator, batch_size)), [])
    evaluate_batches = getattr(judge, "evaluate_batches", None)
    if evaluate_batches is not None:  # a model judge: batches overlap on the run's request pool
        pairs = _RememberedBatches(batches)
        evaluated_batches = evaluate_batches(
            (
                [with_dialect(line.record, dialect) for line in batch if line.record is not None]
                for batch in pairs.feed()
            ),
            rulebook,
            dialect,  # also the app's dialect its schema file is read in (record_schema)
        )
        try:
            for evaluations in evaluated_batches:
                evaluated = iter([OutputRow.of(e) for e in evaluations])
                for line in pairs.collected():
                    yield rejected_row(line) if line.record is None else next(evaluated)
        finally:
            evaluated_batches.close()  # a run that stops early gives up the batches still queued
        return
    for batch in batches:
        records = [with_dialect(line.record, dialect) for line in batch if line.record is not None]
        evaluated = iter(
            evaluate_many(
                records,
                rulebook=rulebook,
                judge=cast("Judge | None", judge),  # without evaluate_many: a per-record judge
                default_dialect=dialect,  # also the app's dialect its schema file is read in (record_schema)
                convert=OutputRow.of,
                schemas=schemas,
                observed=observed,
            )
        )
        for line in batch:
            yield rejected_row(line) if line.record is None else next(evaluated)


class _RememberedBatches:
    """The batches of lines fed to a pipelined evaluator, kept until their evaluations come back
    (:meth:`stef.llm.evaluate.LLMEvaluator.evaluate_batches` submits one batch ahead)."""

    def __init__(self, batches: Iterator[list[LogLine]]) -> None:
        self._batches = batches
        self._fed: deque[list[LogLine]] = deque()

    def feed(self) -> Iterator[list[LogLine]]:
        """The batches, each remembered for :meth:`collected`."""
        for batch in self._batches:
            self._fed.append(batch)
            yield batch

    def collected(self) -> list[LogLine]:
        """The lines of the earliest batch whose evaluations came back."""
        return self._fed.popleft()


def _workers(requested: int, evaluator: object | None) -> int:
    """Processes for ``stef evaluate``: the model judge runs in one process (it is I/O bound)."""
    if evaluator is not None:
        return 1
    if requested:
        return requested
    from flows.cli.parallel import default_workers

    return default_workers()


_ORDERS: dict[str, type[Enum]] = {
    "status": EvaluationStatus,
    "band": Band,
    "filter_status": FilterStatus,
    "verdict": Verdict,
}
"""The Evaluation fields counted in the ``stef evaluate`` summary, with their values in display order."""


@dataclass(slots=True)
class EvaluationStats:
    """Running totals of a ``stef evaluate`` run (the printed summary)."""

    records: int = 0
    scores: list[float] = field(default_factory=list)
    probabilities: list[float] = field(default_factory=list)
    """p_correct of the evaluated records."""
    counts: dict[str, Counter[str]] = field(default_factory=lambda: {key: Counter() for key in _ORDERS})
    not_evaluated: list[tuple[str, str, str]] = field(default_factory=list)
    """The first few (run_id, status, reason) of records that got no score."""
    rejections: Counter[str] = field(default_factory=Counter)
    """Lines rejected by the reader or the log contract, by kind (:func:`stef.log_contract.rejection_kind`)."""

    def add(self, evaluation: Evaluation | OutputRow) -> None:
        """Count one evaluation (the model or its output row)."""
        self.records += 1
        rejection = getattr(evaluation, "rejection", None)
        if rejection is not None:
            from stef.log_contract import rejection_kind

            self.rejections[rejection_kind(rejection)] += 1
        if evaluation.score is not None:
            self.scores.append(evaluation.score)
        if evaluation.p_correct is not None:
            self.probabilities.append(evaluation.p_correct)
        for key in self.counts:
            value = getattr(evaluation, key)
            if value is not None:
                self.counts[key][value.value] += 1
        if evaluation.status is not EvaluationStatus.EVALUATED and len(self.not_evaluated) < NOT_EVALUATED_SHOWN:
            self.not_evaluated.append(
                (evaluation.run_id or "(no run_id)", evaluation.status.value, evaluation.status_reason or "")
            )

    @property
    def evaluated(self) -> int:
        """Records with status ``evaluated``."""
        return self.counts["status"][EvaluationStatus.EVALUATED.value]

    @property
    def coverage(self) -> float | None:
        """evaluated / records (``None`` when there were no records)."""
        return self.evaluated / self.records if self.records else None

    @property
    def mean_score(self) -> float | None:
        """Mean Φ of the evaluated records."""
        return statistics.fmean(self.scores) if self.scores else None

    @property
    def mean_p_correct(self) -> float | None:
        """Mean calibrated P(correct) of the evaluated records (the expected share of correct answers)."""
        return statistics.fmean(self.probabilities) if self.probabilities else None


def _evaluation_tables(stats: EvaluationStats, source: Path, out: Path) -> list[Table]:
    overview = Table(title="stef evaluate", show_header=False, title_justify="left")
    overview.add_column("", style="bold")
    overview.add_column("", justify="right")
    for name, value in (
        ("input", one_line(source)),
        ("records", str(stats.records)),
        ("evaluated", str(stats.evaluated)),
        ("coverage", percent(stats.coverage)),
        ("mean Φ", number(stats.mean_score)),
        ("P90 Φ", number(p90_score(stats.scores))),
        ("mean P(correct)", number(stats.mean_p_correct, ".3f")),
        ("output", one_line(out)),
    ):
        overview.add_row(name, Text(value))
    breakdown = Table(title="Counts", title_justify="left")
    breakdown.add_column("by")
    breakdown.add_column("value")
    breakdown.add_column("records", justify="right")
    for key, enum in _ORDERS.items():
        for index, member in enumerate(enum):
            breakdown.add_row(
                key if index == 0 else "",
                str(member.value),
                str(stats.counts[key][member.value]),
                end_section=index == len(enum) - 1,
            )
    tables = [overview, breakdown]
    if stats.rejections:
        rejected = Table(title=f"Rejected lines: {sum(stats.rejections.values())}", title_justify="left")
        rejected.add_column("reason (reader, log contract)", overflow="fold")
        rejected.add_column("lines", justify="right")
        for kind, count in stats.rejections.most_common():
            rejected.add_row(Text(one_line(kind)), str(count))
        tables.append(rejected)
    if stats.not_evaluated:
        failures = Table(title=f"Not evaluated (first {NOT_EVALUATED_SHOWN})", title_justify="left")
        failures.add_column("run_id", overflow="fold")
        failures.add_column("status")
        failures.add_column("reason", overflow="fold")
        for run_id, status, reason in stats.not_evaluated:
            failures.add_row(Text(shorten(run_id)), Text(status), Text(one_line(reason)))
        tables.append(failures)
    return tables


def evaluate(
    input_path: Annotated[
        Path, typer.Argument(metavar="INPUT", help="A JSONL log file, or a directory of *.jsonl files.")
    ],
    out_name: Annotated[
        str,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help=(
                "Where to write one JSON object per input line (JSONL): a file name, or - for standard "
                "output (the summary then goes to standard error)."
            ),
        ),
    ],
    rules: Annotated[
        Path | None,
        typer.Option(
            "--rules",
            help="R_app rule file applied to every record (default: rules/<app_id>.json, else rules/default.json).",
        ),
    ] = None,
    judge: Annotated[str, typer.Option("--judge", metavar="symbolic|MODEL|hybrid:MODEL", help=JUDGE_HELP)] = "symbolic",
    dialect: Annotated[
        str | None,
        typer.Option("--dialect", help="sqlglot dialect for records that name none (a record's own dialect wins)."),
    ] = None,
    api_base: Annotated[str | None, typer.Option("--api-base", metavar="URL", help=API_BASE_HELP)] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Model requests in flight.")] = 8,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=0.001,
            help="Seconds per model request (then retried: 429/5xx/timeouts, exponential backoff).",
        ),
    ] = 60.0,
    breaker_failures: Annotated[int, typer.Option("--breaker-failures", min=0, help=BREAKER_HELP)] = 5,
    cache: Annotated[
        Path | None,
        typer.Option(
            "--cache",
            metavar="FILE",
            help="DuckDB file caching model verdicts (may be the warehouse); a rerun makes no model call.",
        ),
    ] = None,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(
            "--max-cost-usd",
            min=0.0,
            help="Budget for the model calls (USD): a request starts only if its estimated cost still fits; the records left get the symbolic verdict and say so.",
        ),
    ] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=0, help="Processes for the symbolic judge (0: one per usable core).")
    ] = 0,
    schema_dir: Annotated[Path | None, typer.Option("--schema-dir", help=SCHEMA_DIR_HELP)] = None,
    observed_catalog: Annotated[
        Path | None, typer.Option("--observed-catalog", metavar="FILE", help=OBSERVED_HELP)
    ] = None,
    calibrator: Annotated[
        Path | None,
        typer.Option(
            "--calibrator",
            metavar="FILE.json",
            help="A deployment calibrator (stef review calibrate --out): refits the shipped one for every app.",
        ),
    ] = None,
) -> None:
    """Score every record of INPUT without a warehouse; write one result line per input line.

    Lines that are not valid records get an ``invalid_input`` row at their position, so the
    output has exactly as many lines as the input (blank lines aside), in the same order.
    With ``--judge MODEL`` or ``hybrid:MODEL`` each row also carries the judge, the fallback
    reason (if the model could not answer), cost and tokens; a judge summary is printed.
    """
    from stef.pipeline.rules import RuleBook
    from stef.time_cap import configured_time_cap_s

    with user_errors():
        out = output_file(out_name, "scores.jsonl", stdout=True)
        to_stdout = out_name == STDOUT_NAME
        if not to_stdout:
            check_not_overwriting(
                out,
                judge_cache=cache,
                rules_file=rules,
                calibrator=calibrator,
                observed_catalog=observed_catalog,
                schema_file=schema_files(schema_dir),
            )
        check_workers(workers)
        settings = validate_judge(
            judge,
            api_base=api_base,
            concurrency=concurrency,
            timeout_s=timeout,
            max_cost_usd=max_cost_usd,
            breaker_failures=breaker_failures,
            schema_dir=str(schema_dir) if schema_dir is not None else None,
            observed_catalog=str(observed_catalog) if observed_catalog is not None else None,
            calibrators=read_calibrator_option(calibrator),
        )
        schemas = settings.schemas()  # a missing folder or catalog fails here, before any work
        settings.symbolic_judge()  # so does an unreadable --calibrator
        observed = settings.observed()
        evaluator = None
        if not settings.is_symbolic:
            from stef.llm.evaluate import LLMEvaluator

            judge_cache = None
            if cache is not None:
                from warehouse.judge_cache import DuckDBJudgeCache

                judge_cache = DuckDBJudgeCache(cache)
            evaluator = LLMEvaluator(settings, cache=judge_cache)
        if dialect is not None:
            dialect = validate_dialect(dialect)
        rulebook = RuleBook(rules_file=rules)
        configured_time_cap_s()  # an invalid $STEF_TIME_CAP_S fails here, before any work
        files = input_files(input_path, exclude=None if to_stdout else out)
        stats = EvaluationStats()
        if not to_stdout and out.is_dir():
            raise CliError(f"{out}: is a directory; give --out a file name (e.g. {out / 'scores.jsonl'})")
        # A regular file is written to OUT.partial and renamed at the end (no half-written output);
        # standard output, a symlink, FIFO or device (/dev/stdout) is written through, never replaced.
        special = to_stdout or out.is_symlink() or (out.exists() and not out.is_file())
        partial = out if special else out.with_name(out.name + ".partial")
        handle: TextIO | _Unclosed
        if to_stdout:
            handle = _Unclosed(sys.stdout)
        else:
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                handle = partial.open("w", encoding="utf-8")
            except OSError as exc:
                raise CliError(f"{out}: cannot write output ({exc.strerror or exc})") from exc
        from rich.progress import Progress, SpinnerColumn, TextColumn

        progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            console=err_console,
            transient=True,
            disable=not err_console.is_terminal,
        )

        def kept() -> str:
            if special:
                where = "standard output" if to_stdout else str(out)
                return f"{where} received the rows of the first {stats.records} records (written through, not renamed)"
            return f"nothing was written to {out} (rows go to {partial.name}, removed, and are renamed only at the end)"

        try:
            with interruptible(kept), _written_to(out, special), handle, progress:
                task = progress.add_task("evaluating", total=None)
                processes = _workers(workers, evaluator)
                if processes > 1:
                    from flows.cli.parallel import evaluate_files_in_processes

                    rows = evaluate_files_in_processes(
                        files,
                        rulebook,
                        processes,
                        dialect=dialect,
                        batch_size=BATCH_SIZE,
                        schemas=schemas,
                        observed=observed,
                        judge=settings.symbolic_judge() if settings.calibrators else None,
                    )
                else:
                    rows = evaluate_lines(
                        checked_lines(files),
                        rulebook,
                        dialect=dialect,
                        judge=evaluator if evaluator is not None else settings.symbolic_judge(),
                        schemas=schemas,
                        observed=observed,
                    )
                for row in rows:
                    handle.write(row.json + "\n")
                    stats.add(row)
                    if stats.records % PROGRESS_EVERY == 0:
                        progress.update(task, description=f"evaluated {stats.records} records")
            if not special:
                with _written_to(out, special):
                    partial.replace(out)
        finally:
            if not special:
                partial.unlink(missing_ok=True)
    # With the rows on standard output, the summary must not mix with them: it goes to stderr.
    summary = err_console if to_stdout or _is_standard_output(out) else console
    for table in _evaluation_tables(stats, input_path, out):
        summary.print(table)
    if evaluator is not None:
        summary.print(judge_table(evaluator.stats))
    if stats.records == 0:  # an empty file (or blank lines only): say so, the output is empty too
        err_console.print(
            Text(f"warning: {one_line(input_path)} holds no log lines: nothing was scored ({one_line(out)} is empty)"),
            soft_wrap=True,
        )


class _Unclosed:
    """Standard output as the rows' file: written through, flushed and left open at the end."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(text)

    def __enter__(self) -> _Unclosed:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stream.flush()


def _is_standard_output(out: Path) -> bool:
    """Whether ``out`` is this process's standard output (``/dev/stdout``, ``/proc/self/fd/1``, or
    the file stdout is redirected to): the same device and inode."""
    try:
        target = os.stat(out)
        current = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no such file, or stdout is not a real file (a test's)
        return False
    return (target.st_dev, target.st_ino) == (current.st_dev, current.st_ino)


@contextmanager
def _written_to(out: Path, streamed: bool) -> Iterator[None]:
    """Turn an :class:`OSError` of writing ``out`` (disk full, quota, I/O error) into a
    :class:`CliError` naming the file (reading errors are :class:`InputError` by then).
    ``streamed``: ``out`` is written through (a pipe, a device), not replaced at the end.

    A streamed output whose reader closed it (``stef evaluate … --out - | head``) stops the
    command quietly, as a Unix filter stops: exit code 141 (128 + SIGPIPE), no message, the rest
    of standard output sent to ``/dev/null`` so that no later write or flush fails again.
    """
    try:
        yield
    except BrokenPipeError as exc:
        if not streamed:
            raise CliError(f"{out}: cannot write output ({exc.strerror or exc}); {out} was left as it was") from exc
        discard_stdout()
        raise typer.Exit(BROKEN_PIPE_EXIT) from None
    except OSError as exc:
        outcome = "the output there is incomplete" if streamed else f"{out} was left as it was"
        raise CliError(f"{out}: cannot write output ({exc.strerror or exc}); {outcome}") from exc


def judge_table(stats: JudgeRunStats) -> Table:
    """The judge summary of a run with a model: escalation, cache, requests, fallbacks, cost.

    Args:
        stats: :attr:`stef.llm.evaluate.LLMEvaluator.stats` after the run.
    """
    table = Table(title=Text(f"Judge {one_line(stats.judge)}"), show_header=False, title_justify="left")
    table.add_column("", style="bold")
    table.add_column("", justify="right")
    rows = [
        ("records judged", str(stats.records)),
        ("sent to the model", f"{stats.escalated} ({percent(stats.escalated_share)})"),
        ("model verdicts", str(stats.model_verdicts)),
        ("cache hits", str(stats.cache_hits)),
        ("model requests", str(stats.requests)),
        ("fallbacks to symbolic", str(stats.fallback_count)),
        *((f"  {one_line(reason)}", str(count)) for reason, count in stats.fallbacks.most_common()),
        ("cost_usd (sum of rows)", usd(stats.cost_usd)),
        ("spent in this run", usd(stats.spent_usd)),
        ("tokens (sum of rows)", str(stats.tokens)),
    ]
    if stats.unpriced:
        rows.append(("verdicts without a price", str(stats.unpriced)))
    if stats.usage_untrusted:
        rows.append(("untrusted usage (cost unknown)", str(stats.usage_untrusted)))
    for name, value in rows:
        table.add_row(Text(name), Text(value))
    if stats.breaker:
        table.caption, table.caption_justify = Text(one_line(stats.breaker)), "left"  # quotes the server's error text
    return table
