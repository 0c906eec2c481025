"""The monitoring commands of the ``stef`` CLI: ``drift``, ``backfill``, ``report``, ``serve``.

Registered on the app of :mod:`flows.cli.main` by :func:`register`. Like the rest of the CLI, this
module imports only typer, rich and pure ``stef`` code at import time; Prefect and DuckDB are
imported inside the commands. Errors STEF raises on purpose print as one ``error: …`` line with
exit code 2 (:func:`flows.cli.common.user_errors`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import date
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from flows.cli.common import (
    DAY_METAVAR,
    SPREADSHEET_SUFFIXES,
    ApiBaseOption,
    BatchSizeOption,
    BreakerFailuresOption,
    CliError,
    ConcurrencyOption,
    TimeoutOption,
    check_day_range,
    check_evaluator_version,
    check_not_overwriting,
    console,
    day_option,
    drift_sentences,
    err_console,
    interruptible,
    nightly_preparation,
    running_flows,
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
from stef.display import DISPLAY_WIDTH, json_line, one_line, quoted, shorten
from stef.monitor.alerts import is_new_worse_drift
from stef.monitor.models import DEFAULT_WINDOW_DAYS, DriftThresholds

if TYPE_CHECKING:
    from flows.backfill import BackfillDay
    from stef.monitor.models import DriftCheck

_DEFAULTS = DriftThresholds()


def register(app: typer.Typer) -> None:
    """Add ``drift``, ``backfill``, ``report``, ``export`` and ``serve`` to ``app``."""
    app.command("drift")(drift)
    app.command("export")(export)
    app.command("quarantine")(quarantine)
    app.command("backfill")(backfill)
    app.command("report")(report)
    app.command("serve")(serve)


# --------------------------------------------------------------------------- drift


def _num(value: Any, spec: str = "+.2f") -> str:
    return "–" if value is None else format(value, spec)


def _ci(value: Any, spec: str = ".2f") -> str:
    return "" if not value or value[0] is None else f"[{value[0]:+{spec}}, {value[1]:+{spec}}]"


def left_out_line(entry: Mapping[str, Any]) -> str:
    """One line on answers a drift check does not see (:attr:`stef.monitor.models.DriftCheck.left_out`).

    >>> print(left_out_line({"side": "baseline", "agent_version": "v1", "evaluator_version": "stef-1",
    ...     "evaluations": 359, "first_day": "2026-11-24", "last_day": "2026-11-26"}))
    baseline: 359 answers of v1 (2026-11-24 … 2026-11-26) scored only by evaluator stef-1, not compared; to compare like with like, score those days again with the same options (stef backfill --force)
    """
    return (
        f"{entry['side']}: {entry['evaluations']} answers of {shorten(entry['agent_version'])} "
        f"({entry['first_day']} … {entry['last_day']}) scored only by evaluator {one_line(entry['evaluator_version'])}, "
        "not compared; to compare like with like, score those days again with the same options (stef backfill --force)"
    )


def drift_tables(check: DriftCheck) -> list[Table]:
    """The verdict table and the statistics table that ``stef drift`` prints.

    Agent ids, versions and reasons are :class:`rich.text.Text` (never console markup), on one
    line, names shortened (:func:`stef.display.shorten`; ``--json`` has them whole).
    """
    s = check.summary()
    verdict = s["verdict"] + (f" / {s['direction']}" if s["direction"] else "")
    style = "bold red" if s["direction"] == "worse" else ("bold green" if s["direction"] == "better" else "bold")
    head = Table(
        title=Text(f"Drift check — agent {shorten(s['agent_id'])} ({s['kind']})"),
        show_header=False,
        title_justify="left",
        box=box.SIMPLE,
    )
    head.add_column("", style="bold")
    head.add_column("")
    bw, cw = s["baseline_window"], s["candidate_window"]
    for name, value in (
        ("verdict", Text(verdict, style=style)),
        ("in short", Text(one_line(s["sentence"]))),
        (
            "baseline",
            Text(
                f"{shorten(s['baseline_version'])}  {bw[0]} … {bw[1]}  ({s['n_baseline']} scored of {s['records_baseline']})"
            ),
        ),
        (
            "candidate",
            Text(
                f"{shorten(s['candidate_version'])}  {cw[0]} … {cw[1]}  ({s['n_candidate']} scored of {s['records_candidate']})"
            ),
        ),
        ("evaluator", Text(one_line(s["evaluator_version"]))),
        *(("reason", Text(one_line(reason))) for reason in s["reasons"]),
        *(("left out", Text(left_out_line(entry))) for entry in s["left_out"]),
    ):
        head.add_row(name, value)
    level = f"{check.result.thresholds.confidence_level:.0%}"
    stats = Table(
        title=f"Statistics (candidate − baseline; {level} intervals: normal for the error rates, bootstrap for the rest)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for column in ("statistic", "baseline", "candidate", "delta", "interval"):
        stats.add_column(column, justify="left" if column == "statistic" else "right", no_wrap=True)
    for name, key in (
        ("wrong answers (estimated)", "error_rate"),
        ("wrong, unscored counted", "error_rate_with_unscored"),
    ):
        stats.add_row(
            name,
            _num(s[f"{key}_baseline"], ".3f"),
            _num(s[f"{key}_candidate"], ".3f"),
            _num(s[f"{key}_delta"], "+.3f"),
            _ci(s[f"{key}_delta_ci"], ".3f"),
        )
    if s["paired_questions"] is not None:
        stats.add_row(
            f"paired ({s['paired_questions']} shared questions)",
            "",
            "",
            _num(s["paired_error_rate_delta"], "+.3f"),
            _ci(s["paired_error_rate_delta_ci"], ".3f"),
        )
    for name, key, spec in (("mean Φ", "mean", ".2f"), ("P90 Φ", "p90", ".2f"), ("coverage", "coverage", ".3f")):
        stats.add_row(
            name,
            _num(s[f"{key}_baseline"], spec),
            _num(s[f"{key}_candidate"], spec),
            _num(s[f"{key}_delta"], "+" + spec),
            _ci(s[f"{key}_delta_ci"]),
        )
    for name, value, spec in (
        ("KS statistic", s["ks_statistic"], ".3f"),
        ("KS p-value", s["ks_pvalue"], ".3g"),
        ("Wasserstein (Φ)", s["wasserstein"], ".2f"),
        ("Wasserstein / σ", s["wasserstein_norm"], ".3f"),
        ("PSI (10-point bins)", s["psi"], ".3f"),
        ("χ² verdict p", s["verdict_chi2_pvalue"], ".3g"),
        ("χ² filter status p", s["filter_status_chi2_pvalue"], ".3g"),
    ):
        stats.add_row(name, "", "", _num(value, spec), "")
    tables = [head, stats]
    if s["category_shifts"]:
        shifts = Table(
            title="Suspected error categories (share of scored answers; Fisher's exact test, Benjamini–Hochberg q)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for column in ("category", "baseline", "candidate", "p", "q", "significant"):
            shifts.add_column(column, justify="left" if column == "category" else "right", no_wrap=True)
        for shift in s["category_shifts"]:
            shifts.add_row(
                Text(shorten(shift["category"])),
                f"{shift['baseline_share']:.1%}",
                f"{shift['candidate_share']:.1%}",
                f"{shift['pvalue']:.3g}",
                f"{shift['qvalue']:.3g}",
                "yes" if shift["significant"] else "no",
            )
        tables.append(shifts)
    return tables


def drift(
    agent: Annotated[str, typer.Option("--agent", help="Agent id to check.")],
    warehouse: Annotated[
        str | None, typer.Option("--warehouse", help="DuckDB file (default: $STEF_WAREHOUSE, else ./stef.duckdb).")
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Baseline agent version (default: the version before the candidate)."),
    ] = None,
    candidate: Annotated[
        str | None, typer.Option("--candidate", help="Candidate agent version (default: the newest).")
    ] = None,
    start: Annotated[
        date | None, typer.Option("--start", parser=day_option, metavar=DAY_METAVAR, help="First day of the window.")
    ] = None,
    end: Annotated[
        date | None,
        typer.Option(
            "--end",
            parser=day_option,
            metavar=DAY_METAVAR,
            help="Last day of the window (default: the candidate's newest day).",
        ),
    ] = None,
    temporal: Annotated[
        bool,
        typer.Option(
            "--temporal", help="Compare the candidate with its own previous window instead of another version."
        ),
    ] = False,
    window_days: Annotated[
        int, typer.Option("--window-days", min=1, max=36_500, help="Window length when --start is not given.")
    ] = DEFAULT_WINDOW_DAYS,
    min_samples: Annotated[
        int, typer.Option("--min-samples", min=2, help="Scored records needed per side (fewer: insufficient_data).")
    ] = _DEFAULTS.min_samples,
    error_rate_delta: Annotated[
        float,
        typer.Option(
            "--error-rate-delta",
            min=0.0,
            max=1.0,
            help="Smallest |delta of the estimated share of wrong answers| (share, 0.05 = 5 points) that counts as drift.",
        ),
    ] = _DEFAULTS.error_rate_delta,
    mean_delta: Annotated[
        float,
        typer.Option(
            "--mean-delta",
            min=0.0,
            help="Smallest |mean Φ delta| (points) flagged as supporting evidence (decides only for evaluations without p_correct).",
        ),
    ] = _DEFAULTS.mean_delta,
    p90_delta: Annotated[
        float,
        typer.Option("--p90-delta", min=0.0, help="The same for the P90 Φ delta (points)."),
    ] = _DEFAULTS.p90_delta,
    coverage_delta: Annotated[
        float,
        typer.Option(
            "--coverage-delta", min=0.0, max=1.0, help="Smallest |coverage delta| (share) that counts as drift."
        ),
    ] = _DEFAULTS.coverage_delta,
    confidence: Annotated[
        float, typer.Option("--confidence", min=0.5, max=0.999, help="Level of the confidence intervals.")
    ] = _DEFAULTS.confidence_level,
    evaluator_version: Annotated[
        str | None,
        typer.Option("--evaluator-version", help="Whose evaluations (default: the newest stored for the agent)."),
    ] = None,
    no_store: Annotated[
        bool,
        typer.Option("--no-store", help="Do not record the check in drift_checks (opens the warehouse read-only)."),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on one line instead of tables.")
    ] = False,
) -> None:
    """Compare the estimated share of wrong answers of a candidate agent version with a baseline version.

    Default: the newest version against the one before it, over the 7 days ending at the
    candidate's newest day (the baseline's own last 7 days when it stopped earlier). The share of
    wrong answers is estimated from the judge's calibrated p_correct, corrected for the shift in
    that share. Verdict ``drift`` only when its delta (or the coverage delta) reaches its threshold
    and its 95 % interval excludes 0; ``insufficient_data`` below --min-samples. Exit code 0
    whatever the verdict; the check is stored in the warehouse's drift_checks table.
    """

    with user_errors():
        check_day_range(start, end, "window")
        from tasks.drift_checks import run_drift_check
        from warehouse import WarehouseReadOnlyError, existing_warehouse

        thresholds = DriftThresholds(
            min_samples=min_samples,
            error_rate_delta=error_rate_delta,
            mean_delta=mean_delta,
            p90_delta=p90_delta,
            coverage_delta=coverage_delta,
            confidence_level=confidence,
        )
        try:
            if evaluator_version is not None:  # a typo: name the stored versions, not "no agent has evaluations"
                check_evaluator_version(existing_warehouse(warehouse), evaluator_version, read_only=no_store)
            check = run_drift_check(
                warehouse,
                agent,
                baseline=baseline,
                candidate=candidate,
                start=start,
                end=end,
                temporal=temporal,
                window_days=window_days,
                thresholds=thresholds,
                evaluator_version=evaluator_version,
                store=not no_store,
            )
        except WarehouseReadOnlyError as exc:
            if no_store:
                raise
            raise WarehouseReadOnlyError(
                f"{exc} (to run the check without recording it, add --no-store: it opens the warehouse read-only)"
            ) from exc
    if as_json:
        typer.echo(json_line(check.summary(), allow_nan=False))
        return
    for table in drift_tables(check):
        console.print(table)


# --------------------------------------------------------------------------- backfill


def _day_line(day: BackfillDay, evaluator_version: str) -> str:
    if day.status == "skipped":
        # the flow's version holds the warehouse's deployment calibrators (+calib=…), the command's does not
        done_with = one_line(day.evaluator_version or evaluator_version)
        return f"{day.log_date}: skipped (already done with {done_with}; --force redoes it)"
    if day.status == "no_logs":
        if day.detail:
            return f"{day.log_date}: no logs for this day ({one_line(day.detail)}), nothing stored"
        return f"{day.log_date}: no logs for this day, nothing stored"

    if day.summary is None:
        return f"{day.log_date}: done"
    line = summary_line(day.summary)
    if day.rerun_fallbacks:
        line += f"; rerun: {day.rerun_fallbacks} records fell back to the symbolic verdict"
    if day.fallbacks:
        line += (
            f"; {day.fallbacks} records {'still ' if day.rerun_fallbacks else ''}fell back to the symbolic verdict "
            "(the next backfill reruns the day)"
        )
    elif day.rerun_fallbacks:
        line += ", none now"
    drift_checks = getattr(day.summary, "drift_checks", None) or []
    worse = [c for c in drift_checks if is_new_worse_drift(c)]  # a recomputed check only when it newly turned worse
    if worse:
        line += "; drift for the worse: " + ", ".join(
            f"{shorten(c['agent_id'])} {shorten(c['baseline_version'])}→{shorten(c['candidate_version'])}"
            + (f" (window to {c['candidate_window'][1]}, recomputed)" if c.get("recomputed") else "")
            for c in worse
        )
    return line


def _interrupted_backfill(days: Sequence[date], finished: Sequence[BackfillDay]) -> str:
    """What an interrupted backfill kept: the days stored (or found done) before the signal, the
    day it was running (not marked done: the next run redoes it) and how to resume.

    >>> from datetime import date
    >>> from flows.backfill import BackfillDay
    >>> days = [date(2026, 11, 23), date(2026, 11, 24), date(2026, 11, 25)]
    >>> print(_interrupted_backfill(days, [BackfillDay(days[0], "done")]))
    1 of 3 days stored before it (2026-11-23), 0 already done; 2026-11-24 was not finished and is not marked done (its rows are written in one transaction, replaced when redone); run the same command again to resume
    """
    stored = [day.log_date.isoformat() for day in finished if day.status == "done"]
    skipped = sum(day.status == "skipped" for day in finished)
    running = days[len(finished)] if len(finished) < len(days) else None
    line = f"{len(stored)} of {len(days)} days stored before it" + (f" ({', '.join(stored)})" if stored else "")
    line += f", {skipped} already done"
    if running is not None:
        line += (
            f"; {running} was not finished and is not marked done (its rows are written in one transaction, "
            "replaced when redone)"
        )
    return line + "; run the same command again to resume"


def backfill(
    start: Annotated[date, typer.Option("--start", parser=day_option, metavar=DAY_METAVAR, help="First day.")],
    end: Annotated[date, typer.Option("--end", parser=day_option, metavar=DAY_METAVAR, help="Last day (included).")],
    logs_root: Annotated[
        str, typer.Option("--logs-root", help="Folder (or fsspec URL) holding <YYYY-MM-DD>/*.jsonl.")
    ] = "./logs",
    warehouse: Annotated[
        str | None, typer.Option("--warehouse", help="DuckDB file (default: $STEF_WAREHOUSE, else ./stef.duckdb).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Redo days already done with the same evaluator version.")
    ] = False,
    rules_dir: Annotated[
        str | None,
        typer.Option("--rules-dir", help="Folder of <app_id>.json rule files (searched before the bundled rules)."),
    ] = None,
    max_bad_share: Annotated[
        float,
        typer.Option(
            "--max-bad-share", min=0.0, max=1.0, help="Per day: fail when more than this share of lines is quarantined."
        ),
    ] = 0.05,
    batch_size: BatchSizeOption = None,
    judge: Annotated[
        str,
        typer.Option(
            "--judge",
            metavar="symbolic|MODEL|hybrid:MODEL",
            help="Judge, as for stef nightly; it decides the evaluator version that marks a day done. With a model, "
            "a day stored with records that fell back to the symbolic verdict is rerun (the cache answers the others).",
        ),
    ] = "symbolic",
    api_base: ApiBaseOption = None,
    concurrency: ConcurrencyOption = 8,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(
            "--max-cost-usd",
            min=0.0,
            help="Budget for model calls of the whole backfill: each day runs with what is left of it; once it is used "
            "up, the remaining records get the symbolic verdict and a later backfill reruns their days.",
        ),
    ] = None,
    timeout: TimeoutOption = 60.0,
    breaker_failures: BreakerFailuresOption = 5,
    schema_dir: Annotated[
        str | None,
        typer.Option(
            "--schema-dir",
            help="Folder of the apps' schemas, as for stef nightly (part of the evaluator version that marks a day done).",
        ),
    ] = None,
    observed_catalog: Annotated[
        str | None,
        typer.Option("--observed-catalog", metavar="FILE", help="Observed catalog file, as for stef nightly."),
    ] = None,
    learn_catalog: Annotated[
        bool, typer.Option("--learn-catalog", help="Learn and use observed catalogs day by day, as for stef nightly.")
    ] = False,
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
) -> None:
    """Run the nightly work for every day from --start to --end; skip days already done.

    Resumable: after an interruption run the same command again; the days stored before it are
    skipped (a day is done once its rows, metrics and drift checks are stored with this evaluator
    version), the rest run. A day without a log folder is reported and skipped.
    """

    with user_errors():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from flows.backfill import backfill as backfill_flow
        from tasks.backfill import day_has_logs, days_in_range, logs_root_note, unread_files_note
        from warehouse.connection import warehouse_file

        first, last = start, end
        days = days_in_range(first, last)  # checks the range before Prefect starts
        total = len(days)
        warehouse_file(warehouse)  # so is a folder given as the warehouse
        check_trace_options(source, source_endpoint, source_project, source_input, source_mapping, push, push_endpoint)
        if source == "files" and not any(day_has_logs(logs_root, day) for day in days):  # a mistyped --logs-root
            unread = next((f"; {day}: {note}" for day in days if (note := unread_files_note(logs_root, day))), "")
            if not unread and (root_note := logs_root_note(logs_root)):
                unread = f"; {root_note}"
            raise CliError(
                f"no logs for any day of {first} … {last} in {one_line(logs_root)} "
                f"(expected {one_line(logs_root.rstrip('/'))}/<YYYY-MM-DD>/*.jsonl{unread}); nothing was run or stored"
            )
        settings = validate_judge(
            judge,
            api_base=api_base,
            concurrency=concurrency,
            max_cost_usd=max_cost_usd,
            timeout_s=timeout,
            breaker_failures=breaker_failures,
            schema_dir=schema_dir,
            observed_catalog=observed_catalog,
            learn_catalog=learn_catalog,
        )  # also checks a model's keys
        settings.schemas()  # a missing schema folder or catalog file fails here
        settings.observed()
        from stef.monitor.drift import thresholds_from_env

        thresholds_from_env()  # so does a bad $STEF_DRIFT_THRESHOLDS (else only each night's drift step says so)
        version = settings.evaluator_version
        progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
            disable=not err_console.is_terminal,
        )
        with progress:
            bar = progress.add_task(f"backfill {first} … {last}", total=total)

            finished: list[BackfillDay] = []

            def on_day(day: BackfillDay) -> None:
                finished.append(day)
                console.print(Text(_day_line(day, version)), soft_wrap=True)  # above the bar while it is shown
                progress.advance(bar)

            with (
                interruptible(lambda: _interrupted_backfill(days, finished)),
                running_flows(quiet=quiet, prepare=nightly_preparation(symbolic=settings.is_symbolic)),
            ):
                summary = backfill_flow(
                    start=first,
                    end=last,
                    logs_root=logs_root,
                    warehouse=warehouse,
                    force=force,
                    rules_dir=rules_dir,
                    max_bad_share=max_bad_share,
                    batch_size=batch_size,
                    judge=judge,
                    api_base=api_base,
                    concurrency=concurrency,
                    max_cost_usd=max_cost_usd,
                    timeout_s=timeout,
                    breaker_failures=breaker_failures,
                    on_day=on_day,
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
    done, skipped, missing = (summary.with_status(s) for s in ("done", "skipped", "no_logs"))
    reruns, unfinished = summary.reruns(), summary.with_fallbacks()
    console.print(
        Text(
            f"backfill {summary.start} … {summary.end} into {one_line(summary.warehouse)}: {len(done)} days run"
            + (f" ({len(reruns)} rerun for records that fell back to the symbolic verdict)" if reruns else "")
            + f", {len(skipped)} skipped (already done), {len(missing)} without logs"
            + (f" ({', '.join(d.isoformat() for d in missing)})" if missing else "")
        ),
        soft_wrap=True,
    )
    if not settings.is_symbolic:
        budget = "" if summary.max_cost_usd is None else f" of --max-cost-usd {usd(summary.max_cost_usd)}"
        console.print(Text(f"judge {one_line(judge)}: spent {usd(summary.spent_usd)}{budget}"), soft_wrap=True)
    if unfinished:
        console.print(
            Text(
                f"{len(unfinished)} days still have records that fell back to the symbolic verdict "
                f"({', '.join(d.isoformat() for d in unfinished)}): every backfill reruns them until the model judges "
                "those records; a permanent cause (a --max-cost-usd used up every time, a record the model never "
                "answers) reruns them every time"
            ),
            soft_wrap=True,
        )
    newest = [day.summary for day in summary.days if day.status == "done" and day.summary is not None]
    if newest:  # the checks as they stand after the run: the last day's own, and those it recomputed
        for line in drift_sentences(newest[-1].drift_checks):
            console.print(line, soft_wrap=True)


# --------------------------------------------------------------------------- report


def headline_rich_table(rows: list[dict[str, Any]], week: str) -> Table:
    """The report's headline table for the terminal (rows of :func:`stef.monitor.report.headline_table`).

    Names are :class:`rich.text.Text`, shortened (:func:`stef.display.shorten`): a long agent id
    does not push the numbers off the screen.
    """
    table = Table(
        title=f"Weekly report {week}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for column in ("agent", "version", "records", "coverage", "wrong (est.)", "mean Φ", "P90 Φ", "drift"):
        if column in ("agent", "version", "drift"):  # names fold when the terminal is narrow; numbers never do
            table.add_column(column, justify="left", overflow="fold")
        else:
            table.add_column(column, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(
            Text(shorten(row["agent"])),
            Text(shorten(row["version"])),
            str(row["records"]),
            str(row["coverage"]),
            str(row["wrong (est.)"]),
            _num(row["mean Φ"], ".1f"),
            _num(row["P90 Φ"], ".1f"),
            Text(shorten(str(row["drift"]).removeprefix("drift / "), DISPLAY_WIDTH + 24)),
        )
    return table


def report(
    week: Annotated[
        str | None,
        typer.Option("--week", metavar="YYYY-Www", help="ISO week, e.g. 2026-W48 (default: the last complete week)."),
    ] = None,
    warehouse: Annotated[
        str | None, typer.Option("--warehouse", help="DuckDB file (default: $STEF_WAREHOUSE, else ./stef.duckdb).")
    ] = None,
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            help="HTML file, or a folder (existing, or ending in /) for stef-report-<week>.html (default: that name here); the .md twin goes beside it (a FILE.md names the twin, the HTML is FILE.html).",
        ),
    ] = None,
    evaluator_version: Annotated[
        str | None,
        typer.Option("--evaluator-version", help="Whose evaluations (default: the newest stored in the week)."),
    ] = None,
) -> None:
    """Write the weekly report: one self-contained HTML file (charts embedded) and its Markdown twin.

    Score histogram per agent × version, daily trend of mean / P90 / coverage, filter-status and
    verdict breakdown, drift results, and the 10 lowest-scoring queries with their evidence.
    """

    with user_errors():
        from flows.weekly_report import weekly_report
        from stef.monitor.report import parse_week
        from tasks.report import report_paths
        from warehouse import existing_warehouse, resolve_path

        label, _, _ = parse_week(week)  # check before Prefect starts
        html, markdown = report_paths(out, label)  # so is --out (a name of another format, a device)
        target = existing_warehouse(warehouse)
        check_not_overwriting(html, warehouse=target)
        check_not_overwriting(markdown, warehouse=target)
        check_evaluator_version(target, evaluator_version)
        with running_flows():
            files = weekly_report(week=label, warehouse=warehouse, out=out, evaluator_version=evaluator_version)
    if files.headline:
        console.print(headline_rich_table(files.headline, files.week))
        for sentence in files.sentences:
            console.print(Text(one_line(sentence)), soft_wrap=True)
    else:
        console.print(
            Text(
                f"No evaluations are stored for {label} in {one_line(resolve_path(warehouse))}: the report says so"
                + _newest_week_hint(warehouse, label)
                + "."
            ),
            soft_wrap=True,
        )
    if files.left_out:
        console.print(Text(files.left_out), soft_wrap=True)
    console.print(
        Text(f"HTML report: {one_line(files.html)}\nMarkdown twin: {one_line(files.markdown)}"), soft_wrap=True
    )


def _newest_week_hint(warehouse: str | None, week: str) -> str:
    """``"; the newest stored day, D, is in week W (--week W)"`` when that week is not ``week``, else ``""``."""
    from warehouse import connect, existing_warehouse
    from warehouse.monitoring import newest_stored_day

    with connect(existing_warehouse(warehouse), read_only=True) as conn:
        newest = newest_stored_day(conn)
    if newest is None:
        return ""
    year, number, _ = newest.isocalendar()
    newest_week = f"{year}-W{number:02d}"
    return (
        "" if newest_week == week else f"; the newest stored day, {newest}, is in {newest_week} (--week {newest_week})"
    )


# --------------------------------------------------------------------------- quarantine


def quarantine(
    log_date: Annotated[
        date, typer.Option("--date", "--log-date", parser=day_option, metavar=DAY_METAVAR, help="The day.")
    ],
    warehouse: Annotated[
        str | None, typer.Option("--warehouse", help="DuckDB file (default: $STEF_WAREHOUSE, else ./stef.duckdb).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line instead of a table.")] = False,
) -> None:
    """List a day's rejected log lines: file, line number, run id and why (also for a day whose run
    stopped because too many lines were bad). A stored day without any says so in one line (exit code 0)."""
    with user_errors():
        from warehouse import connect, existing_warehouse
        from warehouse.store import read_quarantine

        target = existing_warehouse(warehouse)
        with connect(target, read_only=True) as conn:
            rows = read_quarantine(conn, log_date)
            stored = bool(rows) or bool(
                conn.execute("SELECT count(*) FROM stored_days WHERE log_date = ?", [log_date]).fetchall()[0][0]
            )
    if not stored:  # not a clean day: a day no run has stored (yet)
        err_console.print(
            Text(
                f"{log_date} is not stored in {one_line(target)}: no run has stored that day, so there are no "
                "quarantined lines to list (run `stef nightly --date` for it)"
            ),
            soft_wrap=True,
        )
        return
    if not rows:  # a clean day: one line, not a table without rows (--json: no object, the line on stderr)
        (err_console if as_json else console).print(
            Text(f"no quarantined lines on {log_date} in {one_line(target)}: every log line of that day was read"),
            soft_wrap=True,
        )
        return
    if as_json:
        for row in rows:
            typer.echo(json_line({**row, "quarantined_at": str(row["quarantined_at"])}))
        return
    table = Table(
        title=Text(f"Quarantined lines of {log_date} ({len(rows)})"), title_justify="left", box=box.SIMPLE_HEAD
    )
    for column in ("line", "run id", "reason"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            Text(f"{one_line(row['source_file'])}:{row['line_number']}"),
            Text(shorten(row["run_id"] or "–")),
            Text(one_line(row["reason"])),
        )
    console.print(table)


# --------------------------------------------------------------------------- export


class ExportFormatChoice(str, Enum):
    """File formats of ``stef export``."""

    csv = "csv"
    parquet = "parquet"
    jsonl = "jsonl"


def export(
    start: Annotated[date, typer.Option("--start", parser=day_option, metavar=DAY_METAVAR, help="First day.")],
    end: Annotated[date, typer.Option("--end", parser=day_option, metavar=DAY_METAVAR, help="Last day (included).")],
    out: Annotated[
        str,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help="File to write (replaced when it exists; a file name, not a folder). In a CSV, a text cell starting with =, +, -, @, tab or CR gets a leading ' so a spreadsheet shows it as text; Parquet and JSON lines keep every value exact.",
        ),
    ],
    export_format: Annotated[
        ExportFormatChoice | None,
        typer.Option(
            "--format",
            help="csv, parquet or jsonl (default: from the --out suffix, else csv; a workbook suffix such as .xlsx "
            "is refused).",
        ),
    ] = None,
    warehouse: Annotated[
        str | None, typer.Option("--warehouse", help="DuckDB file (default: $STEF_WAREHOUSE, else ./stef.duckdb).")
    ] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent.")] = None,
    evaluator_version: Annotated[
        str | None,
        typer.Option("--evaluator-version", help="Whose evaluations (default: the newest stored in the window)."),
    ] = None,
) -> None:
    """Export a window's evaluations (one row per answer, with its question, SQL and evidence as JSON)
    for a BI tool, streamed by DuckDB: any size.

    CSV cells of text that a spreadsheet would run as a formula get a leading ' (numbers stay
    numbers); Parquet and JSON lines hold the values exactly.
    """
    with user_errors():
        from warehouse import connect, existing_warehouse
        from warehouse.export import export_evaluations, export_target
        from warehouse.monitoring import latest_evaluator_version

        check_day_range(start, end, "export")
        out_file = export_target(out)  # a folder is refused before anything is read
        target = existing_warehouse(warehouse)
        check_not_overwriting(out_file, warehouse=target)
        check_evaluator_version(target, evaluator_version)
        first, last = start, end
        chosen = export_format.value if export_format is not None else None
        if chosen is None:
            suffix = out_file.suffix.lower()
            if suffix in SPREADSHEET_SUFFIXES:  # a CSV named .xlsx: Excel refuses to open it
                raise CliError(
                    f"--out {one_line(out_file)}: stef export writes CSV, Parquet or JSON lines, not {suffix} "
                    f"workbooks; name it {one_line(out_file.with_suffix('.csv'))} (a spreadsheet opens it)"
                )
            chosen = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl"}.get(suffix, "csv")
        out_file.parent.mkdir(parents=True, exist_ok=True)
        with connect(target, read_only=True) as conn:
            version = evaluator_version or latest_evaluator_version(conn, agent, first, last)
            if version is None:
                of_agent = f" of agent {quoted(agent)}" if agent else ""
                raise CliError(f"no evaluations{of_agent} in {target} between {first} and {last}; nothing exported")
            rows = export_evaluations(conn, out_file, first, last, version, chosen, agent_id=agent)  # type: ignore[arg-type]
    console.print(
        Text(
            f"exported {rows} evaluations of {one_line(version)} ({first} … {last}) to {one_line(out_file)} ({chosen})"
        ),
        soft_wrap=True,
    )


# --------------------------------------------------------------------------- serve


def serve(
    timezone: Annotated[
        str, typer.Option("--timezone", help="IANA time zone of the cron times (e.g. Europe/Zurich).")
    ] = "UTC",
    logs_root: Annotated[
        str, typer.Option("--logs-root", help="Folder (or fsspec URL) of the logs, for the nightly and backfill runs.")
    ] = "./logs",
    warehouse: Annotated[
        str | None,
        typer.Option("--warehouse", help="DuckDB file of every run (default: $STEF_WAREHOUSE, else ./stef.duckdb)."),
    ] = None,
    reports_dir: Annotated[
        str, typer.Option("--reports-dir", help="Folder of the weekly reports (stef-report-<week>.html and .md).")
    ] = "./reports/",
    nightly_cron: Annotated[str, typer.Option("--nightly-cron", help="Cron of the nightly run.")] = "0 2 * * *",
    weekly_cron: Annotated[str, typer.Option("--weekly-cron", help="Cron of the weekly report.")] = "0 6 * * 1",
    check: Annotated[
        bool, typer.Option("--check", help="Build the deployments, print their schedules and exit (no server needed).")
    ] = False,
    notify_webhook: Annotated[
        str | None,
        typer.Option(
            "--notify-webhook",
            metavar="URL",
            help="Slack-compatible incoming webhook: each new drift for the worse of the served runs is posted there "
            "as its sentence (default: $STEF_NOTIFY_WEBHOOK).",
        ),
    ] = None,
) -> None:
    """Serve the nightly (02:00), weekly-report (Monday 06:00) and backfill deployments.

    Schedules need a Prefect server: start one with `prefect server start` and point
    PREFECT_API_URL at it (e.g. http://127.0.0.1:4200/api); this process then runs the scheduled
    flows until stopped (Ctrl-C). Without a server it stops with an error (use --check to see the
    schedules).
    """

    if notify_webhook:
        from stef.monitor.alerts import NOTIFY_WEBHOOK_ENV

        os.environ[NOTIFY_WEBHOOK_ENV] = notify_webhook  # the served runs execute in this process
    with user_errors():
        from flows.deployments import build_deployments, serve_deployments, server_url

        deployments = build_deployments(
            timezone=timezone,
            logs_root=logs_root,
            warehouse=warehouse,
            reports_dir=reports_dir,
            nightly_cron=nightly_cron,
            weekly_cron=weekly_cron,
        )
        console.print("STEF deployments (schedules fire only with a Prefect server):")
        for deployment in deployments:
            schedules = ", ".join(
                f"schedule {getattr(s.schedule, 'cron', s.schedule)} ({getattr(s.schedule, 'timezone', None)})"
                for s in deployment.schedules or []
            )
            console.print(
                f"  {deployment.name}: {deployment.entrypoint}, {schedules or 'no schedule (run on demand)'}, "
                f"parameters {json.dumps(deployment.parameters)}",
                soft_wrap=True,
                markup=False,
            )
        if check:
            return
        url = server_url()
        if url is None:
            raise CliError(
                "stef serve needs a Prefect server for its schedules: start one with `prefect server start` and set "
                "PREFECT_API_URL=http://127.0.0.1:4200/api (or use `prefect deploy` with prefect.yaml); --check shows the schedules"
            )
        console.print(f"Serving on {url}; scheduled runs execute in this process until Ctrl-C.", soft_wrap=True)
        serve_deployments(deployments)
