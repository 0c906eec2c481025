"""``stef campaign``: the reference-based campaign protocol from the command line (DESIGN.md §7).

Commands: ``run`` (audit the gold battery, classify every run into the six outcome classes,
write the evidence, store into the warehouse), ``compare A B`` (two campaigns side by side),
``calibrate`` (how well Φ predicts ``success``), ``schema`` (JSON Schemas of the inputs).
Source of the protocol: ``seeds/003_7e3f1b24b92db84a.txt``; issue 6.

Registered on the app of :mod:`flows.cli.main` by :func:`register`. Imports typer, rich and pure
``stef`` code only; DuckDB is imported inside the commands that store or read the warehouse.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from flows.cli.common import CliError, console, err_console, user_errors, validate_dialect
from stef.display import one_line, shorten
from stef.errors import InputError

if TYPE_CHECKING:
    from stef.campaign.models import CalibrationReport, CampaignResult, CampaignSettings, CampaignSummary
    from stef.models import Evaluation

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "campaign_data"
"""The bundled GeoQuery sample: geography.sqlite, catalog.json, gold.jsonl, runs.jsonl, settings.json."""

campaign_app = typer.Typer(
    no_args_is_help=True,
    help="Reference-based campaigns: gold audit, six outcome classes per run, comparison, calibration of Φ.",
)

RunsOpt = Annotated[Path, typer.Option("--runs", help="Campaign run log (JSONL, one run per line).")]
GoldOpt = Annotated[Path, typer.Option("--gold", help="Gold battery (JSONL: question_id, question, gold_sql).")]
DbOpt = Annotated[Path, typer.Option("--db", help="Test database: SQLite or DuckDB file, opened read-only.")]
CatalogOpt = Annotated[
    Path | None,
    typer.Option("--catalog", help="Canonical catalog JSON {table: [columns]} (default: derived from --db)."),
]
DialectOpt = Annotated[
    str | None, typer.Option("--dialect", help="sqlglot dialect of the statements (default: settings, else sqlite).")
]
SettingsOpt = Annotated[
    Path | None,
    typer.Option(
        "--settings",
        help="Protocol settings JSON (tool_budget, max_statements, timeout_s, row_cap, tariffs, infra_cost_usd).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]


def register(app: typer.Typer) -> None:
    """Add the ``campaign`` command group to ``app``."""
    app.add_typer(campaign_app, name="campaign")


def _settings(path: Path | None, dialect: str | None, timeout_s: float | None = None) -> CampaignSettings:
    from pydantic import ValidationError

    from stef.campaign.models import CampaignSettings

    data: dict[str, Any] = {}
    if path is not None:
        from stef.config_files import read_config_text

        try:
            data = json.loads(read_config_text(path))
        except OSError as exc:
            raise InputError(f"{path}: cannot read the settings file ({exc.strerror or exc})") from exc
        except (ValueError, RecursionError) as exc:  # also JSONDecodeError, UnicodeDecodeError, 4,301-digit ints
            raise InputError(f"{path}: not a JSON settings file ({str(exc)[:200]})") from exc
        if not isinstance(data, dict):
            raise InputError(f"{path}: a settings file holds one JSON object, not {type(data).__name__}")
    if dialect is not None:
        resolved = validate_dialect(dialect)
        data["dialect"] = "" if resolved == "generic" else resolved
    if timeout_s is not None:
        data["timeout_s"] = timeout_s
    try:
        return CampaignSettings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(
            f"{path or 'settings'}: field `{'.'.join(str(p) for p in first['loc'])}`: {first['msg']}"
        ) from exc


def _run(
    runs: Path, gold: Path, db: Path, catalog: Path | None, settings: CampaignSettings, out: Path | None
) -> CampaignResult:
    from stef.campaign.inputs import load_catalog, read_jsonl
    from stef.campaign.models import CampaignRunLog, GoldQuestion
    from stef.campaign.run import run_campaign
    from stef.campaign.sandbox import open_test_database

    run_logs = read_jsonl(runs, CampaignRunLog)
    battery = read_jsonl(gold, GoldQuestion)
    canonical = load_catalog(catalog) if catalog is not None else None
    database = open_test_database(db, settings.resource_limits())
    try:
        return run_campaign(run_logs, battery, database, settings, canonical, out)
    finally:
        database.close()


def _score(result: CampaignResult, settings: CampaignSettings) -> dict[tuple[str | None, str | None], Evaluation]:
    """STEF (schema-free) evaluations of every classified run, by ``(campaign_id, run_id)``."""
    from stef.campaign.calibration import index_evaluations, stef_record
    from stef.pipeline.evaluate import evaluate_many

    records = [stef_record(r, settings.dialect) for r in result.results]
    return index_evaluations(evaluate_many(records))


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)


def summary_table(summaries: Sequence[CampaignSummary], title: str) -> Table:
    """Campaigns side by side: counts and rates per class, then the per-run means."""
    table = Table(title=Text(one_line(title)), box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("figure")
    for s in summaries:
        table.add_column(Text(f"{shorten(s.campaign_id)} ({s.mode.value})"), justify="right")
    classes = list(dict.fromkeys(c for s in summaries for c in s.counts))
    for c in classes:
        table.add_row(c, *(f"{s.counts[c]}  ({s.rates[c]:.0%})" if c in s.counts else "n/a" for s in summaries))
    for name, key, spec in (
        ("runs classified", "runs", "d"),
        ("runs excluded (gold audit)", "excluded_runs", "d"),
        ("runs rejected (invalid lines)", "rejected_runs", "d"),
        ("mean tool calls", "mean_tool_calls", ".2f"),
        ("mean latency ms", "mean_latency_ms", ".0f"),
        ("mean tokens", "mean_tokens", ".0f"),
        ("mean cost C_i USD", "mean_cost_usd", ".6f"),
        ("total cost ΣC_i USD", "total_cost_usd", ".6f"),
        ("C_infra USD (not in C_i)", "infra_cost_usd", ".2f"),
        ("catalog traceability", "mean_catalog_traceability", ".3f"),
    ):
        table.add_row(name, *(_fmt(getattr(s, key), spec) for s in summaries))
    return table


SHOWN_REJECTED = 20
"""Rejected input lines printed one by one; the rest are counted (``--json`` lists them all)."""


def print_rejected(result: CampaignResult, to_stderr: bool = False) -> None:
    """One line per rejected input line (file, line, reason; the first :data:`SHOWN_REJECTED`), as text."""
    out = err_console if to_stderr else console
    for line in result.rejected[:SHOWN_REJECTED]:
        out.print(Text(f"  rejected {one_line(line.where())}: {one_line(line.reason)}"))
    if len(result.rejected) > SHOWN_REJECTED:
        out.print(f"  ... and {len(result.rejected) - SHOWN_REJECTED} more rejected lines (--json lists them all)")


def _print_diagnostics(result: CampaignResult, to_stderr: bool = False) -> None:
    """The gold audit's count and exclusions, the rejected lines and the runs left unclassified, as text."""
    out = err_console if to_stderr else console
    audit = result.audit
    out.print(f"gold audit: {len(audit.items) - len(audit.excluded)} of {len(audit.items)} questions executable")
    for item in audit.excluded[:SHOWN_REJECTED]:
        out.print(Text(f"  excluded {one_line(item.question_id)}: {one_line(item.reason)}"))
    if len(audit.excluded) > SHOWN_REJECTED:
        out.print(f"  ... and {len(audit.excluded) - SHOWN_REJECTED} more excluded questions")
    print_rejected(result, to_stderr)
    for campaign_id, skipped in result.skipped.items():
        for run_id, reason in skipped.items():
            out.print(Text(f"  run {one_line(run_id)} of {one_line(campaign_id)} not classified: {one_line(reason)}"))


@campaign_app.command("run")
def run(
    runs: RunsOpt,
    gold: GoldOpt,
    db: DbOpt,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Evidence folder: OUT/<campaign>/<run>/{metrics,context}.json, session.jsonl (ids percent-encoded, see the README).",
        ),
    ],
    catalog: CatalogOpt = None,
    dialect: DialectOpt = None,
    settings_file: SettingsOpt = None,
    warehouse: Annotated[
        str | None, typer.Option("--warehouse", help="DuckDB file (default: $STEF_WAREHOUSE, else ./stef.duckdb).")
    ] = None,
    no_store: Annotated[bool, typer.Option("--no-store", help="Do not write the warehouse.")] = False,
    score: Annotated[
        bool, typer.Option("--score/--no-score", help="Also compute STEF's Φ for each run (stored beside the outcome).")
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Audit the gold battery, classify every run (six outcome classes), write evidence and the summary.

    Demo on the bundled GeoQuery sample: ``stef campaign run --runs flows/campaign_data/runs.jsonl
    --gold flows/campaign_data/gold.jsonl --db flows/campaign_data/geography.sqlite --out campaign-out``.
    """

    with user_errors():
        settings = _settings(settings_file, dialect)
        result = _run(runs, gold, db, catalog, settings, out)
        if not result.results:  # storing would replace the campaigns' earlier outcomes with none
            _print_diagnostics(result, to_stderr=True)
            audit = result.audit
            executable = len(audit.items) - len(audit.excluded)
            why = (
                f"no gold question is executable ({executable} of {len(audit.items)}: check --db and --gold)"
                if audit.items and not executable
                else f"{len(result.rejected)} lines rejected, no line names a campaign (check --runs)"
                if not result.runs
                else "every run was left unclassified (reasons above)"
            )
            raise CliError(
                f"no run classified: {why}; nothing stored"
                + ("" if no_store else " (the warehouse keeps its earlier results of these campaigns)")
            )
        evaluations = _score(result, settings) if score else {}
        stored = None
        if not no_store:
            from warehouse import connect
            from warehouse.campaign import store_campaign_result

            with connect(warehouse) as conn:
                stored = store_campaign_result(conn, result, settings, evaluations)
    if as_json:
        payload = result.as_json()
        payload["evidence"] = str(out)
        payload["stored_outcomes"] = None if stored is None else stored.outcomes
        payload["stored_skipped"] = None if stored is None else stored.skipped
        console.print_json(json.dumps(payload), indent=None)
        return
    _print_diagnostics(result)
    summarized = {summary.campaign_id for summary in result.summaries}
    for campaign_id in sorted({run.campaign_id for run in result.runs} - summarized):
        err_console.print(
            Text(
                f"warning: campaign {one_line(campaign_id)}: no run classified; its earlier evidence and stored "
                "outcomes are kept"
            ),
            soft_wrap=True,
        )
    if result.summaries:
        console.print(summary_table(result.summaries, f"Campaign outcomes ({len(result.results)} runs classified)"))
    else:
        console.print("no run classified: no line of the run log names a campaign")
    console.print(
        Text(
            f"evidence: {one_line(out)}/<campaign folder>/<run folder>/"
            + (
                ""
                if stored is None
                else f"; stored {stored.outcomes} outcomes and {stored.skipped} lines not classified"
                " (campaign_skipped, with the reasons) in the warehouse"
            )
        )
    )


def _read_summary(path: Path) -> CampaignSummary:
    """A campaign's ``summary.json`` (:func:`stef.campaign.evidence.write_summary`).

    Raises:
        InputError: the file cannot be read or is not a campaign summary (named, with the first problem).
    """
    from pydantic import ValidationError

    from stef.campaign.models import CampaignSummary

    try:
        return CampaignSummary.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise InputError(f"{path}: cannot read the campaign summary ({exc.strerror or exc})") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(file)"
        raise InputError(
            f"{path}: not a campaign summary written by `stef campaign run` (field `{where}`: {first['msg']})"
        ) from exc


@campaign_app.command("compare")
def compare(
    first: Annotated[str, typer.Argument(metavar="A", help="Campaign id, e.g. mcp.")],
    second: Annotated[str, typer.Argument(metavar="B", help="Campaign id, e.g. baseline-static.")],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Evidence folder of `stef campaign run` (reads <campaign folder>/summary.json)."),
    ] = None,
    warehouse: Annotated[
        str | None, typer.Option("--warehouse", help="Read the summaries from this warehouse instead of --out.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print two campaigns side by side (e.g. ``mcp`` vs ``baseline-static``)."""
    from stef.campaign.evidence import campaign_folder

    with user_errors():
        found: dict[str, CampaignSummary] = {}
        if out is not None:
            for cid in (first, second):
                path = campaign_folder(out, cid) / "summary.json"
                if path.is_file():
                    found[cid] = _read_summary(path)
        else:
            from warehouse import connect, resolve_path
            from warehouse.campaign import read_campaign_summaries

            if not resolve_path(warehouse).is_file():
                raise InputError(
                    f"{resolve_path(warehouse)}: no warehouse; run `stef campaign run` first or pass --out"
                )
            with connect(warehouse, read_only=True) as conn:
                found = read_campaign_summaries(conn)
        missing = [cid for cid in (first, second) if cid not in found]
        if missing:
            raise InputError(f"campaign {', '.join(repr(m) for m in missing)} not found in {out or 'the warehouse'}")
    pair = [found[first], found[second]]
    if as_json:
        console.print_json(json.dumps({s.campaign_id: s.model_dump(mode="json") for s in pair}), indent=None)
        return
    console.print(summary_table(pair, f"Campaign {first} vs {second}"))


def calibration_tables(report: CalibrationReport) -> list[Table]:
    """The headline table, the confusion matrices at the band thresholds and mean Φ per outcome."""
    head = Table(title="Calibration of Φ (positive: success / correct)", box=box.SIMPLE_HEAD, title_justify="left")
    head.add_column("figure")
    head.add_column("value", justify="right")
    for name, value in (
        ("runs", str(report.runs)),
        ("scored by STEF", str(report.scored)),
        ("positives", str(report.positives)),
        ("AUROC", _fmt(report.auroc)),
    ):
        head.add_row(name, value)
    confusion = Table(title="Φ ≥ t predicts success (unscored = Φ 0)", box=box.SIMPLE_HEAD, title_justify="left")
    for column in ("Φ ≥", "TP", "FP", "FN", "TN"):
        confusion.add_column(column, justify="right")
    for c in report.confusion:
        confusion.add_row(f"{c.threshold:g}", str(c.tp), str(c.fp), str(c.fn), str(c.tn))
    per_class = Table(title="Mean Φ per outcome class", box=box.SIMPLE_HEAD, title_justify="left")
    per_class.add_column("outcome")
    per_class.add_column("runs", justify="right")
    per_class.add_column("mean Φ", justify="right")
    for outcome, mean in report.mean_score_by_outcome.items():
        per_class.add_row(outcome, str(report.runs_by_outcome[outcome]), _fmt(mean, ".1f"))
    return [head, confusion, per_class]


@campaign_app.command("calibrate")
def calibrate(
    runs: RunsOpt,
    gold: GoldOpt,
    db: DbOpt,
    catalog: CatalogOpt = None,
    dialect: DialectOpt = None,
    settings_file: SettingsOpt = None,
    campaign_id: Annotated[str | None, typer.Option("--campaign", help="Only this campaign id (default: all).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """How well STEF's Φ (schema-free) predicts the campaign outcome: AUROC, confusion, mean Φ per class."""
    from stef.campaign.calibration import calibration_report

    with user_errors():
        settings = _settings(settings_file, dialect)
        result = _run(runs, gold, db, catalog, settings, None)
        if campaign_id is not None:
            result.results = [r for r in result.results if r.campaign_id == campaign_id]
            if not result.results:
                raise InputError(f"no classified run of campaign {campaign_id!r} in {runs}")
        report = calibration_report(result.results, list(_score(result, settings).values()))
    print_rejected(result, to_stderr=True)  # runs of rejected lines are not in the report: say which
    if as_json:
        console.print_json(report.model_dump_json(), indent=None)
        return
    for table in calibration_tables(report):
        console.print(table)


@campaign_app.command("schema")
def schema(
    name: Annotated[str, typer.Argument(help="run_log | gold_question | catalog | settings | run_result")],
) -> None:
    """Print the JSON Schema of one campaign input (or of the per-run result behind metrics.json)."""
    from stef.campaign.inputs import json_schemas

    with user_errors():
        schemas = json_schemas()
        if name not in schemas:
            raise InputError(f"unknown schema {name!r}; choose one of {', '.join(schemas)}")
    console.print_json(json.dumps(schemas[name]))
