-- The history is partitioned by the day its retention ends, so expiry is a
-- whole-partition drop instead of millions of row deletes.
--
-- An execution's `retention_expires_at` is fixed when it is created (its
-- deadline plus its project's window) and changes only when an administrator
-- changes a window or turns logging off, which re-dates rows (they move
-- between partitions then). So every row is written into its final partition
-- and the hot path never moves one. Its events, attempts and input requests
-- carry the same value and live in the same day's partitions; every tenant
-- row also carries `org_id` in its key, so the tables can be distributed by
-- organization without another schema change.
--
-- A partitioned table's unique keys must hold its partition key, so the
-- Idempotency-Key's uniqueness moves to `execution_keys`, a small table of its
-- own (one narrow row per keyed run, deleted once its run expires).
--
-- Days outside the partitions the coordinator keeps ahead land in each
-- table's DEFAULT partition, whose expired rows are deleted row by row as
-- before: no insert fails for want of a partition.
--
-- This migration copies the four tables once (a write lock for the copy's
-- duration, proportional to the history kept).

CREATE TABLE execution_keys (
    org_id                TEXT NOT NULL,
    project_id            TEXT NOT NULL,
    user_id               TEXT NOT NULL,
    idempotency_key       TEXT NOT NULL,
    execution_id          TEXT NOT NULL,
    retention_expires_at  BIGINT NOT NULL,
    CONSTRAINT execution_keys_pkey PRIMARY KEY (org_id, project_id, user_id, idempotency_key)
);
CREATE INDEX execution_keys_expiry ON execution_keys (retention_expires_at);
INSERT INTO execution_keys (org_id, project_id, user_id, idempotency_key, execution_id, retention_expires_at)
    SELECT org_id, project_id, user_id, idempotency_key, id, retention_expires_at
    FROM executions WHERE idempotency_key IS NOT NULL;

ALTER TABLE executions RENAME TO executions_unpartitioned;
ALTER TABLE executions_unpartitioned DROP CONSTRAINT executions_pkey;
DROP INDEX executions_idempotency_key, executions_claimable, executions_owner, executions_open_deadline,
    executions_open_lease, executions_retention, executions_history, executions_history_tool,
    executions_history_toolkit, executions_history_failed;
ALTER TABLE execution_events RENAME TO execution_events_unpartitioned;
ALTER TABLE execution_events_unpartitioned DROP CONSTRAINT execution_events_pkey;
ALTER TABLE attempts RENAME TO attempts_unpartitioned;
ALTER TABLE attempts_unpartitioned DROP CONSTRAINT attempts_pkey;
ALTER TABLE input_requests RENAME TO input_requests_unpartitioned;
ALTER TABLE input_requests_unpartitioned DROP CONSTRAINT input_requests_pkey;

CREATE TABLE executions (LIKE executions_unpartitioned INCLUDING DEFAULTS)
    PARTITION BY RANGE (retention_expires_at);
ALTER TABLE executions ADD CONSTRAINT executions_pkey PRIMARY KEY (id, retention_expires_at, org_id);
CREATE INDEX executions_claimable ON executions (project_id, not_before) WHERE status = 'pending';
CREATE INDEX executions_open_deadline ON executions (execution_deadline)
    WHERE status IN ('pending', 'working', 'input_required');
CREATE INDEX executions_open_lease ON executions (lease_expires_at)
    WHERE status IN ('working', 'input_required');
CREATE INDEX executions_retention ON executions (retention_expires_at);
CREATE INDEX executions_history ON executions (project_id, created_at, id)
    INCLUDE (retention_expires_at, status);
CREATE INDEX executions_history_tool ON executions (project_id, tool_name, created_at, id)
    INCLUDE (retention_expires_at, status);
CREATE INDEX executions_history_toolkit ON executions (project_id, toolkit_name, created_at, id)
    INCLUDE (retention_expires_at, status);
CREATE INDEX executions_owner ON executions (project_id, user_id, created_at, id)
    INCLUDE (retention_expires_at, status);
CREATE INDEX executions_history_failed ON executions (project_id, created_at, id)
    INCLUDE (retention_expires_at, failure_reason, tool_name, toolkit_name, user_id) WHERE status = 'failed';

CREATE TABLE execution_events (
    org_id                TEXT NOT NULL,
    execution_id          TEXT NOT NULL,
    seq                   BIGINT NOT NULL,
    at                    BIGINT NOT NULL,
    kind                  TEXT NOT NULL,
    status                TEXT NOT NULL,
    detail                TEXT,
    retention_expires_at  BIGINT NOT NULL,
    CONSTRAINT execution_events_pkey PRIMARY KEY (execution_id, seq, retention_expires_at, org_id)
) PARTITION BY RANGE (retention_expires_at);

CREATE TABLE attempts (
    org_id                TEXT NOT NULL,
    execution_id          TEXT NOT NULL,
    attempt               BIGINT NOT NULL,
    worker_id             TEXT NOT NULL,
    started_at            BIGINT NOT NULL,
    finished_at           BIGINT,
    success               BIGINT,
    error_message         TEXT,
    output_ct             BYTEA,
    error_detail_ct       BYTEA,
    retention_expires_at  BIGINT NOT NULL,
    CONSTRAINT attempts_pkey PRIMARY KEY (execution_id, attempt, retention_expires_at, org_id)
) PARTITION BY RANGE (retention_expires_at);

CREATE TABLE input_requests (
    org_id                TEXT NOT NULL,
    execution_id          TEXT NOT NULL,
    request_key           TEXT NOT NULL,
    remote_key            TEXT NOT NULL,
    attempt               BIGINT NOT NULL,
    spec_ct               BYTEA NOT NULL,
    state                 TEXT NOT NULL,
    response_ct           BYTEA,
    created_at            BIGINT NOT NULL,
    answered_at           BIGINT,
    retention_expires_at  BIGINT NOT NULL,
    CONSTRAINT input_requests_pkey PRIMARY KEY (execution_id, request_key, retention_expires_at, org_id)
) PARTITION BY RANGE (retention_expires_at);

CREATE TABLE executions_default PARTITION OF executions DEFAULT;
CREATE TABLE execution_events_default PARTITION OF execution_events DEFAULT;
CREATE TABLE attempts_default PARTITION OF attempts DEFAULT;
CREATE TABLE input_requests_default PARTITION OF input_requests DEFAULT;

-- A partition per day the kept rows expire on, and for the coming week;
-- the coordinator keeps creating them ahead (store/partitions.rs names them
-- `<table>_p<days since the epoch>`).
DO $$
DECLARE
    today BIGINT := floor(extract(epoch FROM now()) / 86400)::BIGINT;
    d BIGINT;
    t TEXT;
BEGIN
    FOR d IN
        SELECT DISTINCT retention_expires_at / 86400000 FROM executions_unpartitioned
            WHERE retention_expires_at >= 0 AND retention_expires_at / 86400000 <= today + 400
        UNION SELECT generate_series(today, today + 8)
    LOOP
        FOREACH t IN ARRAY ARRAY['executions', 'execution_events', 'attempts', 'input_requests'] LOOP
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%s) TO (%s)',
                t || '_p' || d, t, d * 86400000, (d + 1) * 86400000);
        END LOOP;
    END LOOP;
END $$;

INSERT INTO executions SELECT * FROM executions_unpartitioned;
INSERT INTO execution_events (org_id, execution_id, seq, at, kind, status, detail, retention_expires_at)
    SELECT e.org_id, c.execution_id, c.seq, c.at, c.kind, c.status, c.detail, e.retention_expires_at
    FROM execution_events_unpartitioned c JOIN executions_unpartitioned e ON e.id = c.execution_id;
INSERT INTO attempts (org_id, execution_id, attempt, worker_id, started_at, finished_at, success, error_message,
        output_ct, error_detail_ct, retention_expires_at)
    SELECT e.org_id, c.execution_id, c.attempt, c.worker_id, c.started_at, c.finished_at, c.success,
        c.error_message, c.output_ct, c.error_detail_ct, e.retention_expires_at
    FROM attempts_unpartitioned c JOIN executions_unpartitioned e ON e.id = c.execution_id;
INSERT INTO input_requests (org_id, execution_id, request_key, remote_key, attempt, spec_ct, state, response_ct,
        created_at, answered_at, retention_expires_at)
    SELECT e.org_id, c.execution_id, c.request_key, c.remote_key, c.attempt, c.spec_ct, c.state, c.response_ct,
        c.created_at, c.answered_at, e.retention_expires_at
    FROM input_requests_unpartitioned c JOIN executions_unpartitioned e ON e.id = c.execution_id;

DROP TABLE input_requests_unpartitioned, attempts_unpartitioned, execution_events_unpartitioned,
    executions_unpartitioned;
