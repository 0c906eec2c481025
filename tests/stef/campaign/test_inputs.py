"""Campaign inputs (issue 6): a bad JSONL line is rejected naming the file, line and reason; the catalog's shape; the JSON
Schemas validate the bundled sample.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stef.campaign.inputs import json_schemas, load_catalog, read_jsonl
from stef.campaign.models import CampaignRunLog, GoldQuestion, InputKind, SkipStatus
from stef.errors import InputError
from tests.stef.campaign.support import (
    SAMPLE,
)


@pytest.mark.parametrize(
    ("line", "reason", "ids"),
    [
        pytest.param(
            b"{not json",
            "not valid JSON: Expecting property name enclosed in double quotes (column 2)",
            (None, None, None),
            id="not_json",
        ),
        pytest.param(
            b'{"run_id": "b", "campaign_id": "mcp", "question": "?"}',
            "invalid record: field `question_id`: Field required",
            ("mcp", "b", None),
            id="missing_field",
        ),
        pytest.param(
            b'{"run_id": "b", "campaign_id": "mcp", "question_id": "q", "question": "?", "tool_calls": 3}',
            "invalid record: field `tool_calls`: Input should be a valid list",
            ("mcp", "b", "q"),
            id="wrong_type",
        ),
        pytest.param(b'"mcp"', "not a JSON object but a string", (None, None, None), id="not_an_object"),
        pytest.param(
            b'{"run_id": "b", "run_id": "c", "campaign_id": "mcp"}',
            "ambiguous JSON: key 'run_id' appears twice in one object",
            ("mcp", None, None),
            id="key_twice",
        ),
        pytest.param(b'{"run_id": "b\xff"}', "invalid UTF-8 at byte 13", (None, "b\ufffd", None), id="not_utf8"),
        pytest.param(b'{"a": NaN}', "not readable JSON: NaN is not a JSON number", (None, None, None), id="nan"),
    ],
)
def test_read_jsonl_rejects_a_bad_line_with_file_line_and_reason_and_reads_the_rest(
    tmp_path: Path, line: bytes, reason: str, ids: tuple[str | None, str | None, str | None]
) -> None:
    """One bad line was an InputError that stopped the whole campaign; now it is rejected and the others are read."""
    path = tmp_path / "runs.jsonl"
    good = b'{"run_id": "a", "campaign_id": "mcp", "question_id": "q", "question": "?"}'
    path.write_bytes(good + b"\n\n" + line + b"\n" + good.replace(b'"a"', b'"z"') + b"\n")
    read = read_jsonl(path, CampaignRunLog)
    assert [r.run_id for r in read.items] == ["a", "z"] and read.line_numbers == [1, 4]
    assert [(r.status, r.input, r.source, r.line_number, r.reason) for r in read.rejected] == [
        (SkipStatus.INVALID_INPUT, InputKind.RUN_LOG, str(path), 3, reason)
    ]
    rejected = read.rejected[0]
    assert (rejected.campaign_id, rejected.run_id, rejected.question_id) == ids
    assert rejected.raw == line.decode("utf-8", "replace")
    assert rejected.where() == f"{path} line 3"


def test_read_jsonl_still_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"gold\.jsonl: no such file"):
        read_jsonl(tmp_path / "gold.jsonl", GoldQuestion)


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
