"""Fixtures of the LLM judge tests: litellm warmed up, the symbolic evaluation of the record, a
placeholder key for the local stub server (use them with ``pytest.mark.usefixtures``)."""

from __future__ import annotations

from typing import Any

import pytest

from stef.llm.litellm_loader import import_litellm
from stef.pipeline.evaluate import evaluate
from tests.stef.llm.mocked import MODEL, MODEL_ANSWER, RECORD


@pytest.fixture(scope="module")
def warm_litellm() -> None:
    """One mocked call before the tests: litellm imports its provider modules on the first call,
    which on a busy machine can take longer than the tests' 0.05 s request timeout (+ 1 s guard)
    and would turn a scripted answer into a timeout."""
    import asyncio

    litellm = import_litellm()
    asyncio.run(
        litellm.acompletion(model=MODEL, messages=[{"role": "user", "content": "warm up"}], mock_response=MODEL_ANSWER)
    )


@pytest.fixture(scope="module")
def symbolic() -> Any:
    """The symbolic evaluation of :data:`RECORD` (what every fallback must store)."""
    return evaluate(RECORD)


@pytest.fixture
def placeholder_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stub needs no key, but litellm's openai/ provider wants one in the environment."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-placeholder")
    monkeypatch.delenv("STEF_LLM_API_BASE", raising=False)
