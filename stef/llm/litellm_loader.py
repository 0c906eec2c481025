"""litellm, imported lazily and without network access (used by the judge, its settings and the usage checks).

litellm is imported only when a model is called or checked, and once per process: the first
:func:`import_litellm` sets ``LITELLM_LOCAL_MODEL_COST_MAP`` first, so that importing it never
reaches the network, and turns off its debug prints; later calls return the same module. The
range pinned in ``pyproject.toml`` never allows the compromised releases 1.82.7 and 1.82.8.

The import runs with the garbage collector paused and its objects are frozen afterwards
(:func:`stef.module_import.import_uncollected`): 0.7 s less than a plain import, and no later
collection walks them again (neither the full collections while requests are answered nor the
one at interpreter exit).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from stef.module_import import import_uncollected

if TYPE_CHECKING:
    from types import ModuleType

COST_MAP_ENV = "LITELLM_LOCAL_MODEL_COST_MAP"
"""Set to ``True`` before litellm is imported: its price table is read from the package, not fetched."""

_lock = threading.Lock()
_litellm: ModuleType | None = None


def import_litellm() -> ModuleType:
    """Import litellm without network access (local cost map) and without its debug prints.

    Thread-safe; the first call imports (seconds), the others return the module at once.

    Returns:
        The ``litellm`` module.

    Raises:
        ImportError: litellm is not installed (the ``llm`` extra).
    """
    global _litellm
    if _litellm is not None:
        return _litellm
    with _lock:
        if _litellm is None:
            os.environ.setdefault(COST_MAP_ENV, "True")
            litellm = import_uncollected("litellm")
            litellm.suppress_debug_info = True  # type: ignore[attr-defined]  # a ModuleType to mypy
            _litellm = litellm
        return _litellm
