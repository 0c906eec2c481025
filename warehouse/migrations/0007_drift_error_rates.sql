-- 0007: the estimated share of wrong answers of both sides of a drift check (issue 16), corrected
-- for label shift (stef.monitor.error_rate), with 95 % intervals as [low, high]; fractions in [0, 1].
-- Rows written before this migration keep NULL here (their statistics JSON is unchanged).
ALTER TABLE drift_checks ADD COLUMN error_rate_baseline DOUBLE;        -- estimated share of wrong answers
ALTER TABLE drift_checks ADD COLUMN error_rate_baseline_ci DOUBLE[];   -- [low, high]
ALTER TABLE drift_checks ADD COLUMN error_rate_candidate DOUBLE;
ALTER TABLE drift_checks ADD COLUMN error_rate_candidate_ci DOUBLE[];
ALTER TABLE drift_checks ADD COLUMN error_rate_delta DOUBLE;           -- candidate - baseline, the deciding statistic
ALTER TABLE drift_checks ADD COLUMN error_rate_delta_ci DOUBLE[];
ALTER TABLE drift_checks ADD COLUMN category_shifts JSON;              -- [{category, baseline_share, candidate_share, pvalue, qvalue, significant, ...}]
ALTER TABLE drift_checks ADD COLUMN sentence VARCHAR;                  -- the check in one sentence (stef.monitor.sentence)
