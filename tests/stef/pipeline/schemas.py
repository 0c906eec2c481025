"""The small pet-shop schema that the schema, schema-check and CLI tests of the pipeline share."""

from __future__ import annotations

PETS_DDL = """
-- a tiny pet shop
CREATE TABLE pets (
    pet_id INTEGER PRIMARY KEY, -- the pet
    kind TEXT,                  -- cat or dog
    age INTEGER,
    born DATE
);
CREATE TABLE owners (
    owner_id INTEGER PRIMARY KEY,
    name TEXT,
    pet_id INTEGER,
    FOREIGN KEY (pet_id) REFERENCES pets (pet_id)
);
CREATE INDEX owners_name ON owners (name);
"""
"""Two tables (``pets``, ``owners``) with keys, a foreign key, comments as descriptions and an index."""
