"""Fixtures shared by the pipeline tests: the parsed pet-shop schema."""

from __future__ import annotations

import pytest

from stef.pipeline.schema import DatabaseSchema, parse_ddl
from tests.stef.pipeline.schemas import PETS_DDL


@pytest.fixture(scope="module")
def pets() -> DatabaseSchema:
    """:data:`PETS_DDL` parsed as SQLite (source ``pets.sql``)."""
    return parse_ddl(PETS_DDL, "sqlite", "pets.sql")
