"""The ``stef`` command line (DESIGN.md §8): :mod:`flows.cli.main` builds the app from one module per command group."""

from __future__ import annotations

import time

COMMAND_STARTED = time.perf_counter()
"""When the command line was first imported (``--timings`` counts its start-up from here)."""
