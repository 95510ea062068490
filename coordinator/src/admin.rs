//! Creating and revoking organizations, projects, gateways and credentials.
//! Used by `baton admin` and by `baton dev`'s seeding; tokens are returned once
//! and stored only as hashes.

use crate::authz::{Role, generate_token, hash_token};
use crate::domain::id::random_id;
use crate::engine::now_ms;
use crate::store::{self, CredentialKind, NewCredential, Store};

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
    pub id: String,
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

pub async fn issue_worker_token(store: &Store, project_id: &str) -> Result<Issued, Error> {
    issue(store, credential(CredentialKind::Worker, project_id), "btw_").await
}

pub async fn revoke(store: &Store, credential_id: &str) -> Result<(), Error> {
    if store.revoke_credential(credential_id, now_ms()).await? {
        Ok(())
    } else {
        Err(Error::Unknown { what: "live credential", id: credential_id.to_owned() })
    }
}
