//! `baton.coordinator.v1.ProjectAdmin`: a project's audit log and retention
//! window, over the engine's settings use cases.

use super::authorization;
use super::status::to_status;
use crate::engine::settings::{AuditQuery, RetentionView};
use crate::engine::{Engine, Scope};
use crate::store::AuditEntry;
use baton_proto::coordinator::v1::{self as pb, project_admin_server::ProjectAdmin};
use std::sync::Arc;
use tonic::{Request, Response, Status};

pub(crate) struct ProjectAdminService {
    pub(crate) engine: Arc<Engine>,
}

type Reply<T> = Result<Response<T>, Status>;

fn entry(e: AuditEntry) -> pb::AuditLogEntry {
    pb::AuditLogEntry {
        id: e.id,
        at_ms: e.at,
        actor_id: e.actor_id,
        actor_kind: e.actor_kind,
        action: e.action,
        target: e.target,
        outcome: e.outcome,
        detail: e.detail,
        project_id: e.project_id,
        occurrences: e.occurrences,
    }
}

fn retention(v: RetentionView) -> pb::Retention {
    pb::Retention {
        effective_ms: v.effective_ms,
        source: v.source.as_str().to_owned(),
        project_ms: v.project_ms,
        organization_ms: v.organization_ms,
        execution_logging: v.execution_logging,
    }
}

#[tonic::async_trait]
impl ProjectAdmin for ProjectAdminService {
    async fn list_audit_logs(&self, req: Request<pb::ListAuditLogsRequest>) -> Reply<pb::ListAuditLogsResponse> {
        let r = req.get_ref();
        let query = AuditQuery {
            action: r.action.clone(),
            actor_id: r.actor_id.clone(),
            outcome: r.outcome.clone(),
            start_ms: r.start_time_ms,
            end_ms: r.end_time_ms,
        };
        let scope = Scope { org_id: &r.org_id, project_id: &r.project_id };
        let page =
            self.engine.audit_logs(authorization(&req), scope, &query, r.limit, r.offset).await.map_err(to_status)?;
        Ok(Response::new(pb::ListAuditLogsResponse {
            items: page.items.into_iter().map(entry).collect(),
            total_count: page.total,
        }))
    }

    async fn get_retention(&self, req: Request<pb::GetRetentionRequest>) -> Reply<pb::Retention> {
        let r = req.get_ref();
        let scope = Scope { org_id: &r.org_id, project_id: &r.project_id };
        let view = self.engine.retention(authorization(&req), scope).await.map_err(to_status)?;
        Ok(Response::new(retention(view)))
    }

    async fn set_retention(&self, req: Request<pb::SetRetentionRequest>) -> Reply<pb::Retention> {
        let r = req.get_ref();
        let scope = Scope { org_id: &r.org_id, project_id: &r.project_id };
        let view = self.engine.set_retention(authorization(&req), scope, r.retention_ms).await.map_err(to_status)?;
        Ok(Response::new(retention(view)))
    }
}
