//! The worker fleet: dispatch across replicas, at most one invocation, owner
//! loss, coordinator restarts, cancel across replicas, retries, refused tools.

use crate::harness::{Cluster, Settings, eventually};
use futures_util::future::join_all;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn five_hundred_echoes_over_two_coordinators_run_exactly_once() {
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    for i in 0..2 {
        c.start_coordinator().await.expect("coordinator");
        c.start_gateway(i).await.expect("gateway");
        c.start_worker(i).await.expect("worker");
    }
    let clients = [c.rest(0, &c.id.user_token), c.rest(1, &c.id.user_token)];
    let mut ids = Vec::new();
    for chunk in (0..500).collect::<Vec<_>>().chunks(50) {
        let starts = chunk.iter().map(|i| clients[i % 2].start("Demo.Echo", json!({"text": format!("n{i}")}), None));
        for r in join_all(starts).await {
            let r = r.expect("start");
            assert_eq!(r.status, 202, "{:?}", r.json());
            ids.push(r.json()["execution_id"].as_str().expect("id").to_owned());
        }
    }
    eventually(Duration::from_secs(180), "all 500 completed", || async {
        let n = c.scalar("SELECT COUNT(*) FROM executions WHERE status = 'completed'").await?;
        Ok((n == 500).then_some(()))
    })
    .await
    .expect("completed");
    let mut db = c.db().await.expect("db");
    assert_eq!(c.invocations("Demo.Echo").await.expect("metrics"), 500, "each execution ran exactly once");
    let per_worker: Vec<i64> = sqlx::query_scalar("SELECT COUNT(*) FROM attempts GROUP BY worker_id")
        .fetch_all(&mut db)
        .await
        .expect("attempts");
    assert_eq!(per_worker.iter().sum::<i64>(), 500);
    let r = clients[1].get(&format!("/tool-executions/{}/result", ids[0])).await.expect("result");
    assert_eq!(r.status, 200, "any replica serves any execution");
}

#[tokio::test]
async fn a_killed_worker_fails_its_execution_owner_lost_without_rerunning() {
    let short = Settings { lease_ms: 1_500, owner_loss_grace_ms: 1_500, ..Settings::default() };
    let mut c = Cluster::single(short).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let id = alice.start("Demo.Sleep", json!({"seconds": 30}), None).await.expect("start").json()["execution_id"]
        .as_str()
        .expect("id")
        .to_owned();
    eventually(Duration::from_secs(20), "the sleep started", || async {
        Ok((c.invocations("Demo.Sleep").await? == 1).then_some(()))
    })
    .await
    .expect("started");
    c.workers[0].kill9();
    let _ = c.workers[0].child.wait().await;
    // A second worker is available: it must not be handed the execution again.
    c.start_worker(0).await.expect("second worker");
    let detected = eventually(Duration::from_secs(20), "owner loss detection", || async {
        let v = alice.get(&format!("/tool-executions/{id}")).await?.json();
        Ok((!v["owner_loss_detection_at"].is_null() || v["status"] == "failed").then_some(v))
    })
    .await
    .expect("detected");
    assert!(detected["status"] == "working" || detected["failure_reason"] == "owner_lost", "{detected}");
    let v = alice.until_terminal(&id, Duration::from_secs(30)).await.expect("terminal");
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_reason"], "owner_lost");
    assert_eq!(c.invocations("Demo.Sleep").await.expect("metrics"), 0, "the new worker never ran it");
    let mut db = c.db().await.expect("db");
    let attempts: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM attempts WHERE execution_id = $1")
        .bind(&id)
        .fetch_one(&mut db)
        .await
        .expect("attempts");
    assert_eq!(attempts, 1, "exactly one invocation was ever made");
}

#[tokio::test]
async fn a_killed_coordinator_loses_no_settlement_and_reruns_nothing() {
    let mut c = Cluster::single(Settings { lease_ms: 5_000, owner_loss_grace_ms: 10_000, ..Settings::default() })
        .await
        .expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let starts = (0..100).map(|_| alice.start("Demo.Sleep", json!({"seconds": 1.5}), None));
    let ids: Vec<String> = join_all(starts)
        .await
        .into_iter()
        .map(|r| r.expect("start").json()["execution_id"].as_str().expect("id").to_owned())
        .collect();
    eventually(Duration::from_secs(20), "sleeps running", || async {
        Ok((c.invocations("Demo.Sleep").await? >= 50).then_some(()))
    })
    .await
    .expect("running");
    c.coordinators[0].kill9();
    let _ = c.coordinators[0].child.wait().await;
    c.restart_coordinator(0).await.expect("restart");
    eventually(Duration::from_secs(60), "all settled", || async {
        let open = c.scalar("SELECT COUNT(*) FROM executions WHERE status IN ('pending','working')").await?;
        Ok((open == 0).then_some(()))
    })
    .await
    .expect("settled");
    let mut db = c.db().await.expect("db");
    let completed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM executions WHERE status = 'completed'")
        .fetch_one(&mut db)
        .await
        .expect("count");
    let statuses: Vec<(String, Option<String>, Option<String>)> =
        sqlx::query_as("SELECT status, failure_reason, error_message FROM executions WHERE status <> 'completed'")
            .fetch_all(&mut db)
            .await
            .expect("statuses");
    assert_eq!(completed, 100, "every execution completed; others: {statuses:?}");
    assert_eq!(c.invocations("Demo.Sleep").await.expect("metrics"), 100, "none ran twice");
    assert_eq!(ids.len(), 100);
}

#[tokio::test]
async fn cancel_reaches_a_worker_on_another_replica() {
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    c.start_coordinator().await.expect("a");
    c.start_coordinator().await.expect("b");
    c.start_gateway(0).await.expect("gateway on a");
    c.start_worker(1).await.expect("worker on b");
    let alice = c.rest(0, &c.id.user_token);
    let id = alice.start("Demo.Sleep", json!({"seconds": 60}), None).await.expect("start").json()["execution_id"]
        .as_str()
        .expect("id")
        .to_owned();
    eventually(Duration::from_secs(20), "working", || async {
        Ok((alice.get(&format!("/tool-executions/{id}")).await?.json()["status"] == "working").then_some(()))
    })
    .await
    .expect("working");
    let first = alice.post(&format!("/tool-executions/{id}/cancel"), json!({})).await.expect("cancel").json();
    assert_eq!(first["outcome"], "accepted", "{first}");
    let second = alice.post(&format!("/tool-executions/{id}/cancel"), json!({})).await.expect("cancel").json();
    assert!(second["outcome"] == "stop_already_requested" || second["outcome"] == "already_terminal", "{second}");
    let v = alice.until_terminal(&id, Duration::from_secs(20)).await.expect("terminal");
    assert_eq!(v["status"], "cancelled");
    let third = alice.post(&format!("/tool-executions/{id}/cancel"), json!({})).await.expect("cancel").json();
    assert_eq!(third["outcome"], "already_terminal");
}

#[tokio::test]
async fn retryable_failures_retry_and_others_do_not() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let retry = alice.start("Demo.Fail", json!({"retryable": true, "times": 2}), None).await.expect("start").json();
    let retry_id = retry["execution_id"].as_str().expect("id").to_owned();
    let once = alice.start("Demo.Fail", json!({"retryable": false, "times": 2}), None).await.expect("start").json();
    let once_id = once["execution_id"].as_str().expect("id").to_owned();
    assert_eq!(alice.until_terminal(&retry_id, Duration::from_secs(20)).await.expect("t")["status"], "completed");
    assert_eq!(alice.until_terminal(&once_id, Duration::from_secs(20)).await.expect("t")["status"], "failed");
    let mut db = c.db().await.expect("db");
    let attempts = |id: String| {
        sqlx::query_as::<_, (i64, Option<i64>, Option<String>)>(
            "SELECT attempt, success, error_message FROM attempts WHERE execution_id = $1 ORDER BY attempt",
        )
        .bind(id)
    };
    let rows = attempts(retry_id).fetch_all(&mut db).await.expect("attempts");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows.iter().map(|r| r.1).collect::<Vec<_>>(), [Some(0), Some(0), Some(1)]);
    assert_eq!(rows[0].2.as_deref(), Some("planned failure 1 of 2"));
    let rows = attempts(once_id).fetch_all(&mut db).await.expect("attempts");
    assert_eq!(rows.len(), 1);
}

#[tokio::test]
async fn scheduled_runs_wait_for_run_at_and_are_recorded_as_scheduled() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let run_at = std::time::SystemTime::now() + Duration::from_secs(2);
    let secs = run_at.duration_since(std::time::UNIX_EPOCH).expect("time").as_secs();
    let stamp = format_rfc3339(secs);
    let body =
        json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Echo", "input": {"text": "later"}, "run_at": stamp});
    let v = alice.post("/tool-executions", body).await.expect("start").json();
    assert_eq!(v["execution_type"], "scheduled");
    assert_eq!(v["status"], "pending");
    let id = v["execution_id"].as_str().expect("id");
    let done = alice.until_terminal(id, Duration::from_secs(20)).await.expect("terminal");
    assert_eq!(done["status"], "completed");
    let started = done["started_at"].as_str().expect("started_at");
    assert!(started[..19] >= stamp[..19], "started {started} before run_at {stamp}");
}

fn format_rfc3339(unix: u64) -> String {
    // Civil-from-days (Howard Hinnant), enough for a test timestamp in UTC.
    let days = (unix / 86_400) as i64;
    let rem = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[tokio::test]
async fn a_hosted_tool_declaring_task_time_input_is_refused_at_registration() {
    use baton_worker::{Context, Failure, Output, Tool, ToolSpec};
    struct AsksForInput;
    #[tonic::async_trait]
    impl Tool for AsksForInput {
        fn spec(&self) -> ToolSpec {
            ToolSpec::new("Demo.Ask", "Demo", "1.0.0").task_time_input(true)
        }
        async fn call(&self, _: serde_json::Value, _: Context) -> Result<Output, Failure> {
            Ok(Output::text("never runs"))
        }
    }
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    c.start_coordinator().await.expect("coordinator");
    let options = baton_worker::Options {
        coordinator_url: format!("http://{}", c.coordinators[0].addr),
        coordinator_urls: Vec::new(),
        token: c.id.worker_token.clone(),
        worker_id: "wk_ask".into(),
        capacity: 1,
        remote_servers: Vec::new(),
        tls: None,
    };
    let worker = baton_worker::Worker::new(options, vec![std::sync::Arc::new(AsksForInput)]);
    let run = worker.run(Default::default(), Duration::from_secs(1));
    let err = tokio::time::timeout(Duration::from_secs(20), run).await.expect("refused promptly").expect_err("refused");
    assert!(err.to_string().contains("task-time input"), "{err}");
    assert_eq!(c.scalar("SELECT COUNT(*) FROM tools").await.expect("count"), 0, "nothing was registered");
}

#[tokio::test]
async fn a_passed_deadline_stops_the_tool_and_fails_the_execution() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let body =
        json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Sleep", "input": {"seconds": 60}, "ttl_ms": 1500});
    let v = alice.post("/tool-executions", body).await.expect("start").json();
    let id = v["execution_id"].as_str().expect("id").to_owned();
    let done = alice.until_terminal(&id, Duration::from_secs(30)).await.expect("terminal");
    assert_eq!(done["status"], "failed");
    assert_eq!(done["failure_reason"], "deadline_exceeded");
    assert_eq!(c.invocations("Demo.Sleep").await.expect("metrics"), 1);
    // The worker was told to stop: its slot frees, so new work still runs promptly.
    let echo = alice.start("Demo.Echo", json!({"text": "after"}), None).await.expect("start").json();
    let after = alice.until_terminal(echo["execution_id"].as_str().expect("id"), Duration::from_secs(20)).await;
    assert_eq!(after.expect("terminal")["status"], "completed");
    // The result stays readable after the deadline, until retention ends.
    assert_eq!(alice.get(&format!("/tool-executions/{id}/result")).await.expect("result").status, 409);
}
