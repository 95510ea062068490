-- The execution history (GET …/tool_executions): a project's runs newest first,
-- and the same narrowed to one tool. Filtering by user uses executions_owner
-- (project_id, user_id, created_at DESC, id DESC); the other filters (toolkit,
-- outcome, failure reason) read the project's runs in time order, which the
-- retention window bounds. Every index here is written on each transition of
-- an execution, so the set is kept to what the common reads need.
CREATE INDEX executions_history ON executions (project_id, created_at DESC, id DESC);
CREATE INDEX executions_history_tool ON executions (project_id, tool_name, created_at DESC, id DESC);
