-- Counts of a project's history without reading every run (the history's
-- `/count` and the list's `total_count`). A finished run never changes its
-- status, tool or failure reason, so runs are counted once, in the background,
-- and kept as sums; only runs that are recent, still in flight, or past
-- retention but not yet deleted are counted row by row when asked
-- (coordinator/src/store/history_counts.rs has the invariant and its proof).
--
-- Every run of the project created before `sealed_before` is either summed in
-- history_sealed (it was finished when sealed) or listed in history_unsealed
-- (it was not; moved to the sums once it finishes).
CREATE TABLE history_seals (
    project_id    TEXT PRIMARY KEY,
    sealed_before BIGINT NOT NULL
);

CREATE TABLE history_sealed (
    project_id     TEXT NOT NULL,
    status         TEXT NOT NULL,
    failure_reason TEXT NOT NULL,  -- '' when the run has none
    tool_name      TEXT NOT NULL,
    toolkit_name   TEXT NOT NULL,
    n              BIGINT NOT NULL,
    PRIMARY KEY (project_id, status, failure_reason, tool_name, toolkit_name)
);

CREATE TABLE history_unsealed (
    project_id   TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    PRIMARY KEY (project_id, execution_id)
);
