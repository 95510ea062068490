//! The REST owner lifecycle, status code by status code (seed 000).

use crate::harness::{Cluster, Settings};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn start_replay_conflict_long_poll_and_result() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);

    let first = alice.start("Demo.Sleep", json!({"seconds": 0.5}), Some("job-1")).await.expect("start");
    assert_eq!(first.status, 202);
    let v = first.json();
    let id = v["execution_id"].as_str().expect("id").to_owned();
    for field in ["status", "execution_deadline", "retention_expires_at", "poll_interval_ms"] {
        assert!(!v[field].is_null(), "202 lacks {field}: {v}");
    }

    let again = alice.start("Demo.Sleep", json!({"seconds": 0.5}), Some("job-1")).await.expect("replay");
    assert_eq!(again.status, 202);
    assert_eq!(again.json()["execution_id"], id.as_str(), "same key + same request = same execution");
    let other = alice.start("Demo.Sleep", json!({"seconds": 9}), Some("job-1")).await.expect("conflict");
    assert_eq!(other.status, 409);
    assert_eq!(other.json()["error"]["code"], "idempotency_conflict");

    let pending = alice.get(&format!("/tool-executions/{id}/result")).await.expect("result");
    assert_eq!(pending.status, 202, "result is 202 while pollable");

    let done = alice.until_terminal(&id, Duration::from_secs(20)).await.expect("terminal");
    assert_eq!(done["status"], "completed");
    let result = alice.get(&format!("/tool-executions/{id}/result")).await.expect("result");
    assert_eq!(result.status, 200);
    assert_eq!(result.json()["result"]["structuredContent"]["slept_seconds"], 0.5);
}

#[tokio::test]
async fn failed_and_cancelled_executions_have_no_result() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let failed = alice.start("Demo.Fail", json!({"retryable": false}), None).await.expect("start").json();
    let id = failed["execution_id"].as_str().expect("id");
    let v = alice.until_terminal(id, Duration::from_secs(20)).await.expect("terminal");
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_reason"], "tool_error");
    assert_eq!(v["error_message"], "planned failure 1 of 1", "the attempt's error is visible to the owner");
    let r = alice.get(&format!("/tool-executions/{id}/result")).await.expect("result");
    assert_eq!(r.status, 409);

    let sleeping = alice.start("Demo.Sleep", json!({"seconds": 60}), None).await.expect("start").json();
    let id = sleeping["execution_id"].as_str().expect("id");
    crate::harness::eventually(Duration::from_secs(20), "working", || async {
        Ok((alice.get(&format!("/tool-executions/{id}")).await?.json()["status"] == "working").then_some(()))
    })
    .await
    .expect("working");
    let cancel = alice.post(&format!("/tool-executions/{id}/cancel"), json!({})).await.expect("cancel");
    assert_eq!(cancel.status, 200);
    assert_eq!(cancel.json()["outcome"], "accepted");
    let v = alice.until_terminal(id, Duration::from_secs(20)).await.expect("terminal");
    assert_eq!(v["status"], "cancelled");
    assert_eq!(alice.get(&format!("/tool-executions/{id}/result")).await.expect("result").status, 409);
    let again = alice.post(&format!("/tool-executions/{id}/cancel"), json!({})).await.expect("cancel");
    assert_eq!(again.json()["outcome"], "already_terminal");
}

#[tokio::test]
async fn not_found_is_uniform_and_owner_access_is_the_users() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let bob = c.rest(0, &c.id.other_user_token);
    let member = c.rest(0, &c.id.member_key);
    let id = alice.start("Demo.Echo", json!({"text": "hi"}), None).await.expect("start").json()["execution_id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(alice.get(&format!("/tool-executions/{id}")).await.expect("get").status, 200);

    let unknown = alice.get("/tool-executions/te_000000000000000000000000000").await.expect("unknown");
    let foreign = bob.get(&format!("/tool-executions/{id}")).await.expect("foreign");
    let by_member = member.get(&format!("/tool-executions/{id}")).await.expect("member");
    let malformed = alice.get("/tool-executions/not-an-id").await.expect("malformed");
    // Expired: move the record past retention behind the engine's back.
    let expired_id =
        alice.start("Demo.Echo", json!({"text": "old"}), None).await.expect("start").json()["execution_id"]
            .as_str()
            .expect("id")
            .to_owned();
    let mut db = c.db().await.expect("db");
    sqlx::query("UPDATE executions SET retention_expires_at = 1 WHERE id = $1")
        .bind(&expired_id)
        .execute(&mut db)
        .await
        .expect("expire");
    let expired = alice.get(&format!("/tool-executions/{expired_id}")).await.expect("expired");
    for r in [&foreign, &by_member, &malformed, &expired] {
        assert_eq!(r.status, unknown.status);
        assert_eq!(r.bytes, unknown.bytes, "not-found bodies must be byte-identical");
    }
    assert_eq!(unknown.status, 404);
}

#[tokio::test]
async fn client_mistakes_are_4xx_with_stable_codes() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let no_token = c.rest(0, "");
    assert_eq!(no_token.get("/tool-executions").await.expect("list").status, 401);
    let bad = c.rest(0, "bteu_forged");
    assert_eq!(bad.get("/tool-executions").await.expect("list").status, 401);

    let unknown_tool = alice.start("Nope.Tool", json!({}), None).await.expect("start");
    assert_eq!((unknown_tool.status, unknown_tool.json()["error"]["code"].clone()), (404, json!("unknown_tool")));
    let bad_input = alice.start("Demo.Echo", json!({"text": 5}), None).await.expect("start");
    assert_eq!(bad_input.status, 400);
    assert!(bad_input.json()["error"]["message"].as_str().unwrap_or_default().contains("text"));
    let read_only = c.rest(0, &c.id.read_only_key).start("Demo.Echo", json!({"text": "x"}), None).await.expect("start");
    assert_eq!(read_only.status, 403);
    let garbage = c
        .http
        .post(format!("{}/tool-executions", c.rest_base(0)))
        .bearer_auth(&c.id.user_token)
        .body("{not json")
        .send()
        .await
        .expect("send");
    assert_eq!(garbage.status().as_u16(), 400);
    let huge = json!({"text": "x".repeat(2 << 20)});
    assert_eq!(alice.start("Demo.Echo", huge, None).await.expect("start").status, 413);
}

#[tokio::test]
async fn an_api_key_starts_on_a_users_behalf_and_the_user_sees_it() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let admin = c.rest(0, &c.id.admin_key);
    let alice = c.rest(0, &c.id.user_token);
    let other_key = c.rest(0, &c.id.member_key);
    let r = admin.start("Demo.Echo", json!({"text": "for alice"}), None).await.expect("start");
    assert_eq!(r.status, 202);
    let id = r.json()["execution_id"].as_str().expect("id").to_owned();
    assert_eq!(alice.get(&format!("/tool-executions/{id}")).await.expect("alice").status, 200);
    assert_eq!(admin.get(&format!("/tool-executions/{id}")).await.expect("starter").status, 200);
    assert_eq!(other_key.get(&format!("/tool-executions/{id}")).await.expect("unrelated key").status, 404);
    let listed = alice.get("/tool-executions").await.expect("list").json();
    assert!(listed["items"].as_array().expect("items").iter().any(|e| e["execution_id"] == id.as_str()));
}

#[tokio::test]
async fn a_revoked_token_fails_closed_at_once() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    // A token of its own, so revoking it affects no other test step.
    let out = tokio::process::Command::new(crate::harness::baton_bin())
        .args(["admin", "--config"])
        .arg(&c.config)
        .args(["create-end-user-token", "--gateway", &c.id.gateway_id, "--user", "alice@example.com"])
        .output()
        .await
        .expect("admin");
    let issued: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let carol = c.rest(0, issued["token"].as_str().expect("token"));
    let v = carol.start("Demo.Sleep", json!({"seconds": 30}), None).await.expect("start").json();
    let id = v["execution_id"].as_str().expect("id").to_owned();
    let revoke = tokio::process::Command::new(crate::harness::baton_bin())
        .args(["admin", "--config"])
        .arg(&c.config)
        .args(["revoke", "--id", issued["id"].as_str().expect("id")])
        .output()
        .await
        .expect("revoke");
    assert!(revoke.status.success());
    assert_eq!(carol.get(&format!("/tool-executions/{id}")).await.expect("get").status, 401);
    let cancel = carol.post(&format!("/tool-executions/{id}/cancel"), json!({})).await.expect("cancel");
    assert_eq!(cancel.status, 401, "a revoked credential cannot cancel");
    let again = carol.start("Demo.Sleep", json!({"seconds": 30}), None).await.expect("start");
    assert_eq!(again.status, 401, "a revoked credential starts nothing, whatever its last start read");
    // Nothing reached the worker: the execution still runs, and its owner (another token) can see it.
    let alice = c.rest(0, &c.id.user_token);
    let v = alice.get(&format!("/tool-executions/{id}")).await.expect("get").json();
    assert_eq!(v["cancel_state"], "none");
}

#[tokio::test]
async fn an_unreachable_coordinator_is_503_with_retry_after() {
    let mut c = Cluster::single(Settings::default()).await.expect("cluster");
    c.coordinators[0].kill9();
    let _ = c.coordinators[0].child.wait().await;
    let alice = c.rest(0, &c.id.user_token);
    let r = alice.start("Demo.Echo", json!({"text": "x"}), None).await.expect("start");
    assert_eq!(r.status, 503);
    assert!(r.headers.get("retry-after").is_some());
    assert_eq!(r.json()["error"]["code"], "unavailable");
    let ready = c.http.get(format!("http://{}/readyz", c.gateways[0].addr)).send().await.expect("readyz");
    assert_eq!(ready.status().as_u16(), 503);
}
