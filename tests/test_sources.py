"""Repository-wide source checks: every Python file compiles without warnings."""

from __future__ import annotations

from tests.support.checkout import REPO_ROOT


def test_sources_compile_without_warnings() -> None:
    """No invalid escape sequences or other compile-time warnings (errors on newer Pythons)."""
    import warnings

    root = REPO_ROOT
    sources = [
        p
        for folder in ("stef", "flows", "tasks", "warehouse", "scripts", "tests")
        for p in sorted((root / folder).rglob("*.py"))
    ]
    assert len(sources) > 20
    for path in sources:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            compile(path.read_text(encoding="utf-8"), str(path), "exec")
