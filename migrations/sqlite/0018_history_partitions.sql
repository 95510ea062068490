-- Kept in step with postgres/0018: the Idempotency-Key's uniqueness moves to
-- `execution_keys`, and an execution's events, attempts and input requests
-- carry its organization and retention end. SQLite has no partitions: its
-- expired rows are deleted row by row, as before.

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
DROP INDEX executions_idempotency_key;

ALTER TABLE execution_events ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
ALTER TABLE execution_events ADD COLUMN retention_expires_at BIGINT NOT NULL DEFAULT 0;
UPDATE execution_events SET
    org_id = COALESCE((SELECT e.org_id FROM executions e WHERE e.id = execution_id), ''),
    retention_expires_at = COALESCE((SELECT e.retention_expires_at FROM executions e WHERE e.id = execution_id), 0);

ALTER TABLE attempts ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN retention_expires_at BIGINT NOT NULL DEFAULT 0;
UPDATE attempts SET
    org_id = COALESCE((SELECT e.org_id FROM executions e WHERE e.id = execution_id), ''),
    retention_expires_at = COALESCE((SELECT e.retention_expires_at FROM executions e WHERE e.id = execution_id), 0);

ALTER TABLE input_requests ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
ALTER TABLE input_requests ADD COLUMN retention_expires_at BIGINT NOT NULL DEFAULT 0;
UPDATE input_requests SET
    org_id = COALESCE((SELECT e.org_id FROM executions e WHERE e.id = execution_id), ''),
    retention_expires_at = COALESCE((SELECT e.retention_expires_at FROM executions e WHERE e.id = execution_id), 0);
