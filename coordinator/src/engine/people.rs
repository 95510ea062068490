//! People's dashboard sessions (decision 0050). A person signs in with the
//! configured OpenID provider; for one who holds a role in the project the
//! coordinator opens a session (`bdp_…`) that names them. Each request with
//! it is decided from the project's grants as they are then, so a revoked
//! grant takes effect on the next request; the person acts as a project API
//! key of their role would, and the audit log names them
//! (`person:{email}/{subject}`, kind `person`).

use super::session_tokens::{PERSON_SESSION as PREFIX, TOUCH_EVERY_MS};
use super::{Engine, Result};
use crate::authz::{self, generate_token, hash_token};
use crate::oidc::{Begun, Person};
use crate::people::{self, PersonRole};
use crate::store::{Credential, CredentialKind, NewPersonSession};
use baton_proto::clock::now_ms;

/// Why a person with no grant is refused; the gateway shows a page that says so.
pub const NO_ROLE: &str = "no_role: the person holds no role in this project";

/// The audit log's name for a person: their email and the provider's subject.
pub fn actor_id(email: &str, subject: &str) -> String {
    format!("person:{email}/{subject}")
}

/// A person's session just opened.
#[derive(Clone, Debug)]
pub struct OpenedPersonSession {
    pub token: String,
    pub idle_ms: i64,
    pub expires_at_ms: i64,
    pub email: String,
    pub role: PersonRole,
}

impl Engine {
    fn provider(&self) -> Result<&crate::oidc::Provider> {
        self.options.oidc.as_deref().ok_or(super::Error::Missing("OpenID provider"))
    }

    /// The authorization URL of a new sign-in, and the secrets the gateway
    /// keeps for its return. With `another_account`, the provider is asked to
    /// authenticate the person again.
    pub async fn begin_person_sign_in(&self, org_id: &str, project_id: &str, another_account: bool) -> Result<Begun> {
        let provider = self.provider()?;
        if org_id.is_empty() || project_id.is_empty() {
            return Err(super::Error::Invalid("org_id and project_id are required".into()));
        }
        Ok(provider.begin(another_account).await?)
    }

    /// Completes a sign-in: the provider vouches for the person, and a person
    /// with a role in the project gets a session.
    pub async fn complete_person_sign_in(
        &self,
        org_id: &str,
        project_id: &str,
        code: &str,
        pkce_verifier: &str,
        nonce: &str,
    ) -> Result<OpenedPersonSession> {
        let provider = self.provider()?;
        if [code, pkce_verifier, nonce].iter().any(|v| v.is_empty() || v.len() > 2048) {
            return Err(super::Error::Invalid("code, pkce_verifier and nonce are required".into()));
        }
        let Person { subject, email, groups } = provider.complete(code, pkce_verifier, nonce).await?;
        if self.store.project_org(project_id).await?.as_deref() != Some(org_id) {
            return Err(authz::Error::Forbidden(NO_ROLE).into());
        }
        let role = self.person_role(project_id, &email, &groups).await?;
        let token = generate_token(PREFIX);
        let now = now_ms();
        let expires_at_ms = now.saturating_add(self.options.dashboard.lifetime_ms);
        let session = NewPersonSession {
            token_hash: &hash_token(&token),
            org_id,
            project_id,
            subject: &subject,
            email: &email,
            groups: &groups,
        };
        self.store.open_person_session(&session, now, expires_at_ms).await?;
        tracing::info!(project_id, role = role.as_str(), "a person's dashboard session opened");
        Ok(OpenedPersonSession { token, idle_ms: self.options.dashboard.idle_ms, expires_at_ms, email, role })
    }

    async fn person_role(&self, project_id: &str, email: &str, groups: &[String]) -> Result<PersonRole> {
        match people::role_of(&self.store, project_id, email, groups).await {
            Ok(Some(role)) => Ok(role),
            Ok(None) => Err(authz::Error::Forbidden(NO_ROLE).into()),
            Err(people::Error::Store(e)) => Err(e.into()),
            Err(e) => Err(super::Error::Invalid(e.to_string())),
        }
    }

    /// What a person's open session may do now: a project API key of the
    /// role their grants give them, named after them.
    pub(super) async fn person_credential(&self, token: &str) -> Result<Credential> {
        let hash = hash_token(token);
        let now = now_ms();
        let idle_ms = self.options.dashboard.idle_ms;
        let session = self.store.person_session(&hash, now, idle_ms).await?.ok_or(authz::Error::Unauthenticated)?;
        let role = self.person_role(&session.project_id, &session.email, &session.groups).await?;
        if now - session.last_seen_at >= TOUCH_EVERY_MS.min(idle_ms / 4)
            && let Err(e) = self.store.touch_person_session(&hash, now).await
        {
            tracing::warn!(error = %e, "cannot record a person's session use");
        }
        let key_role = match role {
            PersonRole::Admin => authz::Role::Admin,
            PersonRole::Operator | PersonRole::Member => authz::Role::Member,
            PersonRole::ReadOnly => authz::Role::ReadOnly,
        };
        Ok(Credential {
            id: actor_id(&session.email, &session.subject),
            kind: CredentialKind::ApiKey,
            org_id: session.org_id,
            project_id: session.project_id,
            gateway_id: None,
            user_id: None,
            role: Some(key_role.as_str().to_owned()),
            permissions: role.permissions().iter().map(|p| (*p).to_owned()).collect(),
            revoked: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::history::Reveal;
    use super::super::tests::World;
    use super::*;
    use crate::authz::{Principal, Role};
    use crate::people::Grantee;

    async fn session(w: &World, email: &str, groups: &[String]) -> String {
        let token = generate_token(PREFIX);
        let s = NewPersonSession {
            token_hash: &hash_token(&token),
            org_id: &w.org_id,
            project_id: &w.project_id,
            subject: "sub-1",
            email,
            groups,
        };
        w.engine.store.open_person_session(&s, now_ms(), now_ms() + 60_000).await.expect("open");
        format!("Bearer {token}")
    }

    fn refused_for_no_role(r: Result<Principal>) -> bool {
        matches!(r, Err(super::super::Error::Auth(authz::Error::Forbidden(NO_ROLE))))
    }

    #[tokio::test]
    async fn a_person_is_decided_from_the_grants_of_now() {
        let w = World::new().await;
        let store = &w.engine.store;
        let admins = Grantee::group("admins").expect("group");
        people::grant_role(store, &w.project_id, &admins, PersonRole::Admin).await.expect("grant");
        let bearer = session(&w, "ann@x.org", &["admins".to_owned()]).await;
        let p = w.engine.authenticate(Some(&bearer)).await.expect("a person with a grant");
        let Principal::ApiKey { credential_id, role, permissions, .. } = &p else { panic!("{p:?}") };
        assert_eq!((credential_id.as_str(), *role), ("person:ann@x.org/sub-1", Role::Admin));
        assert_eq!(permissions, &["status", "payload", "cancel"]);
        assert_eq!(crate::audit::Actor::of(&p).kind, crate::audit::ActorKind::Person);

        // Revoked mid-session: the next request is refused, and says why.
        assert!(people::revoke_role(store, &w.project_id, &admins).await.expect("revoke"));
        assert!(refused_for_no_role(w.engine.authenticate(Some(&bearer)).await));
        // A grant by email, weaker: the next request has that role.
        let ann = Grantee::email("Ann@X.org").expect("email");
        people::grant_role(store, &w.project_id, &ann, PersonRole::Member).await.expect("grant");
        let p = w.engine.authenticate(Some(&bearer)).await.expect("member");
        assert!(matches!(&p, Principal::ApiKey { role: Role::Member, permissions, .. } if permissions.is_empty()));

        // A member's reveal is refused, and the audit row names the person.
        let scope = super::super::Scope { org_id: &w.org_id, project_id: &w.project_id };
        let id = crate::domain::ExecutionId::generate().to_string();
        let reveal = Reveal { inputs: true, outputs: false };
        assert!(w.engine.history_detail(Some(&bearer), scope, &id, reveal).await.is_err());
        let f = crate::store::AuditFilter {
            org_id: w.org_id.clone(),
            project_id: w.project_id.clone(),
            action: Some(crate::audit::action::HISTORY_REVEAL.into()),
            ..Default::default()
        };
        let rows = store.audit_page(&f, 10, 0).await.expect("audit");
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!((rows[0].actor_id.as_str(), rows[0].actor_kind.as_str()), ("person:ann@x.org/sub-1", "person"));
        assert_eq!(rows[0].outcome, "refused");

        // Sign-out ends the session for every copy.
        let at_provider = w.engine.end_dashboard_session(Some(&bearer)).await.expect("sign out");
        assert_eq!(at_provider, None, "no provider configured here, so nothing to end there");
        let ended = w.engine.authenticate(Some(&bearer)).await;
        assert!(matches!(ended, Err(super::super::Error::Auth(authz::Error::Unauthenticated))), "{ended:?}");
    }

    #[tokio::test]
    async fn a_person_without_a_grant_a_forged_token_and_no_provider_are_refused() {
        let w = World::new().await;
        let bearer = session(&w, "eve@x.org", &["nobody".to_owned()]).await;
        assert!(refused_for_no_role(w.engine.authenticate(Some(&bearer)).await));
        let forged = format!("Bearer {}", generate_token(PREFIX));
        let r = w.engine.authenticate(Some(&forged)).await;
        assert!(matches!(r, Err(super::super::Error::Auth(authz::Error::Unauthenticated))), "{r:?}");
        // A key's session cannot open a person's, and no provider is configured here.
        let begun = w.engine.begin_person_sign_in(&w.org_id, &w.project_id, false).await;
        assert!(matches!(begun, Err(super::super::Error::Missing(_))), "{begun:?}");
        let done = w.engine.complete_person_sign_in(&w.org_id, &w.project_id, "c", "v", "n").await;
        assert!(matches!(done, Err(super::super::Error::Missing(_))), "{done:?}");
    }
}
