-- 0005: the calibrated probability that an answer is correct (issue 14), per evaluation and as a
-- daily mean beside mean Φ. Filled from the evidence JSON by warehouse.store and by
-- warehouse.metrics.compute_daily_metrics; rows stored before this migration keep NULL.
ALTER TABLE evaluations ADD COLUMN p_correct DOUBLE;                -- P(correct) in [0, 1]; NULL unless status = 'evaluated'
ALTER TABLE daily_agent_metrics ADD COLUMN mean_p_correct DOUBLE;   -- mean p_correct of the evaluated answers
