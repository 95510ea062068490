//! Bad input, abuse and rollouts at the edges: every answer honest, nothing
//! lost, limits enforced.

use crate::harness::{Cluster, Settings, eventually};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn malformed_ids_get_the_uniform_404_after_authentication() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let unknown = alice.get("/tool-executions/te_0123456789abcdefghijABCDEFG").await.expect("get");
    assert_eq!(unknown.status, 404);
    for bad in ["te_%00", "te_%00%00%00", "te_x", "te_0123456789abcdefghijABCDEF%0A", "%E2%82%AC"] {
        let r = alice.get(&format!("/tool-executions/{bad}")).await.expect("get");
        assert_eq!(r.status, 404, "{bad}: {}", String::from_utf8_lossy(&r.bytes));
        assert_eq!(r.bytes, unknown.bytes, "{bad}: the same bytes as any unknown id");
        let r = c.rest(0, "not-a-token").get(&format!("/tool-executions/{bad}")).await.expect("get");
        assert_eq!(r.status, 401, "{bad}: a bad credential is told first");
    }
}

#[tokio::test]
async fn control_characters_in_a_start_are_refused_naming_the_field() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let key = c.rest(0, &c.id.member_key);
    let body =
        json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Echo", "input": {"text": "x"}, "user_id": "a\u{0}b"});
    let r = key.send(reqwest::Method::POST, "/tool-executions", Some(body.clone()), None).await.expect("post");
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.bytes));
    assert!(String::from_utf8_lossy(&r.bytes).contains("user_id"));
    let r =
        c.rest(0, "not-a-token").send(reqwest::Method::POST, "/tool-executions", Some(body), None).await.expect("post");
    assert_eq!(r.status, 401, "authentication comes before validation");
    // The store never saw the NUL: the next honest start works.
    let ok = key.start("Demo.Echo", json!({"text": "fine"}), None).await.expect("start");
    assert_eq!(ok.status, 202);
}

#[tokio::test]
async fn a_run_at_past_the_deadline_is_refused() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let later = time::OffsetDateTime::now_utc() + time::Duration::hours(2);
    let run_at = later.format(&time::format_description::well_known::Rfc3339).expect("format");
    let body = json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Echo", "input": {"text": "x"},
        "run_at": run_at, "ttl_ms": 3_600_000});
    let r = alice.send(reqwest::Method::POST, "/tool-executions", Some(body), None).await.expect("post");
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.bytes));
    assert!(String::from_utf8_lossy(&r.bytes).contains("run_at"));
    assert_eq!(c.scalar("SELECT COUNT(*) FROM executions").await.expect("count"), 0, "nothing was created");
}

#[tokio::test]
async fn an_idempotency_key_held_by_another_principal_never_answers_with_its_execution() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let body = json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Echo", "input": {"text": "x"},
        "user_id": "alice@example.com"});
    let alice = c.rest(0, &c.id.user_token);
    let first =
        alice.send(reqwest::Method::POST, "/tool-executions", Some(body.clone()), Some("k1")).await.expect("post");
    assert_eq!(first.status, 202);
    let id = first.json()["execution_id"].as_str().expect("id").to_owned();
    // A project key naming alice, with alice's key and the very same request.
    let key = c.rest(0, &c.id.member_key);
    let replay = key.send(reqwest::Method::POST, "/tool-executions", Some(body), Some("k1")).await.expect("post");
    assert_eq!(replay.status, 409, "{}", String::from_utf8_lossy(&replay.bytes));
    assert!(!String::from_utf8_lossy(&replay.bytes).contains(&id), "someone else's id never leaks");
}

/// The most tools a worker ran at once, by its own count.
async fn most_running(c: &Cluster, worker: usize) -> anyhow::Result<u64> {
    let text = c.http.get(format!("http://{}/metrics", c.workers[worker].addr)).send().await?.text().await?;
    let line = text.lines().find_map(|l| l.strip_prefix("baton_worker_tools_running_max "));
    Ok(line.ok_or_else(|| anyhow::anyhow!("no high-water mark in {text}"))?.trim().parse()?)
}

#[tokio::test]
async fn a_worker_never_runs_more_than_its_capacity() {
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    c.start_coordinator().await.expect("coordinator");
    c.start_gateway(0).await.expect("gateway");
    c.start_worker_with(0, &[("BATON_WORKER__CAPACITY", "5".into())]).await.expect("worker");
    let alice = c.rest(0, &c.id.user_token);
    let mut ids = Vec::new();
    for _ in 0..30 {
        let r = alice.start("Demo.Sleep", json!({"seconds": 1.5}), None).await.expect("start");
        assert_eq!(r.status, 202);
        ids.push(r.json()["execution_id"].as_str().expect("id").to_owned());
    }
    for id in &ids {
        let done = alice.until_terminal(id, Duration::from_secs(60)).await.expect("terminal");
        assert_eq!(done["status"], "completed", "{done}");
    }
    assert_eq!(c.invocations("Demo.Sleep").await.expect("metrics"), 30, "each ran exactly once");
    assert_eq!(most_running(&c, 0).await.expect("metrics"), 5, "five at a time, never more");
}

#[tokio::test]
async fn a_draining_worker_leaves_what_outlives_its_grace_to_the_owner_loss_rules() {
    let short = Settings { lease_ms: 1_500, owner_loss_grace_ms: 1_500, ..Settings::default() };
    let mut c = Cluster::new(short).await.expect("cluster");
    c.start_coordinator().await.expect("coordinator");
    c.start_gateway(0).await.expect("gateway");
    c.start_worker_with(0, &[("BATON_WORKER__DRAIN_TIMEOUT_MS", "1000".into())]).await.expect("worker");
    let alice = c.rest(0, &c.id.user_token);
    let r = alice.start("Demo.Sleep", json!({"seconds": 60}), None).await.expect("start");
    let id = r.json()["execution_id"].as_str().expect("id").to_owned();
    eventually(Duration::from_secs(20), "the sleep to start", || async {
        Ok((c.invocations("Demo.Sleep").await? == 1).then_some(()))
    })
    .await
    .expect("started");
    let pid = c.workers[0].child.id().expect("worker pid");
    let term = tokio::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status().await.expect("kill");
    assert!(term.success());
    let exited = tokio::time::timeout(Duration::from_secs(15), c.workers[0].child.wait()).await;
    assert!(exited.is_ok(), "the worker exits after its drain timeout");
    let done = alice.until_terminal(&id, Duration::from_secs(30)).await.expect("terminal");
    assert_eq!(
        (done["status"].as_str(), done["failure_reason"].as_str()),
        (Some("failed"), Some("owner_lost")),
        "cut short by the rollout, not by the tool: {done}"
    );
}

#[tokio::test]
async fn poisoned_requests_never_fail_or_split_a_shared_batch() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let key = c.rest(0, &c.id.member_key);
    let mut ids = Vec::new();
    for i in 0..20 {
        let r = alice.start("Demo.Echo", json!({"text": format!("n{i}")}), None).await.expect("start");
        ids.push(r.json()["execution_id"].as_str().expect("id").to_owned());
    }
    let paths: Vec<String> = (0..200).map(|i| format!("/tool-executions/{}", ids[i % ids.len()])).collect();
    let honest = paths.iter().map(|p| alice.get(p));
    let poisoned = (0..50).map(|_| alice.get("/tool-executions/te_%00%00"));
    let bad_creates = (0..20).map(|i| {
        let body = json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Echo", "input": {}, "user_id": format!("u{i}\u{0}")});
        key.send(reqwest::Method::POST, "/tool-executions", Some(body), None)
    });
    let good_creates = (0..20).map(|i| key.start("Demo.Echo", json!({"text": format!("k{i}")}), None));
    let (honest, poisoned, bad_creates, good_creates) = tokio::join!(
        futures_util::future::join_all(honest),
        futures_util::future::join_all(poisoned),
        futures_util::future::join_all(bad_creates),
        futures_util::future::join_all(good_creates),
    );
    assert!(honest.iter().all(|r| r.as_ref().is_ok_and(|r| r.status == 200)), "every honest poll answered");
    assert!(poisoned.iter().all(|r| r.as_ref().is_ok_and(|r| r.status == 404)));
    assert!(bad_creates.iter().all(|r| r.as_ref().is_ok_and(|r| r.status == 400)));
    assert!(good_creates.iter().all(|r| r.as_ref().is_ok_and(|r| r.status == 202)));
    let log = std::fs::read_to_string(&c.coordinators[0].log).expect("coordinator log");
    assert!(!log.contains("coalesced read failed"), "no read batch fell back to one by one");
    assert!(!log.contains("coalesced create failed"), "no create batch fell back to one by one");
}

#[tokio::test]
async fn rest_refuses_a_tool_that_forbids_background_runs_before_anything_is_created() {
    use crate::worker_trust::{Hostile, channel, tool};
    use baton_proto::worker::v1::{BackgroundPolicy, coordinator_message::Msg};
    let c = Cluster::single(Settings { backlog: 1, ..Settings::default() }).await.expect("cluster");
    let mut foreground_only = tool("Trust.Foreground");
    foreground_only.set_background(BackgroundPolicy::Forbidden);
    let mut h = Hostile::register(
        channel(&c, 0, None).await.expect("channel"),
        &c.id.worker_token,
        "fg",
        vec![foreground_only],
        2,
    )
    .await
    .expect("session")
    .expect("registered");
    h.next(Duration::from_secs(10), |m| matches!(m, Msg::Registered(_)).then_some(())).await.expect("registered");
    let alice = c.rest(0, &c.id.user_token);
    for _ in 0..3 {
        let r = alice.start("Trust.Foreground", json!({}), None).await.expect("start");
        assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.bytes));
        assert_eq!(r.json()["error"]["code"], "policy_refused");
    }
    assert_eq!(c.scalar("SELECT COUNT(*) FROM executions").await.expect("count"), 0, "nothing was created");
    // Nothing was admitted either: a backlog of one still has its place.
    let r = alice.start("Demo.Sleep", json!({"seconds": 0}), None).await.expect("start");
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.bytes));
}

#[tokio::test]
async fn a_secret_in_the_wrong_place_is_never_echoed() {
    let canary = "canary-key-0123456789abcdef";
    for yaml in [
        format!("security:\n  execution_payload_keys: {canary}\n"),
        format!("worker:\n  remote_servers: {canary}\n"),
        format!("security:\n  execution_payload_keys:\n    - {{id: k, key: {canary}}}\n"),
    ] {
        let (code, stderr) = crate::config_exit::run_with(&yaml).await;
        assert_eq!(code, Some(64), "{stderr}");
        assert!(!stderr.contains(canary), "the value leaked: {stderr}");
    }
}
