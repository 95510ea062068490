-- The version of an execution's latest change a caller can see (every
-- transition but a heartbeat, which only renews a lease): a wait's cursor.
-- Rows written before it read 1, which a cursor-based wait treats as "before
-- any change", so their next change answers it. A constant default adds the
-- column without rewriting the table.
ALTER TABLE executions ADD COLUMN changed_version BIGINT NOT NULL DEFAULT 1;
