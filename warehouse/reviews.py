"""Reviewer labels and deployment calibrators in the warehouse (issue 18, migration 0008).

``reviews`` holds one label per answer and reviewer (``stef review import``); ``calibrators`` the
deployment calibrators fitted from them (``stef review calibrate``). The warehouse only stores and
reads: validation of a label file, the statistics and the fit live in :mod:`stef.monitor.review`,
:mod:`stef.pipeline.judge.deployment` and :mod:`tasks.review`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import duckdb

from warehouse.store import registered
from warehouse.transaction import transaction

REVIEW_FIELDS = (
    "run_id",
    "reviewer",
    "label",
    "error_category",
    "note",
    "evaluator_version",
    "reviewed_at",
    "sample_strategy",
)
"""Keys of a review to store (:func:`store_reviews`); ``source_file`` and ``line_number`` come beside them."""


def read_review_candidates(
    conn: duckdb.DuckDBPyConnection,
    evaluator_version: str,
    agent_id: str | None = None,
    app_id: str | None = None,
    start: date | None = None,
    end: date | None = None,
) -> list[dict[str, Any]]:
    """The stored answers a review sample is drawn from (scored or not: an answer STEF could not
    score counts as called incorrect), oldest first.

    Args:
        conn: a warehouse connection.
        evaluator_version: whose evaluations.
        agent_id, app_id: only this agent / app (``None``: all).
        start, end: only these days (inclusive; ``None``: no bound).

    Returns:
        Dicts with ``run_id``, ``log_date``, ``app_id``, ``agent_id``, ``agent_version``,
        ``question``, ``enriched_question``, ``sql``, ``score``, ``band``, ``verdict``,
        ``p_correct``, ``filter_status``, ``evaluator_version``, ``rationale`` and
        ``categories`` (the suspected error categories, distinct).
    """
    rows = conn.execute(
        """
        SELECT e.run_id, e.log_date, e.app_id, e.agent_id, e.agent_version, r.question, r.enriched_question, r.sql,
               e.score, e.band, e.verdict, e.p_correct, e.filter_status, e.evaluator_version,
               json_extract_string(e.evidence, '$.rationale') AS rationale,
               coalesce(list_distinct(json_extract_string(e.suspected_errors, '$[*].category')), []) AS categories
        FROM evaluations AS e JOIN agent_runs AS r USING (run_id)
        WHERE e.evaluator_version = $version
          AND ($agent::VARCHAR IS NULL OR e.agent_id = $agent) AND ($app::VARCHAR IS NULL OR e.app_id = $app)
          AND ($start::DATE IS NULL OR e.log_date >= $start) AND ($end::DATE IS NULL OR e.log_date <= $end)
        ORDER BY e.log_date, e.run_id
        """,
        {"version": evaluator_version, "agent": agent_id, "app": app_id, "start": start, "end": end},
    ).fetchall()
    names = (
        "run_id",
        "log_date",
        "app_id",
        "agent_id",
        "agent_version",
        "question",
        "enriched_question",
        "sql",
        "score",
        "band",
        "verdict",
        "p_correct",
        "filter_status",
        "evaluator_version",
        "rationale",
        "categories",
    )
    return [dict(zip(names, row, strict=True)) for row in rows]


def evaluation_versions(conn: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> dict[str, list[str]]:
    """Per stored run id of ``run_ids``, the evaluator versions of its evaluations, newest first
    (a run id missing from the result is not in the warehouse)."""
    rows = conn.execute(
        """
        SELECT run_id, list(evaluator_version ORDER BY evaluated_at DESC, evaluator_version)
        FROM evaluations WHERE list_contains($ids::VARCHAR[], run_id) GROUP BY run_id
        """,
        {"ids": list(run_ids)},
    ).fetchall()
    return {str(run_id): list(versions) for run_id, versions in rows}


@dataclass(frozen=True)
class ReviewCounts:
    """What :func:`store_reviews` did: new labels, replaced ones, and rows that changed nothing
    (the same label already stored, or an older one than the stored label)."""

    inserted: int
    replaced: int
    unchanged: int


def store_reviews(
    conn: duckdb.DuckDBPyConnection, reviews: Sequence[Mapping[str, Any]], source_file: str
) -> ReviewCounts:
    """Store validated reviews in one transaction: all of them or none (one Arrow insert).

    A review whose (run id, reviewer) is stored with the same label, category and note changes
    nothing (importing a file twice is a no-op); a different one replaces the stored label when it
    is at least as recent (``reviewed_at``), else it is left out.

    Args:
        conn: a writable warehouse connection.
        reviews: dicts with :data:`REVIEW_FIELDS` and ``line_number``.
        source_file: the file they came from.

    Raises:
        WarehouseError: the write failed (rolled back).
    """
    import pyarrow as pa

    now = datetime.now(UTC).replace(tzinfo=None)
    keys = pa.table(
        {
            "run_id": pa.array([r["run_id"] for r in reviews], pa.string()),
            "reviewer": pa.array([r["reviewer"] for r in reviews], pa.string()),
        }
    )
    with registered(conn, "_stef_review_keys", keys):
        existing = conn.execute(
            """
            SELECT v.run_id, v.reviewer, v.label, v.error_category, v.note, v.reviewed_at
            FROM reviews AS v JOIN _stef_review_keys AS k ON v.run_id = k.run_id AND v.reviewer = k.reviewer
            """
        ).fetchall()
    stored = {(row[0], row[1]): row[2:] for row in existing}
    kept: list[Mapping[str, Any]] = []
    inserted = replaced = unchanged = 0
    for review in reviews:
        before = stored.get((review["run_id"], review["reviewer"]))
        if before is not None:
            label, category, note, reviewed_at = before
            same = (label, category, note) == (review["label"], review["error_category"], review["note"])
            if same or review["reviewed_at"] < reviewed_at:
                unchanged += 1
                continue
            replaced += 1
        else:
            inserted += 1
        kept.append(review)
    table = pa.table(
        {
            **{name: [review[name] for review in kept] for name in REVIEW_FIELDS},
            "source_file": [source_file] * len(kept),
            "line_number": pa.array([int(review["line_number"]) for review in kept], pa.int32()),
            "imported_at": [now] * len(kept),
        }
    )
    with (
        transaction(conn, f"importing the reviews of {source_file} failed and was rolled back"),
        registered(conn, "_stef_reviews", table),
    ):
        conn.execute(
            """
            DELETE FROM reviews AS v USING _stef_reviews AS n
            WHERE v.run_id = n.run_id AND v.reviewer = n.reviewer
            """
        )
        conn.execute(
            """
            INSERT INTO reviews (run_id, reviewer, label, error_category, note, evaluator_version, reviewed_at,
                                 sample_strategy, source_file, line_number, imported_at)
            SELECT run_id, reviewer, label, error_category, note, evaluator_version, reviewed_at,
                   sample_strategy, source_file, line_number, imported_at
            FROM _stef_reviews
            """
        )
    return ReviewCounts(inserted, replaced, unchanged)


def read_reviews(
    conn: duckdb.DuckDBPyConnection, app_id: str | None = None, agent_id: str | None = None
) -> list[dict[str, Any]]:
    """Every reviewed answer (the newest label per run id, whoever gave it) with the evaluation the
    reviewer was shown.

    Returns:
        Dicts with ``run_id``, ``reviewer``, ``label`` (``correct`` / ``incorrect``),
        ``error_category``, ``reviewed_at``, ``evaluator_version``, ``log_date``, ``app_id``,
        ``agent_id``, ``agent_version``, ``question``, ``status``, ``score``, ``p_correct``,
        ``verdict`` (``score`` … ``verdict`` are ``None`` when that evaluation is no longer
        stored), ordered by run id.
    """
    rows = conn.execute(
        """
        WITH newest AS (
            SELECT * FROM reviews
            QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY reviewed_at DESC, imported_at DESC, reviewer) = 1
        )
        SELECT v.run_id, v.reviewer, v.label, v.error_category, v.reviewed_at, v.evaluator_version,
               r.log_date, r.app_id, r.agent_id, r.agent_version, r.question, e.status, e.score, e.p_correct, e.verdict
        FROM newest AS v JOIN agent_runs AS r USING (run_id)
        LEFT JOIN evaluations AS e ON e.run_id = v.run_id AND e.evaluator_version = v.evaluator_version
        WHERE ($app::VARCHAR IS NULL OR r.app_id = $app) AND ($agent::VARCHAR IS NULL OR r.agent_id = $agent)
        ORDER BY v.run_id
        """,
        {"app": app_id, "agent": agent_id},
    ).fetchall()
    names = (
        "run_id",
        "reviewer",
        "label",
        "error_category",
        "reviewed_at",
        "evaluator_version",
        "log_date",
        "app_id",
        "agent_id",
        "agent_version",
        "question",
        "status",
        "score",
        "p_correct",
        "verdict",
    )
    return [dict(zip(names, row, strict=True)) for row in rows]


def read_scores_of_runs(conn: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Every evaluation of ``run_ids`` under any evaluator version: ``run_id``,
    ``evaluator_version``, ``score`` (``None`` unless scored), ``p_correct``, ordered by version and run id."""
    rows = conn.execute(
        """
        SELECT run_id, evaluator_version, CASE WHEN status = 'evaluated' THEN score END, p_correct FROM evaluations
        WHERE list_contains($ids::VARCHAR[], run_id)
        ORDER BY evaluator_version, run_id
        """,
        {"ids": list(run_ids)},
    ).fetchall()
    return [dict(zip(("run_id", "evaluator_version", "score", "p_correct"), row, strict=True)) for row in rows]


def store_calibrator(
    conn: duckdb.DuckDBPyConnection,
    calibrator_version: str,
    app_id: str | None,
    artifact: str,
    reviews: int,
    figures: Mapping[str, Any],
) -> None:
    """Store a deployment calibrator; it becomes the app's active one (the newest per app).

    Raises:
        WarehouseError: the write failed (rolled back), e.g. the version is already stored.
    """
    now = datetime.now(UTC).replace(tzinfo=None)
    with transaction(conn, f"storing the calibrator {calibrator_version} failed and was rolled back"):
        conn.execute(
            "INSERT INTO calibrators (calibrator_version, app_id, artifact, reviews, figures, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [calibrator_version, app_id, artifact, reviews, json.dumps(dict(figures)), now],
        )


def active_calibrators(conn: duckdb.DuckDBPyConnection) -> tuple[tuple[str | None, str], ...]:
    """The newest stored calibrator per app (``None``: the one for every app), as
    ``(app_id, artifact JSON)`` pairs ordered by app: what the nightly flow scores with."""
    rows = conn.execute(
        """
        SELECT app_id, CAST(artifact AS VARCHAR) FROM calibrators
        QUALIFY row_number() OVER (PARTITION BY app_id ORDER BY created_at DESC, calibrator_version DESC) = 1
        ORDER BY app_id NULLS FIRST
        """
    ).fetchall()
    return tuple((None if app_id is None else str(app_id), str(artifact)) for app_id, artifact in rows)


def calibrator_history(conn: duckdb.DuckDBPyConnection) -> list[tuple[datetime, tuple[tuple[str | None, str], ...]]]:
    """Every set of calibrators that was active, oldest first: ``(created_at of the calibrator that
    completed it, the set as in :func:`active_calibrators`)``; what an older ``+calib=`` evaluator
    version was scored with."""
    rows = conn.execute(
        "SELECT app_id, CAST(artifact AS VARCHAR), created_at FROM calibrators ORDER BY created_at, calibrator_version"
    ).fetchall()
    history: list[tuple[datetime, tuple[tuple[str | None, str], ...]]] = []
    active: dict[str | None, str] = {}
    for app_id, artifact, created_at in rows:
        active[None if app_id is None else str(app_id)] = str(artifact)
        ordered = tuple(sorted(active.items(), key=lambda item: (item[0] is not None, item[0] or "")))
        history.append((created_at, ordered))
    return history


def read_calibrators(conn: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every stored calibrator, newest first: ``calibrator_version``, ``app_id``, ``reviews``,
    ``figures`` (dict), ``created_at``."""
    rows = conn.execute(
        "SELECT calibrator_version, app_id, reviews, CAST(figures AS VARCHAR), created_at FROM calibrators "
        "ORDER BY created_at DESC, calibrator_version DESC"
    ).fetchall()
    return [
        {"calibrator_version": v, "app_id": a, "reviews": n, "figures": json.loads(f), "created_at": t}
        for v, a, n, f, t in rows
    ]


def read_run_inputs(conn: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The judge's inputs of stored runs, by run id: ``run_id``, ``agent_id``, ``agent_version``,
    ``question``, ``enriched_question``, ``sql``, ``dialect``, ``app_id`` (the fields of an agent
    log record the pipeline reads)."""
    names = ("run_id", "agent_id", "agent_version", "question", "enriched_question", "sql", "dialect", "app_id")
    rows = conn.execute(
        f"SELECT {', '.join(names)} FROM agent_runs WHERE list_contains($ids::VARCHAR[], run_id)",
        {"ids": list(run_ids)},
    ).fetchall()
    return {str(row[0]): dict(zip(names, row, strict=True)) for row in rows}


def read_reviewed_evaluations(
    conn: duckdb.DuckDBPyConnection, evaluator_version: str, imported_after: datetime | None = None
) -> list[dict[str, Any]]:
    """The reviewed answers' evaluations of ``evaluator_version`` with their newest label: ``run_id``,
    ``log_date``, ``label``, ``error_category``, ``status``, ``score``, ``p_correct``, ``judge``,
    ``schema_checked``, ``observed_checked`` (what picks the calibrator of the p),
    ``sample_strategy``, by run id. ``imported_after``: only labels imported later (those a
    calibrator stored at that time was not fitted on).

    A label belongs to the answer, so it counts for every evaluator version that scored the answer.
    """
    rows = conn.execute(
        """
        WITH newest AS (
            SELECT run_id, label, error_category, sample_strategy FROM reviews
            WHERE $after IS NULL OR imported_at > $after
            QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY reviewed_at DESC, imported_at DESC, reviewer) = 1
        )
        SELECT e.run_id, e.log_date, v.label, v.error_category, e.status, e.score, e.p_correct, e.judge,
               coalesce(json_type(e.evidence, '$.schema_report') = 'OBJECT', false),
               coalesce(json_type(e.evidence, '$.observed_report') = 'OBJECT', false),
               v.sample_strategy
        FROM newest AS v JOIN evaluations AS e ON e.run_id = v.run_id AND e.evaluator_version = $version
        ORDER BY e.run_id
        """,
        {"version": evaluator_version, "after": imported_after},
    ).fetchall()
    names = (
        "run_id",
        "log_date",
        "label",
        "error_category",
        "status",
        "score",
        "p_correct",
        "judge",
        "schema_checked",
        "observed_checked",
        "sample_strategy",
    )
    return [dict(zip(names, row, strict=True)) for row in rows]


def quarantine_reasons(conn: duckdb.DuckDBPyConnection, run_ids: Sequence[str], limit: int = 50) -> dict[str, str]:
    """The quarantine reason of each of the first ``limit`` of ``run_ids`` that is a quarantined log
    line: its stored run id, or (a line too broken to read one) its raw text holding the quoted id."""
    found: dict[str, str] = {}
    for run_id in list(dict.fromkeys(run_ids))[:limit]:
        rows = conn.execute(
            """
            SELECT reason FROM quarantine WHERE run_id = $id OR contains(raw, '"' || $id || '"')
            ORDER BY run_id = $id DESC, quarantined_at DESC LIMIT 1
            """,
            {"id": run_id},
        ).fetchall()
        if rows:
            found[run_id] = str(rows[0][0])
    return found


def has_review_tables(conn: duckdb.DuckDBPyConnection) -> bool:
    """Whether the warehouse has the ``reviews`` and ``calibrators`` tables (migration 0008; a
    file opened read-only before it was migrated has not)."""
    rows = conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('reviews', 'calibrators')"
    ).fetchall()
    return int(rows[0][0]) == 2


def newest_review_import(conn: duckdb.DuckDBPyConnection) -> datetime | None:
    """When reviewer labels were last imported (UTC, naive), or ``None`` without any.

    A drift check stored before then may have been computed with other operating points than the
    labels now give (:func:`tasks.drift_checks.operating_points_for`).
    """
    if not has_review_tables(conn):
        return None
    rows = conn.execute("SELECT max(imported_at) FROM reviews").fetchall()
    newest = rows[0][0] if rows else None
    return newest if isinstance(newest, datetime) else None
