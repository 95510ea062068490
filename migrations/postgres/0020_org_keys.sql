-- Every table that grows with a tenant's traffic carries `org_id` in each of
-- its unique keys, so the tables can be distributed by organization
-- (Citus-style) with no schema change: the history's sums, their seals and
-- their list of unfinished runs, and webhook deliveries. (The execution tables
-- and the audit log gained theirs when they were partitioned, 0018 and 0019.)
-- The small catalog tables (organizations, projects, credentials, tools, ...)
-- would be reference tables, copied to every node; ARCHITECTURE.md lists both.

ALTER TABLE history_seals ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
UPDATE history_seals s SET org_id = p.org_id FROM projects p WHERE p.id = s.project_id;
ALTER TABLE history_seals ALTER COLUMN org_id DROP DEFAULT;
ALTER TABLE history_seals DROP CONSTRAINT history_seals_pkey,
    ADD CONSTRAINT history_seals_pkey PRIMARY KEY (project_id, org_id);

ALTER TABLE history_sealed ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
UPDATE history_sealed s SET org_id = p.org_id FROM projects p WHERE p.id = s.project_id;
ALTER TABLE history_sealed ALTER COLUMN org_id DROP DEFAULT;
ALTER TABLE history_sealed DROP CONSTRAINT history_sealed_pkey,
    ADD CONSTRAINT history_sealed_pkey
    PRIMARY KEY (project_id, status, failure_reason, tool_name, toolkit_name, created_hour, org_id);

ALTER TABLE history_unsealed ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
UPDATE history_unsealed s SET org_id = p.org_id FROM projects p WHERE p.id = s.project_id;
ALTER TABLE history_unsealed ALTER COLUMN org_id DROP DEFAULT;
ALTER TABLE history_unsealed DROP CONSTRAINT history_unsealed_pkey,
    ADD CONSTRAINT history_unsealed_pkey PRIMARY KEY (project_id, execution_id, org_id);

ALTER TABLE webhook_deliveries ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
UPDATE webhook_deliveries d SET org_id = p.org_id FROM projects p WHERE p.id = d.project_id;
ALTER TABLE webhook_deliveries ALTER COLUMN org_id DROP DEFAULT;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_pkey,
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id, org_id);
