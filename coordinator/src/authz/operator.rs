//! Who may use the operator routes (seed 000, "Recover executions as an
//! operator"), as one table. Operator access is separate from owner access
//! and from the history: it comes from a permission stored on a project API
//! key (`baton admin create-api-key --permissions status,payload,cancel`), never
//! from a role alone. Status never reveals a payload; the payload and the
//! cancellation take permissions of their own; a read-only key cannot cancel
//! whatever it holds. End-user and worker tokens hold no permission. A caller
//! of another project gets the uniform not-found.
//!
//! The "Operator routes" section of `docs/rest.md` holds a copy of [`TABLE`]; a test keeps them equal.

use super::{Error, Principal, Role};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// `GET …/operator/tool-executions`
    List,
    /// `GET …/operator/tool-executions/{id}`
    Status,
    /// `GET …/operator/tool-executions/{id}/payload`
    Payload,
    /// `POST …/operator/tool-executions/{id}/cancel`
    Cancel,
}

/// For each route: the permission it needs, and whether a read-only key holding it may call it.
pub(crate) const TABLE: [(Route, &str, bool); 4] = [
    (Route::List, "status", true),
    (Route::Status, "status", true),
    (Route::Payload, "payload", true),
    (Route::Cancel, "cancel", false),
];

impl Route {
    #[cfg(test)]
    fn label(self) -> &'static str {
        match self {
            Route::List => "`GET …/operator/tool-executions`",
            Route::Status => "`GET …/operator/tool-executions/{id}`",
            Route::Payload => "`GET …/operator/tool-executions/{id}/payload`",
            Route::Cancel => "`POST …/operator/tool-executions/{id}/cancel`",
        }
    }

    fn refusal(self) -> &'static str {
        match self {
            Route::List | Route::Status => "this route needs an API key with the `status` permission",
            Route::Payload => "this route needs an API key with the `payload` permission",
            Route::Cancel => "this route needs a key that may act, with the `cancel` permission",
        }
    }
}

/// Whether `p` may call `route` in the project the path names: another
/// project's caller gets the uniform not-found; a refused one, 403.
pub(crate) fn check(p: &Principal, org_id: &str, project_id: &str, route: Route) -> Result<(), Error> {
    p.in_scope(org_id, project_id)?;
    let Some((_, permission, read_only_may)) = TABLE.iter().find(|(r, _, _)| *r == route) else {
        return Err(Error::Forbidden(route.refusal()));
    };
    let admitted = match p {
        Principal::ApiKey { role, permissions, .. } => {
            permissions.iter().any(|held| held == permission) && (*read_only_may || *role != Role::ReadOnly)
        }
        Principal::EndUser { .. } | Principal::Worker { .. } => false,
    };
    if admitted { Ok(()) } else { Err(Error::Forbidden(route.refusal())) }
}

/// The table as `docs/rest.md` shows it.
#[cfg(test)]
pub(crate) fn markdown() -> String {
    let mut out = String::from("| route | needs | `read_only` key with it |\n| --- | --- | --- |\n");
    for (route, permission, read_only_may) in TABLE {
        let read_only = if read_only_may { "200" } else { "403" };
        out.push_str(&format!("| {} | API key with `{permission}` | {read_only} |\n", route.label()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(role: Role, permissions: &[&str], project: &str) -> Principal {
        Principal::ApiKey {
            credential_id: "c".into(),
            org_id: "o".into(),
            project_id: project.into(),
            role,
            permissions: permissions.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn permissions_not_roles_grant_operator_access() {
        let all = ["status", "payload", "cancel"];
        for route in [Route::List, Route::Status, Route::Payload, Route::Cancel] {
            assert_eq!(check(&key(Role::Member, &all, "p"), "o", "p", route), Ok(()));
            assert!(matches!(check(&key(Role::Admin, &[], "p"), "o", "p", route), Err(Error::Forbidden(_))));
            assert_eq!(check(&key(Role::Admin, &all, "q"), "o", "p", route), Err(Error::NotFound));
            let end_user = Principal::EndUser {
                credential_id: "c".into(),
                org_id: "o".into(),
                project_id: "p".into(),
                gateway_id: "g".into(),
                user_id: "u".into(),
            };
            assert!(matches!(check(&end_user, "o", "p", route), Err(Error::Forbidden(_))));
        }
        assert!(matches!(
            check(&key(Role::Admin, &["status"], "p"), "o", "p", Route::Payload),
            Err(Error::Forbidden(_))
        ));
        assert!(matches!(
            check(&key(Role::Admin, &["payload"], "p"), "o", "p", Route::Status),
            Err(Error::Forbidden(_))
        ));
        assert_eq!(check(&key(Role::ReadOnly, &all, "p"), "o", "p", Route::Status), Ok(()));
        assert!(matches!(check(&key(Role::ReadOnly, &all, "p"), "o", "p", Route::Cancel), Err(Error::Forbidden(_))));
    }

    #[test]
    fn the_docs_hold_the_table() {
        let readme = include_str!("../../../docs/rest.md");
        assert!(readme.contains(&markdown()), "docs/rest.md's Operator routes section must hold:\n{}", markdown());
    }
}
