"""Errors of the warehouse layer; all are :class:`stef.errors.StefError` subclasses."""

from __future__ import annotations

from stef.errors import StefError


class WarehouseError(StefError):
    """The warehouse cannot be opened, migrated or written (the message names the file and fix)."""


class WarehouseLockedError(WarehouseError):
    """Another process holds the DuckDB file open for writing (DuckDB allows one writer process)."""


class WarehouseReadOnlyError(WarehouseError):
    """The warehouse cannot be opened for writing by this process: the file, its folder or its file
    system is read-only for the user (it may still open read-only)."""
