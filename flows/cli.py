"""The ``stef`` command line: ``evaluate``, ``nightly``, ``demo`` (DESIGN.md §8).

The CLI is the outermost layer. Importing it loads only typer, rich and the pure ``stef``
package: Prefect, DuckDB, litellm and Great Expectations are imported inside the commands that
need them, so ``stef evaluate`` with the symbolic judge never loads any of them.

Every error STEF raises on purpose (:class:`stef.errors.StefError`) is printed as one line on
stderr and ends the command with exit code 2, without a traceback.
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import Enum
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from flows.cli_campaign import register as _register_campaign
from flows.cli_catalog import register as _register_catalog
from flows.cli_common import (
    CliError,
    console,
    err_console,
    percent,
    running_flows,
    summary_line,
    user_errors,
    validate_dialect,
    validate_judge,
)
from flows.cli_monitoring import register as _register_monitoring
from flows.parallel import OutputRow
from stef.display import one_line, shorten
from stef.errors import InputError
from stef.models import BATCH_SIZE, Band, EvaluationStatus, FilterStatus, Verdict

if TYPE_CHECKING:
    from stef.llm.evaluate import JudgeRunStats
    from stef.logs import LogLine
    from stef.models import Evaluation
    from stef.pipeline.observed import ObservedCatalogBook
    from stef.pipeline.rules import RuleBook
    from stef.pipeline.schema_book import SchemaBook

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
API_BASE_HELP = (
    "OpenAI-compatible endpoint for the model (default: $STEF_LLM_API_BASE). Keys are read only from the environment."
)
BREAKER_HELP = (
    "Circuit breaker: after this many consecutive model timeouts/connection failures, the rest of the run gets the "
    "symbolic verdict without calling the model, and each such record says so (0: never)."
)
PROGRESS_EVERY = 100
"""``stef evaluate`` refreshes its progress line every this many records."""
DEMO_DIR = "stef-demo"
DEMO_WAREHOUSE = "stef-demo.duckdb"
NOT_EVALUATED_SHOWN = 5
"""How many not-evaluated records ``stef evaluate`` lists with their reason."""

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="STEF: reference-free quality monitor for Text-to-SQL agents.",
)


def input_files(path: Path, exclude: Path | None = None) -> list[Path]:
    """The JSONL files to evaluate: ``path`` itself, or the ``*.jsonl`` files in a directory.

    Args:
        path: a JSONL file or a directory of them.
        exclude: a file to leave out (the output file when it sits in the input directory).

    Raises:
        InputError: ``path`` does not exist, or is a directory without ``*.jsonl`` files.
    """
    from stef.logs import log_files

    if not path.exists():
        raise InputError(f"{path}: no such file or directory (give a JSONL file or a directory of *.jsonl files)")
    files = log_files(path)
    if exclude is not None:
        files = [f for f in files if f.resolve() != exclude.resolve()]
    if not files:
        raise InputError(f"{path}: directory holds no *.jsonl files")
    return files


# --------------------------------------------------------------------------- evaluate


def _lines(files: Sequence[Path]) -> Iterator[LogLine]:
    from stef.logs import read_log_file

    for path in files:
        try:
            yield from read_log_file(path)
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from exc


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
    :func:`flows.parallel.rejected_row` at its position; a record without a dialect is
    evaluated in ``dialect`` when one is given. Several processes:
    :func:`flows.parallel.evaluate_files_in_processes`.

    Args:
        lines: the lines of one or more log files (:func:`stef.logs.read_log_file`).
        rulebook: resolves each record's ``app_id`` to its rules.
        dialect: default dialect for records that name none (``None``: the rules decide).
        judge: the judge (``None``: the default symbolic judge), or an object that evaluates whole
            batches (:class:`stef.llm.evaluate.LLMEvaluator`: it has ``evaluate_many``).
        batch_size: records per :func:`stef.pipeline.evaluate.evaluate_many` call (default :data:`BATCH_SIZE`).
        schemas: the apps' schemas (``--schema-dir``; a model judge takes them from its settings).
        observed: the apps' observed catalogs (``--observed-catalog``; likewise).

    Returns:
        :class:`flows.parallel.OutputRow` items: the evaluation's JSON line and its counted fields.
    """
    from flows.parallel import rejected_row, with_dialect
    from stef.pipeline.evaluate import evaluate_many

    batch_evaluate = getattr(judge, "evaluate_many", None)
    batch_size = batch_size or BATCH_SIZE
    iterator = iter(lines)
    while batch := list(islice(iterator, batch_size)):
        records = [with_dialect(line.record, dialect) for line in batch if line.record is not None]
        if batch_evaluate is not None:
            evaluated = iter([OutputRow.of(e) for e in batch_evaluate(records, rulebook)])
        else:
            evaluated = iter(
                evaluate_many(
                    records, rulebook=rulebook, judge=judge, convert=OutputRow.of, schemas=schemas, observed=observed
                )
            )
        for line in batch:
            yield rejected_row(line) if line.record is None else next(evaluated)


def _workers(requested: int, evaluator: object | None) -> int:
    """Processes for ``stef evaluate``: the model judge runs in one process (it is I/O bound)."""
    if evaluator is not None:
        return 1
    if requested:
        return requested
    from flows.parallel import default_workers

    return default_workers()


def p90(values: Sequence[float]) -> float | None:
    """90th percentile with linear interpolation (numpy's default); ``None`` for no values.

    >>> p90([10.0, 20.0, 30.0, 40.0, 50.0])
    46.0
    """
    if not values:
        return None
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


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

    def add(self, evaluation: Evaluation | OutputRow) -> None:
        """Count one evaluation (the model or its output row)."""
        self.records += 1
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


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "–" if value is None else format(value, spec)


def _evaluation_tables(stats: EvaluationStats, source: Path, out: Path) -> list[Table]:
    overview = Table(title="stef evaluate", show_header=False, title_justify="left")
    overview.add_column("", style="bold")
    overview.add_column("", justify="right")
    for name, value in (
        ("input", one_line(source)),
        ("records", str(stats.records)),
        ("evaluated", str(stats.evaluated)),
        ("coverage", percent(stats.coverage)),
        ("mean Φ", _fmt(stats.mean_score)),
        ("P90 Φ", _fmt(p90(stats.scores))),
        ("mean P(correct)", _fmt(stats.mean_p_correct, ".3f")),
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
    if stats.not_evaluated:
        failures = Table(title=f"Not evaluated (first {NOT_EVALUATED_SHOWN})", title_justify="left")
        failures.add_column("run_id", overflow="fold")
        failures.add_column("status")
        failures.add_column("reason", overflow="fold")
        for run_id, status, reason in stats.not_evaluated:
            failures.add_row(Text(shorten(run_id)), Text(status), Text(one_line(reason)))
        tables.append(failures)
    return tables


@app.command()
def evaluate(
    input_path: Annotated[
        Path, typer.Argument(metavar="INPUT", help="A JSONL log file, or a directory of *.jsonl files.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write one JSON object per input line (JSONL).")],
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
            help="Stop calling the model once this much was spent; the remaining records get the symbolic verdict and say so.",
        ),
    ] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=0, help="Processes for the symbolic judge (0: one per usable core).")
    ] = 0,
    schema_dir: Annotated[Path | None, typer.Option("--schema-dir", help=SCHEMA_DIR_HELP)] = None,
    observed_catalog: Annotated[
        Path | None, typer.Option("--observed-catalog", metavar="FILE", help=OBSERVED_HELP)
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
        settings = validate_judge(
            judge,
            api_base=api_base,
            concurrency=concurrency,
            timeout_s=timeout,
            max_cost_usd=max_cost_usd,
            breaker_failures=breaker_failures,
            schema_dir=str(schema_dir) if schema_dir is not None else None,
            observed_catalog=str(observed_catalog) if observed_catalog is not None else None,
        )
        schemas = settings.schemas()  # a missing folder or catalog fails here, before any work
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
        files = input_files(input_path, exclude=out)
        stats = EvaluationStats()
        if out.is_dir():
            raise CliError(f"{out}: is a directory; give --out a file name (e.g. {out / 'scores.jsonl'})")
        # A regular file is written to OUT.partial and renamed at the end (no half-written output);
        # a symlink, FIFO or device (/dev/stdout) is written through, never replaced.
        special = out.is_symlink() or (out.exists() and not out.is_file())
        partial = out if special else out.with_name(out.name + ".partial")
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
        try:
            with _written_to(out, special), handle, progress:
                task = progress.add_task("evaluating", total=None)
                processes = _workers(workers, evaluator)
                if processes > 1:
                    from flows.parallel import evaluate_files_in_processes

                    rows = evaluate_files_in_processes(
                        files,
                        rulebook,
                        processes,
                        dialect=dialect,
                        batch_size=BATCH_SIZE,
                        schemas=schemas,
                        observed=observed,
                    )
                else:
                    rows = evaluate_lines(
                        _lines(files), rulebook, dialect=dialect, judge=evaluator, schemas=schemas, observed=observed
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
    for table in _evaluation_tables(stats, input_path, out):
        console.print(table)
    if evaluator is not None:
        console.print(judge_table(evaluator.stats))


@contextmanager
def _written_to(out: Path, streamed: bool) -> Iterator[None]:
    """Turn an :class:`OSError` of writing ``out`` (disk full, quota, I/O error) into a
    :class:`CliError` naming the file (reading errors are :class:`InputError` by then).
    ``streamed``: ``out`` is written through (a pipe, a device), not replaced at the end."""
    try:
        yield
    except OSError as exc:
        outcome = "the output there is incomplete" if streamed else f"{out} was left as it was"
        raise CliError(f"{out}: cannot write output ({exc.strerror or exc}); {outcome}") from exc


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:.6f}"


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
        ("cost_usd (sum of rows)", _usd(stats.cost_usd)),
        ("spent in this run", _usd(stats.spent_usd)),
        ("tokens (sum of rows)", str(stats.tokens)),
    ]
    if stats.unpriced:
        rows.append(("verdicts without a price", str(stats.unpriced)))
    if stats.usage_untrusted:
        rows.append(("untrusted usage (cost unknown)", str(stats.usage_untrusted)))
    for name, value in rows:
        table.add_row(Text(name), Text(value))
    if stats.breaker:
        table.caption, table.caption_justify = Text(stats.breaker), "left"
    return table


# --------------------------------------------------------------------------- nightly + demo

_METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("records", "records"),
    ("coverage", "coverage"),
    ("mean_p_correct", "P(ok)"),
    ("mean_score", "mean Φ"),
    ("p90_score", "P90 Φ"),
    ("n_excellent", "exc."),
    ("n_good", "good"),
    ("n_marginal", "marg."),
    ("n_poor", "poor"),
)
"""(metric-row key, column header) of the per agent × version tables."""
NAME_MIN_WIDTH = 24
"""Terminal tables keep names up to this many characters on one line (longer ones fold)."""
BANDS_CAPTION = "bands: exc. = Φ ≥ 90, good = 75–90, marg. = 50–75 (human review), poor < 50"


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if key == "coverage":
        return percent(float(value))
    if key in ("mean_score", "p90_score"):
        return _fmt(float(value))
    if key == "mean_p_correct":
        return _fmt(float(value), ".2f")
    return str(value)


def metrics_table(rows: Sequence[Mapping[str, Any]], title: str, day_key: str | None = None) -> Table:
    """A rich table of per agent × version metric rows (the ``daily_agent_metrics`` columns).

    Args:
        rows: mappings with ``agent_id``, ``agent_version``, ``records``, ``coverage``,
            ``mean_score``, ``p90_score``, ``n_excellent``, ``n_good``, ``n_marginal``, ``n_poor``.
        title: table title; when every row has the same agent, the agent is named in the title
            instead of a column (the table then fits 80 columns).
        day_key: key of the day in each row, to add a first ``day`` column (``None``: no column).
    """
    agents = sorted({str(row["agent_id"]) for row in rows})
    one_agent = len(agents) == 1
    table = Table(
        title=Text(f"{title} — agent {shorten(agents[0])}" if one_agent else title),
        title_justify="left",
        caption=BANDS_CAPTION,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        collapse_padding=True,
    )
    keys: list[str] = [] if day_key is None else [day_key]
    keys += ["agent_version"] if one_agent else ["agent_id", "agent_version"]

    def label(key: str, row: Mapping[str, Any]) -> str:  # names shortened, shown as text
        return str(row[key])[:10] if key == day_key else shorten(row[key])  # a day may come as a datetime

    for key in keys:
        header = {"agent_id": "agent", "agent_version": "version"}.get(key, "day")
        # A name up to NAME_MIN_WIDTH stays on one line; a longer one folds, never the numbers.
        widest = max((len(label(key, row)) for row in rows), default=0)
        table.add_column(header, no_wrap=key == day_key, overflow="fold", min_width=min(widest, NAME_MIN_WIDTH))
    for _, header in _METRIC_COLUMNS:
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(
            *[Text(label(key, row)) for key in keys], *[_cell(key, row.get(key)) for key, _ in _METRIC_COLUMNS]
        )
    return table


class TaskRunnerChoice(str, Enum):
    """Values of ``stef nightly --task-runner`` (:func:`flows.nightly.make_task_runner`)."""

    thread = "thread"
    process = "process"
    dask = "dask"


@app.command()
def nightly(
    log_date: Annotated[
        datetime | None,
        typer.Option("--date", formats=["%Y-%m-%d"], help="Day to process, YYYY-MM-DD (default: yesterday, UTC)."),
    ] = None,
    logs_root: Annotated[
        str, typer.Option("--logs-root", help="Folder (or fsspec URL) holding <YYYY-MM-DD>/*.jsonl.")
    ] = "./logs",
    warehouse: Annotated[
        str | None, typer.Option("--warehouse", help="DuckDB file (default: $STEF_WAREHOUSE, else ./stef.duckdb).")
    ] = None,
    rules_dir: Annotated[
        str | None,
        typer.Option("--rules-dir", help="Folder of <app_id>.json rule files (searched before the bundled rules)."),
    ] = None,
    max_bad_share: Annotated[
        float,
        typer.Option(
            "--max-bad-share", min=0.0, max=1.0, help="Fail when more than this share of lines is quarantined."
        ),
    ] = 0.05,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Records per evaluation batch.")] = BATCH_SIZE,
    judge: Annotated[str, typer.Option("--judge", metavar="symbolic|MODEL|hybrid:MODEL", help=JUDGE_HELP)] = "symbolic",
    api_base: Annotated[str | None, typer.Option("--api-base", metavar="URL", help=API_BASE_HELP)] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Model requests in flight per evaluation batch.")
    ] = 8,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(
            "--max-cost-usd", min=0.0, help="Budget for model calls in this run (split evenly over the batches)."
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=0.001,
            help="Seconds per model request (then retried: 429/5xx/timeouts, exponential backoff).",
        ),
    ] = 60.0,
    breaker_failures: Annotated[int, typer.Option("--breaker-failures", min=0, help=BREAKER_HELP)] = 5,
    task_runner: Annotated[
        TaskRunnerChoice,
        typer.Option(
            "--task-runner",
            help="Where evaluation batches run: thread (default), process (every core), dask (prefect-dask: --dask-address, else a local cluster).",
        ),
    ] = TaskRunnerChoice.thread,
    workers: Annotated[
        int | None,
        typer.Option("--workers", min=1, help="Threads / processes / local Dask workers (default: the runner's own)."),
    ] = None,
    dask_address: Annotated[
        str | None,
        typer.Option(
            "--dask-address",
            metavar="tcp://HOST:8786",
            help="Scheduler of a running Dask cluster (with --task-runner dask).",
        ),
    ] = None,
    schema_dir: Annotated[str | None, typer.Option("--schema-dir", help=SCHEMA_DIR_HELP)] = None,
    observed_catalog: Annotated[
        str | None, typer.Option("--observed-catalog", metavar="FILE", help=OBSERVED_HELP)
    ] = None,
    learn_catalog: Annotated[
        bool,
        typer.Option(
            "--learn-catalog",
            help="Learn the observed catalogs from the warehouse's answers of the 30 days before the day, store and use them.",
        ),
    ] = False,
) -> None:
    """Run the nightly flow for one day: load, validate, evaluate, store, daily metrics."""
    from stef.time_cap import configured_time_cap_s

    with user_errors():
        validate_judge(
            judge,
            api_base=api_base,
            concurrency=concurrency,
            max_cost_usd=max_cost_usd,
            timeout_s=timeout,
            breaker_failures=breaker_failures,
            schema_dir=schema_dir,
            observed_catalog=observed_catalog,
        ).observed()
        configured_time_cap_s()  # an invalid $STEF_TIME_CAP_S fails here, not in every batch
        if dask_address is not None and task_runner is not TaskRunnerChoice.dask:
            raise CliError("--dask-address needs --task-runner dask")
        from flows.nightly import run_nightly

        with running_flows():
            summary = run_nightly(
                task_runner=task_runner.value,
                workers=workers,
                dask_address=dask_address,
                log_date=log_date.date() if log_date is not None else None,
                logs_root=logs_root,
                warehouse=warehouse,
                rules_dir=rules_dir,
                max_bad_share=max_bad_share,
                batch_size=batch_size,
                judge=judge,
                api_base=api_base,
                concurrency=concurrency,
                max_cost_usd=max_cost_usd,
                timeout_s=timeout,
                breaker_failures=breaker_failures,
                schema_dir=schema_dir,
                observed_catalog=observed_catalog,
                learn_catalog=learn_catalog,
            )
    console.print(summary_line(summary), soft_wrap=True)
    if summary.judge != "symbolic":
        cost = sum(float(row.get("judge_cost_usd") or 0.0) for row in summary.metrics)
        judged = sum(int(row.get("n_llm_judged") or 0) for row in summary.metrics)
        fallbacks = sum(int(row.get("n_judge_fallback") or 0) for row in summary.metrics)
        console.print(
            Text(
                f"judge {one_line(summary.judge)}: {judged} model verdicts, {fallbacks} fallbacks to symbolic, cost {_usd(cost)}"
            ),
            soft_wrap=True,
        )
        if summary.judge_breaker is not None:
            console.print(Text(f"judge {one_line(summary.judge)}: {summary.judge_breaker}"), soft_wrap=True)
    console.print(metrics_table(list(summary.metrics), title=f"Daily metrics {summary.log_date}"))


def demo_days() -> list[str]:
    """The days (``YYYY-MM-DD``) of the sample logs bundled in ``flows/demo_data``."""
    from importlib import resources

    root = resources.files("flows.demo_data")
    days = []
    for entry in root.iterdir():
        try:
            date.fromisoformat(entry.name)
        except ValueError:
            continue
        if entry.is_dir():
            days.append(entry.name)
    return sorted(days)


def copy_demo_logs(logs_root: Path) -> list[str]:
    """Copy the bundled sample logs to ``<logs_root>/<YYYY-MM-DD>/*.jsonl``; return the days.

    Also copies ``labels.jsonl`` (NL2SQL-BUGs labels, to check scores against) and
    ``schemas/<app_id>.sql`` (the databases' DDL, for ``--schema-dir``) beside ``logs_root``.
    Existing files of the same name are overwritten; nothing else is touched.

    Raises:
        CliError: the package holds no sample logs (a broken installation).
    """
    from importlib import resources

    root = resources.files("flows.demo_data")
    days = demo_days()
    if not days:
        raise CliError("the installed package holds no sample logs in flows/demo_data/: reinstall stef")
    for day in days:
        target = logs_root / day
        target.mkdir(parents=True, exist_ok=True)
        for entry in root.joinpath(day).iterdir():
            if entry.name.endswith(".jsonl"):
                with entry.open("rb") as src, (target / entry.name).open("wb") as dst:
                    shutil.copyfileobj(src, dst)
    labels = root.joinpath("labels.jsonl")
    if labels.is_file():
        (logs_root.parent / "labels.jsonl").write_bytes(labels.read_bytes())
    schemas = root.joinpath("schemas")
    if schemas.is_dir():
        target = logs_root.parent / "schemas"
        target.mkdir(parents=True, exist_ok=True)
        for entry in schemas.iterdir():
            if entry.name.endswith(".sql"):
                (target / entry.name).write_bytes(entry.read_bytes())
    return days


@app.command()
def demo(
    workdir: Annotated[Path, typer.Option("--workdir", help="Where to create stef-demo/ and stef-demo.duckdb.")] = Path(
        "."
    ),
) -> None:
    """Run the nightly flow on the bundled sample logs (3 days, 2 agent versions).

    Needs nothing but the installed package: the sample logs (real questions and SQL from
    NL2SQL-BUGs / BIRD) are copied to WORKDIR/stef-demo/logs/, scored day by day into
    WORKDIR/stef-demo.duckdb, and the daily metrics are read back and printed.
    """
    with user_errors():
        logs_root = workdir / DEMO_DIR / "logs"
        warehouse_path = workdir / DEMO_WAREHOUSE
        days = copy_demo_logs(logs_root)
        console.print(
            f"Sample logs: {logs_root}/<day>/*.jsonl ({len(days)} days: {days[0]} … {days[-1]})", soft_wrap=True
        )
        from flows.nightly import nightly_days
        from warehouse import connect, read_daily_metrics

        with running_flows():
            summaries = nightly_days(days, logs_root=str(logs_root), warehouse=str(warehouse_path))
        with connect(str(warehouse_path)) as conn:
            frame = read_daily_metrics(
                conn,
                start=summaries[0].log_date,
                end=summaries[-1].log_date,
                evaluator_version=summaries[-1].evaluator_version,
            )
    for summary in summaries:
        console.print(summary_line(summary), soft_wrap=True)
    console.print(
        metrics_table(
            list(frame.iter_rows(named=True)),
            title=f"Daily metrics read back from {warehouse_path}",
            day_key="log_date",
        )
    )
    console.print(
        f"Labels to check the scores against: {logs_root.parent / 'labels.jsonl'}\n"
        f"Score one day without a warehouse: stef evaluate {logs_root / days[-1]} --out scores.jsonl\n"
        f"... and against the databases' schemas: stef evaluate {logs_root / days[-1]} --schema-dir {logs_root.parent / 'schemas'} --out scores.jsonl",
        soft_wrap=True,
    )


@app.command("bench-judge")
def bench_judge(
    labelled_file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="Labelled JSONL in the NL2SQL-BUGs format (question, evidence, sql, label, error_types, db_id).",
        ),
    ],
    dialect: Annotated[str, typer.Option("--dialect", help="sqlglot dialect of the SQL in FILE.")] = "sqlite",
    threshold: Annotated[
        float, typer.Option("--threshold", help="Φ at or above which an answer counts as predicted correct.")
    ] = 75.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on one line instead of tables.")
    ] = False,
    schema_dir: Annotated[
        Path | None,
        typer.Option(
            "--schema-dir",
            help="Folder of <db_id>.sql or .json schemas of FILE's databases (e.g. ../shared/data/nl2sql_bugs/schemas).",
        ),
    ] = None,
    observed_catalog: Annotated[
        Path | None,
        typer.Option(
            "--observed-catalog",
            metavar="FILE",
            help="Observed catalog of FILE's databases (learn it on other answers, with `stef catalog learn`).",
        ),
    ] = None,
) -> None:
    """Measure the judge on labelled records: accuracy, AUROC, precision/recall, coverage, recall per error category.

    Each row maps to a log record as the NL2SQL-BUGs README says (question + " " + evidence is
    the enriched question); the label is used only for measuring.
    """
    from stef.monitor.benchmark import bugs_record_to_log, measure, read_bugs_file
    from stef.pipeline.evaluate import evaluate_many

    with user_errors():
        resolved = validate_dialect(dialect)
        if not labelled_file.is_file():
            raise InputError(f"{labelled_file}: no such file")
        try:
            rows = read_bugs_file(labelled_file)
            records = [bugs_record_to_log(row, dialect=resolved) for row in rows]
        except (ValueError, KeyError) as exc:
            raise InputError(f"{labelled_file}: not an NL2SQL-BUGs-format file ({exc})") from exc
        from stef.pipeline.observed import load_observed_catalogs
        from stef.pipeline.schema_book import SchemaBook

        schemas = SchemaBook(schema_dir) if schema_dir is not None else None
        observed = load_observed_catalogs(observed_catalog) if observed_catalog is not None else None
        figures = measure(rows, evaluate_many(records, schemas=schemas, observed=observed), threshold)
    if as_json:
        console.print_json(json.dumps(figures.__dict__), indent=None)
        return
    table = Table(
        title=Text(f"Judge on {one_line(labelled_file.name)} (Φ ≥ {threshold:g} = predicted correct)"),
        box=box.SIMPLE_HEAD,
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name in (
        "records",
        "coverage",
        "accuracy",
        "auroc",
        "accuracy_p_correct",
        "auroc_p_correct",
        "ece",
        "mean_p_correct",
        "share_correct",
        "negative_precision",
        "negative_recall",
        "positive_precision",
        "positive_recall",
    ):
        value = getattr(figures, name)
        table.add_row(name, str(value) if isinstance(value, int) else f"{value:.3f}")
    console.print(table)
    per_category = Table(
        title="Recall per error category (share of incorrect SQL scored < threshold)", box=box.SIMPLE_HEAD
    )
    per_category.add_column("category")
    per_category.add_column("incorrect rows", justify="right")
    per_category.add_column("recall", justify="right")
    for category, recall in figures.recall_by_category.items():
        per_category.add_row(Text(one_line(category)), str(figures.category_counts[category]), f"{recall:.2f}")
    console.print(per_category)


@app.command()
def version() -> None:
    """Print the evaluator version."""
    from stef.models import EVALUATOR_VERSION

    typer.echo(EVALUATOR_VERSION)


# Monitoring commands (drift, backfill, report, serve) live in their own module.
_register_monitoring(app)

# The reference-based campaign commands (`stef campaign ...`, DESIGN.md §7).
_register_campaign(app)

# Database schemas for --schema-dir (`stef catalog ...`).
_register_catalog(app)


if __name__ == "__main__":
    app()
