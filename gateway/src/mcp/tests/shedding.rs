//! Load shedding and graceful shutdown as MCP clients see them: parked waits
//! are bounded per credential (-32025 with `Retry-After`, nothing started), and a
//! shutdown ends every parked wait at once with an answer that says so.

use super::fake::text_result;
use super::*;
use futures_util::stream::BoxStream;

const V1: &str = "2025-11-25";

async fn legacy_task(h: &Harness, token: &str, session: &str) -> String {
    let params = json!({"name": "slow", "arguments": {}, "task": {"ttl": 60000}});
    let a = h.legacy(token, session, "tools/call", params).await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.body());
    a.result()["task"]["taskId"].as_str().expect("taskId").to_owned()
}

/// Opens a blocking `tasks/result` and returns its messages once the gateway parks on it.
async fn parked_result(h: &Harness, token: &str, session: &str, id: &str) -> BoxStream<'static, Value> {
    let seen = h.fake.waits();
    let (status, _, body) = h.open(legacy_request(token, session, "tasks/result", json!({"taskId": id}))).await;
    assert_eq!(status, StatusCode::OK);
    let mut messages = sse_messages(body);
    let waited = h.fake.until_waits_exceed(seen);
    // The stream's first step runs when it is polled.
    tokio::select! {
        () = waited => {}
        m = messages.next() => panic!("the stream answered before parking: {m:?}"),
    }
    messages
}

#[tokio::test]
async fn a_credential_over_its_wait_bound_is_over_capacity_and_others_are_served() {
    let h = harness_with(|o| o.max_waits_per_principal = 1).await;
    let (_, alice) = h.initialize("alice", V1, json!({})).await;
    let (_, bob) = h.initialize("bob", V1, json!({})).await;
    let first = legacy_task(&h, "alice", &alice).await;
    let second = legacy_task(&h, "alice", &alice).await;
    let _parked = parked_result(&h, "alice", &alice, &first).await;

    let refused = h.legacy("alice", &alice, "tasks/result", json!({"taskId": second})).await;
    assert_eq!(refused.status, StatusCode::OK);
    assert_eq!(refused.error_code(), -32025);
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(refused.body()["id"], 7);
    assert_eq!(refused.body()["error"]["data"]["code"], "too_many_waits");
    assert_eq!(refused.body()["error"]["data"]["scope"], "principal");
    assert_eq!(refused.body()["error"]["data"]["retryAfterMs"], 1000);

    // A foreground call that would wait is refused before anything starts.
    let started = h.fake.count();
    let call = h.modern("alice", "tools/call", json!({"name": "slow_fg"}), false).await;
    assert_eq!((call.status, call.error_code()), (StatusCode::OK, -32025));
    assert_eq!(h.fake.count(), started, "nothing was started");
    let get = json!({"name": "Baton_GetToolExecution", "arguments": {"execution_id": second, "wait_ms": 1000}});
    let get = h.modern("alice", "tools/call", get, false).await;
    assert_eq!(get.error_code(), -32025, "a compatibility wait is bounded too");
    // Reads that do not wait are not.
    let read = h.legacy("alice", &alice, "tasks/get", json!({"taskId": second})).await;
    assert_eq!(read.status, StatusCode::OK);

    // Another credential is served meanwhile.
    let theirs = legacy_task(&h, "bob", &bob).await;
    let _theirs = parked_result(&h, "bob", &bob, &theirs).await;
}

#[tokio::test]
async fn shutdown_ends_a_tasks_result_stream_at_once_saying_so() {
    let h = harness().await;
    let (_, session) = h.initialize("alice", V1, json!({})).await;
    let id = legacy_task(&h, "alice", &session).await;
    let mut messages = parked_result(&h, "alice", &session, &id).await;
    h.shutdown.cancel();
    let last = read_until(&mut messages, |m| m.get("id").is_some()).await;
    assert_eq!(last["id"], 7);
    let data = &last["error"]["data"];
    assert_eq!((data["shutdown"].as_bool(), data["executionId"].as_str()), (Some(true), Some(id.as_str())));
    assert_eq!(data["retryAfterMs"], 0, "asking again, anywhere, is safe");
    assert!(messages.next().await.is_none(), "the stream ends after its answer");
    // The execution goes on; a stream opened during shutdown ends the same way.
    let again = h.legacy("alice", &session, "tasks/result", json!({"taskId": id})).await;
    assert_eq!(again.body()["error"]["data"]["shutdown"], true);
}

#[tokio::test]
async fn shutdown_ends_a_foreground_stream_naming_the_execution() {
    let h = harness().await;
    let seen = h.fake.waits();
    let (status, _, body) = h.open(modern_request("alice", "tools/call", json!({"name": "slow_fg"}), false)).await;
    assert_eq!(status, StatusCode::OK);
    let reader = tokio::spawn(async move { read_until(&mut sse_messages(body), |m| m.get("id").is_some()).await });
    h.fake.until_waits_exceed(seen).await;
    h.shutdown.cancel();
    let message = reader.await.expect("reader");
    let data = &message["error"]["data"];
    assert_eq!(data["shutdown"], true);
    assert_eq!(data["executionId"], h.fake.last_id().as_str());
    assert!(data.get("retryAfterMs").is_none(), "calling again would start another execution");
}

#[tokio::test]
async fn shutdown_hands_a_foreground_call_over_at_once() {
    let h = harness_with(|o| o.foreground_budget = Duration::from_secs(60)).await;
    let seen = h.fake.waits();
    let request = modern_request("alice", "tools/call", json!({"name": "slow"}), true);
    let app = h.app.clone();
    let pending = tokio::spawn(async move {
        let response = tower::ServiceExt::oneshot(app, request).await.expect("router");
        axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body")
    });
    h.fake.until_waits_exceed(seen).await;
    h.shutdown.cancel();
    let body: Value = serde_json::from_slice(&pending.await.expect("join")).expect("json");
    assert_eq!(body["result"]["resultType"], "task", "{body}");
    assert_eq!(body["result"]["taskId"], h.fake.last_id().as_str());
}

#[tokio::test]
async fn shutdown_answers_a_compatibility_wait_with_the_execution_as_it_stands() {
    let h = harness().await;
    let started = h.modern("alice", "tools/call", json!({"name": "slow", "arguments": {}}), false).await;
    assert_eq!(started.result()["structuredContent"]["state"], "working");
    let id = h.fake.last_id();
    let seen = h.fake.waits();
    let get = json!({"name": "Baton_GetToolExecution", "arguments": {"execution_id": id, "wait_ms": 45000}});
    let request = modern_request("alice", "tools/call", get, false);
    let app = h.app.clone();
    let pending = tokio::spawn(async move {
        let response = tower::ServiceExt::oneshot(app, request).await.expect("router");
        axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body")
    });
    h.fake.until_waits_exceed(seen).await;
    h.shutdown.cancel();
    let body: Value = serde_json::from_slice(&pending.await.expect("join")).expect("json");
    let handle = &body["result"]["structuredContent"];
    assert_eq!((handle["execution_id"].as_str(), handle["state"].as_str()), (Some(id.as_str()), Some("working")));
    assert_eq!(handle["next_action"]["tool"], "Baton_GetToolExecution");
    h.fake.finish(&id, &text_result("later", false));
}
