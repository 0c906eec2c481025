"""The HTML weekly report in a real browser (issue 17 acceptance): headless Chromium loads the demo's
report from disk, takes a screenshot, and the page logs no console error; its images load and the
headline sentence is visible above the headline table.

Needs ``chromium`` and ``chromedriver`` (Debian packages; ``.ci/run`` installs them) and the
``selenium`` client (test extra). Without them the test is skipped locally and fails under CI.
"""

from __future__ import annotations

import os
import re
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from tests.flows.cli.cli_support import invoke

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture
def flow_cli(prefect_harness: None) -> None:
    """The Prefect harness, with Prefect's console logging set up before CliRunner swaps streams
    (as in test_nightly.py)."""
    import flows.nightly  # noqa: F401  (imports prefect.main)


def _browser(tmp_path: Path) -> Any:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    if CHROMIUM is None or CHROMEDRIVER is None:
        if os.environ.get("CI"):
            pytest.fail("chromium and chromedriver must be installed in CI (.ci/run installs them)")
        pytest.skip("chromium / chromedriver not installed (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,2000",
    ):
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))


@pytest.mark.flow
@pytest.mark.usefixtures("flow_cli")
def test_demo_report_renders_in_headless_chromium_without_console_errors(tmp_path: Path) -> None:
    root = resources.files("flows.demo_data")
    logs = tmp_path / "logs"
    for folder in root.iterdir():
        if folder.is_dir() and folder.name[:2] == "20":
            (logs / folder.name).mkdir(parents=True)
            shutil.copyfile(str(folder / "agent-logs.jsonl"), logs / folder.name / "agent-logs.jsonl")
    warehouse = str(tmp_path / "wh.duckdb")
    start, end = sorted(p.name for p in logs.iterdir())[0], sorted(p.name for p in logs.iterdir())[-1]
    back = invoke("backfill", "--start", start, "--end", end, "--logs-root", str(logs), "--warehouse", warehouse, "-q")
    assert back.exit_code == 0, back.output
    html = tmp_path / "report.html"
    report = invoke("report", "--warehouse", warehouse, "--week", "2026-W48", "--out", str(html))
    assert report.exit_code == 0, report.output

    browser = _browser(tmp_path)
    try:
        browser.get(html.resolve().as_uri())
        screenshot = tmp_path / "report.png"
        assert browser.save_screenshot(str(screenshot))
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000
        errors = [entry for entry in browser.get_log("browser") if entry.get("level") == "SEVERE"]
        assert errors == []
        assert browser.title.startswith("STEF weekly report")
        lead = browser.execute_script("const li = document.querySelector('ul.verdicts li'); return li && li.innerText;")
        assert lead and lead.startswith("bird-analyst v1.5.0 answers an estimated")
        assert re.search(r": worse \(\+\d+ points, 95% CI \+\d+ points to \+\d+ points\)\.$", lead)
        lead_top, table_top = browser.execute_script(
            "return [document.querySelector('ul.verdicts').getBoundingClientRect().top,"
            " document.querySelector('#headline').getBoundingClientRect().top];"
        )
        assert lead_top < table_top
        # the headline table fits the page: its drift verdict is on screen, not behind a scroll bar
        overflow = browser.execute_script(
            "const box = document.querySelector('#headline').nextElementSibling; return box.scrollWidth - box.clientWidth;"
        )
        assert overflow <= 0
        images = browser.execute_script(
            "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight]);"
        )
        assert images and all(done and width > 100 and height > 100 for done, width, height in images)
        shown = browser.execute_script("return document.body.innerText;")
        assert "wrong answers (est.)" in shown and "72 %" in shown
    finally:
        browser.quit()
