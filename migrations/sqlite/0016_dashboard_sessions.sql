-- Dashboard sessions, kept by the coordinator: the browser's cookie carries
-- a session token (stored here only as its SHA-256), never the API key that
-- opened it. Signing out sets `ended_at`; revoking the key ends every session
-- it opened (the credential is joined on each use); a session unused for the
-- idle lifetime, or older than the absolute one, no longer opens.
CREATE TABLE dashboard_sessions (
    token_hash     BLOB PRIMARY KEY,
    credential_id  TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    last_seen_at   BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    ended_at       BIGINT
);

CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);
