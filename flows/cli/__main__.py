"""``python -m flows.cli``: the ``stef`` command line of this checkout."""

from __future__ import annotations

from flows.cli.main import main

main()
