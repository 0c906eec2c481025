-- 0001: the initial STEF warehouse schema (DESIGN.md §4).
-- Timestamps are UTC without a zone; dates are the log folder's date (UTC).
-- JSON columns use DuckDB's built-in JSON type (validated on insert). No secondary indexes:
-- DuckDB's min-max zone maps serve the per-day filters, and ART indexes would slow bulk inserts.

-- Raw agent log records, one row per valid log line. Key: run_id.
CREATE TABLE agent_runs (
    run_id            VARCHAR PRIMARY KEY,
    log_date          DATE NOT NULL,
    "timestamp"       VARCHAR,            -- stored as logged (ISO-8601 text)
    agent_id          VARCHAR NOT NULL,
    agent_version     VARCHAR NOT NULL,
    question          VARCHAR NOT NULL,
    enriched_question VARCHAR,
    sql               VARCHAR NOT NULL,
    dialect           VARCHAR,
    app_id            VARCHAR,
    tool_calls        JSON,
    tokens            JSON,               -- an int or a {prompt, completion, ...} object
    latency_ms        DOUBLE,
    cost_usd          DOUBLE,
    model_version     VARCHAR,
    prompt_version    VARCHAR,
    source_file       VARCHAR NOT NULL,
    line_number       INTEGER NOT NULL,
    raw               JSON NOT NULL,      -- the log line as read (keeps unknown keys)
    ingested_at       TIMESTAMP NOT NULL
);

-- One evaluation per run and evaluator version. Key: (run_id, evaluator_version).
CREATE TABLE evaluations (
    run_id                VARCHAR NOT NULL,
    evaluator_version     VARCHAR NOT NULL,
    log_date              DATE NOT NULL,
    agent_id              VARCHAR,            -- NULL only for a rejected line that is not a JSON object
    agent_version         VARCHAR,
    app_id                VARCHAR,
    status                VARCHAR NOT NULL,   -- EvaluationStatus value
    status_reason         VARCHAR,
    score                 DOUBLE,             -- Φ in [0, 100]; NULL unless status = 'evaluated'
    band                  VARCHAR,
    filter_status         VARCHAR,
    verdict               VARCHAR,
    confidence            DOUBLE,
    judge                 VARCHAR,
    judge_fallback_reason VARCHAR,
    dialect               VARCHAR,
    suspected_errors      JSON,               -- [{category, subcategory, evidence}]
    flags                 JSON,               -- [str]
    evidence              JSON NOT NULL,      -- the full Evaluation (model_dump_json)
    cost_usd              DOUBLE,
    tokens                BIGINT,
    evaluated_at          TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, evaluator_version)
);

-- Log lines that are not stored in agent_runs, with the reason (never dropped silently).
CREATE TABLE quarantine (
    log_date       DATE NOT NULL,
    source_file    VARCHAR NOT NULL,
    line_number    INTEGER NOT NULL,
    run_id         VARCHAR,                   -- when one could be read from the line
    agent_id       VARCHAR,                   -- as AgentLogRecord reads it ('unknown' when absent);
    agent_version  VARCHAR,                   -- NULL when the line is not a JSON object
    reason         VARCHAR NOT NULL,
    raw            VARCHAR NOT NULL,          -- the line text (may not be JSON)
    quarantined_at TIMESTAMP NOT NULL
);

-- Persistent cache of LLM judge responses, keyed by (model, prompt version, inputs hash).
CREATE TABLE judge_cache (
    cache_key      VARCHAR PRIMARY KEY,
    model          VARCHAR NOT NULL,
    prompt_version VARCHAR NOT NULL,
    response       JSON NOT NULL,
    cost_usd       DOUBLE,
    tokens         BIGINT,
    created_at     TIMESTAMP NOT NULL
);

-- Daily metrics per day x agent x agent version x evaluator version.
CREATE TABLE daily_agent_metrics (
    log_date          DATE NOT NULL,
    agent_id          VARCHAR NOT NULL,
    agent_version     VARCHAR NOT NULL,
    evaluator_version VARCHAR NOT NULL,
    records           BIGINT NOT NULL,   -- log lines of the day (valid + quarantined) of this agent
                                         -- version; lines that are not JSON objects name no agent
                                         -- and count only in stored_days
    evaluated         BIGINT NOT NULL,   -- evaluations with status 'evaluated' (have a score)
    coverage          DOUBLE NOT NULL,   -- evaluated / records
    mean_score        DOUBLE,
    p50_score         DOUBLE,
    p90_score         DOUBLE,
    n_excellent       BIGINT NOT NULL,
    n_good            BIGINT NOT NULL,
    n_marginal        BIGINT NOT NULL,
    n_poor            BIGINT NOT NULL,
    n_quarantined     BIGINT NOT NULL,
    computed_at       TIMESTAMP NOT NULL,
    PRIMARY KEY (log_date, agent_id, agent_version, evaluator_version)
);

-- Drift checks of a candidate agent version against a baseline (DESIGN.md §6).
CREATE TABLE drift_checks (
    checked_at        TIMESTAMP NOT NULL,
    agent_id          VARCHAR NOT NULL,
    baseline_version  VARCHAR NOT NULL,
    candidate_version VARCHAR NOT NULL,
    evaluator_version VARCHAR NOT NULL,
    window_start      DATE NOT NULL,
    window_end        DATE NOT NULL,
    n_baseline        BIGINT,
    n_candidate       BIGINT,
    verdict           VARCHAR NOT NULL,   -- e.g. no_drift | drift | insufficient_data
    direction         VARCHAR,            -- better | worse | mixed | NULL
    statistics        JSON                -- KS, Wasserstein, PSI, deltas with CIs, chi-square ...
);

-- Which days were stored (and their metrics computed) with which evaluator version;
-- a day is done when metrics_at is set (backfill skips done days).
CREATE TABLE stored_days (
    log_date          DATE NOT NULL,
    evaluator_version VARCHAR NOT NULL,
    lines             BIGINT NOT NULL,
    runs              BIGINT NOT NULL,
    evaluations       BIGINT NOT NULL,
    quarantined       BIGINT NOT NULL,
    stored_at         TIMESTAMP NOT NULL,
    metrics_at        TIMESTAMP,
    PRIMARY KEY (log_date, evaluator_version)
);
