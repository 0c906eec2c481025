"""The checkout under test, for tests that start a Python subprocess.

A subprocess started outside the repository (``cwd=tmp_path``) imports whatever copy of
``stef`` / ``flows`` is installed, which in ``.ci/run`` is the built wheel, not the code under
test; :func:`checkout_env` puts the checkout first on its ``PYTHONPATH``.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository root (the folder holding ``stef/``, ``flows/``, ``tasks/``, ``warehouse/``)."""


def checkout_env(**extra: str) -> dict[str, str]:
    """``os.environ`` with :data:`REPO_ROOT` first on ``PYTHONPATH``, plus ``extra``.

    >>> checkout_env(STEF_X="1")["PYTHONPATH"].split(os.pathsep)[0] == str(REPO_ROOT)
    True
    """
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


FIXTURES = REPO_ROOT / "tests" / "fixtures"
"""The test fixtures (agent logs, golden files, monitoring samples)."""
