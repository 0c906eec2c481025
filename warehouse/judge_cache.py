"""The persistent LLM judge cache: the warehouse's ``judge_cache`` table (DESIGN.md §4).

:class:`DuckDBJudgeCache` implements :class:`stef.llm.models.JudgeCache` over one DuckDB file:
the warehouse (``stef nightly``) or a cache file of its own (``stef evaluate --cache FILE``; the
file gets the warehouse schema, so the two may be the same file). Rows are keyed by
:func:`stef.llm.prompt.cache_key` = hash of (model, prompt version, hash of the judge inputs, and the
normalised ``--api-base`` when one is given), so a rerun or backfill of the same records with the
same model, prompt and endpoint makes no model call. The endpoint is only hashed into the key,
never stored (and its userinfo and query string, which may hold credentials, are left out).

The ``response`` column holds the verdict JSON; an answer whose usage was not trusted also
carries its evaluation flags under :data:`FLAGS_KEY` (so a cache hit stores them again).

A row is written once and never overwritten while it holds a valid verdict: :meth:`DuckDBJudgeCache.put_many`
replaces an existing row only when the judge's check (:data:`stef.llm.models.VerdictCheck`) says
it does not hold one (a damaged row: it would be asked again, and paid for, on every run). The
stored row is read and checked in the write's transaction, while this process holds the file
(one writer process per DuckDB file, threads serialised by a lock): a valid verdict that another
writer stored after this run read the row as damaged is seen and kept.

Each call opens the file, does its work in one transaction and closes it again, so the cache
holds no connection while model requests are in flight. Calls from threads of one process are
serialised (DuckDB allows one writer process per file; :func:`warehouse.connect` waits for
another process's lock).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from stef.llm.models import CachedVerdict, VerdictCheck
from warehouse.connection import connect
from warehouse.errors import WarehouseError

_LOCK = threading.Lock()

FLAGS_KEY = "stef_flags"
"""Key of the evaluation flags inside a row's ``response`` JSON (absent when there are none)."""

_ENTRIES_SCHEMA = pl.Schema(
    {
        "cache_key": pl.String,
        "model": pl.String,
        "prompt_version": pl.String,
        "response": pl.String,
        "cost_usd": pl.Float64,
        "tokens": pl.Int64,
    }
)
"""Columns of the frame :meth:`DuckDBJudgeCache.put_many` inserts (polars frames, as in
:mod:`warehouse.store`: pyarrow's conversion of Python lists imports pandas, 0.25 s)."""


class DuckDBJudgeCache:
    """Judge verdicts in the ``judge_cache`` table of a DuckDB file.

    Args:
        path: the DuckDB file (``None``: ``$STEF_WAREHOUSE``, else ``./stef.duckdb``); missing
            folders are created and the schema migrated on first use.

    Attributes:
        hits: keys found by :meth:`get_many` so far.
        stored: rows written by :meth:`put_many` so far (new keys and replaced damaged rows).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = path
        self.hits = 0
        self.stored = 0

    def get_many(self, keys: Sequence[str]) -> dict[str, CachedVerdict]:
        """The cached verdicts among ``keys`` (one query).

        Raises:
            WarehouseLockedError: another process holds the file.
            WarehouseError: the file cannot be opened or read.
        """
        if not keys:
            return {}
        table = pl.DataFrame({"cache_key": list(dict.fromkeys(keys))}, schema={"cache_key": pl.String})
        with _LOCK:
            conn = connect(self.path)
            try:
                conn.register("_stef_cache_keys", table)
                rows = conn.execute(
                    "SELECT c.cache_key, c.model, c.prompt_version, c.response::VARCHAR, c.cost_usd, c.tokens "
                    "FROM judge_cache AS c JOIN _stef_cache_keys AS k USING (cache_key)"
                ).fetchall()
            except duckdb.Error as exc:
                raise WarehouseError(
                    f"reading the judge cache in {self.path or 'the warehouse'} failed: {exc}"
                ) from exc
            finally:
                conn.close()
        found: dict[str, CachedVerdict] = {}
        for key, model, prompt_version, response, cost, tokens in rows:
            try:
                payload = json.loads(response)
            except (TypeError, ValueError, RecursionError):  # RecursionError: nested past Python's limit
                payload = None
            if not isinstance(payload, dict):  # a damaged row is a miss: the model is asked again
                continue
            flags = payload.pop(FLAGS_KEY, [])
            kept = tuple(str(flag) for flag in flags) if isinstance(flags, list) else ()
            found[str(key)] = CachedVerdict(
                str(key), str(model), str(prompt_version), payload, cost, None if tokens is None else int(tokens), kept
            )
        self.hits += len(found)
        return found

    def put_many(self, entries: Sequence[CachedVerdict], valid: VerdictCheck | None = None) -> int:
        """Store verdicts in one transaction: a new key is added; an existing row is kept, unless
        ``valid`` is given and rejects the row's ``response`` read in this transaction (its flags
        left out), or that response is not a JSON object: such a damaged row is replaced (see the
        module docstring for why a valid row is never overwritten).

        Returns:
            How many rows were written (added or replaced).

        Raises:
            WarehouseLockedError: another process holds the file.
            WarehouseError: the write failed (rolled back).
        """
        unique = list({entry.key: entry for entry in entries}.values())
        if not unique:
            return 0
        table = pl.DataFrame(
            {
                "cache_key": [e.key for e in unique],
                "model": [e.model for e in unique],
                "prompt_version": [e.prompt_version for e in unique],
                "response": [
                    json.dumps(
                        {**e.response, **({FLAGS_KEY: list(e.flags)} if e.flags else {})},
                        ensure_ascii=False,
                        sort_keys=True,
                    )
                    for e in unique
                ],
                "cost_usd": [e.cost_usd for e in unique],
                "tokens": [e.tokens for e in unique],
            },
            schema=_ENTRIES_SCHEMA,
        )
        with _LOCK:
            conn = connect(self.path)
            try:
                conn.register("_stef_cache_entries", table)
                conn.begin()
                try:
                    now = datetime.now(UTC).replace(tzinfo=None)
                    stored = conn.execute(
                        "SELECT c.cache_key, c.response::VARCHAR FROM judge_cache AS c "
                        "JOIN _stef_cache_entries AS e USING (cache_key)"
                    ).fetchall()
                    damaged = [
                        str(key) for key, response in stored if valid is not None and not _holds(response, valid)
                    ]
                    if damaged:
                        conn.register(
                            "_stef_cache_damaged", pl.DataFrame({"cache_key": damaged}, schema={"cache_key": pl.String})
                        )
                        conn.execute(
                            "UPDATE judge_cache SET model = e.model, prompt_version = e.prompt_version, "
                            "response = e.response::JSON, cost_usd = e.cost_usd, tokens = e.tokens, created_at = $now::TIMESTAMP "
                            "FROM _stef_cache_entries AS e "
                            "WHERE judge_cache.cache_key = e.cache_key "
                            "AND judge_cache.cache_key IN (SELECT cache_key FROM _stef_cache_damaged)",
                            {"now": now},
                        )
                    before = int(conn.execute("SELECT count(*) FROM judge_cache").fetchall()[0][0])
                    conn.execute(
                        "INSERT INTO judge_cache (cache_key, model, prompt_version, response, cost_usd, tokens, created_at) "
                        "SELECT cache_key, model, prompt_version, response::JSON, cost_usd, tokens, $now::TIMESTAMP FROM _stef_cache_entries "
                        "ON CONFLICT (cache_key) DO NOTHING",
                        {"now": now},
                    )
                    added = (
                        int(conn.execute("SELECT count(*) FROM judge_cache").fetchall()[0][0]) - before + len(damaged)
                    )
                    conn.commit()
                except duckdb.Error:
                    conn.rollback()
                    raise
            except duckdb.Error as exc:
                raise WarehouseError(
                    f"writing the judge cache in {self.path or 'the warehouse'} failed and was rolled back: {exc}"
                ) from exc
            finally:
                conn.close()
        self.stored += added
        return added


def _holds(response: Any, valid: VerdictCheck) -> bool:
    """Whether a stored ``response`` (JSON text) holds a valid verdict by ``valid`` (its flags left out).

    >>> _holds('{"verdict": "CORRECT", "stef_flags": ["f"]}', lambda r: r == {"verdict": "CORRECT"})
    True
    >>> _holds("[1]", lambda r: True), _holds("not json", lambda r: True), _holds("[" * 100_000, lambda r: True)
    (False, False, False)
    """
    try:
        payload = json.loads(response)
    except (TypeError, ValueError, RecursionError):
        return False
    if not isinstance(payload, dict):
        return False
    payload.pop(FLAGS_KEY, None)
    return valid(payload)
