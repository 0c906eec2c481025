"""The nightly flow with an LLM judge setting, against the local OpenAI-compatible stub server
(tests/support/llm_server.py, 127.0.0.1 only): verdicts cached in the warehouse, cost summed per day."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stef.llm.prompt import PROMPT_VERSION
from tests.support.llm_server import stub_llm_server

MODEL = "openai/gpt-4o-mini"


@pytest.fixture(autouse=True)
def placeholder_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stub needs no key, but litellm's openai/ provider wants one in the environment."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-placeholder")
    monkeypatch.delenv("STEF_LLM_API_BASE", raising=False)


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_nightly_with_a_model_caches_in_the_warehouse_and_sums_cost_per_day(log_day: Path, tmp_path: Path) -> None:
    from flows.nightly import nightly
    from warehouse import connect

    warehouse_path = tmp_path / "wh.duckdb"
    with stub_llm_server(delay_s=0.0) as server:
        settings: dict[str, Any] = {
            "logs_root": str(log_day),
            "warehouse": str(warehouse_path),
            "max_bad_share": 0.3,
            "batch_size": 2,
            "judge": MODEL,
            "api_base": server.url,
            "concurrency": 2,
        }
        first = nightly(log_date="2026-11-20", **settings)
        asked = server.requests
        server.reset_counts()
        second = nightly(log_date="2026-11-20", **settings)
        assert server.requests == 0  # the rerun takes every verdict from judge_cache
    assert asked == first.evaluated == 4
    assert first.judge == MODEL and first.evaluator_version.endswith(f"+judge={MODEL};prompt={PROMPT_VERSION}")
    assert second.evaluator_version == first.evaluator_version
    with connect(warehouse_path, read_only=True) as conn:
        judges = conn.execute(
            "SELECT judge, count(*) FROM evaluations WHERE status = 'evaluated' GROUP BY judge"
        ).fetchall()
        versions = conn.execute("SELECT DISTINCT evaluator_version FROM evaluations").fetchall()
        cached = conn.execute("SELECT count(*), sum(cost_usd) FROM judge_cache").fetchall()[0]
        per_day = conn.execute(
            "SELECT m.agent_version, m.judge_cost_usd, m.judge_tokens, m.n_llm_judged, m.n_judge_fallback, e.cost, e.tokens "
            "FROM daily_agent_metrics AS m JOIN (SELECT agent_version, sum(cost_usd) AS cost, sum(tokens) AS tokens, count(*) AS n "
            "FROM evaluations GROUP BY agent_version) AS e USING (agent_version) ORDER BY m.agent_version"
        ).fetchall()
    assert judges == [(MODEL, 4)]
    assert versions == [(first.evaluator_version,)]  # quarantined lines' evaluations too
    assert cached[0] == 4 and cached[1] > 0
    for _, cost, tokens, _, fallbacks, summed_cost, summed_tokens in per_day:
        assert cost == pytest.approx(summed_cost) and tokens == summed_tokens and fallbacks == 0
    assert sum(row[3] for row in per_day) == 4
    assert sum(row[1] or 0.0 for row in per_day) == pytest.approx(cached[1])


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_nightly_with_a_hung_model_opens_one_breaker_for_the_run_and_stores_every_record(
    log_day: Path, tmp_path: Path
) -> None:
    from flows.nightly import DEFAULT_WORKERS, nightly
    from warehouse import connect

    warehouse_path = tmp_path / "wh.duckdb"
    with stub_llm_server(hang=True) as server:
        summary = nightly(
            log_date="2026-11-20",
            logs_root=str(log_day),
            warehouse=str(warehouse_path),
            max_bad_share=0.3,
            batch_size=1,
            judge=MODEL,
            api_base=server.url,
            concurrency=1,
            timeout_s=0.3,
            breaker_failures=2,
        )
        requests = server.requests
    # Four one-record batches on DEFAULT_WORKERS threads share the breaker: the two failures that
    # open it plus what was in flight, not 4 records x 4 attempts.
    assert 2 <= requests <= 2 + DEFAULT_WORKERS - 1
    assert summary.evaluated == 4
    assert summary.judge_breaker is not None and summary.judge_breaker.startswith("circuit breaker opened after")
    with connect(warehouse_path, read_only=True) as conn:
        rows = conn.execute(
            "SELECT judge, judge_fallback_reason FROM evaluations WHERE status = 'evaluated'"
        ).fetchall()
        fallbacks = conn.execute("SELECT sum(n_judge_fallback) FROM daily_agent_metrics").fetchall()[0][0]
    assert len(rows) == 4 and fallbacks == 4
    assert all(
        judge == "symbolic" and f"{MODEL}: " in reason and "circuit breaker open after 2 consecutive" in reason
        for judge, reason in rows
    )
    assert all("timeout value=0.3," in reason for _, reason in rows)  # timeout_s reached every request


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_stef_nightly_takes_timeout_and_breaker_failures(log_day: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    import flows.nightly
    from flows.cli.main import app

    with stub_llm_server(hang=True) as server:
        result = CliRunner().invoke(
            app,
            [
                "nightly",
                "--date",
                "2026-11-20",
                "--logs-root",
                str(log_day),
                "--warehouse",
                str(tmp_path / "wh.duckdb"),
                "--max-bad-share",
                "0.3",
                "--batch-size",
                "1",
                "--judge",
                MODEL,
                "--api-base",
                server.url,
                "--concurrency",
                "1",
                "--timeout",
                "0.3",
                "--breaker-failures",
                "1",
            ],
        )
        requests = server.requests
    assert result.exit_code == 0, result.output
    assert 1 <= requests <= 1 + flows.nightly.DEFAULT_WORKERS - 1
    assert f"judge {MODEL}: circuit breaker opened after" in result.stdout
    assert "(1 consecutive timeouts/connection failures; last: Timeout" in result.stdout
    assert "timeout value=0.3," in result.stdout  # litellm's message: --timeout reached the request


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_stef_nightly_shows_the_servers_error_text_visibly_and_stores_it_as_received(
    log_day: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 429 whose message holds terminal escapes: the WARNING log line and the summary line quote it
    with ``\\x1b`` visible; the warehouse keeps the fallback reason as received (it is data)."""
    from typer.testing import CliRunner

    import flows.nightly
    from flows.cli.main import app
    from stef.llm.settings import JudgeSettings
    from warehouse import connect

    warned: list[str] = []
    run_logger = flows.nightly.get_run_logger

    class Recorder:
        """The flow's run logger, keeping the text of its warnings (the console handler's stream varies)."""

        def __init__(self) -> None:
            self.logger = run_logger()

        def warning(self, msg: str, *args: Any) -> None:
            warned.append(msg % args)
            self.logger.warning(msg, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.logger, name)

    monkeypatch.setattr(flows.nightly, "get_run_logger", Recorder)
    monkeypatch.setitem(JudgeSettings.parse.__func__.__kwdefaults__, "backoff_s", 0.001)  # type: ignore[attr-defined]
    warehouse_path = tmp_path / "wh.duckdb"
    with stub_llm_server(delay_s=0.0, script=(429,) * 100, error_message="err \x1b[31mred\x1b[0m") as server:
        result = CliRunner().invoke(
            app,
            [
                "nightly",
                "--date",
                "2026-11-20",
                "--logs-root",
                str(log_day),
                "--warehouse",
                str(warehouse_path),
                "--max-bad-share",
                "0.3",
                "--batch-size",
                "1",
                "--judge",
                MODEL,
                "--api-base",
                server.url,
                "--concurrency",
                "1",
                "--breaker-failures",
                "1",
            ],
        )
        requests = server.requests
    assert result.exit_code == 0, result.output
    assert requests >= 4  # one record ran out of retries (1 + 3 requests) and opened the breaker
    visible = (
        "(1 records in a row ran out of retries on server errors; last: RateLimitError (HTTP 429): "
        "OpenAIException - err \\x1b[31mred\\x1b[0m after 4 request(s)); "
    )
    assert "\x1b[31mred" not in result.stdout and "\x1b[31mred" not in result.stderr
    summary = [line for line in result.stdout.splitlines() if line.startswith(f"judge {MODEL}: circuit breaker")]
    logged = [line for line in warned if "circuit breaker" in line]
    assert len(summary) == 1 and visible in summary[0], result.stdout
    assert len(logged) == 1 and logged[0].startswith(f"judge {MODEL}: circuit breaker opened after ")
    assert visible in logged[0] and "\x1b" not in logged[0]
    with connect(warehouse_path, read_only=True) as conn:
        reasons = [row[0] for row in conn.execute("SELECT judge_fallback_reason FROM evaluations").fetchall()]
    assert any("err \x1b[31mred\x1b[0m" in (reason or "") for reason in reasons)
