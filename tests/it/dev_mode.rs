//! `baton dev`: ready on start, drains in-flight work on Ctrl-C and exits 0,
//! and a restart on the same data directory keeps everything.

use crate::harness::{baton_bin, eventually, random_suffix};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

async fn start_dev(dir: &Path) -> (Child, Value) {
    let _ = std::fs::remove_file(dir.join("dev.json"));
    let child = Command::new(baton_bin())
        .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn baton dev");
    let dev = eventually(Duration::from_secs(30), "dev.json", || async {
        Ok(std::fs::read(dir.join("dev.json")).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok()))
    })
    .await
    .expect("dev.json written");
    (child, dev)
}

#[tokio::test]
async fn dev_is_ready_drains_on_interrupt_and_keeps_state_across_restarts() {
    let dir = std::env::temp_dir().join(format!("baton-dev-{}", random_suffix()));
    crate::harness::install_crypto_provider();
    let http = reqwest::Client::new();
    let (mut child, dev) = start_dev(&dir).await;
    let url = dev["http_url"].as_str().expect("http_url").to_owned();
    eventually(Duration::from_secs(30), "readyz 200", || async {
        Ok(http.get(format!("{url}/readyz")).send().await.ok().filter(|r| r.status() == 200).map(|_| ()))
    })
    .await
    .expect("ready");
    let token = dev["credentials"]["end_user"]["token"].as_str().expect("token").to_owned();
    let base = dev["rest_base"].as_str().expect("rest_base").to_owned();
    // The worker registers its tools just after the gateway is ready: retry the
    // start (same Idempotency-Key, so never two executions) until the tool is known.
    let started: Value = eventually(Duration::from_secs(30), "Demo.Sleep registered", || async {
        let r = http
            .post(format!("{base}/tool-executions"))
            .bearer_auth(&token)
            .header("Idempotency-Key", "dev-drain")
            .json(&json!({"gateway_id": dev["gateway_id"], "tool_name": "Demo.Sleep", "input": {"seconds": 1.5}}))
            .send()
            .await?;
        Ok(if r.status() == 202 { Some(r.json().await?) } else { None })
    })
    .await
    .expect("started");
    let id = started["execution_id"].as_str().expect("id").to_owned();
    eventually(Duration::from_secs(20), "working", || async {
        let v: Value =
            http.get(format!("{base}/tool-executions/{id}")).bearer_auth(&token).send().await?.json().await?;
        Ok((v["status"] == "working").then_some(()))
    })
    .await
    .expect("working");

    let pid = child.id().expect("pid").to_string();
    Command::new("kill").args(["-INT", &pid]).status().await.expect("kill -INT");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await.expect("exits").expect("status");
    assert!(status.success(), "baton dev exited with {status}");

    let (_child, again) = start_dev(&dir).await;
    assert_eq!(again["credentials"], dev["credentials"], "same seeded credentials after restart");
    let url = again["http_url"].as_str().expect("http_url").to_owned();
    let base = again["rest_base"].as_str().expect("rest_base").to_owned();
    let v: Value = eventually(Duration::from_secs(30), "the execution readable", || async {
        let r = http.get(format!("{base}/tool-executions/{id}")).bearer_auth(&token).send().await;
        Ok(match r {
            Ok(r) if r.status() == 200 => Some(r.json().await?),
            _ => None,
        })
    })
    .await
    .expect("readable after restart");
    assert_eq!(v["status"], "completed", "the in-flight sleep was drained before exit: {v}");
    assert!(url.starts_with("http://127.0.0.1:"));
}
