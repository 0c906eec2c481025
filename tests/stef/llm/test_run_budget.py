"""``--max-cost-usd`` is one budget for the whole run (stef/llm/budget.py): the batches of a nightly
run share it, and no request starts unless the run's spend plus the reserves in flight plus its own
reserve fits. Against the local OpenAI-compatible stub server (tests/support/llm_server.py,
127.0.0.1 only), which reports a fixed usage so each answer's cost is known."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stef.llm.budget import CostBudget, run_budget, usd
from stef.llm.litellm_loader import import_litellm
from stef.llm.usage import ANSWER_RESERVE_TOKENS
from stef.models import AgentLogRecord
from tests.stef.llm.mocked import reserves
from tests.support.llm_server import stub_llm_server, synthetic_records

MODEL = "openai/gpt-4o-mini"
PROMPT_TOKENS, COMPLETION_TOKENS = 1500, 20
USAGE = json.dumps(
    {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
    }
)
RECORDS = 8


@pytest.fixture(autouse=True)
def placeholder_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stub needs no key, but litellm's openai/ provider wants one in the environment."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-placeholder")
    monkeypatch.delenv("STEF_LLM_API_BASE", raising=False)


def answer_cost() -> float:
    """What one stub answer costs by litellm's price table (the usage it reports)."""
    prices = import_litellm().model_cost["gpt-4o-mini"]
    return float(PROMPT_TOKENS * prices["input_cost_per_token"] + COMPLETION_TOKENS * prices["output_cost_per_token"])


def three_calls_budget(records: list[AgentLogRecord]) -> float:
    """A limit with room for exactly three requests made one at a time: two answers spent plus the
    largest reserve fits, three answers plus the smallest reserve do not."""
    cost, held = answer_cost(), reserves(records)
    limit = math.ceil((2 * cost + max(held)) * 1e7) / 1e7
    assert 3 * cost + min(held) > limit  # the prompts' reserves differ by less than one answer's cost
    assert cost < min(held)  # every answer costs less than its reserve: the spend stays within the limit
    return limit


def write_day(root: Path) -> list[AgentLogRecord]:
    rows = synthetic_records(RECORDS)
    day = root / "2026-11-20"
    day.mkdir(parents=True)
    (day / "agent-logs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return [AgentLogRecord(**row) for row in rows]


def reason(spent: float, limit: float) -> str:
    return f"{MODEL}: cost budget reached: ${usd(spent)} spent of --max-cost-usd ${usd(limit)} for the run; symbolic judge used"


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("concurrency", [1, 4])
def test_stef_nightly_batches_share_one_budget_for_the_run(tmp_path: Path, concurrency: int) -> None:
    from typer.testing import CliRunner

    from flows.cli.main import app
    from warehouse import connect

    records = write_day(tmp_path / "logs")
    limit = three_calls_budget(records)
    warehouse_path = tmp_path / "wh.duckdb"
    with stub_llm_server(delay_s=0.05, usage=USAGE) as server:
        result = CliRunner().invoke(
            app,
            [
                "nightly",
                "--date",
                "2026-11-20",
                "--logs-root",
                str(tmp_path / "logs"),
                "--warehouse",
                str(warehouse_path),
                "--batch-size",
                "1",  # 8 batches: before the fix each could make a request with its 1/8 share
                "--judge",
                MODEL,
                "--api-base",
                server.url,
                "--concurrency",
                str(concurrency),
                "--max-cost-usd",
                str(limit),
            ],
        )
        requests = server.requests
        asked = [body.get("max_tokens") for body in server.bodies]
    assert result.exit_code == 0, result.output
    assert asked == [ANSWER_RESERVE_TOKENS] * requests  # each answer is capped at what its reserve holds
    with connect(warehouse_path, read_only=True) as conn:
        rows = conn.execute(
            "SELECT judge, cost_usd, judge_fallback_reason FROM evaluations WHERE status = 'evaluated' ORDER BY run_id"
        ).fetchall()
    assert len(rows) == RECORDS
    judged = [row for row in rows if row[0] == MODEL]
    spent = sum(row[1] for row in judged)
    assert len(judged) == requests and spent == pytest.approx(requests * answer_cost())
    assert spent <= limit
    fallbacks = [row[2] for row in rows if row[0] != MODEL]
    assert len(fallbacks) == RECORDS - requests
    # reserves in flight keep later requests out until they settle, and those wait for them rather
    # than fall back while money is left: three requests whatever the concurrency (1..3 before)
    assert requests == 3
    assert fallbacks == [reason(3 * answer_cost(), limit)] * (RECORDS - 3)


def test_stef_evaluate_holds_the_budget_with_requests_in_flight(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.main import app

    records = write_day(tmp_path / "logs")
    limit = three_calls_budget(records)
    out = tmp_path / "scores.jsonl"
    with stub_llm_server(delay_s=0.05, usage=USAGE) as server:
        result = CliRunner().invoke(
            app,
            [
                "evaluate",
                str(tmp_path / "logs" / "2026-11-20" / "agent-logs.jsonl"),
                "--out",
                str(out),
                "--judge",
                MODEL,
                "--api-base",
                server.url,
                "--concurrency",
                "4",  # before the fix all four started below the limit: four answers, over it
                "--max-cost-usd",
                str(limit),
            ],
        )
        requests = server.requests
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    judged = [row for row in rows if row["judge"] == MODEL]
    spent = sum(row["cost_usd"] for row in judged)
    assert requests == 3 and len(judged) == requests  # the later ones waited for the reserves in flight
    assert spent == pytest.approx(requests * answer_cost()) and spent <= limit
    assert [row["judge_fallback_reason"] for row in rows if row["judge"] != MODEL] == [
        reason(3 * answer_cost(), limit)
    ] * (RECORDS - 3)


def test_a_budget_split_over_batches_in_other_processes_names_the_run_limit() -> None:
    budget = run_budget(0.001, "split-run", shares=4)
    assert (budget.max_usd, budget.run_max_usd) == (0.00025, 0.001)
    assert budget.reserve(0.0002) == 0.0002 and budget.reserve(0.0001) is None
    budget.settle(0.0002, 0.00018)
    assert budget.reason(1) == (
        "cost budget reached: $0.00018 spent of this batch's share $0.00025 of --max-cost-usd $0.001 for the run "
        "(split evenly over 4 batches: batches in other processes cannot share one budget); "
        "no further request after 1 request(s); symbolic judge used"
    )


def test_a_limit_of_zero_allows_no_request_even_unpriced() -> None:
    budget = CostBudget(0.0)
    assert budget.reserve(None) is None and budget.exhausted


UNPRICED = "hosted_vllm/sqlcoder-no-price"
"""A model litellm's price table does not know (a self-hosted deployment)."""
UNPRICED_MESSAGE = (
    f"--max-cost-usd cannot be enforced for {UNPRICED}: litellm has no price for it, so no request could be "
    "counted against the cap; drop --max-cost-usd (e.g. for a self-hosted server that costs nothing per "
    "request), or judge with a model litellm has a price for"
)


def test_max_cost_usd_for_a_model_without_a_price_is_refused_before_any_request(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.main import app

    logs = tmp_path / "logs.jsonl"
    logs.write_text("".join(json.dumps(row) + "\n" for row in synthetic_records(3)), encoding="utf-8")
    args = ["evaluate", str(logs), "--out", str(tmp_path / "out.jsonl"), "--judge", UNPRICED]
    with stub_llm_server(delay_s=0.0) as server:
        refused = CliRunner().invoke(app, [*args, "--api-base", server.url, "--max-cost-usd", "1"])
        asked_capped = server.requests
        zero = CliRunner().invoke(app, [*args, "--api-base", server.url, "--max-cost-usd", "0"])
        asked_zero = server.requests
        uncapped = CliRunner().invoke(app, [*args, "--api-base", server.url])
        asked_uncapped = server.requests
    assert refused.exit_code != 0 and asked_capped == 0
    assert UNPRICED_MESSAGE in " ".join(refused.output.split())  # the console may wrap the line
    assert zero.exit_code == 0, zero.output
    assert asked_zero == 0  # a cap of 0 is enforceable without a price: no request at all
    assert uncapped.exit_code == 0, uncapped.output
    assert asked_uncapped == 3  # without a cap the model is used as before (cost_usd unknown)


def test_a_caller_that_skips_the_preflight_gets_no_request_for_an_unpriced_model_under_a_cap() -> None:
    from tests.stef.llm.mocked import MODEL_ANSWER, RECORD, evaluator

    run, made = evaluator(MODEL_ANSWER, judge=UNPRICED, max_cost_usd=1.0)
    [stored] = run.evaluate_many([RECORD])
    assert made == []
    assert (stored.judge, stored.judge_fallback_reason) == ("symbolic", f"{UNPRICED}: {UNPRICED_MESSAGE}")
    assert run.stats.fallbacks == {"cost cap cannot be enforced": 1}
    free, asked = evaluator(MODEL_ANSWER, judge=UNPRICED)  # no cap: asked as before, its cost unknown
    [judged] = free.evaluate_many([RECORD])
    assert len(asked) == 1 and (judged.judge, judged.cost_usd) == (UNPRICED, None)
