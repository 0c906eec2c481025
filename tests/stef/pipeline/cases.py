"""Reading the JSONL case files of the pipeline tests (golden inputs and expected outputs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of the JSONL file ``path``, one dict per non-blank line, in file order."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
