-- The audit log is partitioned by 30-day period of `at` (`log_period`), so its
-- retention drops a period whole once all of it is past the 400 days.
--
-- A row that stands for repeated refusals or reads (`occurrences`) is folded
-- within a minute or fifteen minutes; both divide the period, so one fold never
-- spans two periods and its key (`id`, `log_period`, `org_id`) stays one row.
-- Rows with no period partition yet wait in the DEFAULT partition; creating
-- their period moves them in (store/partitions.rs).

ALTER TABLE audit_logs RENAME TO audit_logs_unpartitioned;
ALTER TABLE audit_logs_unpartitioned DROP CONSTRAINT audit_logs_pkey;
DROP INDEX audit_logs_project, audit_logs_org, audit_logs_at;

CREATE TABLE audit_logs (
    id           TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    project_id   TEXT,
    at           BIGINT NOT NULL,
    actor_id     TEXT NOT NULL,
    actor_kind   TEXT NOT NULL,
    action       TEXT NOT NULL,
    target       TEXT,
    outcome      TEXT NOT NULL,
    detail       TEXT,
    occurrences  BIGINT NOT NULL DEFAULT 1,
    log_period   BIGINT NOT NULL,
    CONSTRAINT audit_logs_pkey PRIMARY KEY (id, log_period, org_id)
) PARTITION BY RANGE (log_period);
CREATE INDEX audit_logs_project ON audit_logs (project_id, at DESC, id DESC);
CREATE INDEX audit_logs_org ON audit_logs (org_id, at DESC, id DESC);
CREATE INDEX audit_logs_at ON audit_logs (at);
CREATE TABLE audit_logs_default PARTITION OF audit_logs DEFAULT;

DO $$
DECLARE
    now_period BIGINT := floor(extract(epoch FROM now()) / 2592000)::BIGINT;
    p BIGINT;
BEGIN
    FOR p IN
        SELECT DISTINCT at / 2592000000 FROM audit_logs_unpartitioned WHERE at >= 0
        UNION SELECT generate_series(now_period, now_period + 1)
    LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF audit_logs FOR VALUES FROM (%s) TO (%s)',
            'audit_logs_p' || p, p, p + 1);
    END LOOP;
END $$;

INSERT INTO audit_logs (id, org_id, project_id, at, actor_id, actor_kind, action, target, outcome, detail,
        occurrences, log_period)
    SELECT id, org_id, project_id, at, actor_id, actor_kind, action, target, outcome, detail, occurrences,
        at / 2592000000
    FROM audit_logs_unpartitioned;
DROP TABLE audit_logs_unpartitioned;
