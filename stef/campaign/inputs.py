"""Campaign inputs from files: run logs and gold batteries (JSONL), the canonical catalog, JSON Schemas.

Source: DESIGN.md §7 and issue 6; the models are in :mod:`stef.campaign.models`. Every bad input
is an :class:`~stef.errors.InputError` naming the file, line and field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from stef.campaign.models import CampaignRunLog, CampaignRunResult, CampaignSettings, CanonicalCatalog, GoldQuestion
from stef.errors import InputError


def read_jsonl(path: str | Path, model: type[BaseModel]) -> list[Any]:
    """Read a JSONL file into ``model`` instances (blank lines skipped).

    Args:
        path: the file.
        model: :class:`CampaignRunLog` or :class:`GoldQuestion`.

    Returns:
        One instance per non-blank line.

    Raises:
        InputError: missing file, or a line that is not valid JSON / not valid for ``model``
            (the message names the file, line and field).
    """
    from pydantic import ValidationError

    from stef.logs import MAX_LINE_BYTES, capped_lines

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    out: list[Any] = []
    with path.open("rb") as handle:
        for number, raw in capped_lines(handle):
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"{path}:{number}: line longer than {MAX_LINE_BYTES} bytes")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"{path}:{number}: invalid UTF-8 at byte {exc.start}") from exc
            if not line.strip():
                continue
            try:
                out.append(model.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first.get("loc", ())) or "line"
                raise InputError(f"{path}:{number}: field `{where}`: {first.get('msg')}") from exc
    return out


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


__all__ = ["json_schemas", "load_catalog", "read_jsonl"]
