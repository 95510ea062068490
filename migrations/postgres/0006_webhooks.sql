-- Webhook endpoints of a project (`tool.execution.lifecycle` signals) and the
-- transactional outbox of the signals owed to them. A signal row is inserted in
-- the transaction of the transition that causes it, one per enabled endpoint,
-- so a committed transition always has its signals and a rolled-back one never.

CREATE TABLE webhook_endpoints (
    id                  TEXT PRIMARY KEY,
    org_id              TEXT NOT NULL,
    project_id          TEXT NOT NULL CONSTRAINT webhook_endpoints_project_fk REFERENCES projects (id),
    url                 TEXT NOT NULL,
    event_type          TEXT NOT NULL,
    -- The whsec_ secret, sealed with the payload key ring (bound to this row).
    secret_ct           BYTEA NOT NULL,
    -- During a rotation, the secret being replaced: deliveries carry both
    -- signatures until previous_until.
    previous_secret_ct  BYTEA,
    previous_until      BIGINT,
    enabled             BIGINT NOT NULL,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL
);
CREATE INDEX webhook_endpoints_project ON webhook_endpoints (project_id);

CREATE TABLE webhook_deliveries (
    -- message_id ':' endpoint_id
    id                TEXT PRIMARY KEY,
    -- The webhook-id header: the same on every attempt.
    message_id        TEXT NOT NULL,
    endpoint_id       TEXT NOT NULL,
    project_id        TEXT NOT NULL,
    execution_id      TEXT NOT NULL,
    -- The execution state signalled.
    state             TEXT NOT NULL,
    -- The exact body signed and sent, fixed when the signal is written.
    body              TEXT NOT NULL,
    -- pending | delivered | failed (given up after the retry horizon)
    status            TEXT NOT NULL,
    attempts          BIGINT NOT NULL,
    created_at        BIGINT NOT NULL,
    next_attempt_at   BIGINT NOT NULL,
    -- A replica delivering the row holds it until lease_until; a replica that
    -- dies mid-delivery leaves it to be taken again when the lease ends.
    lease_until       BIGINT,
    lease_owner       TEXT,
    last_attempt_at   BIGINT,
    last_status_code  BIGINT,
    last_error        TEXT,
    finished_at       BIGINT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at DESC);
