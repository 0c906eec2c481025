"""``stef nightly`` and ``stef demo``: run the nightly flow from the command line and print the daily metrics.

Prefect, DuckDB and the flows are imported inside the commands, so ``--help`` and errors found
before any work (a malformed date, an invalid judge) never load them.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from datetime import date
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from flows.cli.common import (
    DAY_METAVAR,
    JUDGE_HELP,
    OBSERVED_HELP,
    SCHEMA_DIR_HELP,
    ApiBaseOption,
    BatchSizeOption,
    BreakerFailuresOption,
    CliError,
    CommandClock,
    ConcurrencyOption,
    TimeoutOption,
    check_workers,
    console,
    day_option,
    drift_sentences,
    err_console,
    interruptible,
    nightly_preparation,
    number,
    percent,
    running_flows,
    suggested_program,
    summary_line,
    usd,
    user_errors,
    validate_judge,
)
from flows.cli.traces import (
    PushEndpointOption,
    PushOption,
    SourceEndpointOption,
    SourceInputOption,
    SourceMappingOption,
    SourceOption,
    SourceProjectOption,
    check_trace_options,
)
from stef.display import one_line, shorten, visible_lines

if TYPE_CHECKING:
    pass

DEMO_DIR = "stef-demo"
DEMO_WAREHOUSE = "stef-demo.duckdb"


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
        return number(float(value))
    if key == "mean_p_correct":
        return number(float(value), ".2f")
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

    pool = "pool"
    thread = "thread"
    process = "process"
    dask = "dask"


def nightly(
    log_date: Annotated[
        date | None,
        typer.Option(
            "--date",
            "--log-date",  # the nightly deployment's parameter is log_date
            parser=day_option,
            metavar=DAY_METAVAR,
            help="Day to process (default: yesterday, UTC).",
        ),
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
    batch_size: BatchSizeOption = None,
    judge: Annotated[str, typer.Option("--judge", metavar="symbolic|MODEL|hybrid:MODEL", help=JUDGE_HELP)] = "symbolic",
    api_base: ApiBaseOption = None,
    concurrency: ConcurrencyOption = 8,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(
            "--max-cost-usd",
            min=0.0,
            help="Budget in USD for the model calls of the whole run (the process and dask runners split it evenly over the batches).",
        ),
    ] = None,
    timeout: TimeoutOption = 60.0,
    breaker_failures: BreakerFailuresOption = 5,
    task_runner: Annotated[
        TaskRunnerChoice,
        typer.Option(
            "--task-runner",
            help="Where evaluation batches run: pool (default: tasks in threads, scoring in one process per core), "
            "thread (one core), process (Prefect's process runner: a temporary API per worker without a server), "
            "dask (prefect-dask: --dask-address, else a local cluster).",
        ),
    ] = TaskRunnerChoice.pool,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Scoring processes / threads / processes / local Dask workers (default: the runner's own).",
        ),
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
    notify_webhook: Annotated[
        str | None,
        typer.Option(
            "--notify-webhook",
            metavar="URL",
            help="Slack-compatible incoming webhook: each new drift for the worse is posted there as its sentence "
            "(default: $STEF_NOTIFY_WEBHOOK).",
        ),
    ] = None,
    source: SourceOption = "files",
    source_endpoint: SourceEndpointOption = None,
    source_project: SourceProjectOption = None,
    source_input: SourceInputOption = None,
    source_mapping: SourceMappingOption = None,
    push: PushOption = None,
    push_endpoint: PushEndpointOption = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Show only warnings and errors of Prefect on the console.")
    ] = False,
    timings: Annotated[
        bool,
        typer.Option("--timings", help="Print the seconds of each phase (start-up, load, validate, evaluate ...)."),
    ] = False,
) -> None:
    """Run the nightly flow for one day: load, validate, evaluate, store, daily metrics."""
    from stef.time_cap import configured_time_cap_s

    with user_errors():
        configured_time_cap_s()  # an invalid $STEF_TIME_CAP_S fails here, not in every batch
        if dask_address is not None and task_runner is not TaskRunnerChoice.dask:
            raise CliError("--dask-address needs --task-runner dask")
        check_workers(workers, threads=task_runner is TaskRunnerChoice.thread)
        check_trace_options(source, source_endpoint, source_project, source_input, source_mapping, push, push_endpoint)
        day: date | None = None

        def prepare() -> None:  # while Prefect's temporary API boots; an error here stops it at once
            nonlocal day
            from flows.nightly import prepare_process, resolve_log_date
            from stef.monitor.alerts import NOTIFY_WEBHOOK_ENV
            from tasks.backfill import day_has_logs, logs_root_note, unread_files_note
            from warehouse.connection import warehouse_file

            warehouse_file(warehouse)  # a folder given as the warehouse fails here, before the flow starts

            # The judge is checked here, not before the server starts: checking it imports the
            # pipeline (and, for a model, litellm: 2.5 s), which then overlaps the server's boot
            # instead of delaying it (0.3 s of a symbolic nightly's start-up).
            settings = validate_judge(
                judge,
                api_base=api_base,
                concurrency=concurrency,
                max_cost_usd=max_cost_usd,
                timeout_s=timeout,
                breaker_failures=breaker_failures,
                schema_dir=schema_dir,
                observed_catalog=observed_catalog,
            )
            settings.observed()
            from stef.monitor.drift import thresholds_from_env

            thresholds_from_env()  # a bad $STEF_DRIFT_THRESHOLDS fails here, not silently in the drift step
            if notify_webhook:
                os.environ[NOTIFY_WEBHOOK_ENV] = (
                    notify_webhook  # read by the drift step, in this process and its workers
                )
            day = resolve_log_date(log_date)
            if source == "files" and not day_has_logs(logs_root, day):  # before any flow runs: said once, at once
                unread = unread_files_note(logs_root, day) or logs_root_note(logs_root)
                raise CliError(
                    f"no logs for {day} in {one_line(logs_root)} (expected "
                    f"{one_line(logs_root.rstrip('/'))}/{day}/*.jsonl{'; ' + unread if unread else ''}); "
                    "nothing was run or stored"
                )
            prepare_process(task_runner.value, workers, settings.is_symbolic)
            if source == "files":  # after the fork: the workers do not inherit the lines
                from tasks.logs import prefetch_day

                prefetch_day(logs_root, day)

        clock = CommandClock()

        stored: list[date] = []

        def kept() -> str:
            which = "the day" if day is None else str(day)
            if stored:
                return f"{which} was stored before it (the interrupt came after the flow run)"
            return (
                f"{which} was not finished and is not marked done (its rows are written in one transaction, "
                "replaced when redone); run the same command again to redo it"
            )

        try:
            with interruptible(kept), running_flows(quiet=quiet, prepare=clock.timed("prepare", prepare)):
                from flows.nightly import run_nightly

                clock.lap("start-up")
                summary = run_nightly(
                    task_runner=task_runner.value,
                    workers=workers,
                    dask_address=dask_address,
                    log_date=day,
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
                    source=source,
                    source_endpoint=source_endpoint,
                    source_project=source_project,
                    source_input=source_input,
                    source_mapping=source_mapping,
                    push=push,
                    push_endpoint=push_endpoint,
                )
                stored.append(summary.log_date)
                clock.lap("flow run", summary.timings)
            clock.lap("stop")
        finally:
            from tasks.logs import discard_prefetched

            discard_prefetched()  # lines read ahead that no flow run took (it failed first)
    if timings:
        console.print(clock.table())
    if summary.pulled:
        console.print(Text(f"pulled {summary.pulled}"), soft_wrap=True)
    console.print(summary_line(summary), soft_wrap=True)
    if summary.pushed:
        console.print(Text(f"pushed {summary.pushed}"), soft_wrap=True)
    if summary.push_error:
        err_console.print(
            Text.assemble(("push failed: ", "bold red"), visible_lines(summary.push_error)), soft_wrap=True
        )
    for line in drift_sentences(summary.drift_checks):
        console.print(line, soft_wrap=True)
    if summary.judge != "symbolic":
        cost = sum(float(row.get("judge_cost_usd") or 0.0) for row in summary.metrics)
        judged = sum(int(row.get("n_llm_judged") or 0) for row in summary.metrics)
        fallbacks = sum(int(row.get("n_judge_fallback") or 0) for row in summary.metrics)
        console.print(
            Text(
                f"judge {one_line(summary.judge)}: {judged} model verdicts, {fallbacks} fallbacks to symbolic, cost {usd(cost)}"
            ),
            soft_wrap=True,
        )
        if summary.judge_breaker is not None:
            console.print(Text(f"judge {one_line(summary.judge)}: {one_line(summary.judge_breaker)}"), soft_wrap=True)
    if summary.metrics:
        console.print(metrics_table(list(summary.metrics), title=f"Daily metrics {summary.log_date}"))
    else:  # a trace store's day without spans, or every line quarantined: a line, not a table without rows
        console.print(
            Text(f"no daily metrics for {summary.log_date}: no record of that day was stored"), soft_wrap=True
        )


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


def demo(
    workdir: Annotated[Path, typer.Option("--workdir", help="Where to create stef-demo/ and stef-demo.duckdb.")] = Path(
        "."
    ),
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Show only warnings and errors of Prefect on the console.")
    ] = False,
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

        def kept() -> str:
            return (
                f"the demo days scored before it stay in {warehouse_path} (each day is written in one "
                "transaction); run stef demo again to score them all"
            )

        with interruptible(kept), running_flows(quiet=quiet, prepare=nightly_preparation()):
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
    for line in drift_sentences(summaries[-1].drift_checks):
        console.print(line, soft_wrap=True)
    last = summaries[-1].log_date
    year, week, _ = last.isocalendar()
    agents = sorted({str(c["agent_id"]) for c in summaries[-1].drift_checks if c.get("kind") == "version"})
    stef = suggested_program()  # shell-quoted already; `.venv/bin/stef` when the venv is not activated
    # Every path quoted for a shell (a --workdir with a space), and printed as text, never as markup.
    warehouse_arg = shlex.quote(str(warehouse_path))
    labels = logs_root.parent / "labels.jsonl"
    day_arg = shlex.quote(str(logs_root / days[-1]))
    console.print(
        Text(
            "Next:\n"
            + "".join(f"  {stef} drift --agent {shlex.quote(agent)} --warehouse {warehouse_arg}\n" for agent in agents)
            + f"  {stef} report --warehouse {warehouse_arg} --week {year}-W{week:02d} --out stef-demo-report.html"
        ),
        soft_wrap=True,
    )
    console.print(
        Text(
            f"Check STEF's calls against the answers' labels ({labels}; the line"
            " quarantined on purpose has no answer to label):\n"
            f"  {stef} review import {shlex.quote(str(labels))} --warehouse {warehouse_arg}"
            " --reviewer benchmark --skip-unknown\n"
            f"  {stef} review stats --warehouse {warehouse_arg}\n"
            f"Score one day without a warehouse: {stef} evaluate {day_arg} --out scores.jsonl\n"
            f"... and against the databases' schemas: {stef} evaluate {day_arg} --schema-dir "
            f"{shlex.quote(str(logs_root.parent / 'schemas'))} --out scores.jsonl"
        ),
        soft_wrap=True,
    )
