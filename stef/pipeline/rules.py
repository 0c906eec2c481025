"""Stage A of the STEF method: application rules R_app (STEF paper §2.A, DESIGN.md §3.1).

A rule file is JSON validated against ``rules/schema.json``; keys left out take the values of
``rules/default.json``. An ``app_id`` with no rule file uses the defaults; a file that exists but
is invalid raises :class:`stef.errors.RulesError` naming the file and field.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from stef.config_files import not_text_message, read_config_text
from stef.errors import RulesError

NORMALIZATION_RULES = ("required_group_by", "benign_group_by", "order_by_tolerance", "limit_tolerance")
"""The four production normalisation rules (STEF paper §2.E), in the order they are applied."""


class BenignFilter(BaseModel):
    """A filter the agent may add unasked; ``operator``/``value`` ``None`` match any."""

    model_config = ConfigDict(frozen=True)

    column: str
    operator: str | None = None
    value: str | float | bool | None = None
    reason: str = ""


class ScoringRules(BaseModel):
    """Score maps and Γ thresholds of Φ (STEF paper §3; DESIGN.md §3 defaults)."""

    model_config = ConfigDict(frozen=True)

    filter_scores: dict[str, float]
    verdict_scores: dict[str, float]
    leniency_bonus: float = 1.0
    gamma_high: float = 0.85
    gamma_low: float = 0.65


class AppRules(BaseModel):
    """R_app: deployment-specific rules of one application (STEF paper §2.A).

    Attributes:
        app_id: the application these rules belong to.
        default_dialect: sqlglot dialect for records with none (``None``: generic dialect).
        column_mappings: lower-case synonym -> canonical column name.
        benign_filters: filters that may be added unasked (earn the leniency bonus).
        value_normalization: ``lowercase``, ``collapse_whitespace``, ``value_aliases``.
        normalization_rules: switches of the four production rules + ``safety_limit_threshold``.
        scoring: score maps and Γ thresholds.
        schema_file: the app's schema file, key ``schema`` (DDL ``.sql`` or catalog ``.json``; relative paths are
            read from ``--schema-dir``), or ``None``: ``<schema-dir>/<app_id>.sql|.json``.
        source: the file the rules were read from (``None`` for built-in defaults).
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    app_id: str = "default"
    description: str = ""
    default_dialect: str | None = None
    column_mappings: dict[str, str] = Field(default_factory=dict)
    benign_filters: tuple[BenignFilter, ...] = ()
    value_normalization: dict[str, Any] = Field(default_factory=dict)
    normalization_rules: dict[str, Any] = Field(default_factory=dict)
    scoring: ScoringRules
    schema_file: str | None = Field(default=None, alias="schema")
    """The rule file's ``schema`` key."""
    source: str | None = None

    def rule_enabled(self, name: str) -> bool:
        """Whether production normalisation rule ``name`` (one of NORMALIZATION_RULES) is on."""
        return bool(self.normalization_rules.get(name, True))

    @property
    def safety_limit_threshold(self) -> int:
        """LIMIT at or above which a limit is a safety guard, not a top-k (default 1000)."""
        return int(self.normalization_rules.get("safety_limit_threshold", 1000))

    def canonical_column(self, name: str) -> str:
        """Lower-case ``name`` and apply ``column_mappings``.

        >>> AppRules.model_validate({**_default_payload(), "column_mappings": {"territory": "region"}}).canonical_column("Territory")
        'region'
        """
        lowered = name.lower()
        return self.column_mappings.get(lowered, lowered)


RESERVED_RULE_NAMES = frozenset({"schema"})
"""File stems in ``rules/`` that are not rule files (an app called ``schema`` uses the defaults)."""


def _rules_dir() -> Path:
    return Path(str(resources.files("rules")))


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((_rules_dir() / "schema.json").read_text(encoding="utf-8"))
    return schema


@lru_cache(maxsize=1)
def _default_payload() -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((_rules_dir() / "default.json").read_text(encoding="utf-8"))
    return payload


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _field_path(path: Any) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(root)"


def parse_rules(payload: Any, source: str) -> AppRules:
    """Validate a decoded rule document against ``rules/schema.json`` and merge defaults.

    Args:
        payload: the decoded JSON document.
        source: file name used in error messages.

    Returns:
        The merged :class:`AppRules`.

    Raises:
        RulesError: ``"<source>: field `<path>` <problem>"`` for the first schema violation.
    """
    import jsonschema

    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(payload), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        error = errors[0]
        path = list(error.path)
        if error.validator == "required":
            missing = error.message.split("'")[1] if "'" in error.message else "?"
            path = [*path, missing]
            problem = "is missing"
        elif error.validator == "additionalProperties":
            allowed = set(error.schema.get("properties", {}))
            unexpected = (
                sorted(k for k in error.instance if k not in allowed) if isinstance(error.instance, dict) else []
            )
            if unexpected:
                path = [*path, unexpected[0]]
            problem = f"is not allowed (allowed: {', '.join(sorted(allowed))})"
        else:
            problem = f"is invalid: {error.message}"
        raise RulesError(f"{source}: field `{_field_path(path)}` {problem}")
    return _merged_rules(payload, source)


def _merged_rules(payload: dict[str, Any], source: str) -> AppRules:
    """A schema-valid rule document merged over the defaults (its dialect checked with sqlglot)."""
    dialect = payload.get("default_dialect")
    if dialect is not None:
        from stef.errors import UnknownDialectError
        from stef.pipeline.dialects import resolve_dialect

        try:
            resolve_dialect(dialect)
        except UnknownDialectError as exc:
            raise RulesError(f"{source}: field `default_dialect` is invalid: {exc}") from exc
    merged = _merge(_default_payload(), payload)
    merged.pop("$schema", None)
    scoring = merged.get("scoring") or {}
    low, high = scoring.get("gamma_low"), scoring.get("gamma_high")
    if isinstance(low, int | float) and isinstance(high, int | float) and low > high:
        raise RulesError(
            f"{source}: field `scoring.gamma_low` ({low}) is above `scoring.gamma_high` ({high}): "
            "Γ_low is the confidence below which a verdict earns less, Γ_high the one above which it earns more"
        )
    # column names and values are compared lower case (and values normalised): so are the rule file's
    mappings: dict[str, str] = {}
    for name, canonical in (merged.get("column_mappings") or {}).items():
        if mappings.get(name.lower(), canonical.lower()) != canonical.lower():
            raise RulesError(f"{source}: field `column_mappings`: {name!r} and another name both read {name.lower()!r}")
        mappings[name.lower()] = canonical.lower()
    merged["column_mappings"] = mappings
    normalization = dict(merged.get("value_normalization") or {})
    if normalization.get("value_aliases"):
        aliases: dict[str, str] = {}
        for alias, value in normalization["value_aliases"].items():
            key, target = (_as_values_are(text, normalization) for text in (alias, value))
            if aliases.get(key, target) != target:
                raise RulesError(
                    f"{source}: field `value_normalization.value_aliases`: {alias!r} and another alias both read {key!r}"
                )
            aliases[key] = target
        normalization["value_aliases"] = aliases
        merged["value_normalization"] = normalization
    return AppRules.model_validate({**merged, "source": source})


def _as_values_are(text: str, normalization: dict[str, Any]) -> str:
    """``text`` with the whitespace and case normalisation values get before their alias is looked up
    (:func:`stef.pipeline.values.normalize_value`), so ``"Deutschland"`` finds ``deutschland``.

    >>> _as_values_are(" New  York ", {}), _as_values_are("New York", {"lowercase": False})
    ('new york', 'New York')
    """
    if normalization.get("collapse_whitespace", True):
        text = " ".join(text.split())
    return text.lower() if normalization.get("lowercase", True) else text


def load_rules_file(path: str | Path) -> AppRules:
    """Read and validate one rule file.

    Raises:
        RulesError: the file is missing, is not JSON, or violates the schema.
    """
    path = Path(path)
    try:
        text = read_config_text(path)
    except OSError as exc:
        raise RulesError(f"{path}: cannot read rule file ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        binary = not_text_message(bytes(exc.object[:16]), "a JSON rule file")
        if binary is not None:
            raise RulesError(f"{path}: {binary}") from exc
        raise RulesError(f"{path}: not a UTF-8 text file (invalid byte at offset {exc.start})") from exc
    try:
        payload = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise RulesError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    except ValueError as exc:  # NaN, Infinity: Python's json reads them, JSON has no such number
        raise RulesError(f"{path}: not valid JSON ({exc})") from exc
    return parse_rules(payload, str(path))


def _no_constant(name: str) -> Any:
    """``json.loads``' ``parse_constant``: ``NaN``, ``Infinity`` and ``-Infinity`` are refused
    (a NaN score map gave evaluated rows without a score)."""
    raise ValueError(f"{name} is not a JSON number")


@lru_cache(maxsize=1)
def default_rules() -> AppRules:
    """The built-in ``rules/default.json`` (parsed once; the model is frozen).

    pydantic validates it here; the JSON Schema check is left to the test suite
    (``tests/stef/pipeline/test_rules.py::test_bundled_example_rules_are_valid``), as the file ships with the
    package: importing jsonschema would cost every ``stef`` run about 60 ms.
    """
    return _merged_rules(_default_payload(), "rules/default.json")


class RuleBook:
    """Resolves ``app_id`` -> :class:`AppRules` from one or more rule directories/files.

    Lookup order for an app id: ``<dir>/<app_id>.json`` in each directory given, then the
    bundled ``rules/<app_id>.json``, then ``rules/default.json``. An explicit ``rules_file``
    applies to every record. Results are cached per app id; an invalid file raises
    :class:`RulesError` the first time it is needed.
    """

    def __init__(self, rules_file: str | Path | None = None, rules_dirs: tuple[str | Path, ...] = ()) -> None:
        self._forced = load_rules_file(rules_file) if rules_file is not None else None
        self._dirs = tuple(Path(d) for d in rules_dirs)
        self._cache: dict[str | None, AppRules] = {}

    def validate_all(self) -> int:
        """Read and validate every ``*.json`` rule file of the rule directories now (each is
        cached), so that a broken file stops a run before any work instead of when the first
        record that names its app arrives.

        Returns:
            The number of rule files read.

        Raises:
            RulesError: a file is invalid (the message names it and the field).
        """
        count = 0
        for directory in self._dirs:
            for candidate in sorted(directory.glob("*.json")):
                app_id = candidate.stem
                if is_rule_file_name(app_id) and app_id not in self._cache:
                    self._cache[app_id] = load_rules_file(candidate)
                    count += 1
        return count

    def for_app(self, app_id: str | None) -> AppRules:
        """Rules for ``app_id`` (default rules when it is ``None`` or has no file)."""
        if self._forced is not None:
            return self._forced
        if app_id in self._cache:
            return self._cache[app_id]
        rules = default_rules()
        if is_rule_file_name(app_id):
            for directory in (*self._dirs, _rules_dir()):
                candidate = directory / f"{app_id}.json"
                try:
                    found = (
                        candidate.is_symlink() or candidate.exists()
                    )  # a folder, FIFO or broken link named <app_id>.json is an error, not "no rules"
                except OSError as exc:
                    raise RulesError(
                        f"{candidate}: cannot look up the rule file of app {app_id!r} ({exc.strerror or exc})"
                    ) from exc
                if found:
                    rules = load_rules_file(candidate)
                    break
        if len(self._cache) < MAX_CACHED_APPS:
            self._cache[app_id] = rules
        return rules


MAX_CACHED_APPS = 10_000
"""App ids whose rules a :class:`RuleBook` remembers (further ids are looked up each time)."""
MAX_APP_ID_BYTES = 200
"""Longest app id (UTF-8 bytes) that can name a rule file (``<app_id>.json`` within a file
name's 255 bytes); a longer id gets the default rules."""


def is_rule_file_name(app_id: str | None) -> bool:
    """Whether ``app_id`` can name a rule file ``<app_id>.json``: letters, digits, ``_`` and
    ``-`` only, at most :data:`MAX_APP_ID_BYTES` bytes, not a reserved name. Other ids (``None``,
    paths, very long ids) get the default rules without touching the file system.

    >>> is_rule_file_name("sales_eu-1"), is_rule_file_name("../etc/passwd"), is_rule_file_name("a" * 251)
    (True, False, False)
    """
    if not app_id:
        return False
    return (
        len(app_id.encode("utf-8", "surrogatepass")) <= MAX_APP_ID_BYTES
        and app_id.replace("_", "").replace("-", "").isalnum()
        and app_id not in RESERVED_RULE_NAMES
    )
