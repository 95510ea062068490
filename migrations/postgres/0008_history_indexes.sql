-- The execution history at scale (measured by `baton bench history` on one
-- project of 1,000,000 runs; README has the figures). A page is read in two
-- steps (coordinator/src/store/history.rs): the page's ids, then their rows.
-- The first step skips the offset inside an index; these indexes carry every
-- column the filters and the retention check read (INCLUDE), so skipping
-- 10,000 runs is an index-only scan that reads no heap page, and so is a count.
--
-- Keys ascend: runs arrive in created_at order, so each index grows at its
-- right edge, where Postgres splits pages 90/10 and they stay full; a
-- descending key grows at the left edge, where pages split 50/50 and stay
-- half empty (twice the pages to read for a count). Reads newest first walk
-- the index backward, at the same cost.
--
-- Cost: a transition changes `status` (also in the predicates of the claim,
-- deadline and lease indexes), so it is never a HOT update and adds an entry
-- to every index of the table; each index here adds one entry per transition
-- (about three per run). Hence one index per filter that needs its own order,
-- and no more:
--   executions_history          the project's time order: no filter, a time
--                               range, outcome=success
--   executions_history_tool     tool_name (and with an outcome or time range)
--   executions_history_toolkit  toolkit_name (and with an outcome or time range)
--   executions_owner            user_id (also the owner's own list); same key
--   executions_history_failed   failed runs only (outcome=failure, and every
--                               failure_reason, which only failed runs carry):
--                               about one run in ten, entered once, when it fails
DROP INDEX executions_history;
CREATE INDEX executions_history ON executions (project_id, created_at, id)
    INCLUDE (retention_expires_at, status);
DROP INDEX executions_history_tool;
CREATE INDEX executions_history_tool ON executions (project_id, tool_name, created_at, id)
    INCLUDE (retention_expires_at, status);
CREATE INDEX executions_history_toolkit ON executions (project_id, toolkit_name, created_at, id)
    INCLUDE (retention_expires_at, status);
DROP INDEX executions_owner;
CREATE INDEX executions_owner ON executions (project_id, user_id, created_at, id)
    INCLUDE (retention_expires_at, status);
CREATE INDEX executions_history_failed ON executions (project_id, created_at, id)
    INCLUDE (retention_expires_at, failure_reason, tool_name, toolkit_name, user_id) WHERE status = 'failed';
