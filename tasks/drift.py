"""Drift checks over the warehouse: plan, run, store, alert (DESIGN.md §6, issue 5).

Plain functions (:func:`plan_version_check`, :func:`plan_temporal_check`, :func:`run_check`,
:func:`run_drift_check`) do the work without a Prefect run, so ``stef drift`` starts no Prefect
API. The tasks wrap them for the nightly flow: :func:`check_drift` runs every check of a night
and stores it, :func:`publish_drift` writes the markdown artifact and emits the
``stef.drift.detected`` event for every check that drifted for the worse, and
:func:`nightly_drift_step` runs both so that a failing check never fails the night (its data is
stored before the check runs).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import ValidationError

from stef.display import Markdown, md_table, md_text, shorten
from stef.monitor.drift import (
    DEFAULT_WINDOW_DAYS,
    DriftDirection,
    DriftError,
    DriftKind,
    DriftResult,
    DriftSample,
    DriftThresholds,
    DriftVerdict,
    compare,
    order_versions,
    previous_window,
    trailing_window,
)
from tasks._runtime import retry_on_io_error, run_logger
from warehouse import WarehouseError, connect, resolve_path
from warehouse.monitoring import (
    agents_on_day,
    known_agents,
    last_day,
    latest_evaluator_version,
    read_drift_sample_rows,
    store_drift_checks,
    version_first_days,
)

DRIFT_EVENT = "stef.drift.detected"
"""Prefect event emitted for every check whose verdict is ``drift`` with direction ``worse``."""
DRIFT_ARTIFACT_KEY = "stef-drift"
"""Key of the markdown artifact with a night's drift checks (Prefect keeps its history)."""
THRESHOLDS_ENV = "STEF_DRIFT_THRESHOLDS"
"""Environment variable with a JSON object of :class:`stef.monitor.drift.DriftThresholds` fields for the
nightly checks, e.g. ``{"mean_delta": 2.0, "min_samples": 200}``."""


@dataclass(frozen=True, slots=True)
class DriftPlan:
    """What one check compares.

    Attributes:
        agent_id: the agent.
        kind: ``version`` (candidate version vs baseline version) or ``temporal`` (a version
            vs its own previous window).
        baseline_version, candidate_version: the agent versions (equal for ``temporal``).
        baseline_window, candidate_window: ``(first day, last day)``, both included.
        evaluator_version: whose evaluations are compared.
    """

    agent_id: str
    kind: DriftKind
    baseline_version: str
    candidate_version: str
    baseline_window: tuple[date, date]
    candidate_window: tuple[date, date]
    evaluator_version: str


@dataclass(frozen=True, slots=True)
class DriftCheck:
    """A planned check with its result."""

    plan: DriftPlan
    result: DriftResult

    def summary(self) -> dict[str, Any]:
        """Flat JSON-ready dict: the plan (agent, kind, versions, windows as ``YYYY-MM-DD``) + :meth:`DriftResult.summary`."""
        plan = self.plan
        return {
            "agent_id": plan.agent_id,
            "kind": plan.kind.value,
            "baseline_version": plan.baseline_version,
            "candidate_version": plan.candidate_version,
            "baseline_window": [plan.baseline_window[0].isoformat(), plan.baseline_window[1].isoformat()],
            "candidate_window": [plan.candidate_window[0].isoformat(), plan.candidate_window[1].isoformat()],
            "evaluator_version": plan.evaluator_version,
            **self.result.summary(),
        }

    def row(self, source: str) -> dict[str, Any]:
        """The ``drift_checks`` row (:func:`warehouse.monitoring.store_drift_checks`); ``statistics`` holds the full result."""
        plan = self.plan
        return {
            "agent_id": plan.agent_id,
            "kind": plan.kind.value,
            "baseline_version": plan.baseline_version,
            "candidate_version": plan.candidate_version,
            "evaluator_version": plan.evaluator_version,
            "window_start": plan.candidate_window[0],
            "window_end": plan.candidate_window[1],
            "baseline_window_start": plan.baseline_window[0],
            "baseline_window_end": plan.baseline_window[1],
            "n_baseline": self.result.n_baseline,
            "n_candidate": self.result.n_candidate,
            "verdict": self.result.verdict.value,
            "direction": self.result.direction.value if self.result.direction else None,
            "statistics": _json_safe({"summary": self.summary(), "result": self.result.model_dump(mode="json")}),
            "source": source,
        }


def _json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (JSON has no NaN or infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


# --------------------------------------------------------------------------- planning


def thresholds_from_env(environ: Mapping[str, str] | None = None) -> DriftThresholds:
    """The nightly thresholds: :data:`THRESHOLDS_ENV` (JSON object) over the defaults.

    Raises:
        DriftError: the variable is not a JSON object of known threshold fields.

    >>> thresholds_from_env({"STEF_DRIFT_THRESHOLDS": '{"mean_delta": 2}'}).mean_delta
    2.0
    """
    text = (environ if environ is not None else os.environ).get(THRESHOLDS_ENV, "").strip()
    if not text:
        return DriftThresholds()
    try:
        return DriftThresholds.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())
        raise DriftError(f"${THRESHOLDS_ENV} is not a valid set of drift thresholds ({problems})") from exc


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
    if end < start:
        raise DriftError(f"window end {end.isoformat()} is before its start {start.isoformat()}")
    return start, end


def _listing(names: Sequence[str]) -> str:
    """Names for an error message: comma-separated, each on one line and shortened (:func:`stef.display.shorten`)."""
    return ", ".join(shorten(name) for name in names)


def _versions(conn: Any, agent_id: str, evaluator_version: str, until: date | None) -> list[str]:
    first_days = version_first_days(conn, agent_id, evaluator_version, until=until)
    if not first_days:
        agents = known_agents(conn, evaluator_version)
        known = _listing(agents[:20]) or "none"
        raise DriftError(
            f"agent {agent_id!r} has no evaluations of evaluator version {evaluator_version}"
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
    :func:`stef.monitor.drift.order_versions`), counting only days up to ``end`` when given. By default
    the candidate is the newest version and the baseline the one before it.

    Windows: with ``start`` and ``end`` both sides use ``start … end``. Otherwise the candidate
    window is the ``window_days`` days ending at ``end`` (default: the candidate's newest day),
    and the baseline window the ``window_days`` days ending at the baseline's newest day up to
    that end — the same window while both versions run side by side, the baseline's last week
    when the candidate replaced it.

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
    if start is not None and end is not None:
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


def run_check(conn: Any, plan: DriftPlan, thresholds: DriftThresholds | None = None) -> DriftCheck:
    """Read both samples of ``plan`` from the warehouse and compare them (:func:`stef.monitor.drift.compare`)."""

    def sample(version: str, window: tuple[date, date]) -> DriftSample:
        rows = read_drift_sample_rows(conn, plan.agent_id, version, window[0], window[1], plan.evaluator_version)
        return DriftSample.from_rows(rows)

    result = compare(
        sample(plan.baseline_version, plan.baseline_window),
        sample(plan.candidate_version, plan.candidate_window),
        thresholds,
    )
    return DriftCheck(plan, result)


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
        thresholds: decision thresholds (default :class:`stef.monitor.drift.DriftThresholds`).
        evaluator_version: whose evaluations (default: the newest stored for the agent).
        store: write the result to ``drift_checks``.
        source: the ``source`` column of the stored row.

    Returns:
        The :class:`DriftCheck`.

    Raises:
        DriftError: the check cannot be planned (see the planners).
        WarehouseError: the file is missing, locked or cannot be written.
    """
    target = resolve_path(warehouse_path)
    if not target.is_file():
        raise WarehouseError(
            f"warehouse {target} does not exist; run `stef nightly` or `stef backfill` first, or pass --warehouse"
        )
    conn = connect(target, read_only=not store)
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


def nightly_plans(
    conn: Any, log_date: date, evaluator_version: str, window_days: int = DEFAULT_WINDOW_DAYS
) -> list[DriftPlan]:
    """The checks of one night: per agent with data that day, newest version vs the one before
    (when there is one) and the newest version vs its own previous window; windows end at ``log_date``."""
    plans: list[DriftPlan] = []
    for agent_id in agents_on_day(conn, log_date, evaluator_version):
        versions = order_versions(version_first_days(conn, agent_id, evaluator_version, until=log_date))
        if len(versions) >= 2:
            plans.append(plan_version_check(conn, agent_id, evaluator_version, end=log_date, window_days=window_days))
        plans.append(plan_temporal_check(conn, agent_id, evaluator_version, end=log_date, window_days=window_days))
    return plans


# --------------------------------------------------------------------------- alerting


def drift_event(check: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of ``prefect.events.emit_event`` for one check summary (:meth:`DriftCheck.summary`).

    The resource is the agent (``stef.agent.<agent_id>``, labelled with the candidate version and
    the kind); the related resources are both agent versions; the payload carries the verdict,
    the direction, the versions, the windows and the deltas with their intervals.

    >>> kwargs = drift_event({"agent_id": "bird-analyst", "kind": "version", "baseline_version": "v1", "candidate_version": "v2",
    ...     "verdict": "drift", "direction": "worse", "mean_delta": -3.0})
    >>> kwargs["event"], kwargs["resource"]["prefect.resource.id"], kwargs["payload"]["mean_delta"]
    ('stef.drift.detected', 'stef.agent.bird-analyst', -3.0)
    """
    agent = str(check["agent_id"])
    related = [
        {
            "prefect.resource.id": f"stef.agent.{agent}.version.{check[key]}",
            "prefect.resource.role": role,
            "prefect.resource.name": str(check[key]),
        }
        for key, role in (("baseline_version", "baseline"), ("candidate_version", "candidate"))
    ]
    payload_keys = (
        "agent_id",
        "kind",
        "baseline_version",
        "candidate_version",
        "baseline_window",
        "candidate_window",
        "evaluator_version",
        "verdict",
        "direction",
        "n_baseline",
        "n_candidate",
        "mean_baseline",
        "mean_candidate",
        "mean_delta",
        "mean_delta_ci",
        "p90_delta",
        "p90_delta_ci",
        "coverage_delta",
        "coverage_delta_ci",
        "ks_pvalue",
        "psi",
        "wasserstein_norm",
        "reasons",
    )
    return {
        "event": DRIFT_EVENT,
        "resource": {
            "prefect.resource.id": f"stef.agent.{agent}",
            "prefect.resource.name": agent,
            "stef.agent-version": str(check["candidate_version"]),
            "stef.drift-kind": str(check["kind"]),
        },
        "related": related,
        "payload": {key: check.get(key) for key in payload_keys},
    }


def _fmt(value: Any, spec: str = "+.2f") -> str:
    return "–" if value is None else format(value, spec)


def _ci(value: Any) -> str:
    return "–" if not value or value[0] is None else f"[{value[0]:+.2f}, {value[1]:+.2f}]"


def drift_markdown(checks: Sequence[Mapping[str, Any]], title: str) -> str:
    """A markdown table of check summaries (the drift artifact; also used by ``stef nightly`` readers).

    Every cell goes through :func:`stef.display.md_table` (names shortened by
    :func:`stef.display.shorten`): an agent id or a version with HTML, Markdown, ``|`` or line
    breaks shows as its text and keeps the table's shape.

    >>> print(drift_markdown([], "Drift 2026-11-26").splitlines()[-1])
    No drift check ran (no agent had data, or no agent has two versions or a previous window).
    """
    lines = [f"# {md_text(title)}", ""]
    if not checks:
        lines.append("No drift check ran (no agent had data, or no agent has two versions or a previous window).")
        return "\n".join(lines)
    header = [
        "agent",
        "kind",
        "baseline → candidate",
        "windows",
        "n",
        "verdict",
        "direction",
        "mean Δ [95 % CI]",
        "P90 Δ",
        "coverage Δ",
        "KS p",
        "PSI",
        "W/σ",
    ]
    rows = []
    for c in checks:
        bw, cw = c["baseline_window"], c["candidate_window"]
        rows.append(
            [
                shorten(c["agent_id"]),
                c["kind"],
                f"{shorten(c['baseline_version'])} → {shorten(c['candidate_version'])}",
                f"{bw[0]}…{bw[1]} → {cw[0]}…{cw[1]}",
                f"{c['n_baseline']} / {c['n_candidate']}",
                Markdown(f"**{md_text(c['verdict'])}**"),
                c["direction"] or "–",
                Markdown(f"{_fmt(c.get('mean_delta'))} {_ci(c.get('mean_delta_ci'))}"),
                Markdown(_fmt(c.get("p90_delta"))),
                Markdown(_fmt(c.get("coverage_delta"), "+.3f")),
                Markdown(_fmt(c.get("ks_pvalue"), ".3g")),
                Markdown(_fmt(c.get("psi"), ".3f")),
                Markdown(_fmt(c.get("wasserstein_norm"), ".3f")),
            ]
        )
    lines.append(md_table(header, rows, "llllrllrrrrrr"))
    lines += [
        "",
        (
            "Decision: drift when |Δ| reaches its threshold and its 95 % bootstrap interval excludes 0 "
            "(mean, P90, coverage); `insufficient_data` below the minimum sample."
        ),
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- tasks


@task(
    name="check-drift",
    retries=2,
    retry_delay_seconds=10,
    retry_condition_fn=retry_on_io_error,
    cache_policy=NO_CACHE,
    persist_result=False,
)
def check_drift(
    warehouse_path: str | None,
    log_date: date,
    evaluator_version: str,
    thresholds: DriftThresholds | None = None,
    window_days: int = DEFAULT_WINDOW_DAYS,
) -> list[dict[str, Any]]:
    """Run and store the night's checks (:func:`nightly_plans`) in one transaction.

    Args:
        warehouse_path: DuckDB file (``None``: ``$STEF_WAREHOUSE`` or ``./stef.duckdb``).
        log_date: the night's day; windows end there.
        evaluator_version: the evaluator version of the night's evaluations.
        thresholds: decision thresholds (default: :func:`thresholds_from_env`).
        window_days: window length.

    Returns:
        One :meth:`DriftCheck.summary` per check.

    Raises:
        DriftError: invalid thresholds in the environment.
        WarehouseLockedError: another process writes the file (retried twice).
        WarehouseError: the write failed.
    """
    limits = thresholds or thresholds_from_env()
    conn = connect(warehouse_path)
    try:
        checks = [
            run_check(conn, plan, limits) for plan in nightly_plans(conn, log_date, evaluator_version, window_days)
        ]
        store_drift_checks(conn, [check.row("nightly") for check in checks])
    finally:
        conn.close()
    logger = run_logger()
    for check in checks:
        summary = check.summary()
        logger.info(  # names shortened on one line: a log line shows data, it never forges another line
            "drift %s %s %s -> %s: %s%s (n %d / %d)",
            shorten(summary["agent_id"]),
            summary["kind"],
            shorten(summary["baseline_version"]),
            shorten(summary["candidate_version"]),
            summary["verdict"],
            f" ({summary['direction']})" if summary["direction"] else "",
            summary["n_baseline"],
            summary["n_candidate"],
        )
    return [check.summary() for check in checks]


@task(name="publish-drift", cache_policy=NO_CACHE, persist_result=False)
def publish_drift(checks: list[dict[str, Any]], log_date: date) -> list[str]:
    """Markdown artifact of the night's checks; one ``stef.drift.detected`` event per worse drift.

    Attach a Prefect automation (trigger: event ``stef.drift.detected``) to notify people.

    Args:
        checks: summaries from :func:`check_drift`.
        log_date: the night's day (artifact title).

    Returns:
        The ids of the events emitted (empty when Prefect does not emit events, e.g. with no API).
    """
    from prefect.artifacts import create_markdown_artifact
    from prefect.events import emit_event

    title = f"STEF drift checks {log_date.isoformat()}"
    create_markdown_artifact(markdown=drift_markdown(checks, title), key=DRIFT_ARTIFACT_KEY, description=title)
    emitted: list[str] = []
    for check in checks:
        if check["verdict"] == DriftVerdict.DRIFT.value and check["direction"] == DriftDirection.WORSE.value:
            event = emit_event(**drift_event(check))
            run_logger().warning(
                "drift for the worse: %s %s -> %s (mean Δ %s)",
                shorten(check["agent_id"]),
                shorten(check["baseline_version"]),
                shorten(check["candidate_version"]),
                _fmt(check.get("mean_delta")),
            )
            if event is not None:
                emitted.append(str(event.id))
    return emitted


@dataclass(frozen=True, slots=True)
class DriftStep:
    """What the drift step of a night did.

    Attributes:
        checks: one summary per check (empty when the step failed).
        events: ids of the ``stef.drift.detected`` events emitted.
        error: why the step failed (``None`` when it did not); the day's data is stored anyway.
    """

    checks: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    error: str | None = None


def _failure(state: Any) -> str:
    exc = state.result(raise_on_failure=False)
    return f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else str(state.message)


def nightly_drift_step(warehouse_path: str | None, log_date: date, evaluator_version: str) -> DriftStep:
    """Run :func:`check_drift` then :func:`publish_drift` inside a flow; never raise.

    Called at the end of the nightly flow, after the day is stored and its metrics computed: a
    failed check is logged and reported in the result (and shows as a failed task run in the
    Prefect UI) while the night still completes with its data.

    Returns:
        A :class:`DriftStep`.
    """
    logger = run_logger()
    state = check_drift(warehouse_path, log_date, evaluator_version, return_state=True)
    if not state.is_completed():
        error = _failure(state)
        logger.error("drift check of %s failed, the day's data is stored: %s", log_date.isoformat(), error)
        return DriftStep(error=error)
    checks: list[dict[str, Any]] = state.result()
    published = publish_drift(checks, log_date, return_state=True)
    if not published.is_completed():
        error = _failure(published)
        logger.error("publishing the drift checks of %s failed: %s", log_date.isoformat(), error)
        return DriftStep(checks=checks, error=error)
    return DriftStep(checks=checks, events=published.result())
