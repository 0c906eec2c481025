"""Stage E: the four production normalisation rules (STEF paper §2.E).

They keep structurally correct but idiomatically different SQL from being penalised. Each rule
can be switched off in R_app (``normalization_rules``). The result is a normalised copy of the
SQL spec in which tolerated constructs are neutralised, plus the names of the rules applied;
the caller's spec is never mutated.

1. ``required_group_by``  — a SELECT mixing aggregates and plain columns needs its GROUP BY:
   the GROUP BY is accepted even when the question did not ask for grouping.
2. ``benign_group_by``    — grouping on a column that WHERE pins to one value is ignored.
3. ``order_by_tolerance`` — an ORDER BY is accepted when the user asked for no order and no
   top-k (it only sorts the full answer).
4. ``limit_tolerance``    — a LIMIT at or above the safety threshold (default 1000) is a
   safety guard, not a top-k constraint, unless a top-k was asked.
"""

from __future__ import annotations

from dataclasses import dataclass

from stef.models import QuestionSpec, SQLSpec
from stef.pipeline.rules import AppRules


@dataclass(frozen=True, slots=True)
class NormalizationResult:
    """The normalised spec, the rules that fired and the constructs they tolerate.

    Attributes:
        sql_spec: copy of the input spec with tolerated GROUP BY keys / ORDER BY / LIMIT removed.
        applied: names of the rules that changed something, in rule order.
        grouping_required: the GROUP BY is structurally required (rule 1).
    """

    sql_spec: SQLSpec
    applied: tuple[str, ...]
    grouping_required: bool


def normalize(
    sql_spec: SQLSpec, question: QuestionSpec, enriched: QuestionSpec, rules: AppRules
) -> NormalizationResult:
    """Apply the production normalisation rules that R_app leaves on.

    >>> import sqlglot
    >>> from stef.pipeline.extract_sql import extract_sql_spec
    >>> from stef.pipeline.rules import default_rules
    >>> spec = extract_sql_spec(sqlglot.parse_one("SELECT name FROM t ORDER BY name LIMIT 5000"))
    >>> result = normalize(spec, QuestionSpec(), QuestionSpec(), default_rules())
    >>> result.applied, result.sql_spec.limit, result.sql_spec.order_by
    (('order_by_tolerance', 'limit_tolerance'), None, ())
    """
    applied: list[str] = []
    updates: dict[str, object] = {}
    top_k_asked = question.top_k is not None or enriched.top_k is not None
    ordering_asked = question.ordering is not None or enriched.ordering is not None or top_k_asked

    grouping_required = bool(sql_spec.group_by) and bool(sql_spec.aggregations) and sql_spec.plain_projections > 0
    if rules.rule_enabled("required_group_by") and grouping_required and not (question.grouping or enriched.grouping):
        applied.append("required_group_by")

    if rules.rule_enabled("benign_group_by") and sql_spec.group_by:
        pinned = {
            f.column for f in sql_spec.filters if f.operator == "=" and f.value is not None and f.clause == "where"
        }
        kept = tuple(key for key in sql_spec.group_by if key not in pinned)
        if kept != sql_spec.group_by:
            updates["group_by"] = kept
            applied.append("benign_group_by")

    limit = sql_spec.limit
    safety_limit = limit is not None and limit >= rules.safety_limit_threshold and not top_k_asked
    if (
        rules.rule_enabled("order_by_tolerance")
        and sql_spec.order_by
        and not ordering_asked
        and (limit is None or safety_limit)
    ):
        updates["order_by"] = ()
        applied.append("order_by_tolerance")

    if rules.rule_enabled("limit_tolerance") and safety_limit:
        updates["limit"] = None
        applied.append("limit_tolerance")

    normalised = sql_spec.model_copy(update=updates) if updates else sql_spec
    return NormalizationResult(normalised, tuple(applied), grouping_required)
