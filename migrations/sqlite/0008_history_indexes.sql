-- The history's filters by toolkit and by outcome or failure reason get an
-- index in time order, as in the Postgres schema (see migrations/postgres/0008).
-- SQLite has no INCLUDE and serves `baton dev`, whose history is small: the
-- key alone.
CREATE INDEX executions_history_toolkit ON executions (project_id, toolkit_name, created_at, id);
CREATE INDEX executions_history_failed ON executions (project_id, created_at, id) WHERE status = 'failed';
