"""Observed catalogs in the warehouse (issue 14): learned from the stored answers of each app,
refreshed by the nightly flow before it scores a day, kept with their version."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

import duckdb

from stef.models import ObservedCatalog, ObservedCatalogBook
from warehouse.transaction import transaction

LEARN_WINDOW_DAYS = 30
"""Days of stored answers before the scored day that a refreshed catalog learns from."""


def read_answers_for_learning(
    conn: duckdb.DuckDBPyConnection, start: date | None = None, end: date | None = None
) -> tuple[list[dict[str, Any]], str]:
    """The stored answers (``app_id``, ``sql``, ``dialect``) of ``start`` … ``end`` and a label of the source.

    ``end`` defaults to the newest stored day, ``start`` to :data:`LEARN_WINDOW_DAYS` before ``end``.
    """
    if end is None:
        row = conn.execute("SELECT max(log_date) FROM agent_runs").fetchall()
        end = row[0][0] if row and row[0][0] is not None else date.today()
    if start is None:
        start = end - timedelta(days=LEARN_WINDOW_DAYS - 1)
    rows = conn.execute(
        "SELECT app_id, sql, dialect FROM agent_runs WHERE log_date BETWEEN $start AND $end AND app_id IS NOT NULL ORDER BY log_date, run_id",
        {"start": start, "end": end},
    ).fetchall()
    return [
        {"app_id": a, "sql": s, "dialect": d} for a, s, d in rows
    ], f"warehouse answers {start.isoformat()} … {end.isoformat()}"


def store_observed_catalogs(conn: duckdb.DuckDBPyConnection, log_date: date, book: ObservedCatalogBook) -> None:
    """Store every catalog of ``book`` (learned for ``log_date``) as a new version in ``observed_catalogs``
    (one transaction). The caller learns them (:func:`stef.pipeline.observed.learn_catalogs` over
    :func:`read_answers_for_learning`), so the warehouse holds no part of the method.

    Raises:
        WarehouseError: the write failed (rolled back).
    """
    now = datetime.now(UTC).replace(tzinfo=None)
    with transaction(conn, f"storing the observed catalogs for {log_date.isoformat()} failed and was rolled back"):
        for app_id, catalog in book.catalogs.items():
            version = conn.execute(
                "SELECT coalesce(max(version), 0) + 1 FROM observed_catalogs WHERE app_id = ?", [app_id]
            ).fetchall()[0][0]
            conn.execute(
                "INSERT INTO observed_catalogs (app_id, version, learned_for, queries, catalog, learned_at) VALUES (?, ?, ?, ?, ?, ?)",
                [app_id, version, log_date, catalog.queries, catalog.model_dump_json(), now],
            ).fetchall()


def latest_observed_catalogs(conn: duckdb.DuckDBPyConnection) -> ObservedCatalogBook:
    """The newest stored catalog of every app."""
    rows = conn.execute(
        "SELECT app_id, catalog FROM observed_catalogs QUALIFY row_number() OVER (PARTITION BY app_id ORDER BY version DESC) = 1"
    ).fetchall()
    return ObservedCatalogBook(
        {app: ObservedCatalog.model_validate(json.loads(text)) for app, text in rows}, "warehouse"
    )
