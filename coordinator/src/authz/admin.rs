//! Who may administer a project over the API, as one table: only an `admin`
//! API key of the project. Members, read-only keys, end users and workers are
//! refused with 403 (and the refusal of a change is audited); a caller of
//! another project gets the uniform not-found. Organization-wide settings
//! (the default window, turning execution logging off) have no API route:
//! every credential is scoped to one project, so only `baton admin`, which
//! holds the database, changes them.
//!
//! The "Audit log and retention" section of `docs/webhooks-and-audit.md` holds a copy of [`TABLE`]; a test keeps them equal.

use super::history::Caller;
use super::{Error, Principal};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// `GET …/audit_logs`
    AuditLogs,
    /// `GET …/retention`
    ReadRetention,
    /// `PUT …/retention`
    SetRetention,
}

/// For each route, the callers it admits; every other caller of the project is refused with 403.
pub(crate) const TABLE: [(Route, &[Caller]); 3] = [
    (Route::AuditLogs, &[Caller::Admin]),
    (Route::ReadRetention, &[Caller::Admin]),
    (Route::SetRetention, &[Caller::Admin]),
];

#[cfg(test)]
impl Route {
    fn label(self) -> &'static str {
        match self {
            Route::AuditLogs => "`GET …/audit_logs`",
            Route::ReadRetention => "`GET …/retention`",
            Route::SetRetention => "`PUT …/retention`",
        }
    }
}

/// Whether `p` may call `route` in the project the path names.
pub(crate) fn check(p: &Principal, org_id: &str, project_id: &str, route: Route) -> Result<(), Error> {
    p.in_scope(org_id, project_id)?;
    if super::history::admits(&TABLE, route, Caller::of(p)) {
        Ok(())
    } else {
        Err(Error::Forbidden("this route needs an admin API key of the project"))
    }
}

/// The table as `docs/webhooks-and-audit.md` shows it.
#[cfg(test)]
pub(crate) fn markdown() -> String {
    super::history::caller_table(TABLE.iter().map(|(route, admitted)| (route.label(), *admitted)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::Role;

    fn key(role: Role, project: &str) -> Principal {
        Principal::ApiKey {
            credential_id: "c".into(),
            org_id: "o".into(),
            project_id: project.into(),
            role,
            permissions: vec!["status".into(), "payload".into(), "cancel".into()],
        }
    }

    #[test]
    fn only_a_projects_admin_key_administers_it() {
        let end_user = Principal::EndUser {
            credential_id: "c".into(),
            org_id: "o".into(),
            project_id: "p".into(),
            gateway_id: "g".into(),
            user_id: "u".into(),
        };
        let worker = Principal::Worker { credential_id: "c".into(), org_id: "o".into(), project_id: "p".into() };
        for route in [Route::AuditLogs, Route::ReadRetention, Route::SetRetention] {
            assert_eq!(check(&key(Role::Admin, "p"), "o", "p", route), Ok(()));
            // Operator permissions grant no administration.
            for refused in [key(Role::Member, "p"), key(Role::ReadOnly, "p"), end_user.clone(), worker.clone()] {
                assert!(matches!(check(&refused, "o", "p", route), Err(Error::Forbidden(_))), "{refused:?}");
            }
            assert_eq!(check(&key(Role::Admin, "other"), "o", "p", route), Err(Error::NotFound));
        }
    }

    #[test]
    fn the_docs_hold_the_table() {
        let readme = include_str!("../../../docs/webhooks-and-audit.md");
        assert!(readme.contains(&markdown()), "docs/webhooks-and-audit.md's audit section must hold:\n{}", markdown());
    }
}
