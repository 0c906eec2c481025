"""``stef review ...``: reviewers close the loop (issue 18).

``sample`` writes answers to label (CSV, JSONL or Label Studio tasks); ``import`` stores the filled
file's labels in the warehouse (all rows checked first, nothing half-imported; importing the same
file again changes nothing); ``stats`` prints the judge's agreement with the labels (accuracy of
"Φ ≥ 75 means correct", Cohen's κ, base rate, AUROC, ECE, with bootstrap 95 % intervals);
``calibrate`` fits a deployment calibrator from them, stores it for the nightly flow and writes it
for ``stef evaluate --calibrator``.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from flows.cli.common import (
    DAY_METAVAR,
    SPREADSHEET_SUFFIXES,
    CliError,
    check_day_range,
    check_not_overwriting,
    console,
    day_option,
    output_file,
    schema_files,
    user_errors,
)
from stef.display import json_line, one_line, shorten

review_app = typer.Typer(
    no_args_is_help=True,
    help="Reviewer labels: sample answers to label, import the labels, measure and recalibrate the judge.",
)

_WAREHOUSE = typer.Option("--warehouse", help="DuckDB file (default: $STEF_WAREHOUSE, else ./stef.duckdb).")


def register(app: typer.Typer) -> None:
    """Add the ``review`` command group to ``app``."""
    app.add_typer(review_app, name="review")


@review_app.command("sample")
def sample(
    out_name: Annotated[
        str, typer.Option("--out", "-o", metavar="FILE", help="The review file to write (.csv, .jsonl, or .json).")
    ],
    n: Annotated[int, typer.Option("--n", min=1, help="Answers to sample.")] = 100,
    strategy: Annotated[
        str,
        typer.Option(
            "--strategy",
            help="random; uncertain (the answers with P(correct) nearest 0.5); stratified (balanced over score bands and apps).",
        ),
    ] = "random",
    seed: Annotated[int, typer.Option("--seed", help="Random seed (the same seed gives the same sample).")] = 0,
    file_format: Annotated[
        str | None,
        typer.Option("--format", help="csv, jsonl or label-studio (default: from the file name; .json: label-studio)."),
    ] = None,
    warehouse: Annotated[str | None, _WAREHOUSE] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's answers.")] = None,
    app_id: Annotated[str | None, typer.Option("--app", help="Only this app's answers.")] = None,
    start: Annotated[
        date | None, typer.Option("--start", parser=day_option, metavar=DAY_METAVAR, help="First day.")
    ] = None,
    end: Annotated[date | None, typer.Option("--end", parser=day_option, metavar=DAY_METAVAR, help="Last day.")] = None,
) -> None:
    """Write a sample of scored answers for reviewers to label (empty label, error_category, note columns)."""
    from stef.monitor.review import FORMATS, LABEL_STUDIO_CONFIG, STRATEGIES
    from tasks.review import write_sample

    with user_errors():
        from warehouse import resolve_path

        out = output_file(out_name, "review.csv")
        check_not_overwriting(out, warehouse=resolve_path(warehouse))
        if strategy not in STRATEGIES:
            raise CliError(f"--strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
        suffix = out.suffix.lower()
        if file_format is None and suffix in SPREADSHEET_SUFFIXES:  # a CSV named .xlsx: Excel refuses to open it
            raise CliError(
                f"--out {one_line(out)}: stef review sample writes CSV, JSON lines or Label Studio tasks, not "
                f"{suffix} workbooks; name it {one_line(out.with_suffix('.csv'))} (a spreadsheet opens it)"
            )
        chosen = file_format or {".jsonl": "jsonl", ".json": "label-studio"}.get(suffix, "csv")
        if chosen not in FORMATS:
            raise CliError(f"--format {chosen!r}: use one of {', '.join(FORMATS)}")
        check_day_range(start, end, "review sample")
        result = write_sample(
            warehouse,
            out,
            n,
            strategy,
            seed,
            chosen,
            agent,
            app_id,
            start,
            end,
        )
        config = None
        if chosen == "label-studio":
            config = out.with_suffix(".label-config.xml")
            try:
                config.write_text(LABEL_STUDIO_CONFIG, encoding="utf-8")
            except OSError as exc:
                raise CliError(f"{config}: cannot write ({exc.strerror or exc})") from exc
    console.print(
        Text(
            f"wrote {result.rows} answers to review ({strategy}, seed {seed}) of {result.candidates} stored under "
            f"{result.evaluator_version}: {out}"
        )
    )
    if config is not None:
        console.print(Text(f"Label Studio labeling config: {config}; import its JSON export with `stef review import`"))
    else:
        console.print(
            Text(
                "fill `label` (correct / incorrect), optionally `error_category` (NL2SQL-BUGs category) and `note`, "
                f"then: stef review import {out}"
            )
        )


@review_app.command("import")
def import_(
    label_file: Annotated[
        Path, typer.Argument(metavar="FILE", help="A filled review file (.csv, .jsonl) or a Label Studio JSON export.")
    ],
    warehouse: Annotated[str | None, _WAREHOUSE] = None,
    reviewer: Annotated[
        str | None,
        typer.Option("--reviewer", help="Who labelled (default: the file's annotator, else your user name)."),
    ] = None,
    skip_unknown: Annotated[
        bool,
        typer.Option(
            "--skip-unknown",
            help="Leave out (and count) rows whose run_id has no stored evaluation instead of refusing the file.",
        ),
    ] = False,
) -> None:
    """Check every labelled row against the warehouse and store the labels (all or none)."""
    from tasks.review import import_labels

    with user_errors():
        result = import_labels(warehouse, label_file, reviewer, skip_unknown)
    counts = result.counts
    skipped = f"; {result.skipped} rows of answers not stored left out (--skip-unknown)" if result.skipped else ""
    console.print(
        Text(
            f"{one_line(label_file)}: {result.labelled} labelled rows: {counts.inserted} new, {counts.replaced} "
            f"replaced, {counts.unchanged} unchanged; {result.unlabelled} rows without a label left out{skipped}"
        ),
        soft_wrap=True,
    )


@review_app.command("stats")
def stats(
    warehouse: Annotated[str | None, _WAREHOUSE] = None,
    app_id: Annotated[str | None, typer.Option("--app", help="Only this app's reviews.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's reviews.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
) -> None:
    """The judge's agreement with the reviewers: accuracy of Φ ≥ 75, κ, base rate, AUROC, ECE, per app and version."""
    from tasks.review import review_stats

    with user_errors():
        figures = review_stats(warehouse, app_id, agent)
    if as_json:
        typer.echo(json_line(figures, allow_nan=False, default=str))
        return
    if not figures["n"]:
        filters = [f"{name} {value!r}" for name, value in (("app", app_id), ("agent", agent)) if value is not None]
        if filters:  # reviews may exist, just none of this app or agent
            console.print(Text(f"no reviews of {' and '.join(one_line(f) for f in filters)}"), soft_wrap=True)
        else:
            console.print(Text("no reviews stored yet: `stef review sample`, then `stef review import`"))
        return
    console.print(_figures_table("Judge vs reviewers", [("all reviewed answers", figures)]))
    classes = Table(
        title="STEF's call (Φ ≥ 75 = correct) against the labels", box=box.SIMPLE_HEAD, title_justify="left"
    )
    for header in ("class", "precision [95 % CI]", "recall [95 % CI]"):
        classes.add_column(header, justify="left" if header == "class" else "right")
    for name in ("correct", "incorrect"):
        classes.add_row(name, _with_ci(figures, f"precision_{name}"), _with_ci(figures, f"recall_{name}"))
    console.print(classes)
    console.print(
        Text(
            "AUROC of P(correct) "
            + (
                f"undefined ({figures['auroc_undefined']})"
                if figures.get("auroc_undefined")
                else _with_ci(figures, "auroc")
            )
            + f"; expected calibration error {_with_ci(figures, 'ece')}"
            + (
                f"; Cohen's κ undefined ({figures['kappa_undefined']}: κ is 0 whatever STEF calls)"
                if figures.get("kappa_undefined")
                else ""
            )
        )
    )
    for key, title in (("by_app", "app_id"), ("by_evaluator_version", "evaluator_version"), ("by_week", "week")):
        rows = [(str(row.get(title) or "(none)"), row) for row in figures[key]]
        if len(rows) > 1 or key == "by_evaluator_version":
            console.print(_figures_table(f"By {title}", rows))
    if any(row.get("held_out_only") for row in figures["by_evaluator_version"]):
        console.print(
            Text(
                "a +calib version is measured on the labels imported after its calibrator only "
                "(the others trained it; `stef review calibrate` printed its cross-validated figures)"
            )
        )
    categories = figures.get("recall_by_category") or {}
    if categories:
        table = Table(
            title="Recall of wrong answers per labelled error category", box=box.SIMPLE_HEAD, title_justify="left"
        )
        for header in ("category", "n", "recall"):
            table.add_column(header, justify="left" if header == "category" else "right")
        for name, entry in categories.items():
            table.add_row(Text(name), str(entry["n"]), f"{entry['recall']:.2f}")
        console.print(table)


def _figures_table(title: str, rows: list[tuple[str, dict[str, Any]]]) -> Table:
    table = Table(title=Text(title), box=box.SIMPLE_HEAD, title_justify="left")
    for header in ("", "n", "wrong (labels)", "accuracy [95 % CI]", "κ [95 % CI]", "AUROC", "ECE"):
        table.add_column(header, justify="left" if not header else "right")
    for name, figures in rows:
        table.add_row(
            Text(shorten(name)),
            str(figures["n"]),
            _share(figures.get("base_rate_incorrect")),
            _with_ci(figures, "accuracy"),
            _with_ci(figures, "kappa"),
            _plain(figures.get("auroc")),
            _plain(figures.get("ece")),
        )
    return table


def _plain(value: Any) -> str:
    return "–" if value is None else _fixed(value, 3)


def _share(value: Any) -> str:
    return "–" if value is None else f"{_fixed(100 * value, 0)} %"


def _with_ci(figures: dict[str, Any], key: str) -> str:
    value, interval = figures.get(key), (figures.get("ci") or {}).get(key)
    if value is None:
        return "–"
    return _fixed(value, 3) + (f" [{_fixed(interval[0], 2)}, {_fixed(interval[1], 2)}]" if interval else "")


def _fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals; a value that shows as zero has no minus sign.

    >>> _fixed(-0.0, 3), _fixed(-0.0004, 3), _fixed(-0.25, 2), _fixed(0.5, 0)
    ('0.000', '0.000', '-0.25', '0')
    """
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


@review_app.command("calibrate")
def calibrate(
    out_name: Annotated[
        str | None,
        typer.Option(
            "--out", "-o", metavar="FILE", help="Also write the calibrator here (for stef evaluate --calibrator)."
        ),
    ] = None,
    warehouse: Annotated[str | None, _WAREHOUSE] = None,
    app_id: Annotated[
        str | None, typer.Option("--app", help="Fit on this app's reviews and apply to it (default: every app).")
    ] = None,
    rules_dir: Annotated[str | None, typer.Option("--rules-dir", help="As for the nightly run.")] = None,
    schema_dir: Annotated[str | None, typer.Option("--schema-dir", help="As for the nightly run.")] = None,
    observed_catalog: Annotated[
        str | None, typer.Option("--observed-catalog", help="As for the nightly run (default: the warehouse's).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Fit and print the figures; store nothing in the warehouse.")
    ] = False,
) -> None:
    """Fit a calibrator from the reviews (shrunk toward the shipped one), print its cross-validated
    accuracy and AUROC against the shipped one, and store it: the nightly flow uses it from its next run."""
    from stef.pipeline.judge.deployment import NotEnoughLabelsError
    from tasks.review import calibrate_from_reviews

    with user_errors():
        from warehouse import resolve_path

        out = None if out_name is None else output_file(out_name, "calibrator.json")
        if out is not None:
            check_not_overwriting(
                out,
                warehouse=resolve_path(warehouse),
                observed_catalog=observed_catalog,
                schema_file=schema_files(schema_dir),
            )
        try:
            result = calibrate_from_reviews(
                warehouse, out, app_id, rules_dir, schema_dir, observed_catalog, store=not dry_run
            )
        except NotEnoughLabelsError as exc:
            raise CliError(f"not fitted: {exc}") from exc
    fit = result.fit
    table = Table(
        title=Text(
            f"Calibrator {fit.calibrator.version}: {fit.n} reviewed answers ({fit.incorrect} incorrect), "
            "5-fold cross-validation grouped by question"
        ),
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    for header in ("calibrator", "accuracy (Φ ≥ 75)", "AUROC", "log-loss"):
        table.add_column(header, justify="left" if header == "calibrator" else "right")
    for name, figures in (("shipped", fit.shipped), ("refit on the reviews", fit.fitted)):
        table.add_row(name, f"{figures.accuracy:.3f}", _plain(figures.auroc), f"{figures.log_loss:.3f}")
    console.print(table)
    if result.skipped:
        console.print(
            Text("left out (cannot be scored now): " + ", ".join(f"{k} {v}" for k, v in sorted(result.skipped.items())))
        )
    where = (
        "not stored (--dry-run)"
        if dry_run
        else f"stored for {app_id or 'every app'}; the nightly flow uses it from its next run"
    )
    console.print(Text(f"{where}" + (f"; written to {out} (stef evaluate --calibrator {out})" if out else "")))
