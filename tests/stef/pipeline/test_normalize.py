"""Tests of the production normalisation rules (stef.pipeline.normalize)."""

from __future__ import annotations

import pytest
import sqlglot

from stef.models import QuestionSpec
from stef.pipeline.extract_nl import extract_question_spec
from stef.pipeline.extract_sql import extract_sql_spec
from stef.pipeline.normalize import normalize
from stef.pipeline.rules import default_rules, parse_rules


@pytest.mark.parametrize(
    ("question", "sql", "applied"),
    [
        pytest.param(
            "Revenue of each country", "SELECT country, SUM(revenue) FROM s GROUP BY country", (), id="grouping_asked"
        ),
        pytest.param(
            "Total revenue in Italy",
            "SELECT country, SUM(revenue) FROM s GROUP BY country",
            ("required_group_by",),
            id="required_group_by",
        ),
        pytest.param(
            "Total revenue in Italy",
            "SELECT SUM(revenue) FROM s WHERE country = 'Italy' GROUP BY country",
            ("benign_group_by",),
            id="benign_group_by",
        ),
        pytest.param(
            "List the products", "SELECT name FROM p ORDER BY name", ("order_by_tolerance",), id="order_by_tolerance"
        ),
        pytest.param("List the products", "SELECT name FROM p LIMIT 10000", ("limit_tolerance",), id="safety_limit"),
        pytest.param("Top 5 products", "SELECT name FROM p ORDER BY sales DESC LIMIT 5", (), id="top_k_not_tolerated"),
    ],
)
def test_production_normalisation_rules(question: str, sql: str, applied: tuple[str, ...]) -> None:
    spec = extract_sql_spec(sqlglot.parse_one(sql))
    result = normalize(spec, extract_question_spec(question), QuestionSpec(), default_rules())
    assert result.applied == applied


def test_normalisation_rules_can_be_switched_off() -> None:
    rules = parse_rules(
        {"normalization_rules": {"limit_tolerance": False, "order_by_tolerance": False}}, "rules/t.json"
    )
    spec = extract_sql_spec(sqlglot.parse_one("SELECT name FROM p ORDER BY name LIMIT 5000"))
    result = normalize(spec, QuestionSpec(), QuestionSpec(), rules)
    assert result.applied == () and result.sql_spec.limit == 5000
