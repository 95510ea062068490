//! The audit trail: who did what to which target, when, and how it ended.
//! Every operator operation and every administrative change is appended,
//! including refusals, before its answer leaves the coordinator: an operation
//! whose row cannot be written fails rather than go unrecorded. Refusals are
//! recorded for callers of the project they tried; a caller of another project
//! gets the uniform not-found and leaves no row there.

use crate::authz::Principal;
use crate::domain::id::random_id;
use crate::store::{self, AuditEntry, Store};
use baton_proto::clock::now_ms;

/// How long audit rows are kept: longer than any execution's history, so an
/// audit period outlives the runs it covers.
pub(crate) const RETENTION_MS: i64 = 400 * 86_400_000;

/// Who acted: a credential, or `baton admin` at a terminal (which holds the
/// database itself, so it has no credential).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub(crate) id: String,
    pub(crate) kind: ActorKind,
}

/// What kind of caller acted: a row's `actor_kind`, stored as `as_str` spells
/// it. On the wire and in REST it stays text (decision 0051): rows are read
/// back as written, a newer coordinator's kind included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ActorKind {
    ApiKey,
    /// A person signed in with the OpenID provider (engine/people.rs).
    Person,
    EndUser,
    Worker,
    Cli,
}

impl ActorKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ActorKind::ApiKey => "api_key",
            ActorKind::Person => "person",
            ActorKind::EndUser => "end_user",
            ActorKind::Worker => "worker",
            ActorKind::Cli => "cli",
        }
    }
}

impl Actor {
    pub(crate) fn of(p: &Principal) -> Actor {
        let kind = match p {
            Principal::ApiKey { credential_id, .. } if credential_id.starts_with("person:") => ActorKind::Person,
            Principal::ApiKey { .. } => ActorKind::ApiKey,
            Principal::EndUser { .. } => ActorKind::EndUser,
            Principal::Worker { .. } => ActorKind::Worker,
        };
        Actor { id: p.credential_id().to_owned(), kind }
    }

    pub fn cli() -> Actor {
        Actor { id: "cli".into(), kind: ActorKind::Cli }
    }
}

/// The actions the log records; README lists them.
pub(crate) mod action {
    pub(crate) const OPERATOR_LIST: &str = "operator.list";
    pub(crate) const OPERATOR_STATUS: &str = "operator.status";
    pub(crate) const OPERATOR_PAYLOAD: &str = "operator.payload";
    pub(crate) const OPERATOR_CANCEL: &str = "operator.cancel";
    pub(crate) const HISTORY_REVEAL: &str = "history.reveal";
    pub(crate) const RETENTION_SET: &str = "retention.set";
    pub(crate) const EXECUTION_LOGGING_SET: &str = "execution_logging.set";
    pub(crate) const CREDENTIAL_CREATE: &str = "credential.create";
    pub(crate) const CREDENTIAL_REVOKE: &str = "credential.revoke";
    pub(crate) const TOOL_DISABLE: &str = "tool.disable";
    pub(crate) const TOOL_ENABLE: &str = "tool.enable";
    /// A worker registering a tool it did not have (new, or claimed from an
    /// owner with no live token), or refused one another identity owns.
    pub(crate) const TOOL_REGISTER: &str = "tool.register";
    /// The owner registering a changed definition of its tool.
    pub(crate) const TOOL_UPDATE: &str = "tool.update";
    /// An administrator giving a tool to another worker identity.
    pub(crate) const TOOL_TRANSFER: &str = "tool.transfer";
    /// Recorded when refused: reading the audit log or the retention window.
    pub(crate) const AUDIT_READ: &str = "audit.read";
    pub(crate) const RETENTION_READ: &str = "retention.read";
    /// An owner's cancel of its own execution, with the cancel's outcome.
    pub(crate) const EXECUTION_CANCEL: &str = "execution.cancel";
    /// `baton admin payload-keys rewrap` re-sealing an organization's values.
    pub(crate) const PAYLOAD_KEYS_REWRAP: &str = "payload_keys.rewrap";
    /// `baton admin grant-role|revoke-role`: a person's role in a project.
    pub(crate) const ROLE_GRANT: &str = "role.grant";
    pub(crate) const ROLE_REVOKE: &str = "role.revoke";
}

/// The outcomes besides an operation's own (a cancel's outcome, for instance).
pub(crate) mod outcome {
    pub(crate) const ALLOWED: &str = "allowed";
    pub(crate) const REFUSED: &str = "refused";
    pub(crate) const NOT_FOUND: &str = "not_found";
}

/// One thing to record.
#[derive(Clone, Debug)]
pub(crate) struct Record<'a> {
    pub(crate) org_id: &'a str,
    /// `None` for an organization-wide change.
    pub(crate) project_id: Option<&'a str>,
    pub(crate) action: &'static str,
    pub(crate) target: Option<&'a str>,
    pub(crate) outcome: &'a str,
    /// Why, for a refusal; the new value, for a change. Never a payload or a secret.
    pub(crate) detail: Option<String>,
}

/// Refusals of one credential for one action within this long share a row.
pub(crate) const REFUSAL_WINDOW_MS: i64 = 60_000;
/// Repeated metadata reads (`operator.status` of one execution, `operator.list`)
/// by one credential within this long share a row: a dashboard panel that
/// polls the status every few seconds is one row per opening, not one per poll.
pub(crate) const READ_WINDOW_MS: i64 = 15 * 60_000;
// A folded row never spans two of the audit log's partitions, so its key holds.
const _: () = assert!(store::AUDIT_PERIOD_MS % REFUSAL_WINDOW_MS == 0 && store::AUDIT_PERIOD_MS % READ_WINDOW_MS == 0);
/// The longest detail kept; a longer one is cut (details are the system's
/// words about a change or a refusal, never a caller's essay).
const MAX_DETAIL_CHARS: usize = 500;

/// Appends `r`, done by `actor`, now. What a caller could fill is bounded
/// first: a target must have an id's shape (anything else is kept as
/// `invalid`), and a detail is cut and stripped of control characters. A
/// refusal folds into the row of the same credential, action, outcome and
/// project in the current minute, which counts it: a caller refused in a
/// loop grows the log by a row a minute per action, not a row a call.
pub(crate) async fn append(store: &Store, actor: &Actor, r: Record<'_>) -> Result<(), store::Error> {
    let at = now_ms();
    let id = match fold_window(&r) {
        Some(window) => folded_id(actor, &r, at.div_euclid(window)),
        None => random_id("aud_", 96),
    };
    let target = r.target.map(|t| if is_id_shaped(t) { t.to_owned() } else { "invalid".to_owned() });
    let detail =
        r.detail.map(|d| d.chars().take(MAX_DETAIL_CHARS).map(|c| if c.is_control() { ' ' } else { c }).collect());
    store
        .append_audit(&AuditEntry {
            id,
            org_id: r.org_id.to_owned(),
            project_id: r.project_id.map(str::to_owned),
            at,
            actor_id: actor.id.clone(),
            actor_kind: actor.kind.as_str().to_owned(),
            action: r.action.to_owned(),
            target,
            outcome: r.outcome.to_owned(),
            detail,
            occurrences: 1,
        })
        .await
}

/// What every id Baton hands out looks like (`te_…`, `wh_…`, `cred_…`, an
/// attempt's `te_…:2`).
fn is_id_shaped(t: &str) -> bool {
    (1..=128).contains(&t.len())
        && t.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':' | b'.'))
}

/// How long repeats of `r` share one row, if they do: refusals, and allowed
/// metadata reads. A payload read, a cancel or a change is a row each.
fn fold_window(r: &Record<'_>) -> Option<i64> {
    match (r.outcome, r.action) {
        (outcome::REFUSED | outcome::NOT_FOUND, _) => Some(REFUSAL_WINDOW_MS),
        (outcome::ALLOWED, action::OPERATOR_STATUS | action::OPERATOR_LIST) => Some(READ_WINDOW_MS),
        _ => None,
    }
}

/// The one row that repeats of `r` by `actor` in `window` share. A refusal's
/// target is left out of the key (a caller trying many ids is one row); an
/// allowed read's is in it (each execution read is recorded).
fn folded_id(actor: &Actor, r: &Record<'_>, window: i64) -> String {
    use sha2::Digest as _;
    let window = window.to_string();
    let target = if r.outcome == outcome::ALLOWED { r.target.unwrap_or("") } else { "" };
    let mut h = sha2::Sha256::new();
    for part in [r.org_id, r.project_id.unwrap_or(""), &actor.id, r.action, r.outcome, target, &window] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let digest: String = h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("aud_r{digest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actor_kinds_are_stored_as_0_1_spelled_them() {
        let kinds = [ActorKind::ApiKey, ActorKind::Person, ActorKind::EndUser, ActorKind::Worker, ActorKind::Cli];
        let spelled: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        assert_eq!(spelled, ["api_key", "person", "end_user", "worker", "cli"]);
        assert_eq!(Actor::cli().kind.as_str(), "cli");
    }

    fn refusal<'a>(action: &'static str, target: Option<&'a str>) -> Record<'a> {
        Record { org_id: "org_1", project_id: Some("p1"), action, target, outcome: outcome::REFUSED, detail: None }
    }

    #[test]
    fn a_minutes_refusals_of_one_credential_and_action_share_a_row() {
        let a = Actor { id: "cred_a".into(), kind: ActorKind::EndUser };
        let b = Actor { id: "cred_b".into(), kind: ActorKind::EndUser };
        let list = refusal(action::OPERATOR_LIST, None);
        assert_eq!(fold_window(&list), Some(REFUSAL_WINDOW_MS));
        assert_eq!(folded_id(&a, &list, 7), folded_id(&a, &refusal(action::OPERATOR_LIST, Some("te_x")), 7));
        assert_ne!(folded_id(&a, &list, 7), folded_id(&a, &list, 8), "the next window");
        assert_ne!(folded_id(&a, &list, 7), folded_id(&b, &list, 7), "another credential");
        assert_ne!(folded_id(&a, &list, 7), folded_id(&a, &refusal(action::OPERATOR_STATUS, None), 7));
        assert!(folded_id(&a, &list, 7).starts_with("aud_r"));
    }

    #[test]
    fn a_polled_status_read_is_one_row_per_execution_but_payloads_and_cancels_are_each_a_row() {
        let a = Actor { id: "cred_a".into(), kind: ActorKind::ApiKey };
        let read = |action, target| Record {
            org_id: "org_1",
            project_id: Some("p1"),
            action,
            target,
            outcome: outcome::ALLOWED,
            detail: None,
        };
        assert_eq!(fold_window(&read(action::OPERATOR_STATUS, Some("te_x"))), Some(READ_WINDOW_MS));
        let (x, y) = (read(action::OPERATOR_STATUS, Some("te_x")), read(action::OPERATOR_STATUS, Some("te_y")));
        assert_ne!(folded_id(&a, &x, 1), folded_id(&a, &y, 1), "each execution read is recorded");
        assert_eq!(fold_window(&read(action::OPERATOR_PAYLOAD, Some("te_x"))), None);
        assert_eq!(fold_window(&read(action::HISTORY_REVEAL, Some("te_x"))), None);
        let cancel = Record { outcome: "accepted", ..read(action::OPERATOR_CANCEL, Some("te_x")) };
        assert_eq!(fold_window(&cancel), None);
    }

    #[test]
    fn only_id_shaped_targets_are_kept() {
        for ok in ["te_abc", "te_abc:2", "wh_1", "cred_x-y.z"] {
            assert!(is_id_shaped(ok), "{ok}");
        }
        let essay = "a".repeat(3_000);
        for bad in ["", "has space", "te_\n", "<script>", essay.as_str()] {
            assert!(!is_id_shaped(bad), "{bad}");
        }
    }
}
