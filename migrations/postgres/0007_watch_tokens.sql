-- Single-use watch tokens (websocket delivery). The token itself is sealed and
-- stateless, so any gateway replica can open it; only its use is shared state:
-- the first connection inserts the token's random id, a second finds it taken.
-- Rows are kept until the token's connect deadline has passed (after it the
-- token is refused anyway), then pruned.
CREATE TABLE watch_tokens_used (
    token_id       TEXT PRIMARY KEY,
    credential_id  TEXT NOT NULL,
    used_at        BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL
);

CREATE INDEX watch_tokens_used_expiry ON watch_tokens_used (expires_at);
