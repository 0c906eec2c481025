"""Tests of the judge settings (stef/llm/settings.py): ``--judge`` and its companions, the API
base, and the preflight check of a model setting.
"""

from __future__ import annotations

from typing import Any

import pytest

from stef.llm.models import JudgeConfigError
from stef.llm.settings import JudgeSettings, preflight
from tests.stef.llm.mocked import MODEL


@pytest.mark.usefixtures("warm_litellm")
@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        pytest.param("hybrid:", {}, "hybrid: needs a model", id="hybrid_without_model"),
        pytest.param("gpt 4o", {}, "has no spaces", id="model_with_space"),
        pytest.param(MODEL, {"concurrency": 0}, "--concurrency must be at least 1", id="zero_concurrency"),
        pytest.param(MODEL, {"max_cost_usd": -1.0}, "--max-cost-usd must be 0 or more", id="negative_budget"),
        pytest.param(MODEL, {"timeout_s": 0.0}, "--timeout must be positive", id="zero_timeout"),
    ],
)
def test_unusable_judge_settings_are_rejected(spec: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(JudgeConfigError, match=message):
        JudgeSettings.parse(spec, **options)


@pytest.mark.usefixtures("warm_litellm")
def test_api_base_comes_from_the_option_else_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEF_LLM_API_BASE", "http://127.0.0.1:9999/v1")
    assert JudgeSettings.parse(MODEL).api_base == "http://127.0.0.1:9999/v1"
    assert JudgeSettings.parse(MODEL, api_base="http://127.0.0.1:1/v1").api_base == "http://127.0.0.1:1/v1"


@pytest.mark.usefixtures("warm_litellm")
@pytest.mark.parametrize(
    ("model", "env", "message"),
    [
        pytest.param("madeup-model-xyz", {}, "does not know this provider", id="unknown_provider"),
        pytest.param(
            "anthropic/claude-3-5-haiku-20241022", {}, "set ANTHROPIC_API_KEY in the environment", id="missing_key"
        ),
    ],
)
def test_preflight_rejects_a_model_that_cannot_work(
    model: str, env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(JudgeConfigError, match=message):
        preflight(JudgeSettings.parse(model))


@pytest.mark.usefixtures("warm_litellm")
def test_preflight_accepts_a_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-placeholder")
    assert preflight(JudgeSettings.parse(MODEL)) == []
    assert preflight(JudgeSettings.parse("hosted_vllm/judge", api_base="http://127.0.0.1:1/v1")) == []


@pytest.mark.usefixtures("placeholder_key")
@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"breaker_failures": -1}, "--breaker-failures must be a whole number, 0 or more", id="negative_breaker"
        ),
        pytest.param({"breaker_failures": True}, "--breaker-failures must be a whole number", id="bool_breaker"),
        pytest.param({"timeout_s": float("nan")}, "--timeout must be positive", id="nan_timeout"),
        pytest.param({"timeout_s": float("inf")}, "--timeout must be positive", id="infinite_timeout"),
        pytest.param({"max_cost_usd": float("nan")}, "--max-cost-usd must be 0 or more", id="nan_budget"),
    ],
)
def test_unusable_breaker_and_timeout_settings_are_rejected(options: dict[str, Any], message: str) -> None:
    with pytest.raises(JudgeConfigError, match=message):
        JudgeSettings.parse(MODEL, **options)


@pytest.mark.usefixtures("warm_litellm")
def test_preflight_refuses_a_cost_cap_it_cannot_enforce() -> None:
    unpriced = JudgeSettings.parse("hosted_vllm/judge", api_base="http://127.0.0.1:1/v1", max_cost_usd=2.0)
    with pytest.raises(JudgeConfigError) as refused:
        preflight(unpriced)
    assert str(refused.value).startswith(
        "--max-cost-usd cannot be enforced for hosted_vllm/judge: litellm has no price for it"
    )
    assert preflight(JudgeSettings.parse("hosted_vllm/judge", api_base="http://127.0.0.1:1/v1", max_cost_usd=0.0)) == []
    assert preflight(JudgeSettings.parse("hosted_vllm/judge", api_base="http://127.0.0.1:1/v1")) == []
