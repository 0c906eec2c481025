"""Tests of the calibration (stef.pipeline.judge.calibrate): the shipped calibrators, the verdict
bands and the monotone map from P(correct) to verdict and Γ.
"""

from __future__ import annotations

import pytest
import sqlglot

from stef.models import AlignmentResult, FilterStatus, QuestionSpec, Verdict
from stef.pipeline.extract_nl import extract_question_spec
from stef.pipeline.extract_sql import extract_sql_spec
from stef.pipeline.rules import default_rules
from stef.pipeline.score import compute_score


def test_shipped_calibrator_matches_the_feature_code() -> None:
    """The artifact's feature names are exactly what feature_vector produces (no silent zeros)."""
    from stef.pipeline.judge.calibrate import feature_vector, load_calibrator
    from stef.pipeline.judge.models import JudgeInput

    calibrator = load_calibrator()
    spec = extract_sql_spec(sqlglot.parse_one("SELECT COUNT(*) FROM users WHERE city = 'Rome'"))
    judge_input = JudgeInput(
        question="How many users live in 'Rome'?",
        enriched_question=None,
        sql="",
        sql_spec=spec,
        question_spec=extract_question_spec("How many users live in 'Rome'?"),
        enriched_spec=QuestionSpec(),
        alignment=AlignmentResult(status=FilterStatus.FULLY_APPLIED),
        normalization_rules_applied=(),
        grouping_required=False,
        rules=default_rules(),
    )
    assert set(feature_vector(judge_input, [])) == set(calibrator.names)
    cv = calibrator.metadata["cross_validation"]
    assert cv["grouped_by"] == "dataset and question" and cv["folds"] == 5
    assert {entry["file"] for entry in calibrator.metadata["trained_on"].values()} == {
        "dev_canonical.jsonl",
        "dev.jsonl",
    }


def test_shipped_schema_calibrator_counts_the_schema_findings() -> None:
    from stef.pipeline.judge.calibrate import SCHEMA_CALIBRATOR, SCHEMA_FEATURES, load_calibrator

    calibrator = load_calibrator(SCHEMA_CALIBRATOR)
    assert {f"schema:{name}" for name in SCHEMA_FEATURES} <= set(calibrator.names)
    assert calibrator.metadata["feature_set"] == "schema"


def test_verdict_is_monotone_in_probability_and_gamma_is_the_side_probability() -> None:
    """Every CORRECT has a higher p than every LIKELY_CORRECT, and so on down; γ = P(the verdict's
    side is right); Φ ≥ 75 exactly when p ≥ 0.65 with the filters fully applied."""
    from stef.pipeline.judge.calibrate import verdict_from_probability

    order = [Verdict.INCORRECT, Verdict.POTENTIALLY_INCORRECT, Verdict.LIKELY_CORRECT, Verdict.CORRECT]
    scoring = default_rules().scoring
    previous = 0
    for step in range(10001):
        p = step / 10000
        verdict, gamma = verdict_from_probability(p)
        assert order.index(verdict) >= previous, (p, verdict)
        previous = order.index(verdict)
        assert gamma == pytest.approx(p if verdict in (Verdict.CORRECT, Verdict.LIKELY_CORRECT) else 1 - p, abs=1e-4)
        score = compute_score(AlignmentResult(status=FilterStatus.FULLY_APPLIED), verdict, gamma, scoring).score
        assert (score >= 75) == (p >= 0.65), p


def test_a_judge_stated_verdict_and_confidence_map_into_the_verdicts_band() -> None:
    from stef.pipeline.judge.calibrate import VERDICT_BANDS, probability_from_verdict

    for verdict, (low, high) in VERDICT_BANDS.items():
        for gamma in (0.0, 0.3, 0.5, 0.7, 0.9, 1.0):
            p = probability_from_verdict(verdict, gamma)
            assert low <= p <= high and (p < high or verdict is Verdict.CORRECT), (verdict, gamma, p)


@pytest.mark.parametrize(
    "artifact", ["symbolic-v2.json", "schema-v1.json", "observed-v1.json", "schema-observed-v1.json"]
)
def test_every_shipped_calibrator_holds_each_feature_within_its_training_range(artifact: str) -> None:
    """A count beyond anything in the training data moves p no further than the training
    maximum: 60 integer divisions (``/1/1/1…``) made an answer whose findings listed its bugs
    CORRECT at p = 0.97. Checked for every feature of every shipped artifact, up and down."""
    from stef.pipeline.judge.calibrate import load_calibrator

    calibrator = load_calibrator(artifact)
    assert calibrator.lower is not None and calibrator.upper is not None
    base = dict(zip(calibrator.names, calibrator.lower, strict=True))
    for name, low, high in zip(calibrator.names, calibrator.lower, calibrator.upper, strict=True):
        assert low <= high
        at_top = calibrator.probability({**base, name: high})
        assert calibrator.probability({**base, name: high * 10 + 100}) == at_top, name
        assert calibrator.probability({**base, name: low - 100}) == calibrator.probability(base), name


def test_padding_an_answer_with_integer_divisions_does_not_make_it_correct() -> None:
    """The wrong-value answer keeps its verdict however many ``/1`` it carries (the same with a
    schema); p stops changing once the count passes the training range."""
    from stef.models import AgentLogRecord
    from stef.pipeline.evaluate import evaluate

    question = "How many schools are in Alameda County?"
    ps = []
    for count in (0, 30, 100, 1000):
        sql = "SELECT COUNT(*)" + "/1" * count + " FROM schools WHERE county = 'Fresno'"
        evaluation = evaluate(AgentLogRecord(run_id=f"d{count}", question=question, sql=sql, dialect="sqlite"))
        assert evaluation.verdict is not None and evaluation.p_correct is not None
        assert evaluation.verdict not in (Verdict.CORRECT, Verdict.LIKELY_CORRECT), (count, evaluation.rationale)
        ps.append(evaluation.p_correct)
    assert ps[1] == ps[2] == ps[3] < 0.5
