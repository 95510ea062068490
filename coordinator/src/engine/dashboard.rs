//! Dashboard sessions, kept here so that they can end. A person signs in with
//! a project API key; the gateway trades it for a session token (`bds_…`) and
//! seals only that into the browser's cookie. Every call the dashboard makes
//! carries the session token, which stands for the key while the session is
//! open: until sign-out, the key's revocation, `idle_ms` without use, or
//! `lifetime_ms` after sign-in, whichever comes first.

use super::{Engine, Result};
use crate::authz::{self, Principal, Role, generate_token, hash_token};
use crate::store::Credential;
use baton_proto::clock::now_ms;

use super::session_tokens::{KEY_SESSION as PREFIX, PERSON_SESSION, TOUCH_EVERY_MS};

/// The session token in `authorization`, if it carries one: a key's
/// (`bds_…`) or a person's (`bdp_…`, `super::people`).
pub(super) fn session_token(authorization: Option<&str>) -> Option<&str> {
    authz::bearer_token(authorization).filter(|t| t.starts_with(PREFIX) || t.starts_with(PERSON_SESSION))
}

/// A session just opened.
#[derive(Clone, Debug)]
pub(crate) struct OpenedSession {
    pub(crate) token: String,
    pub(crate) idle_ms: i64,
    pub(crate) expires_at_ms: i64,
}

impl Engine {
    /// Opens a session for the caller's key: a project API key with the
    /// `admin` or `member` role, the only keys the dashboard admits.
    pub(crate) async fn open_dashboard_session(&self, authorization: Option<&str>) -> Result<OpenedSession> {
        if session_token(authorization).is_some() {
            return Err(authz::Error::Forbidden("a dashboard session cannot open another").into());
        }
        let p = self.authenticate(authorization).await?;
        let Principal::ApiKey { credential_id, role: Role::Admin | Role::Member, .. } = &p else {
            return Err(authz::Error::Forbidden("only a project API key with the admin or member role").into());
        };
        let token = generate_token(PREFIX);
        let now = now_ms();
        let expires_at_ms = now.saturating_add(self.options.dashboard.lifetime_ms);
        self.store.open_dashboard_session(&hash_token(&token), credential_id, now, expires_at_ms).await?;
        tracing::info!(credential_id = %credential_id, "dashboard session opened");
        Ok(OpenedSession { token, idle_ms: self.options.dashboard.idle_ms, expires_at_ms })
    }

    /// Ends the caller's session (signing out). Ending one already over is no
    /// error. For a person's session, answers where to end it at the OpenID
    /// provider too, when the provider offers that.
    pub async fn end_dashboard_session(&self, authorization: Option<&str>) -> Result<Option<String>> {
        let token = session_token(authorization).ok_or(authz::Error::Unauthenticated)?;
        if token.starts_with(PERSON_SESSION) {
            self.store.end_person_session(&hash_token(token), now_ms()).await?;
            return Ok(match self.options.oidc.as_deref() {
                Some(provider) => provider.logout_url().await,
                None => None,
            });
        }
        self.store.end_dashboard_session(&hash_token(token), now_ms()).await?;
        Ok(None)
    }

    /// The key an open session stands for; an ended, idle or expired session
    /// is unauthenticated (and a revoked key is refused by the caller).
    pub(super) async fn session_credential(&self, token: &str) -> Result<Credential> {
        if token.starts_with(PERSON_SESSION) {
            return self.person_credential(token).await;
        }
        let hash = hash_token(token);
        let now = now_ms();
        let idle_ms = self.options.dashboard.idle_ms;
        let session = self.store.dashboard_session(&hash, now, idle_ms).await?.ok_or(authz::Error::Unauthenticated)?;
        if now - session.last_seen_at >= TOUCH_EVERY_MS.min(idle_ms / 4)
            && let Err(e) = self.store.touch_dashboard_session(&hash, now).await
        {
            // The session stays open on this request; the next one tries again.
            tracing::warn!(error = %e, "cannot record a dashboard session's use");
        }
        Ok(session.credential)
    }
}
