"""Prefect flows and the ``stef`` command line (DESIGN.md §5, §8).

Prefect reads its settings when it is first imported, so the defaults STEF needs are set here,
before any module of the package imports it: no usage analytics are sent from a local API
(``PREFECT_SERVER_ANALYTICS_ENABLED``; an explicit setting in the environment wins).
:mod:`tasks` sets the same for its own modules.
"""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
