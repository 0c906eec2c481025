-- 0002: cost and use of the LLM judge per day x agent x agent version x evaluator version
-- (issue 4). Filled by warehouse.metrics.compute_daily_metrics from the evaluations columns
-- cost_usd, tokens, judge and judge_fallback_reason; rows computed before this migration keep NULL.
ALTER TABLE daily_agent_metrics ADD COLUMN judge_cost_usd DOUBLE;    -- sum of cost_usd (NULL: no priced model verdict)
ALTER TABLE daily_agent_metrics ADD COLUMN judge_tokens BIGINT;      -- sum of tokens (NULL: no model call)
ALTER TABLE daily_agent_metrics ADD COLUMN n_llm_judged BIGINT;      -- evaluations whose verdict came from a model
ALTER TABLE daily_agent_metrics ADD COLUMN n_judge_fallback BIGINT;  -- evaluations that fell back to the symbolic judge
