//! Who a project's tools belong to. A worker identity is a group of worker
//! tokens (`credentials.worker_group`, named after its first token): the
//! identity that first registers a name in a project owns it. Another
//! identity's registration of that name is refused and writes nothing. The
//! owner is gone, and the name claimable, once none of its tokens is live.
//! Only `baton admin transfer-tool` moves a live owner's tool.

use super::identity::{TOOL_COLUMNS, ToolRecord, tool_from_row};
use super::{Result, Store};
use crate::domain::{Background, Millis};
use sqlx::Row;

/// Whether identity `tools.owner` still has a live token (SQL, inside a `tools` query).
const OWNER_LIVE: &str =
    "EXISTS (SELECT 1 FROM credentials c WHERE c.worker_group = tools.owner AND c.revoked_at IS NULL)";

/// What a registration did to one tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ToolChange {
    /// A name the project had not seen.
    Added,
    /// Taken over from an owner with no live token left, or unowned (`from` empty).
    Claimed {
        from: String,
    },
    /// The owner changed its definition.
    Changed,
    Unchanged,
}

/// A registration refused: `tool` belongs to another live identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OwnedElsewhere {
    pub(crate) tool: String,
}

impl Store {
    /// The identity of worker credential `credential_id`, if it is one.
    pub(crate) async fn worker_group(&self, credential_id: &str) -> Result<Option<String>> {
        let group: Option<Option<String>> =
            sqlx::query_scalar("SELECT worker_group FROM credentials WHERE id = $1 AND kind = 'worker'")
                .bind(credential_id)
                .fetch_optional(&self.pool)
                .await?;
        // A worker credential always has one; an empty column would be a
        // credential written around `baton admin`, which stands alone.
        Ok(group.map(|g| g.filter(|g| !g.is_empty()).unwrap_or_else(|| credential_id.to_owned())))
    }

    /// Binds `worker_id` to identity `group` unless another identity holds it:
    /// true when the id is (now) this identity's. Leases name the worker id, so
    /// an id claimed by another identity could otherwise take over its leases;
    /// a rotated token of the same identity takes the id over.
    pub(crate) async fn bind_worker(
        &self,
        worker_id: &str,
        credential_id: &str,
        group: &str,
        project_id: &str,
        now: Millis,
    ) -> Result<bool> {
        sqlx::query(
            "INSERT INTO worker_bindings (worker_id, credential_id, project_id, bound_at, worker_group) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (worker_id) DO NOTHING",
        )
        .bind(worker_id)
        .bind(credential_id)
        .bind(project_id)
        .bind(now)
        .bind(group)
        .execute(&self.pool)
        .await?;
        let holder: Option<String> =
            sqlx::query_scalar("SELECT worker_group FROM worker_bindings WHERE worker_id = $1")
                .bind(worker_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(holder.as_deref() == Some(group))
    }

    /// Records `tools` as identity `owner`'s, all or none: a name another live
    /// identity owns refuses the whole registration. Returns what changed, per
    /// tool, for the audit log.
    pub(crate) async fn register_tools(
        &self,
        project_id: &str,
        owner: &str,
        tools: &[ToolRecord],
        now: Millis,
    ) -> Result<std::result::Result<Vec<(String, ToolChange)>, OwnedElsewhere>> {
        let mut tx = self.begin().await?;
        let mut changes = Vec::with_capacity(tools.len());
        let existing_sql = format!("SELECT {TOOL_COLUMNS}, owner FROM tools WHERE project_id = $1 AND name = $2");
        for (position, t) in tools.iter().enumerate() {
            let row = sqlx::query(sqlx::AssertSqlSafe(existing_sql.as_str()))
                .bind(project_id)
                .bind(&t.name)
                .fetch_optional(&mut *tx)
                .await?;
            let previous = match row {
                None => None,
                Some(row) => {
                    let mut old = tool_from_row(&row)?;
                    old.disabled = t.disabled;
                    Some((row.try_get::<String, _>("owner")?, old))
                }
            };
            // The ownership rule lives in the write itself, so two identities
            // registering at once cannot both win; the read above only says
            // what changed.
            let upsert = format!(
                "INSERT INTO tools (project_id, name, toolkit_name, toolkit_version, description, input_schema, \
                 background, task_time_input, max_attempts, max_ttl_ms, updated_at, position, remote, \
                 required_client_capabilities, cancel_unsupported, title, annotations, output_schema, icons, owner) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) \
                 ON CONFLICT (project_id, name) DO UPDATE SET toolkit_name = excluded.toolkit_name, \
                 toolkit_version = excluded.toolkit_version, description = excluded.description, \
                 input_schema = excluded.input_schema, background = excluded.background, \
                 task_time_input = excluded.task_time_input, max_attempts = excluded.max_attempts, \
                 max_ttl_ms = excluded.max_ttl_ms, updated_at = excluded.updated_at, position = excluded.position, \
                 remote = excluded.remote, required_client_capabilities = excluded.required_client_capabilities, \
                 cancel_unsupported = excluded.cancel_unsupported, title = excluded.title, \
                 annotations = excluded.annotations, output_schema = excluded.output_schema, icons = excluded.icons, \
                 owner = excluded.owner \
                 WHERE tools.owner = excluded.owner OR tools.owner = '' OR NOT {OWNER_LIVE}"
            );
            let done = sqlx::query(sqlx::AssertSqlSafe(upsert))
                .bind(project_id)
                .bind(&t.name)
                .bind(&t.toolkit_name)
                .bind(&t.toolkit_version)
                .bind(&t.description)
                .bind(&t.input_schema)
                .bind(t.background.map_or("", Background::as_str))
                .bind(i64::from(t.task_time_input))
                .bind(i64::from(t.max_attempts))
                .bind(t.max_ttl_ms)
                .bind(now)
                .bind(position as i64)
                .bind(i64::from(t.remote))
                .bind(t.required_client_capabilities.join(","))
                .bind(i64::from(t.cancel_unsupported))
                .bind(&t.metadata.title)
                .bind(&t.metadata.annotations)
                .bind(&t.metadata.output_schema)
                .bind(&t.metadata.icons)
                .bind(owner)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() != 1 {
                return Ok(Err(OwnedElsewhere { tool: t.name.clone() }));
            }
            let change = match previous {
                None => ToolChange::Added,
                Some((held_by, old)) if held_by == owner => {
                    if old == *t {
                        ToolChange::Unchanged
                    } else {
                        ToolChange::Changed
                    }
                }
                Some((held_by, _)) => ToolChange::Claimed { from: held_by },
            };
            changes.push((t.name.clone(), change));
        }
        self.commit(tx).await?;
        Ok(Ok(changes))
    }

    /// Every tool of the project with its owner (empty: unowned).
    pub(crate) async fn tool_owners(&self, project_id: &str) -> Result<Vec<(String, String)>> {
        let rows = sqlx::query("SELECT name, owner FROM tools WHERE project_id = $1")
            .bind(project_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok((r.try_get("name")?, r.try_get("owner")?))).collect()
    }

    /// Gives tool `name` of the project to identity `owner`; the previous
    /// owner, or `None` when the project has no such tool.
    pub(crate) async fn set_tool_owner(&self, project_id: &str, name: &str, owner: &str) -> Result<Option<String>> {
        let mut tx = self.begin().await?;
        let previous: Option<String> =
            sqlx::query_scalar("SELECT owner FROM tools WHERE project_id = $1 AND name = $2")
                .bind(project_id)
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
        if previous.is_some() {
            sqlx::query("UPDATE tools SET owner = $1 WHERE project_id = $2 AND name = $3")
                .bind(owner)
                .bind(project_id)
                .bind(name)
                .execute(&mut *tx)
                .await?;
        }
        self.commit(tx).await?;
        Ok(previous)
    }
}

#[cfg(test)]
mod tests {
    use super::super::contract_tests::backends;
    use super::super::{CredentialKind, NewCredential, ToolRecord};
    use super::{OwnedElsewhere, ToolChange};

    fn echo(description: &str) -> ToolRecord {
        ToolRecord {
            toolkit_name: "Demo".into(),
            description: description.into(),
            background: Some(crate::domain::Background::Optional),
            ..super::super::contract_tests::tool_record("Demo.Echo")
        }
    }

    fn worker(id: &str, group: &str) -> NewCredential {
        NewCredential {
            id: id.into(),
            token_hash: id.as_bytes().to_vec(),
            kind: CredentialKind::Worker,
            org_id: "o".into(),
            project_id: "p".into(),
            gateway_id: None,
            user_id: None,
            role: None,
            permissions: Vec::new(),
            worker_group: Some(group.into()),
        }
    }

    #[tokio::test]
    async fn a_tool_is_its_first_identitys_until_that_identity_has_no_live_token() {
        for b in backends().await {
            let (n, s) = (b.name, &b.store);
            s.create_org("o", "o", 0).await.expect("org");
            s.create_project("p", "o", "p", 0).await.expect("project");
            for (id, group) in [("cred_a", "cred_a"), ("cred_a2", "cred_a"), ("cred_b", "cred_b")] {
                s.create_credential(&worker(id, group), 0).await.expect("credential");
            }
            assert_eq!(s.worker_group("cred_a2").await.expect("group").as_deref(), Some("cred_a"), "{n}");
            let register = |owner: &'static str, t: ToolRecord| async move {
                s.register_tools("p", owner, &[t], 1).await.expect("register")
            };
            let change = |c: ToolChange| Ok(vec![("Demo.Echo".to_owned(), c)]);
            let refused = Err(OwnedElsewhere { tool: "Demo.Echo".into() });
            assert_eq!(register("cred_a", echo("echo")).await, change(ToolChange::Added), "{n}");
            assert_eq!(register("cred_a", echo("echo")).await, change(ToolChange::Unchanged), "{n}");
            assert_eq!(register("cred_a", echo("echo v2")).await, change(ToolChange::Changed), "{n}");
            assert_eq!(register("cred_b", echo("HIJACKED")).await, refused, "{n}");
            s.revoke_credential("cred_a", 2).await.expect("revoke");
            assert_eq!(register("cred_b", echo("HIJACKED")).await, refused, "{n}: the rotated token is live");
            let description: String = sqlx::query_scalar("SELECT description FROM tools WHERE name = 'Demo.Echo'")
                .fetch_one(&s.pool)
                .await
                .expect("tool");
            assert_eq!(description, "echo v2", "{n}: a refused registration writes nothing");
            s.revoke_credential("cred_a2", 3).await.expect("revoke");
            let claimed = change(ToolChange::Claimed { from: "cred_a".into() });
            assert_eq!(register("cred_b", echo("echo b")).await, claimed, "{n}: the owner is gone");
            assert_eq!(s.set_tool_owner("p", "Demo.Echo", "").await.expect("set"), Some("cred_b".into()), "{n}");
            let unowned = change(ToolChange::Claimed { from: String::new() });
            assert_eq!(register("cred_a", echo("echo")).await, unowned, "{n}: an unowned tool is claimed");
            assert_eq!(s.set_tool_owner("p", "Nope", "cred_a").await.expect("set"), None, "{n}");
            assert_eq!(s.tool_owners("p").await.expect("owners"), [("Demo.Echo".to_owned(), "cred_a".to_owned())]);
        }
    }
}
