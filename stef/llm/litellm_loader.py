"""litellm, imported lazily and without network access (used by the judge, its settings and the usage checks).

litellm is imported only when a model is called or checked, and once per process: the first
:func:`import_litellm` sets ``LITELLM_LOCAL_MODEL_COST_MAP`` first, so that importing it never
reaches the network, and turns off its debug prints; later calls return the same module. The
range pinned in ``pyproject.toml`` never allows the compromised releases 1.82.7 and 1.82.8.

The import leaves some hundred thousand long-lived objects (litellm's and openai's modules,
classes and pydantic models). They are moved to the garbage collector's permanent generation
(:func:`gc.freeze`), so that no later collection walks them again: neither the full collections
while requests are answered nor the one at interpreter exit (0.8 s of a ``stef evaluate`` run
otherwise). Reference counting still frees every object; only cycles among the objects alive at
that moment are never collected. For the same reason the collector is off during the import
itself (a fifth of its 3 s otherwise goes to collections that find nothing to free).
"""

from __future__ import annotations

import gc
import os
import threading
from typing import TYPE_CHECKING

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
            collecting = gc.isenabled()
            gc.disable()  # the import makes ~10^6 long-lived objects: collections meanwhile find no garbage
            try:
                import litellm
            finally:
                if collecting:
                    gc.enable()
            litellm.suppress_debug_info = True
            _litellm = litellm
            gc.freeze()  # the import's objects live as long as the process: no collection walks them again
        return _litellm
