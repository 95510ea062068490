//! Roles for people (decision 0050). A person signed in through the
//! organization's OpenID provider is known by the provider's subject, an email
//! address and the provider's groups; a project grants a role to an email or
//! to a group, and the person holds the strongest role among the grants that
//! name them, read on every request so a revoked grant takes effect at once.
//! `baton admin grant-role|revoke-role|list-roles` manages the grants, each
//! change audited by `cli`.

use crate::audit::{self, Actor, Record, action, outcome};
use crate::store::{self, RoleGrantRow, Store};
use baton_proto::clock::now_ms;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error("unknown project {0:?}")]
    UnknownProject(String),
    #[error("{0}")]
    Invalid(&'static str),
}

/// A person's role in a project, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PersonRole {
    /// Reads the history (never a payload); acts on nothing.
    ReadOnly,
    /// Reads the history, without payloads.
    Member,
    /// A member who also sees deadlines and cancels any run of the project.
    Operator,
    /// Everything in the project, payloads of the history included.
    Admin,
}

impl PersonRole {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "admin" => Some(PersonRole::Admin),
            "operator" => Some(PersonRole::Operator),
            "member" => Some(PersonRole::Member),
            "read_only" | "read-only" => Some(PersonRole::ReadOnly),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PersonRole::Admin => "admin",
            PersonRole::Operator => "operator",
            PersonRole::Member => "member",
            PersonRole::ReadOnly => "read_only",
        }
    }

    /// The operator permissions the role carries (those of an API key with them).
    pub fn permissions(self) -> &'static [&'static str] {
        match self {
            PersonRole::Admin => &["status", "payload", "cancel"],
            PersonRole::Operator => &["status", "cancel"],
            PersonRole::Member | PersonRole::ReadOnly => &[],
        }
    }
}

/// Who a grant names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grantee {
    /// An email address, compared without regard to case.
    Email(String),
    /// A group as the provider's groups claim spells it.
    Group(String),
}

const MAX_SUBJECT_LEN: usize = 320;

impl Grantee {
    /// A grantee, checked: an email has one `@` and no spaces; a group is
    /// printable; neither is empty or longer than 320 characters.
    pub fn email(raw: &str) -> Result<Grantee, Error> {
        let e = raw.trim().to_lowercase();
        let ok = e.len() <= MAX_SUBJECT_LEN
            && e.matches('@').count() == 1
            && !e.starts_with('@')
            && !e.ends_with('@')
            && !e.chars().any(|c| c.is_whitespace() || c.is_control());
        if ok { Ok(Grantee::Email(e)) } else { Err(Error::Invalid("--email must be one email address")) }
    }

    pub fn group(raw: &str) -> Result<Grantee, Error> {
        let g = raw.trim();
        if g.is_empty() || g.len() > MAX_SUBJECT_LEN || g.chars().any(char::is_control) {
            return Err(Error::Invalid("--group must be 1 to 320 printable characters"));
        }
        Ok(Grantee::Group(g.to_owned()))
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Grantee::Email(_) => "email",
            Grantee::Group(_) => "group",
        }
    }

    pub fn subject(&self) -> &str {
        match self {
            Grantee::Email(s) | Grantee::Group(s) => s,
        }
    }

    /// `email:ann@example.org` or `group:ops`, as the audit log's detail names it
    /// (a target has an id's shape; an address need not).
    pub fn label(&self) -> String {
        format!("{}:{}", self.kind(), self.subject())
    }
}

/// The strongest role among `grants`; `None` when none names a known role.
pub fn strongest(grants: &[RoleGrantRow]) -> Option<PersonRole> {
    grants.iter().filter_map(|g| PersonRole::parse(&g.role)).max()
}

/// The role a person holds in a project now, from the grants that name their
/// email or one of their groups.
pub async fn role_of(
    store: &Store,
    project_id: &str,
    email: &str,
    groups: &[String],
) -> Result<Option<PersonRole>, Error> {
    let grants = store.role_grants_of(project_id, &email.trim().to_lowercase(), groups).await?;
    Ok(strongest(&grants))
}

async fn org_of(store: &Store, project_id: &str) -> Result<String, Error> {
    store.project_org(project_id).await?.ok_or_else(|| Error::UnknownProject(project_id.to_owned()))
}

/// Grants `role` in the project to `who` (replacing the role it held); audited.
pub async fn grant_role(store: &Store, project_id: &str, who: &Grantee, role: PersonRole) -> Result<(), Error> {
    let org_id = org_of(store, project_id).await?;
    let previous = store.grant_role(project_id, who.kind(), who.subject(), role.as_str(), now_ms()).await?;
    let label = who.label();
    let detail = match previous {
        Some(p) => format!("{label}: role {p} -> {}", role.as_str()),
        None => format!("{label}: role {}", role.as_str()),
    };
    let record = Record {
        org_id: &org_id,
        project_id: Some(project_id),
        action: action::ROLE_GRANT,
        target: None,
        outcome: outcome::ALLOWED,
        detail: Some(detail),
    };
    audit::append(store, &Actor::cli(), record).await?;
    Ok(())
}

/// Revokes `who`'s grant in the project; false (and nothing audited) when there was none.
pub async fn revoke_role(store: &Store, project_id: &str, who: &Grantee) -> Result<bool, Error> {
    let org_id = org_of(store, project_id).await?;
    let Some(role) = store.revoke_role(project_id, who.kind(), who.subject()).await? else {
        return Ok(false);
    };
    let label = who.label();
    let record = Record {
        org_id: &org_id,
        project_id: Some(project_id),
        action: action::ROLE_REVOKE,
        target: None,
        outcome: outcome::ALLOWED,
        detail: Some(format!("{label}: role {role}")),
    };
    audit::append(store, &Actor::cli(), record).await?;
    Ok(true)
}

/// The project's grants.
pub async fn list_roles(store: &Store, project_id: &str) -> Result<Vec<RoleGrantRow>, Error> {
    org_of(store, project_id).await?;
    Ok(store.role_grants(project_id).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(role: &str) -> RoleGrantRow {
        RoleGrantRow {
            project_id: "p".into(),
            subject_kind: "group".into(),
            subject: "g".into(),
            role: role.into(),
            granted_at: 0,
        }
    }

    #[test]
    fn the_strongest_grant_wins() {
        assert_eq!(strongest(&[]), None);
        assert_eq!(strongest(&[row("read_only"), row("operator"), row("member")]), Some(PersonRole::Operator));
        assert_eq!(strongest(&[row("member"), row("admin")]), Some(PersonRole::Admin));
        assert_eq!(strongest(&[row("root")]), None, "an unknown role grants nothing");
        assert_eq!(PersonRole::Operator.permissions(), ["status", "cancel"]);
        assert!(PersonRole::Member.permissions().is_empty());
    }

    #[test]
    fn grantees_are_checked_and_emails_lowercased() {
        assert_eq!(Grantee::email(" Ann@Example.ORG ").expect("email"), Grantee::Email("ann@example.org".into()));
        for bad in ["", "ann", "@x", "a@", "a@b@c", "a b@c", &format!("{}@x.org", "a".repeat(400))] {
            assert!(Grantee::email(bad).is_err(), "{bad:.20}");
        }
        assert_eq!(Grantee::group("ops").expect("group").label(), "group:ops");
        assert!(Grantee::group("  ").is_err());
        assert!(Grantee::group("a\nb").is_err());
    }

    #[tokio::test]
    async fn grants_are_audited_and_decide_the_role_now() {
        let b = crate::store::contract_tests::postgres().await;
        let s = &b.store;
        s.create_org("o", "o", 0).await.expect("org");
        s.create_project("p", "o", "p", 0).await.expect("project");
        let ann = Grantee::email("ann@x.org").expect("email");
        let ops = Grantee::group("ops").expect("group");
        let groups = vec!["ops".to_owned()];
        assert_eq!(role_of(s, "p", "ANN@x.org", &groups).await.expect("role"), None, "no grant, no role");
        grant_role(s, "p", &ops, PersonRole::Operator).await.expect("grant group");
        grant_role(s, "p", &ann, PersonRole::Member).await.expect("grant email");
        assert_eq!(role_of(s, "p", "ANN@x.org", &groups).await.expect("role"), Some(PersonRole::Operator));
        grant_role(s, "p", &ann, PersonRole::Admin).await.expect("regrant");
        assert_eq!(role_of(s, "p", "ann@x.org", &[]).await.expect("role"), Some(PersonRole::Admin));
        assert!(revoke_role(s, "p", &ann).await.expect("revoke"));
        assert!(!revoke_role(s, "p", &ann).await.expect("revoke again"), "nothing to revoke");
        assert_eq!(role_of(s, "p", "ann@x.org", &[]).await.expect("role"), None, "revoked at once");
        assert!(matches!(grant_role(s, "nope", &ann, PersonRole::Admin).await, Err(Error::UnknownProject(_))));
        assert!(matches!(list_roles(s, "nope").await, Err(Error::UnknownProject(_))));
        assert_eq!(list_roles(s, "p").await.expect("list").len(), 1);
        let f = crate::store::AuditFilter { org_id: "o".into(), project_id: "p".into(), ..Default::default() };
        let rows = s.audit_page(&f, 10, 0).await.expect("audit");
        let seen: Vec<(&str, Option<&str>, Option<&str>)> =
            rows.iter().map(|r| (r.action.as_str(), r.target.as_deref(), r.detail.as_deref())).collect();
        for expected in [
            ("role.grant", None, Some("group:ops: role operator")),
            ("role.grant", None, Some("email:ann@x.org: role member -> admin")),
            ("role.revoke", None, Some("email:ann@x.org: role admin")),
        ] {
            assert!(seen.contains(&expected), "{expected:?} in {seen:?}");
        }
        assert_eq!(seen.len(), 4, "one row per change, none for the empty revoke: {seen:?}");
    }
}
