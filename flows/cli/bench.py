"""``stef bench-judge``: measure the judge on labelled records in the NL2SQL-BUGs format.

Accuracy, AUROC, precision/recall, coverage and recall per error category of
:func:`stef.monitor.benchmark.measure`, printed as tables or one JSON line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from flows.cli.common import (
    console,
    user_errors,
    validate_dialect,
)
from stef.display import one_line
from stef.errors import InputError

if TYPE_CHECKING:
    pass


def bench_judge(
    labelled_file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="Labelled rows in the NL2SQL-BUGs format (question, evidence, sql, label, error_types, db_id): JSON lines, or one JSON array as the benchmark publishes it.",
        ),
    ],
    dialect: Annotated[str, typer.Option("--dialect", help="sqlglot dialect of the SQL in FILE.")] = "sqlite",
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold", min=0.0, max=100.0, help="Φ at or above which an answer counts as predicted correct."
        ),
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
    from stef.models import EvaluationStatus
    from stef.monitor.benchmark import bugs_record_to_log, measure, read_bugs_file
    from stef.pipeline.evaluate import evaluate_many

    with user_errors():
        resolved = validate_dialect(dialect)
        if not labelled_file.is_file():
            problem = "not a regular file (a folder or a pipe?)" if labelled_file.exists() else "no such file"
            raise InputError(f"{labelled_file}: {problem}")
        try:
            rows = read_bugs_file(labelled_file)
            for number, row in enumerate(rows, start=1):
                if isinstance(row, dict):
                    row.setdefault("id", f"row-{number}")  # the format's id is optional here: the row number names it
            records = [bugs_record_to_log(row, dialect=resolved) for row in rows]
        except (ValueError, KeyError) as exc:
            raise InputError(f"{labelled_file}: not an NL2SQL-BUGs-format file ({exc})") from exc
        from stef.pipeline.observed import load_observed_catalogs
        from stef.pipeline.schema_book import SchemaBook

        schemas = SchemaBook(schema_dir) if schema_dir is not None else None
        observed = load_observed_catalogs(observed_catalog) if observed_catalog is not None else None
        evaluations = evaluate_many(records, schemas=schemas, observed=observed)
        if not any(evaluation.status is EvaluationStatus.EVALUATED for evaluation in evaluations):
            first = evaluations[0] if evaluations else None
            raise InputError(
                f"{labelled_file}: none of its {len(rows)} rows could be scored"
                + (f" (row 1: {first.status.value}: {first.status_reason})" if first is not None else "")
                + "; bench-judge reads labelled answers, each with its question, sql and label"
                " (NL2SQL-BUGs format), not a file of labels alone"
            )
        figures = measure(rows, evaluations, threshold)
    if as_json:
        console.print_json(json.dumps(_json_ready(figures.__dict__), allow_nan=False), indent=None)
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


def _json_ready(value: object) -> object:
    """``value`` with every NaN float as ``None`` (JSON ``null``), in nested dicts and lists: an AUROC
    of a file with one class is undefined, and ``NaN`` is not JSON.

    >>> _json_ready({"auroc": float("nan"), "by": {"a": 0.5}})
    {'auroc': None, 'by': {'a': 0.5}}
    """
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(item) for item in value]
    return value
