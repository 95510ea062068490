//! Dashboard sessions: a browser's cookie names one of these rows by a random
//! token (kept here only as its hash), so a session ends when the row says so
//! (sign-out), when the API key behind it is revoked (the credential is read
//! with the session), or when it sat unused or lived too long.

use super::identity::{CREDENTIAL_COLUMNS, Credential, credential_from_row};
use super::{Result, Store};
use crate::domain::Millis;
use sqlx::Row;

/// A live session's key, and when it was last used.
pub(crate) struct DashboardSession {
    pub(crate) credential: Credential,
    pub(crate) last_seen_at: Millis,
}

impl Store {
    /// Opens a session for `credential_id` until `expires_at` at the latest,
    /// and drops the rows of sessions already past their absolute end.
    pub(crate) async fn open_dashboard_session(
        &self,
        token_hash: &[u8],
        credential_id: &str,
        now: Millis,
        expires_at: Millis,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM dashboard_sessions WHERE expires_at < $1").bind(now).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT INTO dashboard_sessions (token_hash, credential_id, created_at, last_seen_at, expires_at) \
             VALUES ($1, $2, $3, $3, $4)",
        )
        .bind(token_hash)
        .bind(credential_id)
        .bind(now)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        self.commit(tx).await?;
        Ok(())
    }

    /// The session `token_hash` names, if it is still open at `now`: not
    /// ended, not past its absolute end, used within `idle_ms`. The key's
    /// revocation is the caller's to judge (`Credential::revoked`).
    pub(crate) async fn dashboard_session(
        &self,
        token_hash: &[u8],
        now: Millis,
        idle_ms: i64,
    ) -> Result<Option<DashboardSession>> {
        let sql = format!(
            "SELECT {CREDENTIAL_COLUMNS}, s.last_seen_at FROM dashboard_sessions s \
             JOIN credentials c ON c.id = s.credential_id \
             WHERE s.token_hash = $1 AND s.ended_at IS NULL AND s.expires_at > $2 AND s.last_seen_at > $3"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(token_hash)
            .bind(now)
            .bind(now.saturating_sub(idle_ms))
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(DashboardSession { credential: credential_from_row(&r)?, last_seen_at: r.try_get("last_seen_at")? })
        })
        .transpose()
    }

    /// Records a use of the session (callers touch it at most once a minute).
    pub(crate) async fn touch_dashboard_session(&self, token_hash: &[u8], now: Millis) -> Result<()> {
        self.touch_session(SessionTable::Keys, token_hash, now).await
    }

    /// Ends the session; false when it was not open.
    pub(crate) async fn end_dashboard_session(&self, token_hash: &[u8], now: Millis) -> Result<bool> {
        self.end_session(SessionTable::Keys, token_hash, now).await
    }

    /// Records a use of a session of either kind, at most once per `now`.
    pub(super) async fn touch_session(&self, table: SessionTable, token_hash: &[u8], now: Millis) -> Result<()> {
        let sql = format!("UPDATE {} SET last_seen_at = $1 WHERE token_hash = $2 AND last_seen_at < $1", table.name());
        sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now).bind(token_hash).execute(&self.pool).await?;
        Ok(())
    }

    /// Ends a session of either kind; false when it was not open.
    pub(super) async fn end_session(&self, table: SessionTable, token_hash: &[u8], now: Millis) -> Result<bool> {
        let sql = format!("UPDATE {} SET ended_at = $1 WHERE token_hash = $2 AND ended_at IS NULL", table.name());
        let done = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now).bind(token_hash).execute(&self.pool).await?;
        Ok(done.rows_affected() == 1)
    }
}

/// The two kinds of dashboard session, an API key's and a person's, kept in
/// tables of their own; they record a use and end the same way.
#[derive(Clone, Copy, Debug)]
pub(super) enum SessionTable {
    Keys,
    People,
}

impl SessionTable {
    fn name(self) -> &'static str {
        match self {
            SessionTable::Keys => "dashboard_sessions",
            SessionTable::People => "person_sessions",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::contract_tests::backends;
    use super::super::{CredentialKind, NewCredential};

    #[tokio::test]
    async fn a_session_ends_by_sign_out_idleness_age_or_revocation() {
        for b in backends().await {
            let (n, s) = (b.name, &b.store);
            s.create_org("o", "o", 0).await.expect("org");
            s.create_project("p", "o", "p", 0).await.expect("project");
            let c = NewCredential {
                id: "cred_k".into(),
                token_hash: vec![1],
                kind: CredentialKind::ApiKey,
                org_id: "o".into(),
                project_id: "p".into(),
                gateway_id: None,
                user_id: None,
                role: Some("admin".into()),
                permissions: Vec::new(),
                worker_group: None,
            };
            s.create_credential(&c, 0).await.expect("credential");
            let idle = 1_000;
            s.open_dashboard_session(&[7], "cred_k", 100, 10_000).await.expect("open");
            let open = s.dashboard_session(&[7], 900, idle).await.expect("read").expect("open session");
            assert_eq!((open.credential.id.as_str(), open.last_seen_at), ("cred_k", 100), "{n}");
            assert!(s.dashboard_session(&[7], 1_100, idle).await.expect("read").is_none(), "{n}: idle too long");
            s.touch_dashboard_session(&[7], 1_050).await.expect("touch");
            assert!(s.dashboard_session(&[7], 1_100, idle).await.expect("read").is_some(), "{n}: a use keeps it");
            assert!(s.dashboard_session(&[7], 10_000, 100_000).await.expect("read").is_none(), "{n}: absolute end");
            assert!(s.dashboard_session(&[8], 900, idle).await.expect("read").is_none(), "{n}: another token");
            s.revoke_credential("cred_k", 1_060).await.expect("revoke");
            let revoked = s.dashboard_session(&[7], 1_100, idle).await.expect("read").expect("row");
            assert!(revoked.credential.revoked, "{n}: the key's revocation is read with the session");
            assert!(s.end_dashboard_session(&[7], 1_100).await.expect("end"), "{n}");
            assert!(!s.end_dashboard_session(&[7], 1_100).await.expect("end"), "{n}: once");
            assert!(s.dashboard_session(&[7], 1_100, idle).await.expect("read").is_none(), "{n}: signed out");
            s.open_dashboard_session(&[9], "cred_k", 20_000, 30_000).await.expect("open later");
            let left: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM dashboard_sessions").fetch_one(&s.pool).await.expect("count");
            assert_eq!(left, 1, "{n}: sessions past their end are dropped");
        }
    }
}
