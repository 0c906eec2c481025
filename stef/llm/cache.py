"""A verdict cache in memory (:class:`MemoryJudgeCache`, for tests and single runs); the persistent
one is the warehouse's (:mod:`warehouse.judge_cache`), both implement :class:`stef.llm.models.JudgeCache`.
"""

from __future__ import annotations

from collections.abc import Sequence

from stef.llm.models import CachedVerdict, VerdictCheck


class MemoryJudgeCache:
    """A :class:`stef.llm.models.JudgeCache` in a dict (tests, single runs).

    >>> from stef.llm.prompt import PROMPT_VERSION
    >>> cache = MemoryJudgeCache()
    >>> cache.put_many([CachedVerdict("k", "m", PROMPT_VERSION, {}, None, None)]), list(cache.get_many(["k", "x"]))
    (1, ['k'])
    """

    def __init__(self) -> None:
        self.entries: dict[str, CachedVerdict] = {}

    def get_many(self, keys: Sequence[str]) -> dict[str, CachedVerdict]:
        """The cached verdicts among ``keys``."""
        return {key: self.entries[key] for key in keys if key in self.entries}

    def put_many(self, entries: Sequence[CachedVerdict], valid: VerdictCheck | None = None) -> int:
        """Add entries whose key is new, replace those whose stored row ``valid`` rejects (see
        :meth:`stef.llm.models.JudgeCache.put_many`); return how many were written."""
        written = 0
        for entry in entries:
            stored = self.entries.get(entry.key)
            if stored is None or (valid is not None and not valid(stored.response)):
                self.entries[entry.key] = entry
                written += 1
        return written
