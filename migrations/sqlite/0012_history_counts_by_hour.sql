-- The kept history sums gain the hour their runs were created in, so a count
-- over a time range reads the sums of the whole hours inside it and counts
-- only the runs of its two partial edge hours row by row.
--
-- The sums are rebuilt from scratch: forgetting every seal lists nothing and
-- sums nothing, which counts every run row by row until the sweeper's next
-- seal (about a minute) has summed the finished runs again by hour.
DELETE FROM history_unsealed;
DELETE FROM history_seals;
DROP TABLE history_sealed;

CREATE TABLE history_sealed (
    project_id     TEXT NOT NULL,
    status         TEXT NOT NULL,
    failure_reason TEXT NOT NULL,  -- '' when the run has none
    tool_name      TEXT NOT NULL,
    toolkit_name   TEXT NOT NULL,
    created_hour   BIGINT NOT NULL, -- created_at rounded down to the hour (ms)
    n              BIGINT NOT NULL,
    PRIMARY KEY (project_id, status, failure_reason, tool_name, toolkit_name, created_hour)
);
