//! A project's administration under `/v1/orgs/{org_id}/projects/{project_id}`:
//! the audit log (`GET …/audit_logs`, filtered and paged like the history)
//! and the retention window (`GET`/`PUT …/retention`). Only the project's
//! admin API keys may call them; the coordinator decides (`authz::admin`).

pub(crate) mod openapi;

use super::ScopePath;
use super::body::RetentionBody;
use super::history::{Params, invalid, offset_page, ok};
use crate::app::AppState;
use crate::coordinator::Bearer;
use crate::coordinator::admin::AuditQuery;
use crate::error::ApiError;
use crate::json::rfc3339;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use baton_proto::coordinator::v1 as pb;
use serde_json::{Value, json};

pub(crate) const AUDIT: &str = "/v1/orgs/{org_id}/projects/{project_id}/audit_logs";
pub(crate) const RETENTION: &str = "/v1/orgs/{org_id}/projects/{project_id}/retention";
/// The page size when `limit` is not given.
pub(crate) const DEFAULT_LIMIT: u32 = 100;
/// The largest `limit`.
pub(crate) const MAX_LIMIT: u32 = 1_000;

const FILTERS: [&str; 5] = ["action", "actor_id", "outcome", "start_time", "end_time"];

pub(crate) fn router() -> Router<AppState> {
    Router::new().route(AUDIT, get(audit_logs)).route(RETENTION, get(retention).put(set_retention))
}

fn entry(e: &pb::AuditLogEntry) -> Value {
    json!({
        "id": e.id,
        "at": rfc3339(e.at_ms),
        "actor_id": e.actor_id,
        "actor_kind": e.actor_kind,
        "action": e.action,
        "target": e.target,
        "outcome": e.outcome,
        "detail": e.detail,
        "occurrences": e.occurrences.max(1),
        "scope": if e.project_id.is_some() { "project" } else { "organization" },
    })
}

fn retention_view(r: &pb::Retention) -> Value {
    json!({
        "retention_seconds": r.effective_ms / 1000,
        "source": r.source,
        "project_retention_seconds": r.project_ms.map(|ms| ms / 1000),
        "organization_retention_seconds": r.organization_ms.map(|ms| ms / 1000),
        "execution_logging": r.execution_logging,
    })
}

async fn audit_logs(
    State(state): State<AppState>,
    Path(p): Path<ScopePath>,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let (params, limit, offset) = Params::paged(pairs, &FILTERS, MAX_LIMIT, DEFAULT_LIMIT)?;
    let query = AuditQuery {
        action: params.text("action")?,
        actor_id: params.text("actor_id")?,
        outcome: params.text("outcome")?,
        start_ms: params.time("start_time")?,
        end_ms: params.time("end_time")?,
    };
    if let (Some(start), Some(end)) = (query.start_ms, query.end_ms)
        && start > end
    {
        return Err(invalid("`start_time` must not be after `end_time`"));
    }
    let page = state.coordinator.audit_logs(&bearer, &p.scope(None), &query, limit, offset).await?;
    Ok(offset_page(page.items.iter().map(entry).collect(), limit, offset, page.total_count))
}

async fn retention(
    State(state): State<AppState>,
    Path(p): Path<ScopePath>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let r = state.coordinator.retention(&bearer, &p.scope(None)).await?;
    Ok(ok(retention_view(&r)))
}

async fn set_retention(
    State(state): State<AppState>,
    Path(p): Path<ScopePath>,
    headers: HeaderMap,
    raw: Bytes,
) -> Result<Response, ApiError> {
    let bearer = Bearer::from_headers(&headers)?;
    let body = RetentionBody::parse(&raw)?;
    let r = state.coordinator.set_retention(&bearer, &p.scope(None), body.retention_ms).await?;
    Ok(ok(retention_view(&r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_bodies_name_their_field_when_refused() {
        assert_eq!(RetentionBody::parse(br#"{"retention_seconds": 60}"#).expect("ok").retention_ms, Some(60_000));
        assert_eq!(RetentionBody::parse(br#"{"retention_seconds": null}"#).expect("ok").retention_ms, None);
        for bad in
            [&br#"{}"#[..], br#"{"retention_seconds": -1}"#, br#"{"retention_seconds": "7d"}"#, br#"{"days": 7}"#]
        {
            let e = RetentionBody::parse(bad).expect_err("refused").message();
            assert!(e.contains("retention_seconds") || e.contains("`days`"), "{e}");
        }
    }

    #[test]
    fn audit_entries_say_their_scope() {
        let e = pb::AuditLogEntry { id: "aud_1".into(), action: "retention.set".into(), ..Default::default() };
        assert_eq!(entry(&e)["scope"], "organization");
        let p = pb::AuditLogEntry { project_id: Some("prj".into()), ..e };
        assert_eq!(entry(&p)["scope"], "project");
    }
}
