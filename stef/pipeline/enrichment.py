"""Enriched-question validation (STEF paper §4, contribution 2; DESIGN.md §3 stage 2).

Agents rewrite the user's question Q_u into an enriched question Q_e before writing SQL. The
rewrite is itself a source of errors: it can drop a constraint the user stated, add one the
user never asked for, or contradict the user (another year, another top-k, another threshold).
:func:`validate_enrichment` compares the two specs and classifies the rewrite:

    contradicts         Q_e states a year, top-k or order that conflicts with Q_u's
    drops_constraints   a constraint of Q_u (quoted value, year, compared number, name) is
                        absent from Q_e
    adds_constraints    Q_e adds filter definitions or values that Q_u does not state
    faithful            none of the above

(first match wins). The differing items are returned as evidence; the judge turns a
contradiction into a suspected error, and alignment never reports a Q_e-added constraint that
S applies as an "extra" filter.
"""

from __future__ import annotations

from stef.models import EnrichmentResult, EnrichmentStatus, QuestionSpec
from stef.pipeline.matching import is_grounded, values_match


def _is_year(value: str) -> bool:
    return (
        len(value) >= 4
        and value[:4].isdigit()
        and value[:2] in {"19", "20"}
        and (len(value) == 4 or not value[4].isdigit())
    )


def validate_enrichment(
    question: QuestionSpec, enriched: QuestionSpec, question_text: str, enriched_text: str | None
) -> EnrichmentResult | None:
    """Classify Q_e against Q_u.

    Args:
        question: spec of Q_u.
        enriched: spec of Q_e, extracted with ``reference=Q_u`` (so definitions that Q_u does not
            mention are optional and are not counted as added constraints).
        question_text, enriched_text: the raw texts.

    Returns:
        An :class:`EnrichmentResult`, or ``None`` when there is no Q_e.

    >>> from stef.pipeline.extract_nl import extract_question_spec
    >>> q = "How many posts were created in 2011?"
    >>> e = q + " created in 2011 refers to YEAR(CreationDate) = 2012"
    >>> validate_enrichment(extract_question_spec(q), extract_question_spec(e, reference=q), q, e).status.value
    'contradicts'
    """
    if enriched_text is None or not enriched_text.strip():
        return None
    contradictions: list[str] = []
    question_years = set(question.years)
    dated = [(c, v) for c, _, v in (*enriched.value_bindings, *enriched.optional_bindings) if _is_year(v)]
    if question_years and dated and not any(year in v for _, v in dated for year in question_years):
        for column, value in dated:
            contradictions.append(f"year {', '.join(sorted(question_years))} in Q_u, {column} = {value} in Q_e")
    if question.top_k is not None and enriched.top_k is not None and question.top_k != enriched.top_k:
        contradictions.append(f"top {question.top_k} in Q_u, top {enriched.top_k} in Q_e")
    if (
        question.ordering
        and enriched.ordering
        and question.ordering != enriched.ordering
        and not (enriched.superlative and question.superlative)
    ):
        contradictions.append(f"order {question.ordering} in Q_u, {enriched.ordering} in Q_e")

    dropped = [
        value
        for value in (*question.filter_values, *question.years, *question.entities)
        if not is_grounded(value, enriched_text) and not any(values_match(value, b[2]) for b in enriched.value_bindings)
    ]
    added = [
        f"{column} {operator} {value}"
        for column, operator, value in enriched.value_bindings
        if not is_grounded(value, question_text)
    ]
    added += [f"value {value!r}" for value in enriched.filter_values if not is_grounded(value, question_text)]

    if contradictions:
        status = EnrichmentStatus.CONTRADICTS
    elif dropped:
        status = EnrichmentStatus.DROPS_CONSTRAINTS
    elif added:
        status = EnrichmentStatus.ADDS_CONSTRAINTS
    else:
        status = EnrichmentStatus.FAITHFUL
    return EnrichmentResult(
        status=status,
        added=tuple(dict.fromkeys(added)),
        dropped=tuple(dict.fromkeys(dropped)),
        contradictions=tuple(dict.fromkeys(contradictions)),
    )
