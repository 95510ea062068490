//! The identity lists `baton admin list-…` prints: organizations, projects,
//! gateways and credentials, oldest first. A credential is listed by its
//! metadata only; its token hash is never read here, so no listing can leak it.
//! An empty filter (`''`) means "all": a typed text parameter, where a NULL one
//! would leave Postgres guessing its type.

use super::{Result, Store};
use crate::domain::Millis;
use sqlx::Row;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrgRow {
    pub id: String,
    pub name: String,
    pub created_at: Millis,
    /// The organization's own retention window, if set.
    pub retention_ms: Option<i64>,
    pub execution_logging: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectRow {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub created_at: Millis,
    pub retention_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayRow {
    pub id: String,
    pub project_id: String,
    pub name: String,
    pub created_at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialRow {
    pub id: String,
    /// `end_user`, `api_key` or `worker`.
    pub kind: String,
    pub org_id: String,
    pub project_id: String,
    pub gateway_id: Option<String>,
    pub user_id: Option<String>,
    pub role: Option<String>,
    pub permissions: Vec<String>,
    pub created_at: Millis,
    pub revoked_at: Option<Millis>,
    /// A worker token's identity (its own id, or the token it was made `--same-as`).
    pub worker_group: Option<String>,
}

impl Store {
    pub async fn list_orgs(&self) -> Result<Vec<OrgRow>> {
        let rows = sqlx::query(
            "SELECT id, name, created_at, retention_ms, execution_logging FROM organizations ORDER BY created_at, id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(OrgRow {
                    id: r.try_get("id")?,
                    name: r.try_get("name")?,
                    created_at: r.try_get("created_at")?,
                    retention_ms: r.try_get("retention_ms")?,
                    execution_logging: r.try_get::<i64, _>("execution_logging")? != 0,
                })
            })
            .collect()
    }

    /// Every project, or those of `org_id`.
    pub async fn list_projects(&self, org_id: Option<&str>) -> Result<Vec<ProjectRow>> {
        let rows = sqlx::query(
            "SELECT id, org_id, name, created_at, retention_ms FROM projects \
             WHERE ($1 = '' OR org_id = $1) ORDER BY created_at, id",
        )
        .bind(org_id.unwrap_or_default())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ProjectRow {
                    id: r.try_get("id")?,
                    org_id: r.try_get("org_id")?,
                    name: r.try_get("name")?,
                    created_at: r.try_get("created_at")?,
                    retention_ms: r.try_get("retention_ms")?,
                })
            })
            .collect()
    }

    /// Every gateway, or those of `project_id`.
    pub async fn list_gateways(&self, project_id: Option<&str>) -> Result<Vec<GatewayRow>> {
        let rows = sqlx::query(
            "SELECT id, project_id, name, created_at FROM gateways \
             WHERE ($1 = '' OR project_id = $1) ORDER BY created_at, id",
        )
        .bind(project_id.unwrap_or_default())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(GatewayRow {
                    id: r.try_get("id")?,
                    project_id: r.try_get("project_id")?,
                    name: r.try_get("name")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    /// Every credential, or those of `project_id`, revoked ones included
    /// (with their revocation time). Never the token hash.
    pub async fn list_credentials(&self, project_id: Option<&str>) -> Result<Vec<CredentialRow>> {
        let rows = sqlx::query(
            "SELECT id, kind, org_id, project_id, gateway_id, user_id, role, permissions, created_at, revoked_at, \
             worker_group \
             FROM credentials WHERE ($1 = '' OR project_id = $1) ORDER BY created_at, id",
        )
        .bind(project_id.unwrap_or_default())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let permissions: String = r.try_get("permissions")?;
                Ok(CredentialRow {
                    id: r.try_get("id")?,
                    kind: r.try_get("kind")?,
                    org_id: r.try_get("org_id")?,
                    project_id: r.try_get("project_id")?,
                    gateway_id: r.try_get("gateway_id")?,
                    user_id: r.try_get("user_id")?,
                    role: r.try_get("role")?,
                    permissions: permissions.split(',').filter(|p| !p.is_empty()).map(str::to_owned).collect(),
                    created_at: r.try_get("created_at")?,
                    revoked_at: r.try_get("revoked_at")?,
                    worker_group: r.try_get("worker_group")?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::contract_tests::backends;
    use super::super::{CredentialKind, NewCredential};

    #[tokio::test]
    async fn lists_filter_by_parent_and_show_revocation() {
        for b in backends().await {
            let (s, n) = (&b.store, b.name);
            s.create_org("org_1", "one", 1).await.expect("org");
            s.create_org("org_2", "two", 2).await.expect("org");
            s.create_project("p1", "org_1", "a", 3).await.expect("project");
            s.create_project("p2", "org_2", "b", 4).await.expect("project");
            s.create_gateway("gw1", "p1", "g", 5).await.expect("gateway");
            for (id, project, at) in [("c1", "p1", 6), ("c2", "p1", 7), ("c3", "p2", 8)] {
                let c = NewCredential {
                    id: id.into(),
                    token_hash: id.as_bytes().to_vec(),
                    kind: CredentialKind::ApiKey,
                    org_id: if project == "p1" { "org_1" } else { "org_2" }.into(),
                    project_id: project.into(),
                    gateway_id: None,
                    user_id: None,
                    role: Some("admin".into()),
                    permissions: vec!["status".into(), "cancel".into()],
                    worker_group: None,
                };
                s.create_credential(&c, at).await.expect("credential");
            }
            assert!(s.revoke_credential("c2", 9).await.expect("revoke"));
            // Every backend holds the fixture's org, project and credential too.
            let mut orgs = s.list_orgs().await.expect("orgs");
            orgs.retain(|o| o.id != "org_fixture");
            assert_eq!(orgs.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(), ["org_1", "org_2"], "{n}");
            assert!(orgs[0].execution_logging && orgs[0].retention_ms.is_none(), "{n}");
            let projects = s.list_projects(Some("org_2")).await.expect("projects");
            assert_eq!(projects.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["p2"], "{n}");
            assert_eq!(s.list_projects(None).await.expect("projects").len(), 3, "{n}: two and the fixture's");
            assert_eq!(s.list_gateways(Some("p2")).await.expect("gateways"), [], "{n}");
            assert_eq!(s.list_gateways(None).await.expect("gateways")[0].project_id, "p1", "{n}");
            let creds = s.list_credentials(Some("p1")).await.expect("credentials");
            assert_eq!(
                creds.iter().map(|c| (c.id.as_str(), c.revoked_at)).collect::<Vec<_>>(),
                [("c1", None), ("c2", Some(9))],
                "{n}"
            );
            assert_eq!(creds[0].permissions, ["status", "cancel"], "{n}");
            assert_eq!(s.list_credentials(None).await.expect("credentials").len(), 4, "{n}: three and the fixture's");
        }
    }
}
