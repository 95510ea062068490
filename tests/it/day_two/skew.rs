//! Version skew between real processes (docs/upgrading.md). Every process
//! here is a debug build, which plays another release when told to
//! (`BATON_TEST_VERSION`): the coordinator plays 0.3.0, so worker SDKs from
//! 0.1 and gateways from 0.2 are inside its window, and this release's own
//! gateway (0.1) is not.

use crate::harness::{Cluster, Settings, baton_bin, eventually};
use crate::telemetry::{metrics_addr, sample, scrape};
use baton_proto::worker::v1::{self as wpb, worker_message, worker_session_client::WorkerSessionClient};
use serde_json::json;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

const PLAYED: &str = "BATON_TEST_VERSION";
const TOO_OLD_WORKER: &str = "worker SDK 0.0.9 is older than this coordinator (0.3.0) supports (0.1.0 and later): upgrade baton-worker to 0.1 or later";
const TOO_OLD_GATEWAY: &str = "gateway 0.1.0 is older than this coordinator (0.3.0) supports (0.2.0 and later): upgrade the gateway to 0.2 or later";

/// A coordinator playing 0.3.0 with its metrics served.
async fn cluster_at_0_3() -> Cluster {
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    let env = [(PLAYED, "0.3.0".to_owned()), ("BATON_TELEMETRY__METRICS_ADDR", "127.0.0.1:0".to_owned())];
    c.start_coordinator_with(&env).await.expect("coordinator");
    c
}

/// `baton worker` run to its end, stating `version`: its exit and its stderr.
async fn worker_until_it_exits(c: &Cluster, version: &str) -> (std::process::ExitStatus, String) {
    let mut worker = Command::new(baton_bin());
    worker
        .args(["worker", "--examples", "--config"])
        .arg(&c.config)
        .env("BATON_WORKER__COORDINATOR_URL", c.coordinator_url(0))
        .env("BATON_WORKER__TOKEN", &c.id.worker_token)
        .env(PLAYED, version)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(30), worker.output())
        .await
        .expect("a refused worker ends instead of retrying")
        .expect("worker ran");
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

async fn coordinator_metric(c: &Cluster, name: &str, labels: &[&str]) -> f64 {
    let addr = metrics_addr(&c.coordinators[0].log).expect("coordinator metrics address");
    // A client of its own: no pooled connection the metrics listener may have closed.
    let text = scrape(&reqwest::Client::new(), &addr).await.expect("coordinator metrics");
    sample(&text, name, labels).unwrap_or(0.0)
}

#[tokio::test]
async fn skew_a_worker_too_old_for_the_coordinator_is_refused_and_never_assigned() {
    let mut c = cluster_at_0_3().await;
    c.start_gateway_with(0, &[(PLAYED, "0.3.0".to_owned())]).await.expect("gateway");
    // A current worker registers the demo tools, then goes away: work for
    // them waits for the next worker.
    c.start_worker(0).await.expect("current worker");
    assert_eq!(coordinator_metric(&c, "baton_worker_sessions_by_version", &["version=\"0.1\""]).await, 1.0);
    c.workers[0].kill9();
    eventually(Duration::from_secs(10), "the killed worker's session to end", || async {
        Ok((coordinator_metric(&c, "baton_worker_sessions_by_version", &["version=\"0.1\""]).await == 0.0)
            .then_some(()))
    })
    .await
    .expect("session ended");
    let alice = c.rest(0, &c.id.user_token);
    let started = alice.start("Demo.Echo", json!({"text": "skew"}), None).await.expect("start");
    assert_eq!(started.status, 202, "{}", String::from_utf8_lossy(&started.bytes));
    let id = started.json()["execution_id"].as_str().expect("id").to_owned();

    // A worker built on an SDK older than the window is refused with the
    // versions and the way out, and ends: no retry loop.
    let (exit, stderr) = worker_until_it_exits(&c, "0.0.9").await;
    assert!(!exit.success(), "{stderr}");
    assert!(stderr.contains(TOO_OLD_WORKER), "{stderr}");
    assert!(!stderr.contains("registered"), "{stderr}");
    assert_eq!(
        coordinator_metric(&c, "baton_version_refusals_total", &["role=\"worker\"", "version=\"0.0\""]).await,
        1.0
    );
    // The work it could have run was never assigned to it.
    let seen = alice.get(&format!("/tool-executions/{id}")).await.expect("read");
    assert_eq!(seen.json()["status"], "pending", "{}", seen.json());
    let attempts = c.scalar(&format!("SELECT count(*) FROM attempts WHERE execution_id = '{id}'")).await.expect("db");
    assert_eq!(attempts, 0);

    // A worker of a supported SDK runs it.
    c.start_worker(0).await.expect("current worker again");
    let done = alice.until_terminal(&id, Duration::from_secs(20)).await.expect("terminal");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(coordinator_metric(&c, "baton_worker_sessions_by_version", &["version=\"0.1\""]).await, 1.0);
}

#[tokio::test]
async fn skew_a_gateway_outside_the_window_answers_503_and_logs_why() {
    let mut c = cluster_at_0_3().await;
    // This release's gateway (0.1) is two lines behind; one playing 0.3 is not.
    let old = c.start_gateway(0).await.expect("old gateway");
    let current = c.start_gateway_with(0, &[(PLAYED, "0.3.0".to_owned())]).await.expect("current gateway");

    let refused = c.rest(old, &c.id.user_token).get("/tool-executions").await.expect("list");
    assert_eq!(refused.status, 503, "{}", String::from_utf8_lossy(&refused.bytes));
    assert_eq!(refused.json()["error"]["code"], "unavailable", "{}", refused.json());
    assert!(!String::from_utf8_lossy(&refused.bytes).contains("0.3.0"), "callers are not told the versions");
    let logged = format!("the coordinator refuses this gateway's version: {TOO_OLD_GATEWAY}");
    let log = c.gateways[old].log.clone();
    eventually(Duration::from_secs(10), "the refusal in the gateway's log", || async {
        Ok(std::fs::read_to_string(&log)?.contains(&logged).then_some(()))
    })
    .await
    .expect("logged");
    assert!(
        coordinator_metric(&c, "baton_version_refusals_total", &["role=\"gateway\"", "version=\"0.1\""]).await >= 1.0
    );

    let served = c.rest(current, &c.id.user_token).get("/tool-executions").await.expect("list");
    assert_eq!(served.status, 200, "{}", String::from_utf8_lossy(&served.bytes));
    assert!(coordinator_metric(&c, "baton_gateway_calls_total", &["version=\"0.3\""]).await >= 1.0);
}

/// The version is read before the credential, and a refusal grants nothing:
/// a caller with no valid worker token learns it is refused, registers no
/// tool, and with a version inside the window is still unauthenticated.
#[tokio::test]
async fn skew_a_version_refusal_comes_first_and_grants_a_foreign_caller_nothing() {
    let c = cluster_at_0_3().await;
    let register = |token: &str, version: &str| wpb::WorkerMessage {
        msg: Some(worker_message::Msg::Register(wpb::Register {
            worker_id: "foreign".into(),
            worker_token: token.into(),
            tools: vec![wpb::ToolRegistration {
                name: "Foreign.Tool".into(),
                input_schema_json: r#"{"type":"object"}"#.into(),
                background: wpb::BackgroundPolicy::Optional as i32,
                max_attempts: 1,
                ..Default::default()
            }],
            capacity: 1,
            sdk_version: version.into(),
            ..Default::default()
        })),
    };
    let mut client = WorkerSessionClient::connect(c.coordinator_url(0)).await.expect("dial");
    for (token, version, code) in [
        ("btw_forged", "0.0.9", tonic::Code::FailedPrecondition),
        (c.id.worker_token.as_str(), "0.0.9", tonic::Code::FailedPrecondition),
        ("btw_forged", "0.3.0", tonic::Code::Unauthenticated),
    ] {
        let answer = client.session(tokio_stream::iter([register(token, version)])).await;
        assert_eq!(answer.err().map(|s| s.code()), Some(code), "{token} stating {version}");
    }
    let tools = c.scalar("SELECT count(*) FROM tools WHERE name = 'Foreign.Tool'").await.expect("db");
    assert_eq!(tools, 0, "a refused registration registers nothing");
}
