-- Kept in step with postgres/0019: audit rows carry their 30-day period, part
-- of the key a repeat folds into. SQLite has no partitions: expired rows are
-- deleted row by row, as before.
ALTER TABLE audit_logs ADD COLUMN log_period BIGINT NOT NULL DEFAULT 0;
UPDATE audit_logs SET log_period = at / 2592000000;
CREATE UNIQUE INDEX audit_logs_fold ON audit_logs (id, log_period, org_id);
