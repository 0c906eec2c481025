-- 0004: reference-based campaigns (DESIGN.md §7, issue 6; protocol of seeds/003).
-- One row per campaign (settings, gold audit, summary, C_infra), one row per run as logged, one
-- outcome row per run. Re-running a campaign replaces its rows (warehouse.campaign.store_campaign).
CREATE TABLE campaigns (
    campaign_id     VARCHAR PRIMARY KEY,
    mode            VARCHAR NOT NULL,    -- mcp | baseline-static
    settings        JSON NOT NULL,       -- CampaignSettings
    gold_audit      JSON NOT NULL,       -- [{question_id, ok, reason, row_counts}]
    summary         JSON NOT NULL,       -- CampaignSummary
    infra_cost_usd  DOUBLE,              -- C_infra: recorded per campaign, never added to C_i
    stored_at       TIMESTAMP NOT NULL
);

-- The run log lines (CampaignRunLog). Key: (campaign_id, run_id).
CREATE TABLE campaign_runs (
    campaign_id     VARCHAR NOT NULL,
    run_id          VARCHAR NOT NULL,
    question_id     VARCHAR NOT NULL,
    question        VARCHAR NOT NULL,
    tool_calls      JSON,
    statements      JSON NOT NULL,
    model_version   VARCHAR,
    prompt_version  VARCHAR,
    seed            VARCHAR,
    commit_hash     VARCHAR,
    tokens          JSON,
    latency_ms      DOUBLE,
    cost_usd        DOUBLE,              -- as logged
    raw             JSON NOT NULL,
    PRIMARY KEY (campaign_id, run_id)
);

-- The classified runs (CampaignRunResult) and, when computed, the STEF score of the same run.
CREATE TABLE campaign_outcomes (
    campaign_id          VARCHAR NOT NULL,
    run_id               VARCHAR NOT NULL,
    question_id          VARCHAR NOT NULL,
    mode                 VARCHAR NOT NULL,
    outcome              VARCHAR NOT NULL,  -- budget_exceeded ... success | correct | incorrect
    reason               VARCHAR NOT NULL,
    tool_calls           INTEGER NOT NULL,
    n_statements         INTEGER NOT NULL,
    required             INTEGER NOT NULL,
    matched              INTEGER NOT NULL,
    catalog_traceability DOUBLE,
    latency_ms           DOUBLE,
    tokens               BIGINT,
    cost_usd             DOUBLE,            -- C_i (tokens x tariff), NULL in baseline mode
    stef_score           DOUBLE,            -- Φ of the same question + statements, when computed
    stef_status          VARCHAR,
    evidence             JSON NOT NULL,     -- the full CampaignRunResult
    classified_at        TIMESTAMP NOT NULL,
    PRIMARY KEY (campaign_id, run_id)
);
