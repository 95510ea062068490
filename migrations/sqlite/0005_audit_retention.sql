-- Retention per organization (a default) and per project (an override, the
-- existing projects.retention_ms); with neither, the configured default (7 days).
-- Turning execution logging off for an organization keeps only what the owner
-- lifecycle of work in flight needs.
ALTER TABLE organizations ADD COLUMN retention_ms BIGINT;
ALTER TABLE organizations ADD COLUMN execution_logging BIGINT NOT NULL DEFAULT 1;

-- A tool may declare that it cannot be stopped once started (cancel answers
-- `unsupported`), and an administrator may disable a tool: a disabled tool
-- starts nothing and takes no input or cancellation.
ALTER TABLE tools ADD COLUMN cancel_unsupported BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tools ADD COLUMN disabled_at BIGINT;

-- Append-only: rows are inserted, read, and deleted only past the audit
-- retention; no statement updates them.
CREATE TABLE audit_logs (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL,
    project_id   TEXT,                -- NULL: an organization-wide change
    at           BIGINT NOT NULL,
    actor_id     TEXT NOT NULL,       -- credential id, or `cli` for `baton admin`
    actor_kind   TEXT NOT NULL,       -- api_key | end_user | worker | cli
    action       TEXT NOT NULL,
    target       TEXT,
    outcome      TEXT NOT NULL,
    detail       TEXT
);
CREATE INDEX audit_logs_project ON audit_logs (project_id, at DESC, id DESC);
CREATE INDEX audit_logs_org ON audit_logs (org_id, at DESC, id DESC);
CREATE INDEX audit_logs_at ON audit_logs (at);
