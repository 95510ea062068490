-- Kept in step with postgres/0020: the history's sums, seals and list, and
-- webhook deliveries carry `org_id`, and the keys a statement's ON CONFLICT
-- names include it. (SQLite keeps its old primary keys beside them.)

ALTER TABLE history_seals ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
UPDATE history_seals SET org_id = COALESCE((SELECT p.org_id FROM projects p WHERE p.id = history_seals.project_id), '');
CREATE UNIQUE INDEX history_seals_org ON history_seals (project_id, org_id);

ALTER TABLE history_sealed ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
UPDATE history_sealed SET org_id = COALESCE((SELECT p.org_id FROM projects p WHERE p.id = history_sealed.project_id), '');
CREATE UNIQUE INDEX history_sealed_org
    ON history_sealed (project_id, status, failure_reason, tool_name, toolkit_name, created_hour, org_id);

ALTER TABLE history_unsealed ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
UPDATE history_unsealed SET org_id = COALESCE((SELECT p.org_id FROM projects p WHERE p.id = history_unsealed.project_id), '');
CREATE UNIQUE INDEX history_unsealed_org ON history_unsealed (project_id, execution_id, org_id);

ALTER TABLE webhook_deliveries ADD COLUMN org_id TEXT NOT NULL DEFAULT '';
UPDATE webhook_deliveries SET org_id = COALESCE((SELECT p.org_id FROM projects p WHERE p.id = webhook_deliveries.project_id), '');
CREATE UNIQUE INDEX webhook_deliveries_org ON webhook_deliveries (id, org_id);
