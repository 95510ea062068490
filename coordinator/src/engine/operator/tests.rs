//! Operator recovery on SQLite: permissions, not roles, open each route;
//! status never carries a payload; cancellation answers what it can prove.

use super::*;
use crate::authz::Role;
use crate::engine::tests::World;

fn key(token: &str) -> Option<String> {
    Some(format!("Bearer {token}"))
}

#[tokio::test]
async fn operators_read_status_payloads_and_cancel_by_permission() {
    let w = World::new().await;
    let store = &w.engine.store;
    let issue = |role, permissions: &[&str]| {
        let permissions: Vec<String> = permissions.iter().map(|p| p.to_string()).collect();
        let project = w.project_id.clone();
        async move { crate::admin::issue_api_key(store, &project, role, &permissions).await.expect("key").token }
    };
    let status_only = issue(Role::Member, &["status"]).await;
    let payload_only = issue(Role::Member, &["payload"]).await;
    let canceller = issue(Role::Member, &["cancel"]).await;
    let read_only_all = issue(Role::ReadOnly, &["status", "payload", "cancel"]).await;
    let plain_admin = issue(Role::Admin, &[]).await;
    let start = crate::engine::lifecycle::StartRequest {
        org_id: w.org_id.clone(),
        project_id: w.project_id.clone(),
        gateway_id: w.gateway_id.clone(),
        tool_name: "Test.Echo".into(),
        input_json: r#"{"text":"operator-canary"}"#.into(),
        request_fingerprint: "f".into(),
        surface: crate::domain::Surface::Rest,
        ..Default::default()
    };
    // The tool must exist: register a worker serving it.
    let (_session, _rx) = w.worker("w1", Vec::new()).await;
    let id = w.engine.start(w.bearer().as_deref(), start).await.expect("start").record.id;
    let scope = w.scope();

    let (rows, next) = w.engine.operator_list(key(&status_only).as_deref(), scope, 10, "").await.expect("list");
    assert_eq!((rows.len(), next), (1, None));
    let status = w.engine.operator_status(key(&status_only).as_deref(), scope, id.as_str()).await.expect("status");
    assert_eq!(status.id, id);
    let payload = w.engine.operator_payload(key(&payload_only).as_deref(), scope, id.as_str()).await.expect("payload");
    assert_eq!(payload.input.as_deref(), Some(r#"{"text":"operator-canary"}"#));
    assert_eq!(payload.result, None, "no result before completion");

    let refused = |r: Result<ExecutionRecord>| matches!(r, Err(Error::Auth(authz::Error::Forbidden(_))));
    assert!(refused(w.engine.operator_status(key(&payload_only).as_deref(), scope, id.as_str()).await));
    assert!(refused(w.engine.operator_status(key(&plain_admin).as_deref(), scope, id.as_str()).await));
    assert!(refused(w.engine.operator_status(w.bearer().as_deref(), scope, id.as_str()).await));
    assert!(matches!(
        w.engine.operator_payload(key(&status_only).as_deref(), scope, id.as_str()).await,
        Err(Error::Auth(authz::Error::Forbidden(_)))
    ));
    assert!(matches!(
        w.engine.operator_cancel(key(&read_only_all).as_deref(), scope, id.as_str()).await,
        Err(Error::Auth(authz::Error::Forbidden(_)))
    ));
    let unknown = w.engine.operator_status(key(&status_only).as_deref(), scope, "te_000000000000000000000000000").await;
    assert!(matches!(unknown, Err(Error::Auth(authz::Error::NotFound))));

    let (outcome, _) = w.engine.operator_cancel(key(&canceller).as_deref(), scope, id.as_str()).await.expect("cancel");
    assert_eq!(outcome, CancelOutcome::Accepted, "a pending execution is cancelled at once");
    let (again, record) =
        w.engine.operator_cancel(key(&canceller).as_deref(), scope, id.as_str()).await.expect("again");
    assert_eq!((again, record.status()), (CancelOutcome::AlreadyTerminal, Status::Cancelled));
    assert!(matches!(
        w.engine.operator_list(key(&status_only).as_deref(), scope, 10, "bogus").await,
        Err(Error::Invalid(_))
    ));
}
