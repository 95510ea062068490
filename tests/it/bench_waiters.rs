//! `baton bench --scenario waiters` end to end on a small W, in every wait
//! form (REST long polls, legacy MCP `tasks/result` SSE streams, websocket
//! watches) and both
//! ways of settling: every waiter must be answered once its execution is
//! cancelled. Only that it works is checked; the figures are for people.

use crate::harness::{Cluster, Settings, baton_bin};
use tokio::process::Command;

const W: usize = 30;

async fn bench(c: &Cluster, form: &str, spread: &str, wake: &str) -> String {
    let out = Command::new(baton_bin())
        .env("BATON_BENCH_TOKEN", &c.id.user_token)
        .args(["bench", "--http-url", &format!("http://{}", c.gateways[0].addr)])
        .args(["--org", &c.id.org_id, "--project", &c.id.project_id, "--gateway", &c.id.gateway_id])
        .args(["--scenario", "waiters", "--waiters", &W.to_string(), "--max-seconds", "120", "-c", "8"])
        .args(["--wait-form", form, "--spread", spread, "--wake", wake])
        .output()
        .await
        .expect("run baton bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}\n{stdout}\n{stderr}", out.status.code());
    stdout
}

#[tokio::test]
async fn the_waiters_bench_answers_every_long_poll_tasks_result_stream_and_watch() {
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    c.start_coordinator().await.expect("coordinator");
    let env = [("BATON_GATEWAY__MAX_WAITS_PER_PRINCIPAL", "1000".to_string())];
    c.start_gateway_with(0, &env).await.expect("gateway");
    c.start_worker(0).await.expect("worker");
    for (form, spread, wake, title) in [
        ("poll", "one", "together", "long polls"),
        ("sse", "one", "together", "tasks/result SSE streams"),
        ("sse", "many", "one-by-one", "cancelled one at a time"),
        ("ws", "many", "together", "websocket watches"),
    ] {
        let out = bench(&c, form, spread, wake).await;
        assert!(out.contains(title), "{form}/{spread}/{wake}: no `{title}` in the title:\n{out}");
        let answered = format!("{W} of {W}");
        assert!(
            out.lines().any(|l| l.contains("answered") && l.contains(&answered)),
            "{form}/{spread}/{wake}: not every waiter answered:\n{out}"
        );
    }
}
