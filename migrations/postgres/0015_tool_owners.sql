-- A tool belongs to the worker identity that first registered it in its
-- project. An identity is a group of worker tokens (`worker_group`): a plain
-- `create-worker-token` starts a group named after the new credential, and
-- `--same-as` adds a token to an existing one, so tokens rotate without the
-- tools changing hands. Tools registered before owners existed are unowned
-- (''): the next registration claims them.
ALTER TABLE credentials ADD COLUMN worker_group TEXT;
UPDATE credentials SET worker_group = id WHERE kind = 'worker';
CREATE INDEX credentials_worker_group ON credentials (worker_group);
ALTER TABLE tools ADD COLUMN owner TEXT NOT NULL DEFAULT '';
-- A worker id is bound to the identity, not to one of its tokens: a rotated
-- token takes the worker's id (and its leases) over.
ALTER TABLE worker_bindings ADD COLUMN worker_group TEXT NOT NULL DEFAULT '';
UPDATE worker_bindings SET worker_group = credential_id;
