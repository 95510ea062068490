//! Roles for people: a project's grants of a role to an email address or to a
//! group of the OpenID provider (`project_role_grants`, decision 0050). Read
//! on every request a person makes, so a revoked grant takes effect on the next.

use super::{Result, Store};
use crate::domain::Millis;
use sqlx::Row;

/// One grant, as stored: `subject_kind` is `email` or `group`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleGrantRow {
    pub project_id: String,
    pub subject_kind: String,
    pub subject: String,
    pub role: String,
    pub granted_at: Millis,
}

fn from_row(r: &sqlx::any::AnyRow) -> Result<RoleGrantRow> {
    Ok(RoleGrantRow {
        project_id: r.try_get("project_id")?,
        subject_kind: r.try_get("subject_kind")?,
        subject: r.try_get("subject")?,
        role: r.try_get("role")?,
        granted_at: r.try_get("granted_at")?,
    })
}

const COLUMNS: &str = "project_id, subject_kind, subject, role, granted_at";

impl Store {
    /// Grants `role` to the subject in the project, replacing the role it
    /// held there; returns that previous role.
    pub async fn grant_role(
        &self,
        project_id: &str,
        subject_kind: &str,
        subject: &str,
        role: &str,
        now: Millis,
    ) -> Result<Option<String>> {
        let mut tx = self.begin().await?;
        let previous: Option<String> = sqlx::query_scalar(
            "SELECT role FROM project_role_grants WHERE project_id = $1 AND subject_kind = $2 AND subject = $3",
        )
        .bind(project_id)
        .bind(subject_kind)
        .bind(subject)
        .fetch_optional(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO project_role_grants (project_id, subject_kind, subject, role, granted_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project_id, subject_kind, subject) \
             DO UPDATE SET role = excluded.role, granted_at = excluded.granted_at",
        )
        .bind(project_id)
        .bind(subject_kind)
        .bind(subject)
        .bind(role)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        self.commit(tx).await?;
        Ok(previous)
    }

    /// Removes the subject's grant in the project; returns the role it held.
    pub async fn revoke_role(&self, project_id: &str, subject_kind: &str, subject: &str) -> Result<Option<String>> {
        let removed: Option<String> = sqlx::query_scalar(
            "DELETE FROM project_role_grants WHERE project_id = $1 AND subject_kind = $2 AND subject = $3 \
             RETURNING role",
        )
        .bind(project_id)
        .bind(subject_kind)
        .bind(subject)
        .fetch_optional(&self.pool)
        .await?;
        Ok(removed)
    }

    /// The project's grants, by subject.
    pub async fn role_grants(&self, project_id: &str) -> Result<Vec<RoleGrantRow>> {
        let sql =
            format!("SELECT {COLUMNS} FROM project_role_grants WHERE project_id = $1 ORDER BY subject_kind, subject");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(project_id).fetch_all(&self.pool).await?;
        rows.iter().map(from_row).collect()
    }

    /// The project's grants that name `email` or one of `groups`.
    pub async fn role_grants_of(&self, project_id: &str, email: &str, groups: &[String]) -> Result<Vec<RoleGrantRow>> {
        let mut sql = format!(
            "SELECT {COLUMNS} FROM project_role_grants WHERE project_id = $1 \
             AND ((subject_kind = 'email' AND subject = $2)"
        );
        if !groups.is_empty() {
            let slots: Vec<String> = (0..groups.len()).map(|i| format!("${}", i + 3)).collect();
            sql.push_str(&format!(" OR (subject_kind = 'group' AND subject IN ({}))", slots.join(", ")));
        }
        sql.push(')');
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(project_id).bind(email);
        for g in groups {
            q = q.bind(g);
        }
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter().map(from_row).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::contract_tests::backends;

    #[tokio::test]
    async fn grants_replace_revoke_and_match_by_email_or_group() {
        for b in backends().await {
            let (n, s) = (b.name, &b.store);
            assert_eq!(s.grant_role("p", "email", "ann@x.org", "member", 1).await.expect("grant"), None, "{n}");
            let previous = s.grant_role("p", "email", "ann@x.org", "admin", 2).await.expect("regrant");
            assert_eq!(previous.as_deref(), Some("member"), "{n}: a grant replaces the subject's role");
            s.grant_role("p", "group", "ops", "operator", 3).await.expect("group");
            s.grant_role("q", "email", "ann@x.org", "read_only", 4).await.expect("other project");
            let all = s.role_grants("p").await.expect("list");
            let listed: Vec<(&str, &str, &str)> =
                all.iter().map(|g| (g.subject_kind.as_str(), g.subject.as_str(), g.role.as_str())).collect();
            assert_eq!(listed, [("email", "ann@x.org", "admin"), ("group", "ops", "operator")], "{n}");
            let groups = vec!["ops".to_owned(), "dev".to_owned()];
            assert_eq!(s.role_grants_of("p", "bob@x.org", &groups).await.expect("of").len(), 1, "{n}: by group");
            assert_eq!(s.role_grants_of("p", "ann@x.org", &[]).await.expect("of").len(), 1, "{n}: by email");
            assert!(s.role_grants_of("p", "eve@x.org", &["ann@x.org".into()]).await.expect("of").is_empty(), "{n}");
            assert!(s.role_grants_of("r", "ann@x.org", &groups).await.expect("of").is_empty(), "{n}: per project");
            let revoked = s.revoke_role("p", "group", "ops").await.expect("revoke");
            assert_eq!(revoked.as_deref(), Some("operator"), "{n}");
            assert_eq!(s.revoke_role("p", "group", "ops").await.expect("again"), None, "{n}: once");
            assert!(s.role_grants_of("p", "bob@x.org", &groups).await.expect("of").is_empty(), "{n}: revoked");
        }
    }
}
