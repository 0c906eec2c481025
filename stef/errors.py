"""Error hierarchy of STEF (STYLE.md §7): one root type, messages that name the object and the fix."""

from __future__ import annotations


class StefError(Exception):
    """Root of every error STEF raises on purpose."""


class RulesError(StefError):
    """An R_app rule file is missing, not JSON, or does not match ``rules/schema.json``.

    The message names the file and the offending field, e.g.
    ``rules/acme.json: field `benign_filters[2].column` is missing``.
    """


class UnknownDialectError(StefError):
    """A dialect name that sqlglot does not know (raised for command-line settings only;
    a record with an unknown dialect gets the ``invalid_input`` status instead)."""


class InputError(StefError):
    """An input file cannot be read at all (missing, a directory with no JSONL ...)."""


class ConfigError(StefError):
    """A setting read from the environment is unusable (the message names the variable and the
    values it accepts)."""
