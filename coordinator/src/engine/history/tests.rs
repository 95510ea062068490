//! The history use cases on SQLite (`baton dev`'s store) with a real key ring:
//! the authorization table, payloads opened only for admins who ask, and
//! each attempt's error told apart from the system's.

use super::*;
use crate::authz::Role;
use crate::domain::Event;
use crate::engine::lifecycle::StartRequest;
use crate::engine::messages::{Registration, Reported};
use crate::engine::outbox;
use crate::engine::tests::{World, assigned, settlement};
use crate::store::{EventData, ToolRecord};

#[test]
fn outcomes_are_statuses_and_cancelled_is_neither() {
    assert_eq!(RunOutcome::Success.status(), Status::Completed);
    assert_eq!(RunOutcome::Failure.status(), Status::Failed);
}

#[test]
fn filters_are_checked() {
    let ok = HistoryQuery { tool_name: Some("Demo.Echo".into()), ..Default::default() };
    assert_eq!(ok.filter("p").expect("valid").tool_name.as_deref(), Some("Demo.Echo"));
    for bad in [
        HistoryQuery { user_id: Some(String::new()), ..Default::default() },
        HistoryQuery { toolkit_name: Some("a\u{0}b".into()), ..Default::default() },
        HistoryQuery { tool_name: Some("x".repeat(513)), ..Default::default() },
        HistoryQuery { start_ms: Some(2), end_ms: Some(1), ..Default::default() },
    ] {
        assert!(matches!(bad.filter("p"), Err(Error::Invalid(_))), "{bad:?}");
    }
}

fn flaky() -> ToolRecord {
    ToolRecord {
        toolkit_version: "2.0.0".into(),
        background: Some(crate::domain::Background::Optional),
        max_attempts: 3,
        ..crate::store::contract_tests::tool_record("Test.Flaky")
    }
}

fn key(token: &str) -> Option<String> {
    Some(format!("Bearer {token}"))
}

fn forbidden(r: Result<impl std::fmt::Debug>) -> bool {
    matches!(r, Err(Error::Auth(authz::Error::Forbidden(_))))
}

fn not_found(r: Result<impl std::fmt::Debug>) -> bool {
    matches!(r, Err(Error::Auth(authz::Error::NotFound)))
}

#[tokio::test]
async fn the_history_shows_every_attempt_and_opens_payloads_for_admins_only() {
    let w = World::new().await;
    let store = &w.engine.store;
    let issue = |role| crate::admin::issue_api_key(store, &w.project_id, role, &[]);
    let admin = issue(Role::Admin).await.expect("admin").token;
    let member = issue(Role::Member).await.expect("member").token;
    let read_only = issue(Role::ReadOnly).await.expect("read only").token;
    let elsewhere = crate::admin::create_project(store, &w.org_id, "other").await.expect("project");
    let foreign = crate::admin::issue_api_key(store, &elsewhere, Role::Admin, &[]).await.expect("foreign").token;

    let registration = Registration {
        worker_id: "w1".into(),
        worker_token: w.worker_token.clone(),
        tools: vec![flaky()],
        capacity: 4,
        running: Vec::new(),
        settling: Vec::new(),
    };
    let (tx, mut rx) = outbox(8);
    let session = w.engine.register(registration, tx).await.expect("register");
    let start = StartRequest {
        org_id: w.org_id.clone(),
        project_id: w.project_id.clone(),
        gateway_id: w.gateway_id.clone(),
        tool_name: "Test.Flaky".into(),
        input_json: r#"{"text":"canary-input"}"#.into(),
        request_fingerprint: "f".into(),
        surface: crate::domain::Surface::Rest,
        ..Default::default()
    };
    let id = w.engine.start(w.bearer().as_deref(), start.clone()).await.expect("start").record.id;
    let first = assigned(&w.engine, &mut rx).await;
    let failure = Reported::ToolError {
        message: "provider said 502".into(),
        retryable: true,
        detail_json: r#"{"stack":"canary-detail"}"#.into(),
        protocol: false,
    };
    w.engine.handle(&session, vec![settlement(&first, failure)]).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let second = assigned(&w.engine, &mut rx).await;
    assert_eq!(second.attempt, 2);
    let result = r#"{"content":[{"type":"text","text":"canary-output"}]}"#;
    w.engine.handle(&session, vec![settlement(&second, Reported::Result(result.into()))]).await;

    // A second run that the deadline ends while it runs: the system's error.
    let late = w.engine.start(w.bearer().as_deref(), start).await.expect("start").record.id;
    assigned(&w.engine, &mut rx).await;
    let deadline = store.get_execution(&late).await.expect("get").expect("exists").execution_deadline;
    store.apply(&late, &Event::DeadlinePassed, &EventData::default(), deadline + 1).await.expect("deadline");

    let scope = w.scope();
    let everything = HistoryQuery::default();
    let page = w.engine.history_list(key(&member).as_deref(), scope, &everything, 10, 0).await.expect("list");
    assert_eq!(page.total, 2);
    assert_eq!(page.items.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [late.as_str(), id.as_str()]);
    let failures = HistoryQuery { outcome: Some(RunOutcome::Failure), ..Default::default() };
    assert_eq!(w.engine.history_count(key(&member).as_deref(), scope, &failures).await.expect("count"), 1);

    let plain =
        w.engine.history_detail(key(&member).as_deref(), scope, id.as_str(), Reveal::default()).await.expect("detail");
    assert_eq!(plain.record.status(), Status::Completed);
    assert_eq!(plain.record.error_message, None, "a completed run keeps no error of an earlier attempt");
    assert_eq!((plain.input.as_deref(), plain.output.as_deref()), (None, None));
    let errors: Vec<_> = plain.attempts.iter().map(|a| (a.number, a.success, a.error.as_deref())).collect();
    assert_eq!(errors, [(1, Some(false), Some("provider said 502")), (2, Some(true), None)]);
    assert!(plain.attempts.iter().all(|a| a.output.is_none() && a.error_detail.is_none() && a.system_error.is_none()));
    let kinds: Vec<&str> = plain.timeline.iter().map(|e| e.kind.map_or("", |k| k.as_str())).collect();
    assert_eq!(kinds, ["created", "claimed", "settled", "claimed", "settled"]);

    let all = Reveal { inputs: true, outputs: true };
    let full = w.engine.history_detail(key(&admin).as_deref(), scope, id.as_str(), all).await.expect("detail");
    assert_eq!(full.input.as_deref(), Some(r#"{"text":"canary-input"}"#));
    assert_eq!(full.output.as_deref(), Some(result));
    assert_eq!(full.attempts[0].error_detail.as_deref(), Some(r#"{"stack":"canary-detail"}"#));
    assert_eq!(full.attempts[1].output.as_deref(), Some(result));

    let ended = w
        .engine
        .history_detail(key(&member).as_deref(), scope, late.as_str(), Reveal::default())
        .await
        .expect("detail");
    let attempt = &ended.attempts[0];
    assert_eq!((attempt.success, attempt.error.as_deref()), (Some(false), None));
    assert!(attempt.system_error.as_deref().is_some_and(|m| m.contains("deadline")), "{attempt:?}");

    // The table: payloads are the admin's; read-only keys and end users are refused.
    let only_inputs = Reveal { inputs: true, outputs: false };
    assert!(forbidden(w.engine.history_detail(key(&member).as_deref(), scope, id.as_str(), only_inputs).await));
    for refused in [key(&read_only), w.bearer()] {
        assert!(forbidden(w.engine.history_list(refused.as_deref(), scope, &everything, 10, 0).await));
        assert!(forbidden(w.engine.history_count(refused.as_deref(), scope, &everything).await));
        assert!(forbidden(w.engine.history_detail(refused.as_deref(), scope, id.as_str(), Reveal::default()).await));
    }
    // Another project's key, an unknown id and a malformed one: the uniform not-found.
    assert!(not_found(w.engine.history_list(key(&foreign).as_deref(), scope, &everything, 10, 0).await));
    assert!(not_found(w.engine.history_detail(key(&foreign).as_deref(), scope, id.as_str(), Reveal::default()).await));
    let foreign_scope = Scope { org_id: &w.org_id, project_id: &elsewhere };
    assert!(not_found(
        w.engine.history_detail(key(&foreign).as_deref(), foreign_scope, id.as_str(), Reveal::default()).await
    ));
    for unknown in ["te_000000000000000000000000000", "te_%00"] {
        assert!(not_found(w.engine.history_detail(key(&admin).as_deref(), scope, unknown, Reveal::default()).await));
    }
    let none = None;
    assert!(matches!(
        w.engine.history_list(none, scope, &everything, 10, 0).await,
        Err(Error::Auth(authz::Error::Unauthenticated))
    ));
    assert!(matches!(
        w.engine.history_list(key(&member).as_deref(), scope, &everything, MAX_LIMIT + 1, 0).await,
        Err(Error::Invalid(_))
    ));
}
