-- 0003: drift checks of both kinds (issue 5). A check compares a candidate window of one agent
-- version with a baseline window: another version (kind 'version', usually the same window, or
-- the baseline's last week when it stopped earlier) or the same version one window earlier
-- (kind 'temporal'). window_start / window_end of 0001 are the candidate's window.
-- Rows written before this migration are version checks over one shared window.
ALTER TABLE drift_checks ADD COLUMN kind VARCHAR DEFAULT 'version';   -- version | temporal
ALTER TABLE drift_checks ADD COLUMN baseline_window_start DATE;       -- NULL: same as window_start
ALTER TABLE drift_checks ADD COLUMN baseline_window_end DATE;         -- NULL: same as window_end
ALTER TABLE drift_checks ADD COLUMN source VARCHAR;                   -- nightly | cli | api: who ran the check
