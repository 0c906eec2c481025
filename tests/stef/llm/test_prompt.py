"""Tests of the prompt (stef/llm/prompt.py): the cache key covers the model, the prompt version and
the injected rules.
"""

from __future__ import annotations

import pytest

from stef.llm.prompt import cache_key, render_messages
from stef.pipeline.rules import parse_rules
from tests.stef.llm.mocked import MODEL, RECORD

pytestmark = pytest.mark.usefixtures("warm_litellm")


def test_cache_key_covers_model_prompt_version_and_the_injected_rules() -> None:
    from dataclasses import replace

    from stef.pipeline.evaluate import Prepared, prepare

    prepared = prepare(RECORD)
    assert isinstance(prepared, Prepared)
    judge_input = prepared.judge_input
    base = render_messages(judge_input)
    with_rules = render_messages(
        replace(judge_input, rules=parse_rules({"app_id": "shop", "column_mappings": {"town": "city"}}, "shop.json"))
    )
    keys = {
        cache_key(MODEL, base),
        cache_key(MODEL, with_rules),
        cache_key("anthropic/claude-3-5-haiku-20241022", base),
        cache_key(MODEL, base, prompt_version="stef-judge-0"),
    }
    assert len(keys) == 4
    assert cache_key(MODEL, base) == cache_key(MODEL, render_messages(judge_input))
