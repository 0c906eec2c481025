"""litellm, imported lazily and without network access (used by the judge, its settings and the usage checks).

litellm is imported only when a model is called or checked: :func:`import_litellm` sets
``LITELLM_LOCAL_MODEL_COST_MAP`` first, so that importing it never reaches the network, and turns
off its debug prints.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType


def import_litellm() -> ModuleType:
    """Import litellm without network access (local cost map) and without its debug prints."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm
