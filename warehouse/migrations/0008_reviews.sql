-- 0008: reviewers close the loop (issue 18). `reviews` holds human labels on sampled answers
-- (`stef review import`); `calibrators` the deployment calibrators fitted from them
-- (`stef review calibrate`), which the nightly flow applies from its next run.
CREATE TABLE reviews (
    run_id            VARCHAR NOT NULL,
    reviewer          VARCHAR NOT NULL,
    label             VARCHAR NOT NULL,     -- 'correct' | 'incorrect'
    error_category    VARCHAR,              -- NL2SQL-BUGs taxonomy category, when the reviewer named one
    note              VARCHAR,
    evaluator_version VARCHAR NOT NULL,     -- the evaluation the reviewer was shown
    reviewed_at       TIMESTAMP NOT NULL,   -- from the file, else the import time
    source_file       VARCHAR NOT NULL,
    line_number       INTEGER NOT NULL,
    imported_at       TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, reviewer)
);

CREATE TABLE calibrators (
    calibrator_version VARCHAR PRIMARY KEY,
    app_id             VARCHAR,             -- NULL: every app without its own
    artifact           JSON NOT NULL,       -- the Calibrator artifact (stef.pipeline.judge.deployment)
    reviews            INTEGER NOT NULL,    -- labelled answers it was fitted on
    figures            JSON NOT NULL,       -- cross-validated figures, shipped vs refit
    created_at         TIMESTAMP NOT NULL
);
