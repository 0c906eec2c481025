"""Tests of stef/monitor/models.py: invalid thresholds and samples are rejected, samples from warehouse rows."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from stef.monitor.models import DriftError, DriftSample, DriftThresholds


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"min_samples": 1}, r"min_samples\s+Input should be greater than or equal to 2", id="min_samples"),
        pytest.param({"confidence_level": 1.0}, r"confidence_level\s+Input should be less than 1", id="confidence"),
        pytest.param(
            {"ci_method": "studentized"}, r"ci_method\s+Input should be 'percentile', 'basic' or 'BCa'", id="method"
        ),
        pytest.param({"mean_delta": 1, "typo": 2}, r"typo\s+Extra inputs are not permitted", id="unknown_field"),
    ],
)
def test_invalid_thresholds_are_rejected(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DriftThresholds(**fields)


@pytest.mark.parametrize(
    ("scores", "records", "message"),
    [
        pytest.param((101.0,), 1, r"holds the score 101\.0; scores must lie in \[0, 100\]", id="above_100"),
        pytest.param((float("nan"),), 1, r"holds the score nan", id="nan"),
        pytest.param((50.0, 60.0), 1, r"has 2 scores but only 1 records", id="more_scores_than_records"),
    ],
)
def test_invalid_samples_are_rejected(scores: tuple[float, ...], records: int, message: str) -> None:
    with pytest.raises(DriftError, match=message):
        DriftSample(scores, records)


def test_sample_from_rows_counts_unscored_rows() -> None:
    s = DriftSample.from_rows(
        [
            ("evaluated", 80.0, "CORRECT", "FULLY_APPLIED"),
            ("parse_error", None, None, None),
            ("evaluated", 40.0, "INCORRECT", "NOT_APPLIED"),
        ]
    )
    assert (s.scores, s.records, s.verdicts, s.filter_statuses) == (
        (80.0, 40.0),
        3,
        ("CORRECT", "INCORRECT"),
        ("FULLY_APPLIED", "NOT_APPLIED"),
    )
    assert s.coverage == pytest.approx(2 / 3)
