"""Tests of the application rules (stef.pipeline.rules): rule files, their errors naming the file
and the field, the rule book's per-app lookup and the bundled examples.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stef.errors import RulesError
from stef.pipeline.rules import RuleBook, load_rules_file


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param(
            {"benign_filters": [{"operator": "="}]},
            r"field `benign_filters\[0\]\.column` is missing",
            id="missing_column",
        ),
        pytest.param({"column_mappings": {"a": 3}}, r"field `column_mappings\.a` is invalid", id="mapping_not_string"),
        pytest.param(
            {"scoring": {"gamma_high": 2}}, r"field `scoring\.gamma_high` is invalid", id="gamma_out_of_range"
        ),
        pytest.param({"colum_mappings": {}}, r"field `colum_mappings` is not allowed", id="misspelt_key"),
        pytest.param(
            {"normalization_rules": {"limit_tolerence": True}},
            r"field `normalization_rules\.limit_tolerence` is not allowed",
            id="misspelt_nested_key",
        ),
        pytest.param(
            {"default_dialect": "klingon"},
            r"field `default_dialect` is invalid: unknown SQL dialect .klingon.",
            id="unknown_default_dialect",
        ),
    ],
)
def test_invalid_rule_file_names_file_and_field(tmp_path: Path, payload: dict, message: str) -> None:
    path = tmp_path / "acme.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    with pytest.raises(RulesError, match=rf"acme\.json: {message}"):
        load_rules_file(path)


def test_rule_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(RulesError, match=r"broken\.json: not valid JSON \(line 1, column 2"):
        load_rules_file(path)


def test_rule_file_that_is_a_workbook_or_archive_says_so(tmp_path: Path) -> None:
    """A binary file was "not a UTF-8 text file (invalid byte at offset 10)"."""
    import gzip

    path = tmp_path / "acme.json"
    path.write_bytes(gzip.compress(b'{"benign_filters": []}' * 50))
    with pytest.raises(RulesError) as caught:
        load_rules_file(path)
    assert str(caught.value) == f"{path}: a gzip archive, not a JSON rule file"
    path.write_bytes(b"PK\x03\x04\x14\x00\x06\x00\x08\x00\x00\x00!\x00\x86\xfe" + bytes(64))
    with pytest.raises(
        RulesError, match=r"acme\.json: a workbook or other zip archive \(\.xlsx, \.ods, \.zip\), not a JSON"
    ):
        load_rules_file(path)


def test_rulebook_uses_app_file_then_default(tmp_path: Path) -> None:
    (tmp_path / "sales.json").write_text(
        json.dumps({"app_id": "sales", "column_mappings": {"territory": "region"}}), encoding="utf-8"
    )
    book = RuleBook(rules_dirs=(tmp_path,))
    assert book.for_app("sales").canonical_column("Territory") == "region"
    assert book.for_app("sales").safety_limit_threshold == 1000  # merged from default.json
    assert book.for_app("unknown_app").app_id == "default"
    assert book.for_app(None).app_id == "default"


def test_bundled_example_rules_are_valid() -> None:
    rules_dir = Path(__import__("rules").__file__).parent
    for path in sorted(rules_dir.glob("*.json")):
        if path.name != "schema.json":
            assert load_rules_file(path).scoring.gamma_high == 0.85


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_rule_file_with_a_nan_score_is_refused(tmp_path: Path, constant: str) -> None:
    """Python's json reads NaN, and it passed the schema's minimum and maximum: every row of the app
    came out `evaluated` with no score, a band and a verdict, and the run's mean Φ was nan."""
    path = tmp_path / "shop.json"
    path.write_text('{"app_id": "shop", "scoring": {"filter_scores": {"FULLY_APPLIED": ' + constant + "}}}", "utf-8")
    with pytest.raises(RulesError) as raised:
        load_rules_file(path)
    assert str(raised.value) == f"{path}: not valid JSON ({constant} is not a JSON number)"


def test_gamma_low_above_gamma_high_is_refused(tmp_path: Path) -> None:
    """Γ_low 0.9 over Γ_high 0.3 was schema-valid: an answer with p 0.62 then scored 90, excellent."""
    path = tmp_path / "shop.json"
    path.write_text(json.dumps({"app_id": "shop", "scoring": {"gamma_low": 0.9, "gamma_high": 0.3}}), "utf-8")
    with pytest.raises(RulesError, match=r"field `scoring.gamma_low` \(0.9\) is above `scoring.gamma_high` \(0.3\)"):
        load_rules_file(path)


def test_mappings_and_aliases_written_with_capitals_apply(tmp_path: Path) -> None:
    """Both are compared lower case: `{"Territory": "region"}` and `{"Deutschland": "Germany"}` were
    never found, and the answers they were written for scored 16 and 0 instead of 80."""
    from stef.models import AgentLogRecord
    from stef.pipeline.evaluate import evaluate

    rules = {
        "app_id": "shop",
        "column_mappings": {"Territory": "Region"},
        "value_normalization": {"value_aliases": {" Deutschland ": "Germany"}},
    }
    path = tmp_path / "shop.json"
    path.write_text(json.dumps(rules), "utf-8")
    loaded = load_rules_file(path)
    assert loaded.column_mappings == {"territory": "region"}
    assert loaded.value_normalization["value_aliases"] == {"deutschland": "germany"}
    lower = tmp_path / "lower.json"
    lower.write_text(
        json.dumps(
            {
                "app_id": "shop",
                "column_mappings": {"territory": "region"},
                "value_normalization": {"value_aliases": {"deutschland": "germany"}},
            }
        ),
        "utf-8",
    )
    record = AgentLogRecord(
        run_id="r1",
        app_id="shop",
        question="How many orders were shipped to the territory Deutschland?",
        sql="SELECT COUNT(*) FROM orders WHERE region = 'Germany'",
        dialect="sqlite",
    )
    as_written, lower_case = evaluate(record, loaded), evaluate(record, load_rules_file(lower))
    assert as_written.score == lower_case.score and as_written.filter_status == lower_case.filter_status
    clash = tmp_path / "clash.json"
    clash.write_text(json.dumps({"app_id": "shop", "column_mappings": {"Territory": "a", "territory": "b"}}), "utf-8")
    with pytest.raises(RulesError, match="field `column_mappings`: 'territory' and another name both read"):
        load_rules_file(clash)
