-- The payload key ids that may seal a retained value (decision 0045). A
-- coordinator notes its sealing key (the ring's first) before it serves and
-- again on every sweep pass; `baton admin` notes it before it seals a webhook
-- secret; `baton admin payload-keys rewrap` removes a key id once no retained
-- value names it. A coordinator refuses to start with a ring that lacks one of
-- these ids, which costs one read of this small table however big the history.
--
-- The row with the empty key id (never a valid one) says the values written
-- before this table existed have not been surveyed yet: the first coordinator
-- to start reads the key id of every retained value once, notes each, and
-- removes the row.
CREATE TABLE payload_keys_in_use (
    key_id    TEXT PRIMARY KEY,
    noted_at  BIGINT NOT NULL
);
INSERT INTO payload_keys_in_use (key_id, noted_at) VALUES ('', 0);
