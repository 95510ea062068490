-- Refusals of one credential for one action are kept as one row per minute
-- that counts them (coordinator/src/audit.rs), so no caller can grow the
-- audit log faster than a row a minute for each action it is refused. A
-- constant default adds the column without rewriting the table.
ALTER TABLE audit_logs ADD COLUMN occurrences BIGINT NOT NULL DEFAULT 1;
