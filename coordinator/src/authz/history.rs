//! Who may read a project's execution history (seed 002), as one table.
//!
//! The history shows every run of a project, whoever started it, so it is for
//! callers with a role on the project: admin and member API keys. A read-only
//! key is refused, and so is any caller whose authority comes from a single
//! end user (an end-user token, which is what MCP clients hold) or from a
//! worker. Inputs and outputs take admin authority: the same member gets 200
//! without the payload flags and 403 with them. A caller of another project
//! gets the uniform not-found on every route, as on every other route of the
//! API, so nothing tells it whether the project or an execution exists.
//!
//! The "History" section of `docs/rest.md` holds a copy of [`TABLE`]; a test keeps them equal.

use super::{Error, Principal, Role};

/// The history routes, a payload flag counting as a route of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// `GET …/tool_executions`
    List,
    /// `GET …/tool_executions/count`
    Count,
    /// `GET …/tool_executions/{id}`
    Detail,
    /// `GET …/tool_executions/{id}` with `include_inputs` or `include_outputs`
    DetailWithPayloads,
}

/// A caller as the table tells callers apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    Admin,
    Member,
    ReadOnly,
    EndUser,
    Worker,
}

/// Every caller, in the table's column order.
#[cfg(test)]
const CALLERS: [Caller; 5] = [Caller::Admin, Caller::Member, Caller::ReadOnly, Caller::EndUser, Caller::Worker];

/// For each route, the callers it admits; every other caller of the project
/// is refused with 403.
pub(crate) const TABLE: [(Route, &[Caller]); 4] = [
    (Route::List, &[Caller::Admin, Caller::Member]),
    (Route::Count, &[Caller::Admin, Caller::Member]),
    (Route::Detail, &[Caller::Admin, Caller::Member]),
    (Route::DetailWithPayloads, &[Caller::Admin]),
];

impl Caller {
    pub(crate) fn of(p: &Principal) -> Caller {
        match p {
            Principal::ApiKey { role: Role::Admin, .. } => Caller::Admin,
            Principal::ApiKey { role: Role::Member, .. } => Caller::Member,
            Principal::ApiKey { role: Role::ReadOnly, .. } => Caller::ReadOnly,
            Principal::EndUser { .. } => Caller::EndUser,
            Principal::Worker { .. } => Caller::Worker,
        }
    }

    #[cfg(test)]
    fn label(self) -> &'static str {
        match self {
            Caller::Admin => "`admin` key",
            Caller::Member => "`member` key",
            Caller::ReadOnly => "`read_only` key",
            Caller::EndUser => "end-user token (MCP)",
            Caller::Worker => "worker token",
        }
    }

    /// Why this caller is refused `route`.
    fn refusal(self, route: Route) -> &'static str {
        match (self, route) {
            (Caller::ReadOnly, _) => "a read-only key cannot read the execution history",
            (Caller::EndUser, _) => {
                "an end user's token cannot read the project's execution history; use a project API key"
            }
            (Caller::Worker, _) => "a worker credential cannot read the execution history",
            (_, Route::DetailWithPayloads) => "include_inputs and include_outputs need an admin API key",
            (Caller::Admin | Caller::Member, _) => "this key cannot read the execution history",
        }
    }
}

#[cfg(test)]
impl Route {
    fn label(self) -> &'static str {
        match self {
            Route::List => "`GET …/tool_executions`",
            Route::Count => "`GET …/tool_executions/count`",
            Route::Detail => "`GET …/tool_executions/{id}`",
            Route::DetailWithPayloads => "`GET …/tool_executions/{id}` with `include_inputs` or `include_outputs`",
        }
    }
}

/// Whether `p` may call `route` in the project the path names: a caller of
/// another project gets the uniform not-found; a refused caller, 403.
pub(crate) fn check(p: &Principal, org_id: &str, project_id: &str, route: Route) -> Result<(), Error> {
    p.in_scope(org_id, project_id)?;
    let caller = Caller::of(p);
    if admits(&TABLE, route, caller) { Ok(()) } else { Err(Error::Forbidden(caller.refusal(route))) }
}

/// Whether `table` lists `caller` for `route`.
pub(super) fn admits<R: PartialEq>(table: &[(R, &[Caller])], route: R, caller: Caller) -> bool {
    table.iter().find(|(r, _)| *r == route).is_some_and(|(_, callers)| callers.contains(&caller))
}

/// The table as `docs/rest.md` shows it.
#[cfg(test)]
pub(crate) fn markdown() -> String {
    caller_table(TABLE.iter().map(|(route, admitted)| (route.label(), *admitted)))
}

/// A markdown table of routes × callers: 200 for the admitted, 403 for the
/// rest of the project, 404 for another project's.
#[cfg(test)]
pub(super) fn caller_table<'a>(rows: impl Iterator<Item = (&'static str, &'a [Caller])>) -> String {
    let mut out = String::from("| route |");
    for c in CALLERS {
        out.push_str(&format!(" {} |", c.label()));
    }
    out.push_str(" other project |\n| --- |");
    out.push_str(&" --- |".repeat(CALLERS.len() + 1));
    out.push('\n');
    for (label, admitted) in rows {
        out.push_str(&format!("| {label} |"));
        for c in CALLERS {
            out.push_str(if admitted.contains(&c) { " 200 |" } else { " 403 |" });
        }
        out.push_str(" 404 |\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(role: Role, project: &str) -> Principal {
        Principal::ApiKey {
            credential_id: "c".into(),
            org_id: "o".into(),
            project_id: project.into(),
            role,
            permissions: Vec::new(),
        }
    }

    fn end_user() -> Principal {
        Principal::EndUser {
            credential_id: "c".into(),
            org_id: "o".into(),
            project_id: "p".into(),
            gateway_id: "g".into(),
            user_id: "u".into(),
        }
    }

    #[test]
    fn the_matrix() {
        let routes = [Route::List, Route::Count, Route::Detail, Route::DetailWithPayloads];
        let worker = Principal::Worker { credential_id: "c".into(), org_id: "o".into(), project_id: "p".into() };
        for route in routes {
            assert_eq!(check(&key(Role::Admin, "p"), "o", "p", route), Ok(()));
            let member = check(&key(Role::Member, "p"), "o", "p", route);
            if route == Route::DetailWithPayloads {
                assert!(matches!(member, Err(Error::Forbidden(_))));
            } else {
                assert_eq!(member, Ok(()));
            }
            for refused in [key(Role::ReadOnly, "p"), end_user(), worker.clone()] {
                assert!(matches!(check(&refused, "o", "p", route), Err(Error::Forbidden(_))), "{refused:?}");
            }
            assert_eq!(check(&key(Role::Admin, "other"), "o", "p", route), Err(Error::NotFound));
            assert_eq!(check(&key(Role::Admin, "p"), "other-org", "p", route), Err(Error::NotFound));
        }
    }

    #[test]
    fn the_docs_hold_the_table() {
        let readme = include_str!("../../../docs/rest.md");
        assert!(readme.contains(&markdown()), "docs/rest.md's History section must hold:\n{}", markdown());
    }
}
