-- Tool metadata MCP clients show (a tool's `title`, its behaviour hints in
-- `annotations`, `outputSchema`, `icons`), as the registering worker declared
-- it; JSON text, the empty string when the tool declared none.
ALTER TABLE tools ADD COLUMN title TEXT NOT NULL DEFAULT '';
ALTER TABLE tools ADD COLUMN annotations TEXT NOT NULL DEFAULT '';
ALTER TABLE tools ADD COLUMN output_schema TEXT NOT NULL DEFAULT '';
ALTER TABLE tools ADD COLUMN icons TEXT NOT NULL DEFAULT '';

-- The latest progress a running tool reported, kept on the execution and
-- overwritten per report (throttled by the coordinator), never appended to the
-- event log: callers read it with the execution. NULL: no progress reported.
ALTER TABLE executions ADD COLUMN progress_current DOUBLE PRECISION;
ALTER TABLE executions ADD COLUMN progress_total DOUBLE PRECISION;
ALTER TABLE executions ADD COLUMN progress_message TEXT;
ALTER TABLE executions ADD COLUMN progress_at BIGINT;
