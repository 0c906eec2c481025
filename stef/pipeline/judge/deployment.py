"""A calibrator fitted on one deployment's reviewer labels, shrunk toward the shipped one (issue 18).

The shipped calibrators (:mod:`stef.pipeline.judge.calibrate`) are trained on public benchmarks;
another agent's SQL on another database meets evidence whose weight differs. A team that labels a
sample of its answers (``stef review``) can refit the judge for its deployment. The refit is a
correction of the shipped model, not a new one:

    z = a + b·ẑ + Σ wᵢ·(xᵢ − μᵢ)/σᵢ,      p = σ(z)

where ẑ is the logit of the shipped calibrator's p for the record's context (schema, observed
catalog, both or neither: feature :data:`SHIPPED_LOGIT`), xᵢ the same named features the shipped
model reads (:func:`stef.pipeline.judge.calibrate.feature_vector`), standardised on the reviewed
answers. The fit minimises the summed log-loss plus the penalty

    λ_ab·(a² + (b − 1)²) + λ_w·Σ wᵢ²

which pulls every coefficient toward the shipped model (a = 0, b = 1, w = 0 *is* the shipped
model). Because the data term is a sum, few labels mean a strong pull: with 100 labels the refit
stays close to the shipped calibrator, with 1,000 it moves as far as the labels justify.
(λ_ab, λ_w) are chosen from :data:`PENALTY_GRID` by cross-validated log-loss, folds grouped by
question; the figures it reports (:class:`DeploymentFit`) are nested out-of-fold predictions (the
penalty chosen again inside each outer fold), so they are not tuned on the rows they measure.

The result is an ordinary :class:`stef.pipeline.judge.calibrate.Calibrator` artifact (the same JSON
format as the shipped ones); its feature list contains :data:`SHIPPED_LOGIT`, which the symbolic
judge fills in before applying it (:meth:`stef.pipeline.judge.symbolic.SymbolicJudge.judge`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stef.classification_metrics import auroc
from stef.pipeline.judge.calibrate import CORRECT_FROM, Calibrator

if TYPE_CHECKING:
    import numpy as np

SHIPPED_LOGIT = "shipped:logit"
"""Feature name of ẑ, the logit of the shipped calibrator's P(correct) for the record."""

MIN_LABELS = 100
"""Fewest labelled answers a deployment calibrator is fitted from."""
MIN_PER_CLASS = 20
"""Fewest answers of each label (correct, incorrect) among them."""

PENALTY_GRID: tuple[tuple[float, float], ...] = tuple(
    (ab, w) for ab in (3.0, 30.0) for w in (3.0, 10.0, 30.0, 100.0, 1e6)
)
"""(λ_ab, λ_w) candidates; λ_w = 10⁶ keeps the shipped feature weights and only rescales ẑ."""
FOLDS = 5
LOGIT_CAP = 12.0
"""|ẑ| is capped so a shipped p of exactly 0 or 1 stays finite."""


def shipped_logit(p: float) -> float:
    """ẑ = log(p / (1 − p)), capped at ±:data:`LOGIT_CAP`.

    >>> round(shipped_logit(0.5), 6), shipped_logit(1.0)
    (0.0, 12.0)
    """
    p = min(1.0 - 1e-9, max(1e-9, p))
    return max(-LOGIT_CAP, min(LOGIT_CAP, math.log(p / (1.0 - p))))


@dataclass(frozen=True)
class FoldFigures:
    """Out-of-fold figures of one calibrator on the reviewed answers.

    Attributes:
        accuracy: share of reviewed answers where "Φ ≥ 75 means correct" matches the label.
        auroc: AUROC of p (correct as the positive class); ``None`` with one class only.
        log_loss: mean negative log-likelihood of the labels, nats.
    """

    accuracy: float
    auroc: float | None
    log_loss: float

    def as_dict(self) -> dict[str, float | None]:
        """JSON-ready dict."""
        return {"accuracy": round(self.accuracy, 4), "auroc": _rounded(self.auroc), "log_loss": round(self.log_loss, 4)}


@dataclass(frozen=True)
class DeploymentFit:
    """A fitted deployment calibrator and how it compares with the shipped one.

    Attributes:
        calibrator: the artifact (fitted on every reviewed answer, with the chosen penalty).
        penalty: the chosen (λ_ab, λ_w).
        shipped: out-of-fold figures of the shipped calibrator (its p as is).
        fitted: nested out-of-fold figures of the refit.
        n: reviewed answers used; ``incorrect``: how many of them are labelled incorrect.
    """

    calibrator: Calibrator
    penalty: tuple[float, float]
    shipped: FoldFigures
    fitted: FoldFigures
    n: int
    incorrect: int


class NotEnoughLabelsError(ValueError):
    """Fewer reviewed answers than :data:`MIN_LABELS` (or a class below :data:`MIN_PER_CLASS`)."""


def fit_deployment_calibrator(
    features: Sequence[Mapping[str, float]],
    labels: Sequence[bool],
    groups: Sequence[str],
    passes: Callable[[int, float], bool],
    version: str,
    metadata: Mapping[str, Any] | None = None,
) -> DeploymentFit:
    """Fit the shrunk refit of the module docstring on reviewed answers.

    Args:
        features: per answer, its calibrator features with :data:`SHIPPED_LOGIT` (n mappings).
        labels: per answer, ``True`` when the reviewer labelled it correct.
        groups: per answer, its cross-validation group (the question text): answers to one
            question are never on both sides of a fold.
        passes: ``passes(i, p)``: whether answer ``i`` gets Φ ≥ 75 when its P(correct) is ``p``
            (Φ also depends on its filter alignment).
        version: the artifact's version string (named in each scored row's rationale).
        metadata: extra provenance stored in the artifact (app, reviews digest ...).

    Returns:
        A :class:`DeploymentFit`.

    Raises:
        NotEnoughLabelsError: below :data:`MIN_LABELS` answers or :data:`MIN_PER_CLASS` per label.
        ValueError: the sequences differ in length, or an answer lacks :data:`SHIPPED_LOGIT`.
    """
    n = len(labels)
    if not (len(features) == n == len(groups)):
        raise ValueError(f"features ({len(features)}), labels ({n}) and groups ({len(groups)}) differ in length")
    incorrect = sum(1 for label in labels if not label)
    if n < MIN_LABELS or min(incorrect, n - incorrect) < MIN_PER_CLASS:
        raise NotEnoughLabelsError(
            f"{n} labelled answers ({n - incorrect} correct, {incorrect} incorrect): a deployment calibrator needs "
            f"at least {MIN_LABELS}, with at least {MIN_PER_CLASS} of each label"
        )
    missing = [i for i, row in enumerate(features) if SHIPPED_LOGIT not in row]
    if missing:
        raise ValueError(f"answer {missing[0]} has no {SHIPPED_LOGIT!r} feature")
    import numpy as np  # numpy only when fitting (about 40 ms of every scoring command's start otherwise)

    names = sorted({name for row in features for name in row if name != SHIPPED_LOGIT})
    matrix = np.array([[float(row.get(name, 0.0)) for name in names] for row in features], dtype=float)
    base = np.array([float(row[SHIPPED_LOGIT]) for row in features], dtype=float)
    y = np.array([1.0 if label else 0.0 for label in labels], dtype=float)
    folds = _grouped_folds(groups, FOLDS)

    oof_fitted = np.zeros(n)
    for k in range(FOLDS):
        train, test = folds != k, folds == k
        inner = _grouped_folds([g for g, t in zip(groups, train, strict=True) if t], FOLDS - 1)
        penalty = _select_penalty(matrix[train], base[train], y[train], inner)
        model = _Fitted.fit(matrix[train], base[train], y[train], penalty)
        oof_fitted[test] = model.predict(matrix[test], base[test])
    penalty = _select_penalty(matrix, base, y, folds)
    final = _Fitted.fit(matrix, base, y, penalty)
    from scipy.special import expit  # scipy only when fitting (0.3 s of every scoring command's start otherwise)

    shipped_p = expit(base)
    calibrator = Calibrator(
        version=version,
        names=(*names, SHIPPED_LOGIT),
        means=(*(float(v) for v in final.means), 0.0),
        scales=(*(float(v) for v in final.scales), 1.0),
        coefficients=(*(float(v) for v in final.weights), float(final.b)),
        intercept=float(final.a),
        # no range of its own: the judge hands it features already held within the shipped
        # calibrator's training range (SymbolicJudge.calibration_features and judge), and the
        # shipped logit is not clipped (an uncertain sample's narrow range would squeeze every p)
        metadata={
            **dict(metadata or {}),
            "base": "shipped",
            "method": "logistic refit shrunk toward the shipped calibrator (stef.pipeline.judge.deployment)",
            "penalty": {"ab": penalty[0], "w": penalty[1]},
            "labels": {"n": n, "incorrect": incorrect},
            "quantification": _quantification(oof_fitted, y),
        },
    )
    return DeploymentFit(
        calibrator=calibrator,
        penalty=penalty,
        shipped=_figures(shipped_p, y, passes),
        fitted=_figures(oof_fitted, y, passes),
        n=n,
        incorrect=incorrect,
    )


def calibrator_json(calibrator: Calibrator) -> str:
    """The artifact document of ``calibrator`` (the format :meth:`Calibrator.from_json` reads)."""
    return json.dumps(
        {
            "version": calibrator.version,
            "features": list(calibrator.names),
            "means": list(calibrator.means),
            "scales": list(calibrator.scales),
            "coefficients": list(calibrator.coefficients),
            "intercept": calibrator.intercept,
            **({} if calibrator.lower is None else {"lower": list(calibrator.lower)}),
            **({} if calibrator.upper is None else {"upper": list(calibrator.upper)}),
            "metadata": calibrator.metadata,
        },
        indent=2,
        sort_keys=False,
    )


def artifact_digest(document: str) -> str:
    """First 12 hex digits of the SHA-256 of an artifact document (names a calibrator set)."""
    return hashlib.sha256(document.encode("utf-8")).hexdigest()[:12]


def calibrator_set_digest(deployment: Mapping[str | None, Calibrator]) -> str:
    """First 12 hex digits of the SHA-256 of a set of deployment calibrators by app (their
    versions, features and coefficients): it names the set in the evaluator version.

    >>> calibrator_set_digest({}) == calibrator_set_digest({})
    True
    """
    content = sorted(
        (
            app_id or "",
            cal.version,
            list(cal.names),
            list(cal.means),
            list(cal.scales),
            list(cal.coefficients),
            cal.intercept,
        )
        for app_id, cal in deployment.items()
    )
    return hashlib.sha256(json.dumps(content).encode("utf-8")).hexdigest()[:12]


CALIBRATION_VERSION_PREFIX = "+calib="
"""Evaluator-version part naming the deployment calibrators of a run (``+calib=<digest>``)."""


def parse_calibrator(document: str, source: str) -> Calibrator:
    """A calibrator artifact from its JSON text, checked.

    Args:
        document: the JSON text (:func:`calibrator_json`'s format, or a shipped artifact).
        source: where it came from, for the error message (a path, ``warehouse``).

    Raises:
        ValueError: not JSON, a missing key, lists of different lengths, a non-finite number.
    """
    try:
        payload = json.loads(document)
        calibrator = Calibrator.from_json(payload)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{source}: not a calibrator artifact ({type(exc).__name__}: {exc})") from exc
    sizes = {len(calibrator.names), len(calibrator.means), len(calibrator.scales), len(calibrator.coefficients)}
    if len(sizes) != 1:
        raise ValueError(f"{source}: features, means, scales and coefficients differ in length")
    numbers = (*calibrator.means, *calibrator.scales, *calibrator.coefficients, calibrator.intercept)
    if not all(math.isfinite(v) for v in numbers):
        raise ValueError(f"{source}: a coefficient, mean or scale is not a finite number")
    lower = calibrator.lower or (-math.inf,) * len(calibrator.names)
    upper = calibrator.upper or (math.inf,) * len(calibrator.names)
    if any(math.isnan(low) or math.isnan(high) or low > high for low, high in zip(lower, upper, strict=True)):
        raise ValueError(f"{source}: a feature's training range (lower, upper) is not a range")
    return calibrator


def is_deployment_calibrator(calibrator: Calibrator) -> bool:
    """Whether ``calibrator`` refits the shipped one (reads :data:`SHIPPED_LOGIT`)."""
    return SHIPPED_LOGIT in calibrator.names


# --------------------------------------------------------------------------- fitting


@dataclass(frozen=True)
class _Fitted:
    means: np.ndarray
    scales: np.ndarray
    weights: np.ndarray
    a: float
    b: float

    @classmethod
    def fit(cls, matrix: np.ndarray, base: np.ndarray, y: np.ndarray, penalty: tuple[float, float]) -> _Fitted:
        means = matrix.mean(axis=0)
        scales = matrix.std(axis=0)
        scales[scales == 0.0] = 1.0
        x = (matrix - means) / scales
        import numpy as np
        from scipy.optimize import minimize
        from scipy.special import expit

        lam_ab, lam_w = penalty
        d = x.shape[1]

        def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
            a, b, w = theta[0], theta[1], theta[2:]
            z = a + b * base + x @ w
            # log(1 + e^z) - y z, summed; stable for large |z|
            loss = float(np.sum(np.logaddexp(0.0, z) - y * z))
            loss += lam_ab * (a * a + (b - 1.0) ** 2) + lam_w * float(w @ w)
            residual = expit(z) - y
            grad = np.empty_like(theta)
            grad[0] = residual.sum() + 2.0 * lam_ab * a
            grad[1] = residual @ base + 2.0 * lam_ab * (b - 1.0)
            grad[2:] = x.T @ residual + 2.0 * lam_w * w
            return loss, grad

        start = np.zeros(d + 2)
        start[1] = 1.0
        result = minimize(objective, start, jac=True, method="L-BFGS-B", options={"maxiter": 500})
        theta = result.x
        return cls(means=means, scales=scales, weights=theta[2:], a=float(theta[0]), b=float(theta[1]))

    def predict(self, matrix: np.ndarray, base: np.ndarray) -> np.ndarray:
        import numpy as np
        from scipy.special import expit

        z = self.a + self.b * base + ((matrix - self.means) / self.scales) @ self.weights
        return np.asarray(expit(np.clip(z, -60.0, 60.0)))


def _select_penalty(matrix: np.ndarray, base: np.ndarray, y: np.ndarray, folds: np.ndarray) -> tuple[float, float]:
    """The (λ_ab, λ_w) of :data:`PENALTY_GRID` with the lowest cross-validated log-loss (ties: the
    one listed later, a stronger pull toward the shipped model)."""

    import numpy as np

    def cross_validated_loss(penalty: tuple[float, float]) -> float:
        total = 0.0
        for k in np.unique(folds):
            train, test = folds != k, folds == k
            p = _Fitted.fit(matrix[train], base[train], y[train], penalty).predict(matrix[test], base[test])
            total += _log_loss_sum(p, y[test])
        return total

    losses = [(cross_validated_loss(penalty), -index) for index, penalty in enumerate(PENALTY_GRID)]
    return PENALTY_GRID[-min(losses)[1]]


def _quantification(p: np.ndarray, y: np.ndarray) -> dict[str, float | int]:
    """The refit's operating characteristics from its nested out-of-fold p: the mean p of the
    correct and of the wrong reviewed answers with their standard errors (the keys
    :func:`stef.monitor.error_rate.shipped_operating_points` reads from a shipped artifact)."""
    correct, wrong = p[y == 1.0], p[y == 0.0]
    return {
        "mean_p_correct": round(float(correct.mean()), 6),
        "mean_p_incorrect": round(float(wrong.mean()), 6),
        "se_p_correct": round(float(correct.std(ddof=1) / math.sqrt(correct.size)), 6),
        "se_p_incorrect": round(float(wrong.std(ddof=1) / math.sqrt(wrong.size)), 6),
        "transfer_sd_p_correct": 0.0,
        "transfer_sd_p_incorrect": 0.0,
        "rows_correct": int(correct.size),
        "rows_incorrect": int(wrong.size),
    }


def _grouped_folds(groups: Sequence[str], k: int) -> np.ndarray:
    """Fold index per answer: groups assigned by a stable hash, balanced by size (largest first)."""
    sizes: dict[str, int] = {}
    for g in groups:
        sizes[g] = sizes.get(g, 0) + 1
    order = sorted(sizes, key=lambda g: (-sizes[g], hashlib.sha256(g.encode("utf-8")).hexdigest()))
    load = [0] * k
    fold_of: dict[str, int] = {}
    for g in order:
        target = min(range(k), key=lambda f: (load[f], f))
        fold_of[g] = target
        load[target] += sizes[g]
    import numpy as np

    return np.array([fold_of[g] for g in groups])


def _log_loss_sum(p: np.ndarray, y: np.ndarray) -> float:
    import numpy as np

    q = np.clip(p, 1e-9, 1.0 - 1e-9)
    return float(-np.sum(y * np.log(q) + (1.0 - y) * np.log(1.0 - q)))


def _figures(p: np.ndarray, y: np.ndarray, passes: Callable[[int, float], bool]) -> FoldFigures:
    import numpy as np

    calls = np.array([passes(i, float(v)) for i, v in enumerate(p)])
    return FoldFigures(
        accuracy=float(np.mean(calls == (y == 1.0))),
        auroc=None if math.isnan(area := auroc(p.tolist(), (y == 1.0).tolist())) else area,
        log_loss=_log_loss_sum(p, y) / len(y),
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def correct_call(p: float) -> bool:
    """The verdict side of p: CORRECT (Φ ≥ 75 with fully applied filters) when p ≥ 0.65."""
    return p >= CORRECT_FROM
