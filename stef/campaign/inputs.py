"""Campaign inputs from files: run logs and gold batteries (JSONL), the canonical catalog, JSON Schemas.

Source: DESIGN.md §7 and issue 6; the models are in :mod:`stef.campaign.models`. A bad line of a
JSONL input is rejected with the file, line and reason and the other lines are read (as ``stef
evaluate`` reads logs); a missing or unreadable file is an :class:`~stef.errors.InputError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from stef.campaign.models import (
    CampaignRunLog,
    CampaignRunResult,
    CampaignSettings,
    CanonicalCatalog,
    GoldQuestion,
    InputKind,
    SkippedRun,
    SkipStatus,
)
from stef.errors import InputError

ModelT = TypeVar("ModelT", bound=BaseModel)

RAW_CHARS = 65536
"""A rejected line keeps this many characters of its text (as a quarantined log line does)."""


@dataclass(frozen=True, slots=True)
class JsonlFile(Generic[ModelT]):
    """What :func:`read_jsonl` read from one JSONL file.

    Attributes:
        source: the file, as given.
        items: the valid lines, in order.
        line_numbers: the 1-based line number of each item.
        rejected: the lines that are not valid items, each with its line number and reason.
    """

    source: str
    items: list[ModelT]
    line_numbers: list[int]
    rejected: list[SkippedRun]


def _named_id(payload: dict[str, object] | None, key: str) -> str | None:
    from stef.logs import encodable_text

    value = payload.get(key) if payload is not None else None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        return None
    return encodable_text(str(value))


def read_jsonl(path: str | Path, model: type[ModelT]) -> JsonlFile[ModelT]:
    """Read a JSONL file into ``model`` instances; a bad line is rejected with its reason, never fatal.

    A line that is not UTF-8, not standard JSON, not an object (the checks of
    :func:`stef.logs.read_json_object`) or not valid for ``model`` (a field missing or of the
    wrong type) becomes a :class:`SkippedRun` with status ``invalid_input``, the file, the line
    number, the reason, the ids it names (``campaign_id``, ``run_id``, ``question_id``) and its
    text (cut to :data:`RAW_CHARS`); the other lines are read. Blank lines are skipped.

    Args:
        path: the file.
        model: :class:`CampaignRunLog` or :class:`GoldQuestion`.

    Returns:
        A :class:`JsonlFile`.

    Raises:
        InputError: the file is missing or cannot be read.
    """
    from pydantic import ValidationError

    from stef.logs import capped_lines, decode_json_object, read_json_object, validation_reason

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    kind = InputKind.GOLD if issubclass(model, GoldQuestion) else InputKind.RUN_LOG
    source = str(path)
    items: list[ModelT] = []
    numbers: list[int] = []
    rejected: list[SkippedRun] = []
    try:
        with path.open("rb") as handle:
            for number, raw in capped_lines(handle):
                if not raw.strip():
                    continue
                payload, reason, text = read_json_object(raw, number)
                if payload is not None:
                    try:
                        items.append(model.model_validate(payload))
                        numbers.append(number)
                        continue
                    except ValidationError as exc:
                        reason = validation_reason(exc)
                named = payload if payload is not None else decode_json_object(text)
                rejected.append(
                    SkippedRun(
                        status=SkipStatus.INVALID_INPUT,
                        reason=reason or "invalid line",
                        input=kind,
                        source=source,
                        line_number=number,
                        campaign_id=_named_id(named, "campaign_id"),
                        run_id=_named_id(named, "run_id"),
                        question_id=_named_id(named, "question_id"),
                        raw=text[:RAW_CHARS],
                    )
                )
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    return JsonlFile(source, items, numbers, rejected)


def load_catalog(path: str | Path) -> CanonicalCatalog:
    """Read a canonical catalog JSON file ``{table: [columns]}``.

    Raises:
        InputError: missing file or wrong shape.
    """
    from pydantic import ValidationError

    from stef.config_files import read_config_text

    path = Path(path)
    try:
        text = read_config_text(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the catalog file ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a UTF-8 text file (invalid byte at offset {exc.start})") from exc
    try:
        return CanonicalCatalog.model_validate_json(text)
    except ValidationError as exc:
        raise InputError(
            f"{path}: not a catalog of the form {{table: [columns]}} ({exc.errors()[0].get('msg')})"
        ) from exc


def json_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schemas of the campaign inputs and of ``metrics.json``'s source model.

    Returns:
        ``{"run_log": ..., "gold_question": ..., "catalog": ..., "settings": ..., "run_result": ...}``.

    >>> sorted(json_schemas()["gold_question"]["required"])
    ['gold_sql', 'question', 'question_id']
    """
    return {
        "run_log": CampaignRunLog.model_json_schema(),
        "gold_question": GoldQuestion.model_json_schema(),
        "catalog": CanonicalCatalog.model_json_schema(),
        "settings": CampaignSettings.model_json_schema(),
        "run_result": CampaignRunResult.model_json_schema(),
    }


__all__ = ["JsonlFile", "json_schemas", "load_catalog", "read_jsonl"]
