"""Tests of flows/cli/main.py: `python -m flows.cli` errors without a traceback, importing the app loads no heavy library; moved from tests/test_cli.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.flows.cli.cli_support import FIXTURE, FIXTURE_RUN_IDS, HEAVY_MODULES, read_jsonl
from tests.support.checkout import REPO_ROOT, checkout_env


def test_console_script_exits_2_without_traceback(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "flows.cli",
        "evaluate",
        str(FIXTURE),
        "--out",
        str(tmp_path / "o.jsonl"),
        "--dialect",
        "nosuch",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env=checkout_env(), timeout=120, check=False
    )
    assert done.returncode == 2
    assert "error:" in done.stderr and "nosuch" in done.stderr
    assert "Traceback" not in done.stderr


def test_evaluate_imports_no_heavy_library(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    code = textwrap.dedent(
        f"""
        import json, sys
        from typer.testing import CliRunner
        import flows.cli.main
        from flows.cli.main import app
        result = CliRunner().invoke(app, ["evaluate", {str(FIXTURE)!r}, "--out", {str(out)!r}])
        loaded = sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules)
        print(json.dumps({{"exit_code": result.exit_code, "loaded": loaded, "cli": flows.cli.main.__file__}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=checkout_env(),
        timeout=120,
        check=True,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(report.pop("cli")).resolve().is_relative_to(REPO_ROOT)  # the checkout under test, not an installed copy
    assert report == {"exit_code": 0, "loaded": []}
    assert len(read_jsonl(out)) == len(FIXTURE_RUN_IDS)
