"""Tests of the deployments (flows/deployments.py, prefect.yaml); no Prefect run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import flows.deployments
from stef.errors import InputError
from tests.support.checkout import REPO_ROOT


def test_deployments_have_the_schedules() -> None:
    deployments = flows.deployments.build_deployments(
        timezone="Europe/Zurich", logs_root="/logs", warehouse="/wh.duckdb", reports_dir="/reports/"
    )
    found = {
        d.name: (
            d.entrypoint,
            [(getattr(s.schedule, "cron", None), getattr(s.schedule, "timezone", None)) for s in d.schedules or []],
            d.parameters,
        )
        for d in deployments
    }
    assert found == {
        "stef-nightly": (
            "flows.nightly.nightly",
            [("0 2 * * *", "Europe/Zurich")],
            {"logs_root": "/logs", "warehouse": "/wh.duckdb"},
        ),
        "stef-weekly-report": (
            "flows.weekly_report.weekly_report",
            [("0 6 * * 1", "Europe/Zurich")],
            {"out": "/reports/", "warehouse": "/wh.duckdb"},
        ),
        "stef-backfill": ("flows.backfill.backfill", [], {"logs_root": "/logs", "warehouse": "/wh.duckdb"}),
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param(
            {"timezone": "Mars/Olympus"}, r"--timezone 'Mars/Olympus' is not an IANA time zone", id="timezone"
        ),
        pytest.param(
            {"nightly_cron": "every night"}, r"--nightly-cron 'every night' is not a valid cron expression", id="cron"
        ),
    ],
)
def test_deployments_reject_bad_settings(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        flows.deployments.build_deployments(**kwargs)


def test_prefect_yaml_matches_the_served_deployments() -> None:
    config = yaml.safe_load((REPO_ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    by_name = {d["name"]: d for d in config["deployments"]}
    assert set(by_name) == {
        flows.deployments.NIGHTLY_DEPLOYMENT,
        flows.deployments.WEEKLY_DEPLOYMENT,
        flows.deployments.BACKFILL_DEPLOYMENT,
    }
    assert [s["cron"] for s in by_name["stef-nightly"]["schedules"]] == [flows.deployments.NIGHTLY_CRON]
    assert [s["cron"] for s in by_name["stef-weekly-report"]["schedules"]] == [flows.deployments.WEEKLY_CRON]
    assert not by_name["stef-backfill"].get("schedules")
    import importlib

    from prefect import Flow

    for deployment in config["deployments"]:
        path, function = deployment["entrypoint"].split(":")
        assert (REPO_ROOT / path).is_file()
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        assert isinstance(getattr(module, function), Flow)


def test_a_reports_dir_without_a_trailing_slash_still_gets_one_report_per_week(tmp_path: Path) -> None:
    """``stef serve --reports-dir /data/reports`` (a folder not made yet) wrote each week's report to
    a file named ``/data/reports`` (and ``/data/reports.md``), every week over the last."""
    from tasks.report import report_paths

    folder = tmp_path / "reports"
    deployments = flows.deployments.build_deployments(reports_dir=str(folder))
    weekly = next(d for d in deployments if d.name == flows.deployments.WEEKLY_DEPLOYMENT)
    assert weekly.parameters["out"] == f"{folder}/"
    assert report_paths(weekly.parameters["out"], "2026-W48") == (
        folder / "stef-report-2026-W48.html",
        folder / "stef-report-2026-W48.md",
    )
