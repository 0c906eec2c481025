"""Schema files on disk: one per app in a folder, read when an app is first seen (:class:`SchemaBook`).

:func:`load_schema_file` reads one ``<app_id>.sql`` (DDL, :func:`stef.pipeline.schema.parse_ddl`)
or ``<app_id>.json`` (catalog, :func:`stef.pipeline.schema.parse_catalog`) file into a
:class:`stef.pipeline.schema.DatabaseSchema`.
"""

from __future__ import annotations

import json
from pathlib import Path

from stef.config_files import not_text_message, read_config_text
from stef.pipeline.schema import SCHEMA_VERSION_SUFFIX, DatabaseSchema, SchemaError, parse_catalog, parse_ddl


def load_schema_file(path: str | Path, dialect: str = "") -> DatabaseSchema:
    """Read one schema file: ``*.sql`` as DDL in ``dialect``, ``*.json`` as a catalog.

    Raises:
        SchemaError: the file cannot be read or parsed (the message names it and the line).
    """
    path = Path(path)
    try:
        text = read_config_text(path)
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read the schema file ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        binary = not_text_message(bytes(exc.object[:16]), "a schema file (JSON or SQL text)")
        if binary is not None:
            raise SchemaError(f"{path}: {binary}") from exc
        raise SchemaError(f"{path}: not a UTF-8 text file (invalid byte at offset {exc.start})") from exc
    if path.suffix.lower() == ".json":
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from exc
        except (ValueError, RecursionError) as exc:
            raise SchemaError(f"{path}: not readable JSON ({str(exc)[:200]})") from exc
        return parse_catalog(payload, str(path))
    return parse_ddl(text, dialect, str(path))


class SchemaBook:
    """Resolves ``app_id`` -> :class:`DatabaseSchema` from one folder (``--schema-dir``).

    ``DIR/<app_id>.sql`` (DDL, read in the app's dialect) wins over ``DIR/<app_id>.json``.
    Each file is parsed once; an app without a file has no schema (``None``). App ids that
    cannot name a file (:func:`stef.pipeline.rules.is_rule_file_name`) have none either.
    """

    def __init__(self, directory: str | Path | None = None) -> None:
        """Args:
        directory: the folder of schema files (``None``: only R_app ``schema`` files with an
            absolute path are read).

        Raises:
            SchemaError: ``directory`` is given but is not a folder.
        """
        self.directory = Path(directory) if directory is not None else None
        if self.directory is not None and not self.directory.is_dir():
            problem = "is a file, not a folder" if self.directory.exists() else "schema folder does not exist"
            raise SchemaError(f"{self.directory}: {problem} (expected a folder of <app_id>.sql or <app_id>.json files)")
        self._cache: dict[tuple[str | None, str], DatabaseSchema | SchemaError | None] = {}

    def evaluator_version(self, base: str) -> str:
        """``base`` with :data:`SCHEMA_VERSION_SUFFIX` (the version of every evaluation of a run with schemas)."""
        return (
            base
            if base.endswith(SCHEMA_VERSION_SUFFIX) or SCHEMA_VERSION_SUFFIX + "+" in base
            else base + SCHEMA_VERSION_SUFFIX
        )

    def for_app(self, app_id: str | None, dialect: str = "", schema_file: str | None = None) -> DatabaseSchema | None:
        """The schema of ``app_id``: R_app's ``schema`` file when given (relative to the folder),
        else ``<dir>/<app_id>.sql`` or ``.json``; ``None`` when there is none.

        Raises:
            SchemaError: the app's file exists but cannot be read, or does not parse in ``dialect``
                (remembered as a schema is: the file is read once per app and dialect).
        """
        from stef.pipeline.rules import is_rule_file_name

        key = (app_id, dialect)
        if key in self._cache:
            cached = self._cache[key]
            if isinstance(cached, SchemaError):  # a file that does not parse in this dialect is read once too
                raise type(cached)(*cached.args)  # a new error each time: no traceback grows in the cache
            return cached
        schema: DatabaseSchema | None = None
        candidates: list[Path] = []
        if schema_file:
            named = Path(schema_file)
            candidates.append(named if named.is_absolute() or self.directory is None else self.directory / named)
        elif self.directory is not None and is_rule_file_name(app_id):
            candidates += [self.directory / f"{app_id}.sql", self.directory / f"{app_id}.json"]
        for candidate in candidates:
            if candidate.is_symlink() or candidate.exists():
                try:
                    schema = load_schema_file(candidate, dialect)
                except SchemaError as exc:
                    if len(self._cache) < 10_000:
                        self._cache[key] = exc
                    raise
                break
        if schema_file and schema is None:
            raise SchemaError(f"{candidates[0]}: the schema file named by the rules does not exist")
        if len(self._cache) < 10_000:
            self._cache[key] = schema
        return schema
