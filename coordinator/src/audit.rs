//! The audit trail: who did what to which target, when, and how it ended.
//! Every operator operation and every administrative change is appended,
//! including refusals, before its answer leaves the coordinator: an operation
//! whose row cannot be written fails rather than go unrecorded. Refusals are
//! recorded for callers of the project they tried; a caller of another project
//! gets the uniform not-found and leaves no row there.

use crate::authz::Principal;
use crate::domain::id::random_id;
use crate::engine::now_ms;
use crate::store::{self, AuditEntry, Store};

/// How long audit rows are kept: longer than any execution's history, so an
/// audit period outlives the runs it covers.
pub const RETENTION_MS: i64 = 400 * 86_400_000;

/// Who acted: a credential, or `baton admin` at a terminal (which holds the
/// database itself, so it has no credential).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub id: String,
    pub kind: &'static str,
}

impl Actor {
    pub fn of(p: &Principal) -> Actor {
        let kind = match p {
            Principal::ApiKey { .. } => "api_key",
            Principal::EndUser { .. } => "end_user",
            Principal::Worker { .. } => "worker",
        };
        Actor { id: p.credential_id().to_owned(), kind }
    }

    pub fn cli() -> Actor {
        Actor { id: "cli".into(), kind: "cli" }
    }
}

/// The actions the log records; README lists them.
pub mod action {
    pub const OPERATOR_LIST: &str = "operator.list";
    pub const OPERATOR_STATUS: &str = "operator.status";
    pub const OPERATOR_PAYLOAD: &str = "operator.payload";
    pub const OPERATOR_CANCEL: &str = "operator.cancel";
    pub const HISTORY_REVEAL: &str = "history.reveal";
    pub const RETENTION_SET: &str = "retention.set";
    pub const EXECUTION_LOGGING_SET: &str = "execution_logging.set";
    pub const CREDENTIAL_CREATE: &str = "credential.create";
    pub const CREDENTIAL_REVOKE: &str = "credential.revoke";
    pub const TOOL_DISABLE: &str = "tool.disable";
    pub const TOOL_ENABLE: &str = "tool.enable";
}

/// The outcomes besides an operation's own (a cancel's outcome, for instance).
pub mod outcome {
    pub const ALLOWED: &str = "allowed";
    pub const REFUSED: &str = "refused";
    pub const NOT_FOUND: &str = "not_found";
}

/// One thing to record.
#[derive(Clone, Debug)]
pub struct Record<'a> {
    pub org_id: &'a str,
    /// `None` for an organization-wide change.
    pub project_id: Option<&'a str>,
    pub action: &'static str,
    pub target: Option<&'a str>,
    pub outcome: &'a str,
    /// Why, for a refusal; the new value, for a change. Never a payload or a secret.
    pub detail: Option<String>,
}

/// Appends `r`, done by `actor`, now.
pub async fn append(store: &Store, actor: &Actor, r: Record<'_>) -> Result<(), store::Error> {
    store
        .append_audit(&AuditEntry {
            id: random_id("aud_", 96),
            org_id: r.org_id.to_owned(),
            project_id: r.project_id.map(str::to_owned),
            at: now_ms(),
            actor_id: actor.id.clone(),
            actor_kind: actor.kind.to_owned(),
            action: r.action.to_owned(),
            target: r.target.map(str::to_owned),
            outcome: r.outcome.to_owned(),
            detail: r.detail,
        })
        .await
}
