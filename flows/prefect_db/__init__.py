"""Snapshots of Prefect's SQLite schema, one per migration head (``prefect-sqlite-<head>.sql``).

A temporary Prefect API whose database does not exist yet starts from the snapshot of the
installed Prefect's head instead of running every migration (:func:`flows.prefect_api.seed_missing_database`).
``scripts/make_prefect_snapshot.py`` writes them from Prefect's own migrations.
"""
