"""Campaign inputs (issue 6): JSONL errors name the file, line and field; the catalog's shape; the JSON
Schemas validate the bundled sample.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stef.campaign.inputs import json_schemas, load_catalog, read_jsonl
from stef.campaign.models import CampaignRunLog
from stef.errors import InputError
from tests.stef.campaign.support import (
    SAMPLE,
)


def test_read_jsonl_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(
        '{"run_id": "a", "campaign_id": "mcp", "question_id": "q", "question": "?"}\n\n{"run_id": "b", "campaign_id": "mcp", "question": "?"}\n'
    )
    with pytest.raises(InputError, match=r"runs.jsonl:3: field `question_id`: Field required"):
        read_jsonl(path, CampaignRunLog)


def test_load_catalog_rejects_wrong_shape(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text('{"state": "state_name"}')
    with pytest.raises(InputError, match="not a catalog of the form"):
        load_catalog(path)


def test_json_schemas_validate_the_bundled_sample() -> None:
    import jsonschema

    schemas = json_schemas()
    for line in (SAMPLE / "runs.jsonl").read_text().splitlines()[:5]:
        jsonschema.validate(json.loads(line), schemas["run_log"])
    for line in (SAMPLE / "gold.jsonl").read_text().splitlines():
        jsonschema.validate(json.loads(line), schemas["gold_question"])
    jsonschema.validate(json.loads((SAMPLE / "catalog.json").read_text()), schemas["catalog"])
    jsonschema.validate(json.loads((SAMPLE / "settings.json").read_text()), schemas["settings"])
    with pytest.raises(jsonschema.ValidationError, match="'gold_sql' is a required property"):
        jsonschema.validate({"question_id": "q", "question": "?"}, schemas["gold_question"])
