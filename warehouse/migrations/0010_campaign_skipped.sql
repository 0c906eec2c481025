-- 0010: the campaign input lines that were not classified, each with a typed status and its
-- reason (stef.campaign.models.SkippedRun): runs whose question the gold battery lacks or the gold
-- audit excluded, repeats of a run_id within a campaign, invalid lines of the run log and of the
-- gold battery. campaign_outcomes holds the classified runs; together they account for every line.
-- Re-running a campaign replaces its rows; rows naming no campaign (an invalid line) are replaced
-- per source_file (warehouse.campaign.store_campaign).
CREATE TABLE campaign_skipped (
    campaign_id  VARCHAR,            -- as the line names it; NULL when it names none
    run_id       VARCHAR,            -- idem (a repeated run_id has one row per repeat)
    question_id  VARCHAR,
    input        VARCHAR NOT NULL,   -- run_log | gold
    status       VARCHAR NOT NULL,   -- unknown_question | question_excluded | duplicate_run | invalid_input
    reason       VARCHAR NOT NULL,
    source_file  VARCHAR,            -- the JSONL file, as given; NULL when the runs came from no file
    line_number  INTEGER,
    raw          VARCHAR NOT NULL,   -- the line (cut to 64 KiB), or the run as JSON
    skipped_at   TIMESTAMP NOT NULL
);
