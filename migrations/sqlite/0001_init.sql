-- Baton schema, SQLite (kept statement-for-statement in step with postgres/). Times are milliseconds since the Unix epoch (BIGINT) so the
-- same statements serve Postgres and SQLite; payloads are AES-GCM ciphertext only.

CREATE TABLE organizations (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE projects (
    id            TEXT PRIMARY KEY,
    org_id        TEXT NOT NULL CONSTRAINT projects_org_fk REFERENCES organizations (id),
    name          TEXT NOT NULL,
    retention_ms  BIGINT,
    created_at    BIGINT NOT NULL
);

CREATE TABLE gateways (
    id          TEXT PRIMARY KEY,
    project_id  TEXT NOT NULL CONSTRAINT gateways_project_fk REFERENCES projects (id),
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

-- Bearer credentials, stored only as SHA-256 of the token.
CREATE TABLE credentials (
    id           TEXT PRIMARY KEY,
    token_hash   BLOB NOT NULL CONSTRAINT credentials_token_hash_key UNIQUE,
    kind         TEXT NOT NULL,          -- end_user | api_key | worker
    org_id       TEXT NOT NULL,
    project_id   TEXT NOT NULL CONSTRAINT credentials_project_fk REFERENCES projects (id),
    gateway_id   TEXT,
    user_id      TEXT,
    role         TEXT,                   -- admin | member | read_only (api keys)
    permissions  TEXT NOT NULL DEFAULT '', -- comma list of status,payload,cancel
    created_at   BIGINT NOT NULL,
    revoked_at   BIGINT
);

CREATE TABLE tools (
    project_id       TEXT NOT NULL,
    name             TEXT NOT NULL,
    toolkit_name     TEXT NOT NULL,
    toolkit_version  TEXT NOT NULL,
    description      TEXT NOT NULL,
    input_schema     TEXT NOT NULL,
    background       TEXT NOT NULL,
    task_time_input  BIGINT NOT NULL,
    max_attempts     BIGINT NOT NULL,
    max_ttl_ms       BIGINT,
    position         BIGINT NOT NULL,         -- order in the registering worker's list
    remote           BIGINT NOT NULL,         -- 1: served through a remote MCP server
    updated_at       BIGINT NOT NULL,
    CONSTRAINT tools_pkey PRIMARY KEY (project_id, name)
);

CREATE TABLE executions (
    id                       TEXT PRIMARY KEY,
    org_id                   TEXT NOT NULL,
    project_id               TEXT NOT NULL,
    gateway_id               TEXT NOT NULL,
    tool_name                TEXT NOT NULL,
    toolkit_name             TEXT NOT NULL,
    toolkit_version          TEXT NOT NULL,
    user_id                  TEXT NOT NULL,
    started_by               TEXT NOT NULL,   -- credential id that created it
    surface                  TEXT NOT NULL,
    execution_type           TEXT NOT NULL,   -- immediate | scheduled
    status                   TEXT NOT NULL,
    failure_reason           TEXT,
    error_message            TEXT,
    summary                  TEXT,
    not_before               BIGINT,
    worker_id                TEXT,
    lease_attempt            BIGINT,
    lease_expires_at         BIGINT,
    attempts                 BIGINT NOT NULL,
    max_attempts             BIGINT NOT NULL,
    cancel_requested         BIGINT NOT NULL,
    owner_loss_detection_at  BIGINT,
    created_at               BIGINT NOT NULL,
    scheduled_at             BIGINT,
    started_at               BIGINT,
    finished_at              BIGINT,
    updated_at               BIGINT NOT NULL,
    execution_deadline       BIGINT NOT NULL,
    retention_expires_at     BIGINT NOT NULL,
    poll_interval_ms         BIGINT NOT NULL,
    idempotency_key          TEXT,
    request_fingerprint      TEXT,
    input_ct                 BLOB,
    output_ct                BLOB,
    error_detail_ct          BLOB,
    payload_bytes            BIGINT NOT NULL,
    traceparent              TEXT,            -- W3C context of the start request: one trace per execution
    remote_task_id           TEXT,            -- the current attempt's remote MCP task, once recorded
    version                  BIGINT NOT NULL
);

CREATE UNIQUE INDEX executions_idempotency_key ON executions (project_id, user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Claims scan due pending work in not_before order and filter by tool; this
-- ordering lets LIMIT stop early instead of sorting every open execution.
CREATE INDEX executions_claimable ON executions (project_id, not_before) WHERE status = 'pending';
CREATE INDEX executions_owner ON executions (project_id, user_id, created_at DESC, id DESC);
CREATE INDEX executions_open_deadline ON executions (execution_deadline)
    WHERE status IN ('pending', 'working', 'input_required');
CREATE INDEX executions_open_lease ON executions (lease_expires_at)
    WHERE status IN ('working', 'input_required');
CREATE INDEX executions_retention ON executions (retention_expires_at);

-- One row per transition, written in the transition's transaction.
CREATE TABLE execution_events (
    execution_id  TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    at            BIGINT NOT NULL,
    kind          TEXT NOT NULL,
    status        TEXT NOT NULL,
    detail        TEXT,
    CONSTRAINT execution_events_pkey PRIMARY KEY (execution_id, seq)
);

CREATE TABLE attempts (
    execution_id     TEXT NOT NULL,
    attempt          BIGINT NOT NULL,
    worker_id        TEXT NOT NULL,
    started_at       BIGINT NOT NULL,
    finished_at      BIGINT,
    success          BIGINT,
    error_message    TEXT,
    output_ct        BLOB,
    error_detail_ct  BLOB,
    CONSTRAINT attempts_pkey PRIMARY KEY (execution_id, attempt)
);

-- Input requests a remote MCP server published, under keys Baton minted.
CREATE TABLE input_requests (
    execution_id  TEXT NOT NULL,
    request_key   TEXT NOT NULL,
    remote_key    TEXT NOT NULL,
    attempt       BIGINT NOT NULL,
    spec_ct       BLOB NOT NULL,          -- sealed {"message", "requested_schema"}
    state         TEXT NOT NULL,           -- open | answered | delivered
    response_ct   BLOB,                   -- sealed {"action", "content"}
    created_at    BIGINT NOT NULL,
    answered_at   BIGINT,
    CONSTRAINT input_requests_pkey PRIMARY KEY (execution_id, request_key)
);

-- Legacy MCP sessions ended by DELETE (the session id inside the sealed token).
CREATE TABLE mcp_sessions_ended (
    session_id     TEXT PRIMARY KEY,
    credential_id  TEXT NOT NULL,
    ended_at       BIGINT NOT NULL
);

-- Live worker sessions, so any coordinator can find the replica holding one.
CREATE TABLE workers (
    id              TEXT PRIMARY KEY,
    project_id      TEXT NOT NULL,
    coordinator_id  TEXT NOT NULL,
    connected_at    BIGINT NOT NULL,
    heartbeat_at    BIGINT NOT NULL
);

CREATE TABLE coordinators (
    id             TEXT PRIMARY KEY,
    advertise_url  TEXT NOT NULL,
    heartbeat_at   BIGINT NOT NULL
);
