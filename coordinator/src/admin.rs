//! Creating and revoking organizations, projects, gateways and credentials;
//! retention, execution logging and disabled tools. Used by `baton admin` and
//! by `baton dev`'s seeding; tokens are returned once and stored only as
//! hashes. Every change to a credential or a setting is audited, by `cli`.

use crate::audit::{self, Actor, Record, action, outcome};
use crate::authz::{Role, generate_token, hash_token};
use crate::domain::id::random_id;
use crate::store::{self, CredentialKind, NewCredential, Store};
use baton_proto::clock::now_ms;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error("unknown {what} {id:?}")]
    Unknown { what: &'static str, id: String },
    #[error("{0}")]
    Invalid(String),
}

/// A credential just issued: its id (for revocation) and the secret token.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Issued {
    pub(crate) id: String,
    pub token: String,
}

pub const PERMISSIONS: [&str; 3] = ["status", "payload", "cancel"];

pub async fn create_org(store: &Store, name: &str) -> Result<String, Error> {
    let id = random_id("org_", 96);
    store.create_org(&id, name, now_ms()).await?;
    Ok(id)
}

pub async fn create_project(store: &Store, org_id: &str, name: &str) -> Result<String, Error> {
    let id = random_id("prj_", 96);
    store.create_project(&id, org_id, name, now_ms()).await.map_err(|e| match e {
        store::Error::Database(_) => Error::Unknown { what: "organization", id: org_id.to_owned() },
        other => other.into(),
    })?;
    Ok(id)
}

pub async fn create_gateway(store: &Store, project_id: &str, name: &str) -> Result<String, Error> {
    let id = random_id("gw_", 96);
    store.create_gateway(&id, project_id, name, now_ms()).await.map_err(|e| match e {
        store::Error::Database(_) => Error::Unknown { what: "project", id: project_id.to_owned() },
        other => other.into(),
    })?;
    Ok(id)
}

async fn issue(store: &Store, mut c: NewCredential, prefix: &str) -> Result<Issued, Error> {
    c.org_id = store
        .project_org(&c.project_id)
        .await?
        .ok_or_else(|| Error::Unknown { what: "project", id: c.project_id.clone() })?;
    let token = generate_token(prefix);
    c.token_hash = hash_token(&token);
    store.create_credential(&c, now_ms()).await?;
    let what = match c.kind {
        CredentialKind::ApiKey => "API key",
        CredentialKind::EndUser => "end-user token",
        CredentialKind::Worker => "worker token",
    };
    let detail = match (&c.role, c.permissions.is_empty()) {
        (Some(role), true) => format!("{what}, role {role}"),
        (Some(role), false) => format!("{what}, role {role}, permissions {}", c.permissions.join(",")),
        (None, _) => what.to_owned(),
    };
    let record = Record {
        org_id: &c.org_id,
        project_id: Some(&c.project_id),
        action: action::CREDENTIAL_CREATE,
        target: Some(&c.id),
        outcome: outcome::ALLOWED,
        detail: Some(detail),
    };
    audit::append(store, &Actor::cli(), record).await?;
    Ok(Issued { id: c.id, token })
}

fn credential(kind: CredentialKind, project_id: &str) -> NewCredential {
    NewCredential {
        id: random_id("cred_", 96),
        token_hash: Vec::new(),
        kind,
        org_id: String::new(),
        project_id: project_id.to_owned(),
        gateway_id: None,
        user_id: None,
        role: None,
        permissions: Vec::new(),
        worker_group: None,
    }
}

pub async fn issue_end_user_token(store: &Store, gateway_id: &str, user_id: &str) -> Result<Issued, Error> {
    if user_id.is_empty() || user_id.len() > 512 {
        return Err(Error::Invalid("user id must be 1 to 512 characters".into()));
    }
    let project_id = store
        .gateway_project(gateway_id)
        .await?
        .ok_or_else(|| Error::Unknown { what: "gateway", id: gateway_id.to_owned() })?;
    let mut c = credential(CredentialKind::EndUser, &project_id);
    c.gateway_id = Some(gateway_id.to_owned());
    c.user_id = Some(user_id.to_owned());
    issue(store, c, "bteu_").await
}

pub async fn issue_api_key(
    store: &Store,
    project_id: &str,
    role: Role,
    permissions: &[String],
) -> Result<Issued, Error> {
    if let Some(p) = permissions.iter().find(|p| !PERMISSIONS.contains(&p.as_str())) {
        return Err(Error::Invalid(format!("unknown permission {p:?} (expected status, payload or cancel)")));
    }
    let mut c = credential(CredentialKind::ApiKey, project_id);
    c.role = Some(role.as_str().to_owned());
    c.permissions = permissions.to_vec();
    issue(store, c, "btk_").await
}

/// A worker token. Alone it is a new worker identity, named after the token's
/// id; `same_as` (a live worker token of the project) makes it another token
/// of that identity instead, so tokens rotate without the identity's tools or
/// worker ids changing hands.
pub async fn issue_worker_token(store: &Store, project_id: &str, same_as: Option<&str>) -> Result<Issued, Error> {
    let mut c = credential(CredentialKind::Worker, project_id);
    c.worker_group = Some(match same_as {
        None => c.id.clone(),
        Some(other) => {
            let unknown = || Error::Unknown { what: "live worker token of this project", id: other.to_owned() };
            let group = store.worker_group(other).await?.ok_or_else(unknown)?;
            let live = store.revoked_among(&[other.to_owned()]).await?.is_empty();
            let (_, project) = store.credential_scope(other).await?.ok_or_else(unknown)?;
            if !live || project != project_id {
                return Err(unknown());
            }
            group
        }
    });
    issue(store, c, "btw_").await
}

/// Gives a project's tool to the worker identity that token `to` belongs to:
/// the only way a tool changes hands while its owner has a live token. The
/// previous owner's sessions that serve it end within a heartbeat.
pub async fn transfer_tool(store: &Store, project_id: &str, tool: &str, to: &str) -> Result<(), Error> {
    let org_id = store
        .project_org(project_id)
        .await?
        .ok_or_else(|| Error::Unknown { what: "project", id: project_id.into() })?;
    let unknown = || Error::Unknown { what: "live worker token of this project", id: to.to_owned() };
    let group = store.worker_group(to).await?.ok_or_else(unknown)?;
    let (_, project) = store.credential_scope(to).await?.ok_or_else(unknown)?;
    if project != project_id || !store.revoked_among(&[to.to_owned()]).await?.is_empty() {
        return Err(unknown());
    }
    let Some(previous) = store.set_tool_owner(project_id, tool, &group).await? else {
        return Err(Error::Unknown { what: "tool", id: tool.to_owned() });
    };
    let from = if previous.is_empty() { "nobody" } else { previous.as_str() };
    let record = Record {
        org_id: &org_id,
        project_id: Some(project_id),
        action: action::TOOL_TRANSFER,
        target: Some(tool),
        outcome: outcome::ALLOWED,
        detail: Some(format!("owner {from} -> {group}")),
    };
    audit::append(store, &Actor::cli(), record).await?;
    Ok(())
}

pub async fn revoke(store: &Store, credential_id: &str) -> Result<(), Error> {
    let unknown = || Error::Unknown { what: "live credential", id: credential_id.to_owned() };
    let (org_id, project_id) = store.credential_scope(credential_id).await?.ok_or_else(unknown)?;
    if !store.revoke_credential(credential_id, now_ms()).await? {
        return Err(unknown());
    }
    let record = Record {
        org_id: &org_id,
        project_id: Some(&project_id),
        action: action::CREDENTIAL_REVOKE,
        target: Some(credential_id),
        outcome: outcome::ALLOWED,
        detail: None,
    };
    audit::append(store, &Actor::cli(), record).await?;
    Ok(())
}

/// Where a retention window is set.
#[derive(Clone, Copy, Debug)]
pub enum RetentionScope<'a> {
    Organization(&'a str),
    Project(&'a str),
}

/// Sets (or with `None` clears) an organization's default or a project's
/// override; `default_ms` is the configured window under both.
pub async fn set_retention(
    store: &Store,
    scope: RetentionScope<'_>,
    retention_ms: Option<i64>,
    default_ms: i64,
) -> Result<(), Error> {
    crate::engine::settings::check_retention(retention_ms).map_err(|e| Error::Invalid(e.to_string()))?;
    let now = now_ms();
    let (org_id, project_id) = match scope {
        RetentionScope::Organization(org) => {
            if !store.set_organization_retention(org, retention_ms, default_ms, now).await? {
                return Err(Error::Unknown { what: "organization", id: org.to_owned() });
            }
            (org.to_owned(), None)
        }
        RetentionScope::Project(project) => {
            let unknown = || Error::Unknown { what: "project", id: project.to_owned() };
            let org = store.project_org(project).await?.ok_or_else(unknown)?;
            if !store.set_project_retention(&org, project, retention_ms, default_ms, now).await? {
                return Err(unknown());
            }
            (org, Some(project))
        }
    };
    let detail = match retention_ms {
        Some(ms) => format!("retention set to {} s", ms / 1000),
        None => "retention cleared".to_owned(),
    };
    let record = Record {
        org_id: &org_id,
        project_id,
        action: action::RETENTION_SET,
        target: Some(project_id.unwrap_or(&org_id)),
        outcome: outcome::ALLOWED,
        detail: Some(detail),
    };
    audit::append(store, &Actor::cli(), record).await?;
    Ok(())
}

/// Turns an organization's execution logging on or off; off deletes its
/// history (see `Store::set_execution_logging`).
pub async fn set_execution_logging(store: &Store, org_id: &str, on: bool, default_ms: i64) -> Result<(), Error> {
    if !store.set_execution_logging(org_id, on, default_ms, now_ms()).await? {
        return Err(Error::Unknown { what: "organization", id: org_id.to_owned() });
    }
    let detail = if on { "execution logging on" } else { "execution logging off; history deleted" };
    let record = Record {
        org_id,
        project_id: None,
        action: action::EXECUTION_LOGGING_SET,
        target: Some(org_id),
        outcome: outcome::ALLOWED,
        detail: Some(detail.to_owned()),
    };
    audit::append(store, &Actor::cli(), record).await?;
    Ok(())
}

/// Disables a project's tool (it starts nothing, takes no input or
/// cancellation) or enables it again.
pub async fn set_tool_disabled(store: &Store, project_id: &str, tool: &str, disabled: bool) -> Result<(), Error> {
    let org_id = store
        .project_org(project_id)
        .await?
        .ok_or_else(|| Error::Unknown { what: "project", id: project_id.into() })?;
    if !store.set_tool_disabled(project_id, tool, disabled.then(now_ms)).await? {
        return Err(Error::Unknown { what: "tool", id: tool.to_owned() });
    }
    let record = Record {
        org_id: &org_id,
        project_id: Some(project_id),
        action: if disabled { action::TOOL_DISABLE } else { action::TOOL_ENABLE },
        target: Some(tool),
        outcome: outcome::ALLOWED,
        detail: None,
    };
    audit::append(store, &Actor::cli(), record).await?;
    Ok(())
}
