-- A worker id belongs to the credential that first registered it, for good:
-- leases name the worker id, so a registration under another credential that
-- claimed the same id could otherwise take over that worker's leases.
CREATE TABLE worker_bindings (
    worker_id      TEXT PRIMARY KEY,
    credential_id  TEXT NOT NULL,
    project_id     TEXT NOT NULL,
    bound_at       BIGINT NOT NULL
);
