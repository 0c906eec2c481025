"""Reviewers close the loop (issue 18): sample answers to label, import the labels, measure the
judge against them, and fit a deployment calibrator from them.

The CLI (``stef review ...``, :mod:`flows.cli.review`) calls these functions; they join the
warehouse (:mod:`warehouse.reviews`) with the pure parts (:mod:`stef.monitor.review`,
:mod:`stef.pipeline.judge.deployment`).
"""

from __future__ import annotations

import getpass
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from stef.errors import InputError
from stef.monitor.review import (
    Reviewed,
    agreement,
    bad_rows_error,
    read_label_file,
    review_rows,
    sample_answers,
    write_review_file,
)
from warehouse import connect, existing_warehouse, resolve_path
from warehouse.monitoring import latest_evaluator_version
from warehouse.reviews import (
    ReviewCounts,
    active_calibrators,
    evaluation_versions,
    quarantine_reasons,
    read_review_candidates,
    read_reviews,
    read_run_inputs,
    read_scores_of_runs,
    store_calibrator,
    store_reviews,
)


@dataclass(frozen=True)
class SampleResult:
    """What :func:`write_sample` wrote: rows, the answers it drew from, and their evaluator version."""

    rows: int
    candidates: int
    evaluator_version: str


def write_sample(
    warehouse_path: str | None,
    out: Path,
    n: int,
    strategy: str,
    seed: int = 0,
    file_format: str = "csv",
    agent_id: str | None = None,
    app_id: str | None = None,
    start: date | None = None,
    end: date | None = None,
) -> SampleResult:
    """Draw a review sample from the answers of the newest evaluator version that scored answers
    matching the filters (agent, app, days), and write it.

    Raises:
        InputError: the warehouse has no scored answer matching the filters, or ``out`` cannot
            be written.
        ValueError: an unknown strategy or format, or ``n`` < 1.
    """
    with connect(_existing(warehouse_path), read_only=True) as conn:
        version = latest_evaluator_version(conn, agent_id, start, end, app_id=app_id)
        candidates = read_review_candidates(conn, version, agent_id, app_id, start, end) if version else []
    if not candidates or version is None:
        raise InputError("no stored answers in the warehouse match the filters: nothing to sample")
    rows = review_rows(sample_answers(candidates, n, strategy, seed), "all" if n >= len(candidates) else strategy)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_review_file(rows, out, file_format)
    except OSError as exc:
        raise InputError(f"{out}: cannot write the review file ({exc.strerror or exc})") from exc
    return SampleResult(rows=len(rows), candidates=len(candidates), evaluator_version=version)


@dataclass(frozen=True)
class ImportResult:
    """What :func:`import_labels` did (:class:`warehouse.reviews.ReviewCounts`), how many rows
    of the file had no label yet, and how many ``--skip-unknown`` left out."""

    counts: ReviewCounts
    labelled: int
    unlabelled: int
    skipped: int = 0


def import_labels(
    warehouse_path: str | None, path: Path, reviewer: str | None = None, skip_unknown: bool = False
) -> ImportResult:
    """Validate a filled review file against the warehouse and store its labels (all or none).

    A row is rejected when its run id has no evaluation in the warehouse (with ``skip_unknown``
    it is left out and counted instead; a quarantined line is named with its reason), or names
    an evaluator version the run was not scored with; without one, the run's newest evaluation is
    the one reviewed. The reviewer is ``reviewer``, else the file's (Label Studio's annotator),
    else the user running the command; a row is also rejected when that makes it a second label
    of its answer by one reviewer (an export of two annotators imported with ``reviewer``).

    Raises:
        LabelFileError: a bad row (every one is named, with its line); nothing was stored.
        WarehouseError: the write failed (rolled back).
    """
    labels = read_label_file(path, keep_problems=True)  # its bad rows are named with the warehouse's below
    now = datetime.now(UTC).replace(tzinfo=None)
    default_reviewer = reviewer or _user()
    with connect(_existing(warehouse_path)) as conn:
        versions = evaluation_versions(conn, [row.run_id for row in labels.rows])
        unknown = [row.run_id for row in labels.rows if not versions.get(row.run_id)]
        quarantined = quarantine_reasons(conn, unknown)
        problems: list[tuple[int, str]] = list(labels.problems)
        reviews: list[dict[str, Any]] = []
        first_line: dict[tuple[str, str], int] = {}
        skipped = 0
        for row in labels.rows:
            stored = versions.get(row.run_id)
            if not stored:
                if skip_unknown:
                    skipped += 1
                elif row.run_id in quarantined:
                    problems.append(
                        (
                            row.line,
                            f"run_id {row.run_id!r} is a quarantined log line "
                            f"({quarantined[row.run_id]}), not a scored answer (--skip-unknown leaves such rows out)",
                        )
                    )
                else:
                    problems.append(
                        (
                            row.line,
                            f"run_id {row.run_id!r} is not an answer stored in the warehouse "
                            "(--skip-unknown leaves such rows out)",
                        )
                    )
                continue
            if row.evaluator_version is not None and row.evaluator_version not in stored:
                problems.append(
                    (
                        row.line,
                        f"run_id {row.run_id!r} has no evaluation of evaluator version {row.evaluator_version!r}",
                    )
                )
                continue
            who = reviewer or row.reviewer or default_reviewer
            if (row.run_id, who) in first_line:
                # the file names two reviewers (Label Studio's annotators), --reviewer or the user name one
                problems.append(
                    (
                        row.line,
                        f"run_id {row.run_id!r} is labelled twice by {who!r} (first at line "
                        f"{first_line[row.run_id, who]}); "
                        + (
                            "--reviewer names every row's reviewer: leave it out to keep the file's reviewers"
                            if reviewer
                            else "a row without a reviewer is labelled by the user running the import"
                        ),
                    )
                )
                continue
            first_line[row.run_id, who] = row.line
            reviews.append(
                {
                    "run_id": row.run_id,
                    "reviewer": who,
                    "label": row.label,
                    "error_category": row.error_category,
                    "note": row.note,
                    "evaluator_version": row.evaluator_version or stored[0],
                    "reviewed_at": row.reviewed_at or now,
                    "sample_strategy": row.sample_strategy,
                    "line_number": row.line,
                }
            )
        if problems:
            raise bad_rows_error(path, problems)
        counts = store_reviews(conn, reviews, str(path))
    return ImportResult(counts=counts, labelled=len(labels.rows), unlabelled=labels.unlabelled, skipped=skipped)


def _existing(warehouse_path: str | None) -> Path:
    """The warehouse file, which must exist (a mistyped --warehouse never creates an empty one).

    Raises:
        WarehouseError: there is no such file.
    """
    target = existing_warehouse(warehouse_path)
    return target


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "reviewer"


def review_stats(
    warehouse_path: str | None, app_id: str | None = None, agent_id: str | None = None, seed: int = 0
) -> dict[str, Any]:
    """The judge's agreement with the stored labels (:func:`stef.monitor.review.agreement`): overall
    (the evaluation each reviewer was shown), per app, per evaluator version (every stored
    evaluation of the reviewed answers; for a ``+calib`` version only the labels imported after its
    calibrator, as in the weekly report: the others trained it) and per ISO week of the answers.

    Returns:
        The overall figures with ``by_app``, ``by_evaluator_version`` and ``by_week`` lists (each
        entry: its key and its figures; a version entry also ``held_out_only``).
    """
    from tasks.drift_checks import deployment_calibrators_of
    from warehouse.reviews import read_reviewed_evaluations

    with connect(_existing(warehouse_path), read_only=True) as conn:
        reviews = read_reviews(conn, app_id, agent_id)
        scores = read_scores_of_runs(conn, [r["run_id"] for r in reviews])
        held_out: dict[str, dict[str, dict[str, Any]]] = {}  # +calib version -> run id -> its held-out label
        for version in sorted({str(score["evaluator_version"]) for score in scores}):
            deployment = deployment_calibrators_of(conn, version)
            if deployment is not None:
                held_out[version] = {
                    row["run_id"]: row for row in read_reviewed_evaluations(conn, version, imported_after=deployment[0])
                }
    overall = agreement([_reviewed(r) for r in reviews], seed)
    by_app: dict[str, list[dict[str, Any]]] = {}
    by_week: dict[str, list[dict[str, Any]]] = {}
    for review in reviews:
        by_app.setdefault(str(review["app_id"] or ""), []).append(review)
        week = review["log_date"].isocalendar()
        by_week.setdefault(f"{week.year}-W{week.week:02d}", []).append(review)
    labels = {r["run_id"]: r for r in reviews}
    by_version: dict[str, list[Reviewed]] = {version: [] for version in held_out}
    for score in scores:
        label: dict[str, Any] | None = labels[score["run_id"]]
        if score["evaluator_version"] in held_out:  # None: the label trained the calibrator
            label = held_out[score["evaluator_version"]].get(score["run_id"])
        if label is None:
            continue
        by_version.setdefault(score["evaluator_version"], []).append(
            Reviewed(label["label"] == "correct", score["score"], score["p_correct"], label["error_category"])
        )
    return {
        **overall,
        "by_app": [
            {"app_id": key or None, **agreement([_reviewed(r) for r in rows], seed)}
            for key, rows in sorted(by_app.items())
        ],
        "by_evaluator_version": [
            {"evaluator_version": key, "held_out_only": key in held_out, **agreement(rows, seed)}
            for key, rows in sorted(by_version.items())
        ],
        "by_week": [
            {"week": key, **agreement([_reviewed(r) for r in rows], seed)} for key, rows in sorted(by_week.items())
        ],
    }


def _reviewed(review: dict[str, Any]) -> Reviewed:
    score = review["score"] if review["status"] == "evaluated" else None
    return Reviewed(review["label"] == "correct", score, review["p_correct"], review["error_category"])


@dataclass(frozen=True)
class CalibrationResult:
    """A fitted and stored deployment calibrator (:class:`stef.pipeline.judge.deployment.DeploymentFit`),
    its artifact document and the answers left out of the fit (no longer scorable), by reason."""

    fit: Any
    artifact: str
    skipped: dict[str, int]


def calibrate_from_reviews(
    warehouse_path: str | None,
    out: Path | None,
    app_id: str | None = None,
    rules_dir: str | None = None,
    schema_dir: str | None = None,
    observed_catalog: str | None = None,
    store: bool = True,
) -> CalibrationResult:
    """Fit a deployment calibrator from the stored labels, write it to ``out`` and store it in the
    warehouse (the nightly flow applies it to ``app_id``, or to every app without its own, from
    its next run).

    Each reviewed answer goes through the pipeline again, as the nightly flow scored it: with the
    app's rules, schema (``schema_dir``) and observed catalog (``observed_catalog``, else the
    warehouse's newest learned ones when the reviewed evaluation used one), so the calibrator
    reads the same features the judge will compute.

    Raises:
        NotEnoughLabelsError: fewer labels than the minimum (the message says how many it needs).
        InputError: the reviewed answers were scored against a schema and no ``schema_dir`` is
            given, or ``out`` cannot be written.
        WarehouseError: the write failed.
    """
    from stef.llm.settings import JudgeSettings
    from stef.models import AgentLogRecord, EvaluationStatus
    from stef.pipeline.evaluate import Prepared, RecordSchemaError, prepare, record_schema
    from stef.pipeline.judge.calibrate import verdict_from_probability
    from stef.pipeline.judge.deployment import calibrator_json, fit_deployment_calibrator
    from stef.pipeline.score import compute_score
    from tasks.evaluate import rulebook
    from warehouse.observed import latest_observed_catalogs

    with connect(_existing(warehouse_path), read_only=True) as conn:
        reviews = read_reviews(conn, app_id)
        inputs = read_run_inputs(conn, [r["run_id"] for r in reviews])
        needs_observed = any("+observed" in str(r["evaluator_version"]) for r in reviews)
        learned = latest_observed_catalogs(conn) if needs_observed and observed_catalog is None else None
    if schema_dir is None and any("+schema" in str(r["evaluator_version"]) for r in reviews):
        raise InputError(
            "the reviewed answers were scored against schemas (evaluator version with +schema): "
            "give the same --schema-dir as the nightly run"
        )
    settings = JudgeSettings(schema_dir=schema_dir, observed_catalog=observed_catalog)
    schemas, observed = settings.schemas(), settings.observed() or learned
    judge = settings.symbolic_judge()
    book = rulebook(rules_dir)
    features: list[dict[str, float]] = []
    labels: list[bool] = []
    groups: list[str] = []
    prepared_rows: list[Prepared] = []
    skipped: dict[str, int] = {}
    for review in reviews:
        fields = inputs.get(review["run_id"])
        record = AgentLogRecord(**{k: v for k, v in (fields or {}).items() if v is not None}) if fields else None
        if record is None:
            skipped["not stored"] = skipped.get("not stored", 0) + 1
            continue
        rules = book.for_app(record.app_id)
        try:
            schema = record_schema(schemas, record, rules) if schemas else None
        except RecordSchemaError:  # scored invalid_input by the nightly: no verdict to learn from
            skipped[EvaluationStatus.INVALID_INPUT.value] = skipped.get(EvaluationStatus.INVALID_INPUT.value, 0) + 1
            continue
        prepared = prepare(record, rules, schema=schema, observed=observed.for_app(record.app_id) if observed else None)
        if not isinstance(prepared, Prepared):
            skipped[prepared.status.value] = skipped.get(prepared.status.value, 0) + 1
            continue
        vector = judge.calibration_features(prepared.judge_input)
        if vector is None:  # pragma: no cover - the shipped judge always has a calibrator
            continue
        features.append(vector)
        labels.append(review["label"] == "correct")
        groups.append(" ".join(str(record.question).casefold().split()))
        prepared_rows.append(prepared)

    def passes(index: int, p: float) -> bool:
        prepared = prepared_rows[index]
        if any(f.startswith("non_select_statement") for f in prepared.flags):
            p = 0.0
        verdict, confidence = verdict_from_probability(p)
        return compute_score(prepared.alignment, verdict, confidence, prepared.rules.scoring).score >= 75.0

    created = datetime.now(UTC)
    version = f"reviews-{_slug(app_id) if app_id else 'all'}-{created:%Y%m%dT%H%M%S}"
    fit = fit_deployment_calibrator(
        features,
        labels,
        groups,
        passes,
        version,
        metadata={"app_id": app_id, "created_at": created.isoformat(timespec="seconds"), "skipped": skipped},
    )
    artifact = calibrator_json(fit.calibrator)
    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(artifact + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{out}: cannot write the calibrator ({exc.strerror or exc})") from exc
    if store:
        with connect(_existing(warehouse_path)) as conn:
            store_calibrator(
                conn,
                version,
                app_id,
                artifact,
                fit.n,
                {"shipped": fit.shipped.as_dict(), "refit": fit.fitted.as_dict(), "penalty": list(fit.penalty)},
            )
    return CalibrationResult(fit=fit, artifact=artifact, skipped=skipped)


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)[:40]


def warehouse_calibrators(warehouse_path: str | None) -> tuple[tuple[str | None, str], ...]:
    """The active deployment calibrators of the warehouse (``()`` when the file has none yet, or
    does not exist yet)."""
    from tasks._runtime import run_logger  # Prefect's run logger: only the flows call this

    path = resolve_path(warehouse_path)
    if str(path) != ":memory:" and not Path(path).exists():
        return ()
    # writable: an older file gets the calibrators table first; a wait for another writer is logged
    with connect(_existing(warehouse_path), on_wait=run_logger().warning) as conn:
        return active_calibrators(conn)


__all__: Sequence[str] = (
    "CalibrationResult",
    "ImportResult",
    "SampleResult",
    "calibrate_from_reviews",
    "import_labels",
    "review_stats",
    "warehouse_calibrators",
    "write_sample",
)
