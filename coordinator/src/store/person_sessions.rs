//! People's dashboard sessions (decision 0050): opened by sign-in with the
//! OpenID provider, named by a random token kept here only as its hash. A
//! session ends on sign-out, after `idle_ms` unused, or at its absolute end;
//! what the person may do is read from the project's grants on every request.

use super::dashboard_sessions::SessionTable;
use super::{Result, Store};
use crate::domain::Millis;
use sqlx::Row;

/// A person signed in, as their session records them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersonSession {
    pub org_id: String,
    pub project_id: String,
    pub subject: String,
    pub email: String,
    pub groups: Vec<String>,
    pub last_seen_at: Millis,
}

/// What opens a person's session.
pub struct NewPersonSession<'a> {
    pub token_hash: &'a [u8],
    pub org_id: &'a str,
    pub project_id: &'a str,
    pub subject: &'a str,
    pub email: &'a str,
    pub groups: &'a [String],
}

impl Store {
    /// Opens a session until `expires_at`, and drops sessions past their end.
    pub async fn open_person_session(&self, s: &NewPersonSession<'_>, now: Millis, expires_at: Millis) -> Result<()> {
        let groups = serde_json::to_string(s.groups).map_err(|e| super::Error::Corrupt(e.to_string()))?;
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM person_sessions WHERE expires_at < $1").bind(now).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT INTO person_sessions (token_hash, org_id, project_id, subject, email, groups_json, created_at, \
             last_seen_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8)",
        )
        .bind(s.token_hash)
        .bind(s.org_id)
        .bind(s.project_id)
        .bind(s.subject)
        .bind(s.email)
        .bind(groups)
        .bind(now)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        self.commit(tx).await?;
        Ok(())
    }

    /// The session `token_hash` names, if open at `now` and used within `idle_ms`.
    pub async fn person_session(&self, token_hash: &[u8], now: Millis, idle_ms: i64) -> Result<Option<PersonSession>> {
        let row = sqlx::query(
            "SELECT org_id, project_id, subject, email, groups_json, last_seen_at FROM person_sessions \
             WHERE token_hash = $1 AND ended_at IS NULL AND expires_at > $2 AND last_seen_at > $3",
        )
        .bind(token_hash)
        .bind(now)
        .bind(now.saturating_sub(idle_ms))
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            let groups: String = r.try_get("groups_json")?;
            Ok(PersonSession {
                org_id: r.try_get("org_id")?,
                project_id: r.try_get("project_id")?,
                subject: r.try_get("subject")?,
                email: r.try_get("email")?,
                groups: serde_json::from_str(&groups).map_err(|e| super::Error::Corrupt(e.to_string()))?,
                last_seen_at: r.try_get("last_seen_at")?,
            })
        })
        .transpose()
    }

    /// Records a use (callers touch a session at most once a minute).
    pub(crate) async fn touch_person_session(&self, token_hash: &[u8], now: Millis) -> Result<()> {
        self.touch_session(SessionTable::People, token_hash, now).await
    }

    /// Ends the session; false when it was not open.
    pub(crate) async fn end_person_session(&self, token_hash: &[u8], now: Millis) -> Result<bool> {
        self.end_session(SessionTable::People, token_hash, now).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::contract_tests::backends;
    use super::NewPersonSession;

    #[tokio::test]
    async fn a_person_session_ends_by_sign_out_idleness_or_age() {
        for b in backends().await {
            let (n, s) = (b.name, &b.store);
            let groups = vec!["admins".to_owned()];
            let new = NewPersonSession {
                token_hash: &[7],
                org_id: "o",
                project_id: "p",
                subject: "sub-1",
                email: "ann@x.org",
                groups: &groups,
            };
            s.open_person_session(&new, 100, 10_000).await.expect("open");
            let open = s.person_session(&[7], 900, 1_000).await.expect("read").expect("open");
            assert_eq!(
                (open.email.as_str(), open.groups.clone(), open.last_seen_at),
                ("ann@x.org", groups, 100),
                "{n}"
            );
            assert!(s.person_session(&[7], 1_100, 1_000).await.expect("read").is_none(), "{n}: idle");
            s.touch_person_session(&[7], 1_050).await.expect("touch");
            assert!(s.person_session(&[7], 1_100, 1_000).await.expect("read").is_some(), "{n}: used");
            assert!(s.person_session(&[7], 10_000, 100_000).await.expect("read").is_none(), "{n}: absolute end");
            assert!(s.person_session(&[8], 900, 1_000).await.expect("read").is_none(), "{n}: another token");
            assert!(s.end_person_session(&[7], 1_100).await.expect("end"), "{n}");
            assert!(!s.end_person_session(&[7], 1_100).await.expect("end"), "{n}: once");
            assert!(s.person_session(&[7], 1_100, 1_000).await.expect("read").is_none(), "{n}: signed out");
        }
    }
}
