"""Drift checks over the warehouse without Prefect: plan (versions, windows), run, store (DESIGN.md §6, issue 5).

Plain functions over an open connection (:func:`plan_version_check`, :func:`plan_temporal_check`,
:func:`nightly_plans`, :func:`run_check`) and :func:`run_drift_check` (what ``stef drift`` does):
no Prefect run needed, so ``stef drift`` starts no Prefect API. The nightly tasks are in :mod:`tasks.drift`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from stef.display import shorten
from stef.monitor.drift import compare
from stef.monitor.error_rate import calibration_key, question_key
from stef.monitor.models import (
    DEFAULT_WINDOW_DAYS,
    DriftCheck,
    DriftError,
    DriftKind,
    DriftPlan,
    DriftSample,
    DriftThresholds,
    OperatingPoint,
)
from stef.monitor.windows import order_versions, previous_window, trailing_window
from warehouse import WarehouseError, connect, existing_warehouse
from warehouse.monitoring import (
    agents_on_day,
    answers_of_other_versions,
    done_days,
    known_agents,
    last_day,
    latest_evaluator_version,
    read_drift_checks,
    read_drift_checks_covering,
    read_drift_sample_rows,
    store_drift_checks,
    version_first_days,
)

DriftRefresh = tuple[DriftCheck, str, "str | None", "str | None"]
"""A recomputed check: ``(check, source, previous verdict, previous direction)`` (previous ``None`` when new)."""


def _window(
    conn: Any,
    agent_id: str,
    evaluator_version: str,
    version: str,
    start: date | None,
    end: date | None,
    window_days: int,
) -> tuple[date, date]:
    """The candidate window: ``start … end`` as given; a missing end is the version's newest day."""
    if end is None:
        newest = last_day(conn, agent_id, evaluator_version, version)
        if newest is None:
            raise DriftError(
                f"agent {agent_id!r} version {version!r} has no evaluations of evaluator version {evaluator_version}"
            )
        end = newest if start is None else max(newest, start)
    if start is None:
        start, end = trailing_window(end, window_days)
    _check_order(start, end)
    return start, end


def _check_order(start: date | None, end: date | None) -> None:
    """Raise :class:`DriftError` when both ends are given and ``end`` comes before ``start``."""
    if start is not None and end is not None and end < start:
        raise DriftError(f"window end {end.isoformat()} is before its start {start.isoformat()}")


def _listing(names: Sequence[str]) -> str:
    """Names for an error message: comma-separated, each on one line and shortened (:func:`stef.display.shorten`)."""
    return ", ".join(shorten(name) for name in names)


def _versions(conn: Any, agent_id: str, evaluator_version: str, until: date | None) -> list[str]:
    first_days = version_first_days(conn, agent_id, evaluator_version, until=until)
    if not first_days:
        agents = known_agents(conn, evaluator_version)
        known = _listing(agents[:20]) or "none"
        raise DriftError(
            f"agent {agent_id!r} has no scored evaluations of evaluator version {evaluator_version}"
            + (f" up to {until.isoformat()}" if until else "")
            + f" (agents with evaluations: {known})"
        )
    return order_versions(first_days)


def plan_version_check(
    conn: Any,
    agent_id: str,
    evaluator_version: str,
    *,
    baseline: str | None = None,
    candidate: str | None = None,
    start: date | None = None,
    end: date | None = None,
    window_days: int = DEFAULT_WINDOW_DAYS,
) -> DriftPlan:
    """Plan a candidate-version vs baseline-version check.

    Versions are ordered by the first day each has evaluations (then by natural name order,
    :func:`stef.monitor.windows.order_versions`), counting only days up to ``end`` when given. By default
    the candidate is the newest version and the baseline the one before it.

    Windows: with ``start`` both sides use ``start … end`` (``end`` default: the candidate's newest
    day). Otherwise the candidate window is the ``window_days`` days ending at ``end`` (default:
    the candidate's newest day), and the baseline window the ``window_days`` days ending at the
    baseline's newest day up to that end — the same window while both versions run side by
    side, the baseline's last week when the candidate replaced it.

    Args:
        conn: a warehouse connection.
        agent_id: the agent.
        evaluator_version: whose evaluations to compare.
        baseline: the baseline version (default: the version before the candidate).
        candidate: the candidate version (default: the newest).
        start: first day of the window.
        end: last day of the window.
        window_days: window length when ``start`` is not given.

    Returns:
        A :class:`DriftPlan` of kind ``version``.

    Raises:
        DriftError: unknown agent or version, a single version with no baseline given, equal
            versions, or an empty window.
    """
    _check_order(start, end)  # before the versions: an end before the first version would hide the cause
    versions = _versions(conn, agent_id, evaluator_version, end)
    for name, value in (("baseline", baseline), ("candidate", candidate)):
        if value is not None and value not in versions:
            raise DriftError(
                f"agent {agent_id!r} has no {name} version {value!r} (its versions, oldest first: {_listing(versions)})"
            )
    candidate = candidate or versions[-1]
    if baseline is None:
        position = versions.index(candidate)
        if position == 0:
            raise DriftError(
                f"agent {agent_id!r} has no version before {candidate!r} to compare with "
                f"(versions, oldest first: {_listing(versions)}); give --baseline, or check it against its own past with --temporal"
            )
        baseline = versions[position - 1]
    if baseline == candidate:
        raise DriftError(
            f"baseline and candidate are the same version {candidate!r}; use --temporal to compare a version with its own past"
        )
    candidate_window = _window(conn, agent_id, evaluator_version, candidate, start, end, window_days)
    if start is not None:  # the window asked for, on both sides (with or without an end)
        baseline_window = candidate_window
    else:
        baseline_end = last_day(conn, agent_id, evaluator_version, baseline, until=candidate_window[1])
        baseline_window = trailing_window(baseline_end, window_days) if baseline_end else candidate_window
    return DriftPlan(
        agent_id, DriftKind.VERSION, baseline, candidate, baseline_window, candidate_window, evaluator_version
    )


def plan_temporal_check(
    conn: Any,
    agent_id: str,
    evaluator_version: str,
    *,
    version: str | None = None,
    start: date | None = None,
    end: date | None = None,
    window_days: int = DEFAULT_WINDOW_DAYS,
) -> DriftPlan:
    """Plan a check of one version against its own previous window (temporal drift).

    Args:
        conn: a warehouse connection.
        agent_id: the agent.
        evaluator_version: whose evaluations to compare.
        version: the agent version (default: the newest).
        start: first day of the candidate window.
        end: last day of the candidate window (default: the version's newest day).
        window_days: window length when ``start`` is not given.

    Returns:
        A :class:`DriftPlan` of kind ``temporal``: the baseline window is the window of the same
        length just before the candidate's.

    Raises:
        DriftError: unknown agent or version, or an empty window.
    """
    _check_order(start, end)
    versions = _versions(conn, agent_id, evaluator_version, end)
    if version is not None and version not in versions:
        raise DriftError(
            f"agent {agent_id!r} has no version {version!r} (its versions, oldest first: {_listing(versions)})"
        )
    version = version or versions[-1]
    candidate_window = _window(conn, agent_id, evaluator_version, version, start, end, window_days)
    baseline_window = previous_window(*candidate_window)
    return DriftPlan(
        agent_id, DriftKind.TEMPORAL, version, version, baseline_window, candidate_window, evaluator_version
    )


def nightly_plans(
    conn: Any, log_date: date, evaluator_version: str, window_days: int = DEFAULT_WINDOW_DAYS
) -> list[DriftPlan]:
    """The checks of one night: per agent with data that day, newest version vs the one before
    (when there is one) and the newest version that ran that day vs its own previous window (after a
    rollback the version serving the answers, not the newest one); windows end at ``log_date``.
    An agent with no valid record up to ``log_date`` (only rejected lines) has no version to check and
    gets no plan; a version whose answers all went unscored is checked (its coverage)."""
    plans: list[DriftPlan] = []
    for agent_id in agents_on_day(conn, log_date, evaluator_version):
        versions = order_versions(version_first_days(conn, agent_id, evaluator_version, until=log_date))
        if not versions:  # only rejected lines so far: nothing to compare, the other agents are checked
            continue
        if len(versions) >= 2:
            plans.append(plan_version_check(conn, agent_id, evaluator_version, end=log_date, window_days=window_days))
        running = [v for v in versions if last_day(conn, agent_id, evaluator_version, v, until=log_date) == log_date]
        plans.append(
            plan_temporal_check(
                conn,
                agent_id,
                evaluator_version,
                version=running[-1] if running else versions[-1],
                end=log_date,
                window_days=window_days,
            )
        )
    return plans


def read_drift_sample(
    conn: Any, agent_id: str, agent_version: str, window: tuple[date, date], evaluator_version: str
) -> DriftSample:
    """One version's answers in ``window`` (both days inclusive) as a :class:`stef.monitor.models.DriftSample`,
    with each answer's p_correct, calibration key, suspected error categories and question."""
    return drift_sample(read_drift_sample_rows(conn, agent_id, agent_version, window[0], window[1], evaluator_version))


def drift_sample(rows: Iterable[Sequence[Any]]) -> DriftSample:
    """The :class:`stef.monitor.models.DriftSample` of warehouse rows shaped as
    :func:`warehouse.monitoring.read_drift_sample_rows` returns them (calibration key and
    normalised question worked out per row)."""
    return DriftSample.from_rows(
        (
            status,
            score,
            verdict,
            filter_status,
            p_correct,
            calibration_key(judge, bool(schema_checked), bool(observed_checked)),
            frozenset(str(c) for c in categories or () if c is not None),
            None if question is None else question_key(str(question)),
        )
        for status, score, verdict, filter_status, p_correct, judge, schema_checked, observed_checked, categories, question in rows
    )


def deployment_calibrators_of(conn: Any, evaluator_version: str) -> tuple[Any, dict[str | None, Any]] | None:
    """For a ``+calib=`` evaluator version, ``(created_at, {app_id: Calibrator})`` of the warehouse's
    calibrator set that scored it (:func:`warehouse.reviews.calibrator_history`); ``None`` for
    another version or a set no longer stored."""
    from stef.pipeline.judge.deployment import CALIBRATION_VERSION_PREFIX, calibrator_set_digest, parse_calibrator
    from warehouse.reviews import calibrator_history, has_review_tables

    if CALIBRATION_VERSION_PREFIX not in evaluator_version or not has_review_tables(conn):
        return None
    for created_at, documents in reversed(calibrator_history(conn)):
        deployed = {app: parse_calibrator(doc, "warehouse") for app, doc in documents}
        if evaluator_version.endswith(CALIBRATION_VERSION_PREFIX + calibrator_set_digest(deployed)):
            return created_at, deployed
    return None


def operating_points_for(conn: Any, evaluator_version: str) -> dict[str, OperatingPoint]:
    """The judge's operating points for the evaluations of ``evaluator_version``
    (:mod:`stef.monitor.error_rate`).

    The shipped calibrators' points; for a version scored with one deployment calibrator for every
    app (``+calib=``, found in the warehouse's calibrator history), that calibrator's point from its
    nested cross-validation (with per-app calibrators the shipped points stay: no one point fits
    every app); then, per calibration key with enough labels, the point measured on reviewer labels
    (:func:`stef.monitor.error_rate.reviewed_operating_points`) — only labels of unbiased samples
    (:data:`stef.monitor.review.UNBIASED_STRATEGIES`) and, for a ``+calib`` version, only labels
    imported after its calibrator was stored (the others trained it).
    """
    from stef.monitor.error_rate import artifact_operating_point, reviewed_operating_points, shipped_operating_points
    from stef.monitor.review import UNBIASED_STRATEGIES
    from warehouse.reviews import has_review_tables, read_reviewed_evaluations

    points = dict(shipped_operating_points())
    if not has_review_tables(conn):
        return points
    fitted_at = None
    deployment = deployment_calibrators_of(conn, evaluator_version)
    if deployment is not None:
        fitted_at, deployed = deployment
        if set(deployed) == {None}:
            only = deployed[None]
            point = artifact_operating_point(only.metadata, only.version, f"nested cross-validation of {only.version}")
            if point is not None:
                points = dict.fromkeys(points, point)
    labelled = read_reviewed_evaluations(conn, evaluator_version, imported_after=fitted_at)
    points.update(reviewed_operating_points([row for row in labelled if row["sample_strategy"] in UNBIASED_STRATEGIES]))
    return points


@dataclass(frozen=True, slots=True)
class CheckInputs:
    """What one drift check reads from the warehouse (:func:`read_check`), compared by :func:`compare_check`.

    Attributes:
        plan: the check.
        baseline, candidate: the two samples (:func:`read_drift_sample`).
        operating_points: calibration key -> operating point (:func:`operating_points_for`).
        left_out: the answers the check does not see (:func:`left_out_of`).
    """

    plan: DriftPlan
    baseline: DriftSample
    candidate: DriftSample
    operating_points: Mapping[str, OperatingPoint]
    left_out: tuple[dict[str, Any], ...]


def read_check(conn: Any, plan: DriftPlan) -> CheckInputs:
    """Read what ``plan`` compares: both samples, the operating points and the answers left out."""
    return CheckInputs(
        plan,
        read_drift_sample(conn, plan.agent_id, plan.baseline_version, plan.baseline_window, plan.evaluator_version),
        read_drift_sample(conn, plan.agent_id, plan.candidate_version, plan.candidate_window, plan.evaluator_version),
        operating_points_for(conn, plan.evaluator_version),
        left_out_of(conn, plan),
    )


def compare_check(inputs: CheckInputs, thresholds: DriftThresholds | None = None) -> DriftCheck:
    """Compare the samples of :func:`read_check` (:func:`stef.monitor.drift.compare`); no warehouse access."""
    result = compare(inputs.baseline, inputs.candidate, thresholds, inputs.operating_points)
    return DriftCheck(inputs.plan, result, inputs.left_out)


def run_check(conn: Any, plan: DriftPlan, thresholds: DriftThresholds | None = None) -> DriftCheck:
    """Read both samples of ``plan`` from the warehouse and compare them (:func:`stef.monitor.drift.compare`),
    with the operating points of :func:`operating_points_for`: :func:`read_check`, then :func:`compare_check`."""
    return compare_check(read_check(conn, plan), thresholds)


def left_out_of(conn: Any, plan: DriftPlan) -> tuple[dict[str, Any], ...]:
    """The answers of each side of ``plan`` (its agent version, in its window) that only other
    evaluator versions scored (:func:`warehouse.monitoring.answers_of_other_versions`): the check
    compares ``plan.evaluator_version``'s evaluations and does not see them (:attr:`DriftCheck.left_out`)."""
    sides = (
        ("baseline", plan.baseline_version, plan.baseline_window),
        ("candidate", plan.candidate_version, plan.candidate_window),
    )
    return tuple(
        {"side": side, "agent_version": agent_version, **entry}
        for side, agent_version, (first, last) in sides
        for entry in answers_of_other_versions(
            conn, first, last, plan.evaluator_version, agent_id=plan.agent_id, agent_version=agent_version
        )
    )


def plan_from_row(row: Mapping[str, Any]) -> DriftPlan:
    """The :class:`stef.monitor.models.DriftPlan` of a stored ``drift_checks`` row (windows of old rows default to the candidate's)."""
    window = (row["window_start"], row["window_end"])
    baseline_window = (row["baseline_window_start"] or window[0], row["baseline_window_end"] or window[1])
    return DriftPlan(
        str(row["agent_id"]),
        DriftKind(row["kind"] or DriftKind.VERSION.value),
        str(row["baseline_version"]),
        str(row["candidate_version"]),
        baseline_window,
        window,
        str(row["evaluator_version"]),
    )


def _stored_thresholds(row: Mapping[str, Any], default: DriftThresholds) -> DriftThresholds:
    """The thresholds a stored check ran with (its ``statistics`` JSON), else ``default``."""
    try:
        stored = json.loads(row["statistics"] or "{}").get("result", {}).get("thresholds")
        return DriftThresholds.model_validate(stored) if isinstance(stored, dict) else default
    except (ValueError, ValidationError):
        return default


def refresh_checks(
    conn: Any,
    log_date: date,
    evaluator_version: str,
    thresholds: DriftThresholds | None = None,
    window_days: int = DEFAULT_WINDOW_DAYS,
) -> tuple[list[DriftRefresh], list[date], list[str]]:
    """Recompute every drift check that storing ``log_date`` made stale (issue 16: never stale).

    Two kinds: (1) the nightly checks of every later stored day whose windows can contain
    ``log_date`` (``log_date + 1 … log_date + 2 · window_days − 1``: the candidate window and the
    temporal check's previous window) are planned again (a day stored late can add a version to
    compare, or move the baseline's window); (2) every other stored check (``stef drift`` ones
    included) whose candidate or baseline window contains ``log_date`` is rerun with its own plan
    and thresholds. Run for every stored day (``stef nightly``, each day of ``stef backfill``, in
    any order, ``--force`` too), this leaves every stored check computed on the data as stored now.
    A check that cannot be recomputed (e.g. its version has no evaluations left) keeps its stored
    row and is reported in the failures; it never stops the others.

    Args:
        conn: a read-write warehouse connection.
        log_date: the day just stored.
        evaluator_version: its evaluator version.
        thresholds: thresholds of the re-planned nightly checks (default :class:`DriftThresholds`).
        window_days: window length of the nightly checks.

    Returns:
        ``(refreshed, nightly_days, failures)``: the recomputed checks with their source and the
        verdict and direction stored before (``None`` for a check planned for the first time), the
        later days whose nightly checks were planned again (their old nightly rows are to be replaced:
        :func:`warehouse.monitoring.store_drift_checks` ``replace_nightly``), and one line per check
        that could not be recomputed.
    """
    limits = thresholds or DriftThresholds()
    later = sorted(
        done_days(conn, log_date + timedelta(days=1), log_date + timedelta(days=2 * window_days - 1), evaluator_version)
    )
    covering = read_drift_checks_covering(conn, log_date, evaluator_version)
    previous: dict[DriftPlan, tuple[str | None, str | None]] = {}
    if later:
        for row in read_drift_checks(conn, later[0], later[-1], evaluator_version=evaluator_version).to_dicts():
            previous[plan_from_row(row)] = (row["verdict"], row["direction"])
    for row in covering:
        previous[plan_from_row(row)] = (row["verdict"], row["direction"])
    refreshed: list[DriftRefresh] = []
    failures: list[str] = []
    done: set[DriftPlan] = set()

    def rerun(plan: DriftPlan, source: str, limits_of_check: DriftThresholds) -> None:
        if plan in done:
            return
        done.add(plan)
        try:
            check = run_check(conn, plan, limits_of_check)
        except (DriftError, WarehouseError, ValueError) as exc:
            window = f"{plan.candidate_window[0].isoformat()}…{plan.candidate_window[1].isoformat()}"
            failures.append(
                f"{shorten(plan.agent_id)} {plan.kind.value} {shorten(plan.baseline_version)} -> "
                f"{shorten(plan.candidate_version)} {window} ({source}): {exc}"
            )
            return
        before = previous.get(plan, (None, None))
        refreshed.append((check, source, before[0], before[1]))

    for day in later:
        try:
            plans = nightly_plans(conn, day, evaluator_version, window_days)
        except (DriftError, WarehouseError) as exc:
            failures.append(f"planning the nightly checks of {day.isoformat()}: {exc}")
            continue
        for plan in plans:
            rerun(plan, "nightly", limits)
    replanned = set(later)
    for row in covering:
        source = str(row["source"] or "nightly")
        if source == "nightly" and (row["window_end"] in replanned or row["window_end"] == log_date):
            continue  # planned again above, or the night's own checks (run by the caller)
        rerun(plan_from_row(row), source, _stored_thresholds(row, limits))
    return refreshed, later, failures


def checks_as_labelled_now(conn: Any, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Stored drift checks (:func:`warehouse.monitoring.read_drift_checks` rows) as the reviewer labels
    give them now: a check stored before the newest label import is rerun with its own plan and
    thresholds (read-only; the stored row is left as it is).

    Reviewer labels move the operating points every error-rate estimate uses
    (:func:`operating_points_for`), and importing them recomputes no stored check: a report read
    the estimate of its headline with the labels and the drift sentence beside it without. A check
    that cannot be rerun (its answers are gone) is returned as stored.

    Returns:
        The rows in their order, each with the :data:`warehouse.monitoring.DRIFT_COLUMNS` keys
        (``statistics`` and ``category_shifts`` as JSON text, ``checked_at`` as stored).
    """
    from warehouse.reviews import newest_review_import

    imported = newest_review_import(conn)
    current: list[dict[str, Any]] = []
    for row in rows:
        checked = row.get("checked_at")
        if imported is None or (checked is not None and checked >= imported):
            current.append(dict(row))
            continue
        try:
            check = run_check(conn, plan_from_row(row), _stored_thresholds(row, DriftThresholds()))
        except (DriftError, WarehouseError, ValueError):
            current.append(dict(row))
            continue
        fresh = check.row(str(row.get("source") or "nightly"))
        for name in ("statistics", "category_shifts"):
            if not isinstance(fresh.get(name), str | None):
                fresh[name] = json.dumps(fresh[name])
        fresh["checked_at"] = checked  # the order of read_drift_checks (by window end, then time) stays
        current.append({**row, **fresh})
    return current


def run_drift_check(
    warehouse_path: str | Path | None,
    agent_id: str,
    *,
    baseline: str | None = None,
    candidate: str | None = None,
    start: date | None = None,
    end: date | None = None,
    temporal: bool = False,
    window_days: int = DEFAULT_WINDOW_DAYS,
    thresholds: DriftThresholds | None = None,
    evaluator_version: str | None = None,
    store: bool = True,
    source: str = "cli",
) -> DriftCheck:
    """Plan, run and (by default) store one check: what ``stef drift`` does, without Prefect.

    Args:
        warehouse_path: the DuckDB file (must exist).
        agent_id: the agent.
        baseline: baseline version (version check only).
        candidate: candidate version (for ``temporal``: the version to check).
        start: first day of the window.
        end: last day of the window.
        temporal: check ``candidate`` (default the newest version) against its previous window.
        window_days: window length when ``start`` is not given.
        thresholds: decision thresholds (default :class:`stef.monitor.models.DriftThresholds`).
        evaluator_version: whose evaluations (default: the newest stored for the agent).
        store: write the result to ``drift_checks``.
        source: the ``source`` column of the stored row.

    Returns:
        The :class:`DriftCheck`.

    Raises:
        DriftError: the check cannot be planned (see the planners).
        WarehouseError: the file is missing, locked or cannot be written.
    """
    target = existing_warehouse(warehouse_path)
    conn = connect(target, read_only=not store, existing_tables=True)  # an empty DuckDB file is left as it is
    try:
        version = evaluator_version or latest_evaluator_version(conn, agent_id)
        if version is None:
            known = _listing(known_agents(conn)[:20]) or "none"
            raise DriftError(f"agent {agent_id!r} has no evaluations in {target} (agents with evaluations: {known})")
        if temporal:
            if baseline is not None:
                raise DriftError(
                    "--baseline does not apply to --temporal: the baseline is the version's previous window"
                )
            plan = plan_temporal_check(
                conn, agent_id, version, version=candidate, start=start, end=end, window_days=window_days
            )
        else:
            plan = plan_version_check(
                conn,
                agent_id,
                version,
                baseline=baseline,
                candidate=candidate,
                start=start,
                end=end,
                window_days=window_days,
            )
        check = run_check(conn, plan, thresholds)
        if store:
            store_drift_checks(conn, [check.row(source)])
    finally:
        conn.close()
    return check
