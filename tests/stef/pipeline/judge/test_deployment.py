"""Deployment calibrators (issue 18): the refit of the shipped calibrator on reviewer labels."""

from __future__ import annotations

import json
import math
import random
import re

import pytest

from stef.models import AgentLogRecord
from stef.pipeline.evaluate import evaluate
from stef.pipeline.judge.calibrate import Calibrator
from stef.pipeline.judge.deployment import (
    MIN_LABELS,
    SHIPPED_LOGIT,
    NotEnoughLabelsError,
    calibrator_json,
    calibrator_set_digest,
    fit_deployment_calibrator,
    parse_calibrator,
    shipped_logit,
)
from stef.pipeline.judge.symbolic import SymbolicJudge


def _answers(n: int, shift: float, seed: int) -> tuple[list[dict[str, float]], list[bool], list[str]]:
    """Answers whose true P(correct) is σ(ẑ + shift): the shipped model is off by ``shift`` in logit."""
    rng = random.Random(seed)
    features, labels, groups = [], [], []
    for i in range(n):
        z = rng.gauss(0.0, 1.5)
        features.append({SHIPPED_LOGIT: z, "finding:Value Mismatch": float(rng.random() < 0.2)})
        labels.append(rng.random() < 1.0 / (1.0 + math.exp(-(z + shift))))
        groups.append(f"q{i // 2}")  # two answers per question
    return features, labels, groups


def _passes(features: list[dict[str, float]]):
    return lambda index, p: p >= 0.65


def test_a_shifted_deployment_is_corrected_toward_its_labels() -> None:
    features, labels, groups = _answers(1500, -1.5, seed=1)  # answers are wrong more often than the shipped p says
    fit = fit_deployment_calibrator(features, labels, groups, _passes(features), "test-v1")
    assert fit.n == 1500 and fit.incorrect == labels.count(False)
    assert fit.fitted.log_loss < fit.shipped.log_loss - 0.03  # nested out-of-fold: not tuned on what it measures
    assert fit.fitted.accuracy > fit.shipped.accuracy
    calibrator = fit.calibrator
    assert calibrator.names[-1] == SHIPPED_LOGIT and calibrator.metadata["base"] == "shipped"
    # the refit lowers p of an answer the shipped model put at 0.5: by about the shift
    p = calibrator.probability({SHIPPED_LOGIT: 0.0})
    assert 0.1 < p < 0.35


def test_few_labels_stay_close_to_the_shipped_calibrator() -> None:
    few = fit_deployment_calibrator(*_answers(MIN_LABELS, -1.5, seed=2), lambda i, p: p >= 0.65, "few")
    many = fit_deployment_calibrator(*_answers(3000, -1.5, seed=2), lambda i, p: p >= 0.65, "many")
    probe = {SHIPPED_LOGIT: 0.0}
    assert abs(few.calibrator.probability(probe) - 0.5) < abs(many.calibrator.probability(probe) - 0.5)


def test_a_well_calibrated_shipped_model_is_kept() -> None:
    fit = fit_deployment_calibrator(*_answers(800, 0.0, seed=3), lambda i, p: p >= 0.65, "same")
    for z in (-2.0, 0.0, 2.0):
        expected = 1.0 / (1.0 + math.exp(-z))
        assert fit.calibrator.probability({SHIPPED_LOGIT: z}) == pytest.approx(expected, abs=0.06)


@pytest.mark.parametrize(
    ("n", "wrong", "message"),
    [
        (99, 50, "99 labelled answers (49 correct, 50 incorrect): a deployment calibrator needs at least 100"),
        (
            300,
            19,
            "300 labelled answers (281 correct, 19 incorrect): a deployment calibrator needs at least 100, with at least 20 of each label",
        ),
    ],
)
def test_too_few_labels_are_refused_with_the_number_needed(n: int, wrong: int, message: str) -> None:
    features = [{SHIPPED_LOGIT: 0.0}] * n
    labels = [False] * wrong + [True] * (n - wrong)
    with pytest.raises(NotEnoughLabelsError, match=re.escape(message)):
        fit_deployment_calibrator(features, labels, [str(i) for i in range(n)], lambda i, p: True, "x")


def test_the_artifact_round_trips_and_bad_ones_are_named() -> None:
    fit = fit_deployment_calibrator(*_answers(300, -1.0, seed=4), lambda i, p: p >= 0.65, "round-trip")
    document = calibrator_json(fit.calibrator)
    again = parse_calibrator(document, "calib.json")
    probe = {SHIPPED_LOGIT: 0.7, "finding:Value Mismatch": 1.0}
    assert again.probability(probe) == pytest.approx(fit.calibrator.probability(probe))
    with pytest.raises(ValueError, match=r"calib\.json: not a calibrator artifact"):
        parse_calibrator("{}", "calib.json")
    broken = json.loads(document)
    broken["means"] = broken["means"][:-1]
    with pytest.raises(ValueError, match="differ in length"):
        parse_calibrator(json.dumps(broken), "calib.json")


def _intercept_only(version: str, intercept: float) -> Calibrator:
    return Calibrator(version, (SHIPPED_LOGIT,), (0.0,), (1.0,), (1.0,), intercept, {"base": "shipped"})


def test_the_symbolic_judge_applies_the_app_calibrator_and_names_it() -> None:
    record = AgentLogRecord(
        run_id="r1", question="How many users live in 'Rome'?", sql="SELECT COUNT(*) FROM users WHERE city = 'Rome'"
    )
    shipped = evaluate(record)
    everyone = _intercept_only("reviews-all", -2.0)
    shop = _intercept_only("reviews-shop", 1.0)
    judge = SymbolicJudge(deployment={None: everyone, "shop": shop})
    other = evaluate(record.model_copy(update={"app_id": "crm"}), judge=judge)
    own = evaluate(record.model_copy(update={"app_id": "shop"}), judge=judge)
    assert shipped.p_correct is not None
    z = shipped_logit(shipped.p_correct)
    assert other.p_correct == pytest.approx(1.0 / (1.0 + math.exp(-(z - 2.0))), abs=1e-3)
    assert own.p_correct == pytest.approx(1.0 / (1.0 + math.exp(-(z + 1.0))), abs=1e-3)
    assert "refit by reviews-all" in (other.rationale or "") and "refit by reviews-shop" in (own.rationale or "")
    assert judge.version_suffix == "+calib=" + calibrator_set_digest({None: everyone, "shop": shop})
    assert SymbolicJudge().version_suffix == ""
    assert judge.version_suffix != SymbolicJudge(deployment={None: everyone}).version_suffix


def test_the_refit_has_no_range_of_its_own_and_an_artifact_with_one_round_trips() -> None:
    """A deployment refit is fitted on features the judge already held within the shipped
    calibrator's range; it clips nothing itself (clipping the shipped logit to a sample of
    uncertain answers squeezed a p of 0.02 to 0.41). An artifact that carries a range keeps it
    through JSON, and a broken range is named."""
    features, labels, groups = _answers(300, -1.0, seed=4)
    fit = fit_deployment_calibrator(features, labels, groups, lambda i, p: p >= 0.65, "unbounded")
    calibrator = fit.calibrator
    assert calibrator.lower is None and calibrator.upper is None
    low, high = (
        {SHIPPED_LOGIT: -4.0, "finding:Value Mismatch": 0.0},
        {SHIPPED_LOGIT: 4.0, "finding:Value Mismatch": 0.0},
    )
    assert calibrator.probability(low) < 0.1 < 0.9 < calibrator.probability(high)
    document = json.loads(calibrator_json(calibrator))
    assert "lower" not in document and "upper" not in document
    document.update(lower=[0.0, -12.0], upper=[1.0, 12.0])
    again = parse_calibrator(json.dumps(document), "calib.json")
    assert (again.lower, again.upper) == ((0.0, -12.0), (1.0, 12.0))
    beyond = {SHIPPED_LOGIT: 40.0, "finding:Value Mismatch": 50.0}
    assert again.probability(beyond) == again.probability({SHIPPED_LOGIT: 12.0, "finding:Value Mismatch": 1.0})
    for broken_range in ([2.0, 0.0], [float("nan"), 0.0]):
        broken = dict(document, lower=broken_range)
        with pytest.raises(ValueError, match=r"calib\.json: a feature's training range"):
            parse_calibrator(json.dumps(broken), "calib.json")
    with pytest.raises(ValueError, match="upper has 1 values for 2 features"):
        parse_calibrator(json.dumps(dict(document, upper=[1.0])), "calib.json")


def test_the_judge_hands_a_refit_the_features_within_the_shipped_range() -> None:
    """A refit reads the shipped calibrator's features held within its training range: 60
    integer divisions count as the most the training data showed (one), as for the shipped model."""
    from stef.pipeline.judge.calibrate import load_calibrator

    shipped = load_calibrator()
    top = dict(zip(shipped.names, shipped.upper or (), strict=True))["integer_divisions"]
    refit = Calibrator(
        "reviews", ("integer_divisions", SHIPPED_LOGIT), (0.0, 0.0), (1.0, 1.0), (0.5, 1.0), 0.0, {"base": "shipped"}
    )
    sql = "SELECT COUNT(*)" + "/1" * 60 + " FROM schools WHERE county = 'Alameda'"
    record = AgentLogRecord(run_id="d60", question="How many schools are in Alameda?", sql=sql)
    alone = evaluate(record)
    refitted = evaluate(record, judge=SymbolicJudge(deployment={None: refit}))
    assert alone.p_correct is not None and refitted.p_correct is not None
    expected = 1.0 / (1.0 + math.exp(-(0.5 * min(60.0, top) + shipped_logit(alone.p_correct))))
    assert refitted.p_correct == pytest.approx(expected, abs=2e-4)  # p is rounded to 4 digits
