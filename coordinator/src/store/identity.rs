//! Organizations, projects, gateways, credentials, registered tools, and the
//! directory of live workers and coordinators.

use super::{Dialect, Result, Store};

/// The Postgres channel a revocation is announced on, with the credential's id.
pub(crate) const REVOCATION_CHANNEL: &str = "baton_credential_revoked";
use crate::domain::{Background, Millis};
use sqlx::Row;
use sqlx::any::AnyRow;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialKind {
    EndUser,
    ApiKey,
    Worker,
}

impl CredentialKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CredentialKind::EndUser => "end_user",
            CredentialKind::ApiKey => "api_key",
            CredentialKind::Worker => "worker",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        [CredentialKind::EndUser, CredentialKind::ApiKey, CredentialKind::Worker].into_iter().find(|k| k.as_str() == s)
    }
}

#[derive(Clone, Debug)]
pub struct NewCredential {
    pub id: String,
    pub token_hash: Vec<u8>,
    pub kind: CredentialKind,
    pub org_id: String,
    pub project_id: String,
    pub gateway_id: Option<String>,
    pub user_id: Option<String>,
    pub role: Option<String>,
    pub permissions: Vec<String>,
    /// A worker token's identity (see `store::tool_owners`); `None` for other kinds.
    pub worker_group: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    pub(crate) id: String,
    pub(crate) kind: CredentialKind,
    pub(crate) org_id: String,
    pub(crate) project_id: String,
    pub(crate) gateway_id: Option<String>,
    pub(crate) user_id: Option<String>,
    pub(crate) role: Option<String>,
    pub(crate) permissions: Vec<String>,
    pub(crate) revoked: bool,
}

/// Credential columns under names that cannot collide with a joined table's.
pub(super) const CREDENTIAL_COLUMNS: &str = "c.id AS cred_id, c.kind AS cred_kind, c.org_id AS cred_org_id, \
    c.project_id AS cred_project_id, c.gateway_id AS cred_gateway_id, c.user_id AS cred_user_id, \
    c.role AS cred_role, c.permissions AS cred_permissions, c.revoked_at AS cred_revoked_at";

pub(super) fn credential_from_row(row: &AnyRow) -> Result<Credential> {
    let kind: String = row.try_get("cred_kind")?;
    let permissions: String = row.try_get("cred_permissions")?;
    let revoked_at: Option<i64> = row.try_get("cred_revoked_at")?;
    Ok(Credential {
        id: row.try_get("cred_id")?,
        kind: CredentialKind::parse(&kind).ok_or_else(|| super::Error::Corrupt(format!("credential kind {kind}")))?,
        org_id: row.try_get("cred_org_id")?,
        project_id: row.try_get("cred_project_id")?,
        gateway_id: row.try_get("cred_gateway_id")?,
        user_id: row.try_get("cred_user_id")?,
        role: row.try_get("cred_role")?,
        permissions: permissions.split(',').filter(|p| !p.is_empty()).map(str::to_owned).collect(),
        revoked: revoked_at.is_some(),
    })
}

/// A tool as registered by a worker for a project.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRecord {
    pub(crate) name: String,
    pub(crate) toolkit_name: String,
    pub(crate) toolkit_version: String,
    pub(crate) description: String,
    pub(crate) input_schema: String,
    /// `None`: a policy this release does not know (a newer worker's, or a
    /// newer coordinator's row); registration refuses it, and a start treats
    /// it as not forbidden.
    pub(crate) background: Option<Background>,
    pub(crate) task_time_input: bool,
    pub(crate) max_attempts: u32,
    pub(crate) max_ttl_ms: Option<i64>,
    /// Served through a remote MCP server (the only kind that may ask for input).
    pub(crate) remote: bool,
    pub(crate) required_client_capabilities: Vec<String>,
    /// The tool declared it cannot be stopped once started: a cancel answers `unsupported`.
    pub(crate) cancel_unsupported: bool,
    /// An administrator disabled it: it starts nothing and takes no input or
    /// cancellation. Registrations never change this.
    pub(crate) disabled: bool,
    pub(crate) metadata: ToolMetadata,
}

/// MCP metadata a tool declared, shown to clients as given: JSON text each,
/// empty when the tool declared none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolMetadata {
    pub(crate) title: String,
    /// A JSON object of behaviour hints (`destructiveHint`, `readOnlyHint`…).
    pub(crate) annotations: String,
    /// A JSON Schema object describing `structuredContent`.
    pub(crate) output_schema: String,
    /// A JSON array of MCP icons.
    pub(crate) icons: String,
}

pub(super) fn tool_from_row(row: &AnyRow) -> Result<ToolRecord> {
    let task_time_input: i64 = row.try_get("task_time_input")?;
    let max_attempts: i64 = row.try_get("max_attempts")?;
    let remote: i64 = row.try_get("remote")?;
    let capabilities: String = row.try_get("required_client_capabilities")?;
    let cancel_unsupported: i64 = row.try_get("cancel_unsupported")?;
    let disabled_at: Option<i64> = row.try_get("disabled_at")?;
    Ok(ToolRecord {
        name: row.try_get("name")?,
        toolkit_name: row.try_get("toolkit_name")?,
        toolkit_version: row.try_get("toolkit_version")?,
        description: row.try_get("description")?,
        input_schema: row.try_get("input_schema")?,
        background: Background::parse(&row.try_get::<String, _>("background")?),
        task_time_input: task_time_input != 0,
        max_attempts: u32::try_from(max_attempts).unwrap_or(1),
        max_ttl_ms: row.try_get("max_ttl_ms")?,
        remote: remote != 0,
        required_client_capabilities: capabilities.split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect(),
        cancel_unsupported: cancel_unsupported != 0,
        disabled: disabled_at.is_some(),
        metadata: ToolMetadata {
            title: row.try_get("title")?,
            annotations: row.try_get("annotations")?,
            output_schema: row.try_get("output_schema")?,
            icons: row.try_get("icons")?,
        },
    })
}

pub(super) const TOOL_COLUMNS: &str = "name, toolkit_name, toolkit_version, description, input_schema, background, \
    task_time_input, max_attempts, max_ttl_ms, remote, required_client_capabilities, cancel_unsupported, disabled_at, \
    title, annotations, output_schema, icons";

impl Store {
    pub async fn create_org(&self, id: &str, name: &str, now: Millis) -> Result<()> {
        sqlx::query("INSERT INTO organizations (id, name, created_at) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(name)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn create_project(&self, id: &str, org_id: &str, name: &str, now: Millis) -> Result<()> {
        sqlx::query("INSERT INTO projects (id, org_id, name, created_at) VALUES ($1, $2, $3, $4)")
            .bind(id)
            .bind(org_id)
            .bind(name)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn create_gateway(&self, id: &str, project_id: &str, name: &str, now: Millis) -> Result<()> {
        sqlx::query("INSERT INTO gateways (id, project_id, name, created_at) VALUES ($1, $2, $3, $4)")
            .bind(id)
            .bind(project_id)
            .bind(name)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The organization a project belongs to, if the project exists.
    pub async fn project_org(&self, project_id: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT org_id FROM projects WHERE id = $1")
            .bind(project_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get("org_id")).transpose()?)
    }

    /// The project a gateway belongs to, if the gateway exists.
    pub(crate) async fn gateway_project(&self, gateway_id: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT project_id FROM gateways WHERE id = $1")
            .bind(gateway_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get("project_id")).transpose()?)
    }

    pub async fn create_credential(&self, c: &NewCredential, now: Millis) -> Result<()> {
        sqlx::query(
            "INSERT INTO credentials (id, token_hash, kind, org_id, project_id, gateway_id, user_id, role, \
             permissions, created_at, worker_group) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&c.id)
        .bind(&c.token_hash)
        .bind(c.kind.as_str())
        .bind(&c.org_id)
        .bind(&c.project_id)
        .bind(&c.gateway_id)
        .bind(&c.user_id)
        .bind(&c.role)
        .bind(c.permissions.join(","))
        .bind(now)
        .bind(&c.worker_group)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The organization and project of credential `id`, if it exists.
    pub(crate) async fn credential_scope(&self, id: &str) -> Result<Option<(String, String)>> {
        let row = sqlx::query("SELECT org_id, project_id FROM credentials WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok((r.try_get("org_id")?, r.try_get("project_id")?))).transpose()
    }

    /// Revokes a credential; returns false when no live credential has that id.
    /// On Postgres the revocation is announced to every coordinator as it
    /// commits (`revocations`), in the same statement.
    pub(crate) async fn revoke_credential(&self, id: &str, now: Millis) -> Result<bool> {
        let revoke = "UPDATE credentials SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL RETURNING id";
        let revoked = match self.dialect {
            Dialect::Postgres => {
                let sql = format!("WITH r AS ({revoke}) SELECT pg_notify($3, id) FROM r");
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(now)
                    .bind(id)
                    .bind(REVOCATION_CHANNEL)
                    .fetch_all(&self.pool)
                    .await?
            }
            Dialect::Sqlite => sqlx::query(revoke).bind(now).bind(id).fetch_all(&self.pool).await?,
        };
        Ok(revoked.len() == 1)
    }

    /// The project's tools callers may use (a disabled tool is not offered).
    pub(crate) async fn list_tools(&self, project_id: &str) -> Result<Vec<ToolRecord>> {
        let sql = format!(
            "SELECT {TOOL_COLUMNS} FROM tools WHERE project_id = $1 AND disabled_at IS NULL ORDER BY position, name"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(project_id).fetch_all(&self.pool).await?;
        rows.iter().map(tool_from_row).collect()
    }

    /// Disables (`Some(now)`) or re-enables (`None`) a tool; false when the project has no such tool.
    pub(crate) async fn set_tool_disabled(
        &self,
        project_id: &str,
        name: &str,
        disabled_at: Option<Millis>,
    ) -> Result<bool> {
        let done = sqlx::query("UPDATE tools SET disabled_at = $1 WHERE project_id = $2 AND name = $3")
            .bind(disabled_at)
            .bind(project_id)
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// One tool of a project, enabled or not.
    pub(crate) async fn tool(&self, project_id: &str, name: &str) -> Result<Option<ToolRecord>> {
        let sql = format!("SELECT {TOOL_COLUMNS} FROM tools WHERE project_id = $1 AND name = $2");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(project_id).bind(name).fetch_optional(&self.pool).await?;
        row.as_ref().map(tool_from_row).transpose()
    }

    /// Records that `worker_id` is connected to `coordinator_id` (replacing an older session).
    pub(crate) async fn upsert_worker(
        &self,
        worker_id: &str,
        project_id: &str,
        coordinator_id: &str,
        now: Millis,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO workers (id, project_id, coordinator_id, connected_at, heartbeat_at) VALUES ($1, $2, $3, $4, $4) \
             ON CONFLICT (id) DO UPDATE SET project_id = excluded.project_id, coordinator_id = excluded.coordinator_id, \
             connected_at = excluded.connected_at, heartbeat_at = excluded.heartbeat_at",
        )
        .bind(worker_id)
        .bind(project_id)
        .bind(coordinator_id)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Of `credential_ids`, those revoked (or gone): their sessions must end.
    pub(crate) async fn revoked_among(&self, credential_ids: &[String]) -> Result<Vec<String>> {
        if credential_ids.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders: Vec<String> = (1..=credential_ids.len()).map(|i| format!("${i}")).collect();
        let sql =
            format!("SELECT id FROM credentials WHERE id IN ({}) AND revoked_at IS NULL", placeholders.join(", "));
        let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql)).persistent(false);
        for id in credential_ids {
            query = query.bind(id);
        }
        let live: std::collections::HashSet<String> = query.fetch_all(&self.pool).await?.into_iter().collect();
        Ok(credential_ids.iter().filter(|id| !live.contains(*id)).cloned().collect())
    }

    /// The advertised URL of the coordinator holding `worker_id`'s session, if any.
    pub(crate) async fn worker_coordinator(&self, worker_id: &str) -> Result<Option<(String, String)>> {
        let row = sqlx::query(
            "SELECT c.id, c.advertise_url FROM workers w JOIN coordinators c ON c.id = w.coordinator_id WHERE w.id = $1",
        )
        .bind(worker_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| Ok((r.try_get("id")?, r.try_get("advertise_url")?))).transpose()
    }

    pub(crate) async fn remove_worker(&self, worker_id: &str, coordinator_id: &str) -> Result<()> {
        sqlx::query("DELETE FROM workers WHERE id = $1 AND coordinator_id = $2")
            .bind(worker_id)
            .bind(coordinator_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub(crate) async fn upsert_coordinator(&self, id: &str, advertise_url: &str, now: Millis) -> Result<()> {
        sqlx::query(
            "INSERT INTO coordinators (id, advertise_url, heartbeat_at) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET advertise_url = excluded.advertise_url, heartbeat_at = excluded.heartbeat_at",
        )
        .bind(id)
        .bind(advertise_url)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records that a legacy MCP session ended; ending it again is a no-op.
    pub(crate) async fn end_mcp_session(&self, session_id: &str, credential_id: &str, now: Millis) -> Result<()> {
        sqlx::query(
            "INSERT INTO mcp_sessions_ended (session_id, credential_id, ended_at) VALUES ($1, $2, $3) \
             ON CONFLICT (session_id) DO NOTHING",
        )
        .bind(session_id)
        .bind(credential_id)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(crate) async fn mcp_session_ended(&self, session_id: &str) -> Result<bool> {
        let row = sqlx::query("SELECT 1 AS ended FROM mcp_sessions_ended WHERE session_id = $1")
            .bind(session_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }
}
