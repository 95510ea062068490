//! The project administration calls of the typed client
//! (`baton.coordinator.v1.ProjectAdmin`): the audit log and the retention
//! window. The coordinator decides who may call them.

use super::{Bearer, Coordinator, Scope};
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::WireError;
use pb::project_admin_client::ProjectAdminClient;
use tonic::transport::Channel;

/// What an audit read narrows to; `None` narrows nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AuditQuery {
    pub(crate) action: Option<String>,
    pub(crate) actor_id: Option<String>,
    pub(crate) outcome: Option<String>,
    pub(crate) start_ms: Option<i64>,
    pub(crate) end_ms: Option<i64>,
}

impl Coordinator {
    fn project_admin(&self) -> ProjectAdminClient<Channel> {
        ProjectAdminClient::new(self.channel.clone())
    }

    /// One page of the project's audit log, newest first, and the total that match.
    pub(crate) async fn audit_logs(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        query: &AuditQuery,
        limit: u32,
        offset: u32,
    ) -> Result<pb::ListAuditLogsResponse, WireError> {
        let request = pb::ListAuditLogsRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            action: query.action.clone(),
            actor_id: query.actor_id.clone(),
            outcome: query.outcome.clone(),
            start_time_ms: query.start_ms,
            end_time_ms: query.end_ms,
            limit,
            offset,
        };
        let mut client = self.project_admin();
        self.call(bearer, request, None, |_, r| async move { client.list_audit_logs(r).await }).await
    }

    pub(crate) async fn retention(&self, bearer: &Bearer, scope: &Scope) -> Result<pb::Retention, WireError> {
        let request = pb::GetRetentionRequest { org_id: scope.org_id.clone(), project_id: scope.project_id.clone() };
        let mut client = self.project_admin();
        self.call(bearer, request, None, |_, r| async move { client.get_retention(r).await }).await
    }

    /// Sets (or with `None` clears) the project's retention override.
    pub(crate) async fn set_retention(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        retention_ms: Option<i64>,
    ) -> Result<pb::Retention, WireError> {
        let request = pb::SetRetentionRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            retention_ms,
        };
        let mut client = self.project_admin();
        self.call(bearer, request, None, |_, r| async move { client.set_retention(r).await }).await
    }
}
