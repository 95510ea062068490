//! A project's administration over the API: its audit log and its retention
//! window. Who may call what is `authz::admin::TABLE`; a refusal of a caller
//! of the project is itself audited.

use super::{Engine, Error, Result, Scope};
use crate::audit::{self, Actor, Record, action, outcome};
use crate::authz::{self, Principal, admin::Route};
use crate::domain::Millis;
use crate::store::{AuditEntry, AuditFilter, RetentionSettings};
use baton_proto::clock::now_ms;

/// An audit page holds at most this many rows.
pub(crate) const MAX_LIMIT: u32 = 1_000;
/// The longest retention window a project or organization may set: ten years.
pub(crate) const MAX_RETENTION_MS: i64 = 10 * 366 * 86_400_000;

/// What an audit read narrows to; `None` narrows nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AuditQuery {
    pub(crate) action: Option<String>,
    pub(crate) actor_id: Option<String>,
    pub(crate) outcome: Option<String>,
    pub(crate) start_ms: Option<Millis>,
    pub(crate) end_ms: Option<Millis>,
}

/// One page of the audit log, and how many rows the filter matches in all.
#[derive(Clone, Debug)]
pub(crate) struct AuditPage {
    pub(crate) items: Vec<AuditEntry>,
    pub(crate) total: u64,
}

/// Where a project's window comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RetentionSource {
    Project,
    Organization,
    Default,
    /// Execution logging is off for the organization.
    LoggingOff,
}

impl RetentionSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RetentionSource::Project => "project",
            RetentionSource::Organization => "organization",
            RetentionSource::Default => "default",
            RetentionSource::LoggingOff => "execution_logging_off",
        }
    }
}

/// A project's retention as callers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RetentionView {
    pub(crate) effective_ms: i64,
    pub(crate) source: RetentionSource,
    pub(crate) project_ms: Option<i64>,
    pub(crate) organization_ms: Option<i64>,
    pub(crate) execution_logging: bool,
}

impl RetentionView {
    fn of(s: RetentionSettings, default_ms: i64) -> RetentionView {
        let source = match (s.execution_logging, s.project_ms, s.organization_ms) {
            (false, _, _) => RetentionSource::LoggingOff,
            (true, Some(_), _) => RetentionSource::Project,
            (true, None, Some(_)) => RetentionSource::Organization,
            (true, None, None) => RetentionSource::Default,
        };
        RetentionView {
            effective_ms: s.effective_ms(default_ms),
            source,
            project_ms: s.project_ms,
            organization_ms: s.organization_ms,
            execution_logging: s.execution_logging,
        }
    }
}

/// Checks a window an administrator asks for.
pub(crate) fn check_retention(ms: Option<i64>) -> Result<()> {
    match ms {
        Some(ms) if !(0..=MAX_RETENTION_MS).contains(&ms) => Err(Error::Invalid(format!(
            "the retention window must be between 0 and {} seconds",
            MAX_RETENTION_MS / 1000
        ))),
        _ => Ok(()),
    }
}

impl Engine {
    /// Appends an audit row for `p` acting in `scope`; the operation fails if it cannot be written.
    pub(super) async fn audit(
        &self,
        p: &Principal,
        scope: Scope<'_>,
        action: &'static str,
        target: Option<&str>,
        outcome: &str,
        detail: Option<String>,
    ) -> Result<()> {
        let record =
            Record { org_id: scope.org_id, project_id: Some(scope.project_id), action, target, outcome, detail };
        audit::append(&self.store, &Actor::of(p), record).await?;
        Ok(())
    }

    /// Authenticates and checks `route` in `authz::admin::TABLE`; a refusal of
    /// a caller of the project is audited under `action` before it is answered.
    async fn project_admin(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        route: Route,
        action: Option<&'static str>,
    ) -> Result<Principal> {
        let p = self.authenticate(authorization).await?;
        p.in_scope(scope.org_id, scope.project_id)?;
        if let Err(e) = authz::admin::check(&p, scope.org_id, scope.project_id, route) {
            if let Some(action) = action {
                self.audit(&p, scope, action, None, outcome::REFUSED, Some(e.to_string())).await?;
            }
            return Err(e.into());
        }
        Ok(p)
    }

    /// The project's audit log (and its organization's changes), newest first.
    pub(crate) async fn audit_logs(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        query: &AuditQuery,
        limit: u32,
        offset: u32,
    ) -> Result<AuditPage> {
        self.project_admin(authorization, scope, Route::AuditLogs, Some(action::AUDIT_READ)).await?;
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::Invalid(format!("`limit` must be between 1 and {MAX_LIMIT}")));
        }
        if let (Some(start), Some(end)) = (query.start_ms, query.end_ms)
            && start > end
        {
            return Err(Error::Invalid("`start_time` must not be after `end_time`".into()));
        }
        for (name, value) in [("action", &query.action), ("actor_id", &query.actor_id), ("outcome", &query.outcome)] {
            if value.as_ref().is_some_and(|v| v.is_empty() || v.len() > 128 || v.chars().any(char::is_control)) {
                return Err(Error::Invalid(format!("`{name}` must be 1 to 128 characters without control characters")));
            }
        }
        let filter = AuditFilter {
            org_id: scope.org_id.to_owned(),
            project_id: scope.project_id.to_owned(),
            action: query.action.clone(),
            actor_id: query.actor_id.clone(),
            outcome: query.outcome.clone(),
            from: query.start_ms,
            before: query.end_ms,
        };
        let total = self.store.audit_count(&filter).await?;
        let items =
            if u64::from(offset) >= total { Vec::new() } else { self.store.audit_page(&filter, limit, offset).await? };
        Ok(AuditPage { items, total })
    }

    /// The project's retention window and where it comes from.
    pub(crate) async fn retention(&self, authorization: Option<&str>, scope: Scope<'_>) -> Result<RetentionView> {
        self.project_admin(authorization, scope, Route::ReadRetention, Some(action::RETENTION_READ)).await?;
        let settings =
            self.store.retention_settings(scope.org_id, scope.project_id).await?.ok_or(authz::Error::NotFound)?;
        Ok(RetentionView::of(settings, self.options.lifetime.retention_ms))
    }

    /// Sets (or with `None` clears) the project's override; rows it governs
    /// are re-dated at once, and the change is audited.
    pub(crate) async fn set_retention(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        retention_ms: Option<i64>,
    ) -> Result<RetentionView> {
        let p = self.project_admin(authorization, scope, Route::SetRetention, Some(action::RETENTION_SET)).await?;
        check_retention(retention_ms)?;
        let default_ms = self.options.lifetime.retention_ms;
        if !self.store.set_project_retention(scope.org_id, scope.project_id, retention_ms, default_ms, now_ms()).await?
        {
            return Err(authz::Error::NotFound.into());
        }
        let detail = Some(match retention_ms {
            Some(ms) => format!("project retention set to {} s", ms / 1000),
            None => "project retention override cleared".to_owned(),
        });
        self.audit(&p, scope, action::RETENTION_SET, Some(scope.project_id), outcome::ALLOWED, detail).await?;
        let settings =
            self.store.retention_settings(scope.org_id, scope.project_id).await?.ok_or(authz::Error::NotFound)?;
        Ok(RetentionView::of(settings, default_ms))
    }
}
