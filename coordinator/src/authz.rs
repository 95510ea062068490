//! Who is calling and what they may do. Credentials are opaque bearer tokens,
//! stored only as SHA-256 hashes; every decision is made here, re-checked on
//! every call (so revocation takes effect at once).

use crate::store::{Credential, CredentialKind, ExecutionRecord};
use base64::Engine as _;
use sha2::{Digest, Sha256};

pub(crate) mod admin;
pub(crate) mod history;
pub(crate) mod operator;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("missing or invalid credential")]
    Unauthenticated,
    #[error("{0}")]
    Forbidden(&'static str),
    /// Unknown, unauthorized and expired executions are indistinguishable.
    #[error("not found")]
    NotFound,
}

/// The authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Principal {
    EndUser { credential_id: String, org_id: String, project_id: String, gateway_id: String, user_id: String },
    ApiKey { credential_id: String, org_id: String, project_id: String, role: Role, permissions: Vec<String> },
    Worker { credential_id: String, org_id: String, project_id: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Admin,
    Member,
    ReadOnly,
}

impl Role {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "admin" => Some(Role::Admin),
            "member" => Some(Role::Member),
            "read_only" => Some(Role::ReadOnly),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Member => "member",
            Role::ReadOnly => "read_only",
        }
    }
}

/// A fresh token: 256 random bits, URL-safe base64, with a kind prefix.
pub(crate) fn generate_token(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    crate::domain::id::fill_random(&mut bytes);
    format!("{prefix}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

pub(crate) fn hash_token(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Extracts the token from an `authorization: Bearer …` value.
pub(crate) fn bearer_token(header: Option<&str>) -> Option<&str> {
    let (scheme, token) = header?.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| token.trim())
}

impl Principal {
    pub(crate) fn from_credential(c: Credential) -> Result<Self, Error> {
        if c.revoked {
            return Err(Error::Unauthenticated);
        }
        Ok(match c.kind {
            CredentialKind::EndUser => Principal::EndUser {
                credential_id: c.id,
                org_id: c.org_id,
                project_id: c.project_id,
                gateway_id: c.gateway_id.ok_or(Error::Unauthenticated)?,
                user_id: c.user_id.ok_or(Error::Unauthenticated)?,
            },
            CredentialKind::ApiKey => Principal::ApiKey {
                credential_id: c.id,
                org_id: c.org_id,
                project_id: c.project_id,
                role: c.role.as_deref().and_then(Role::parse).ok_or(Error::Unauthenticated)?,
                permissions: c.permissions,
            },
            CredentialKind::Worker => {
                Principal::Worker { credential_id: c.id, org_id: c.org_id, project_id: c.project_id }
            }
        })
    }

    pub(crate) fn credential_id(&self) -> &str {
        match self {
            Principal::EndUser { credential_id, .. }
            | Principal::ApiKey { credential_id, .. }
            | Principal::Worker { credential_id, .. } => credential_id,
        }
    }

    pub(crate) fn org_id(&self) -> &str {
        match self {
            Principal::EndUser { org_id, .. } | Principal::ApiKey { org_id, .. } | Principal::Worker { org_id, .. } => {
                org_id
            }
        }
    }

    pub(crate) fn project_id(&self) -> &str {
        match self {
            Principal::EndUser { project_id, .. }
            | Principal::ApiKey { project_id, .. }
            | Principal::Worker { project_id, .. } => project_id,
        }
    }

    /// The caller must belong to the org and project named in the path. A
    /// mismatch is a not-found so ids never leak across projects.
    pub(crate) fn in_scope(&self, org_id: &str, project_id: &str) -> Result<(), Error> {
        if self.org_id() == org_id && self.project_id() == project_id { Ok(()) } else { Err(Error::NotFound) }
    }

    /// Owner lifecycle access: the end user it runs for (any of their tokens, any
    /// surface), or the API key that started it on that user's behalf.
    pub(crate) fn may_own(&self, e: &ExecutionRecord) -> bool {
        match self {
            Principal::EndUser { project_id, user_id, .. } => e.project_id == *project_id && e.user_id == *user_id,
            Principal::ApiKey { credential_id, project_id, .. } => {
                e.project_id == *project_id && e.started_by == *credential_id
            }
            Principal::Worker { .. } => false,
        }
    }

    /// Starting, answering and cancelling need more than read-only.
    pub(crate) fn may_act(&self) -> Result<(), Error> {
        match self {
            Principal::EndUser { .. } | Principal::ApiKey { role: Role::Admin | Role::Member, .. } => Ok(()),
            Principal::ApiKey { role: Role::ReadOnly, .. } => Err(Error::Forbidden("a read-only key cannot do this")),
            Principal::Worker { .. } => Err(Error::Forbidden("a worker credential cannot do this")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_hash_stably() {
        let a = generate_token("bt_");
        let b = generate_token("bt_");
        assert_ne!(a, b);
        assert!(a.len() >= 3 + 43);
        assert_eq!(hash_token(&a), hash_token(&a));
        assert_ne!(hash_token(&a), hash_token(&b));
    }

    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer_token(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(Some("Basic abc")), None);
        assert_eq!(bearer_token(Some("Bearer ")), None);
        assert_eq!(bearer_token(None), None);
    }
}
