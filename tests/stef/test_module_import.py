"""Tests of :mod:`stef.module_import` (imports with the garbage collector paused)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest

from stef.module_import import import_uncollected


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Leave the collector as it was: on, nothing frozen by the test."""
    yield
    gc.unfreeze()
    gc.enable()


@pytest.mark.usefixtures("unfrozen")
def test_a_new_import_runs_with_the_collector_paused_and_freezes_the_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    seen: list[bool] = []
    real_import = __import__("importlib").import_module

    def spying(name: str) -> object:
        seen.append(gc.isenabled())
        return real_import(name)

    monkeypatch.setattr("stef.module_import.importlib.import_module", spying)
    gc.unfreeze()
    module = import_uncollected("colorsys")
    assert module.__name__ == "colorsys" and sys.modules["colorsys"] is module
    assert seen == [False]  # paused during the import
    assert gc.isenabled()  # and on again afterwards
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("unfrozen")
def test_a_module_already_imported_freezes_nothing_and_a_failed_import_restores_the_collector() -> None:
    gc.unfreeze()
    assert import_uncollected("json") is sys.modules["json"]
    assert gc.get_freeze_count() == 0
    with pytest.raises(ImportError):
        import_uncollected("stef_no_such_module")
    assert gc.isenabled()
    gc.disable()  # a collector the caller switched off stays off
    with pytest.raises(ImportError):
        import_uncollected("stef_no_such_module")
    assert not gc.isenabled()
