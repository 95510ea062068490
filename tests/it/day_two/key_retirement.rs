//! Retiring a payload key, as docs/security.md tells an operator to: add the
//! new key first in the ring, restart, rewrap, remove the old key, restart.
//! Every result stored under the old key is still its owner's to read, and a
//! coordinator given a ring without the old key before the rewrap refuses to
//! start, saying what to do.

use crate::harness::{Cluster, Settings, baton_bin, random_suffix};
use base64::Engine as _;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::process::Command;

/// The cluster's configuration with `keys` as its payload key ring.
fn with_ring(config: &Path, keys: &[&Value]) -> Value {
    let mut c: Value = serde_json::from_slice(&std::fs::read(config).expect("config")).expect("json config");
    c["security"]["execution_payload_keys"] = json!(keys);
    c
}

fn write(path: &Path, config: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(config).expect("json")).expect("write config");
}

/// Starts a coordinator with `config` and waits for it to exit on its own.
async fn refused_start(config: &Path) -> (Option<i32>, String) {
    let run = Command::new(baton_bin())
        .arg("coordinator")
        .arg("--config")
        .arg(config)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("a coordinator missing a key in use must exit, not serve")
        .expect("run baton");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

async fn restart_coordinator(c: &mut Cluster) {
    c.coordinators[0].kill9();
    let _ = c.coordinators[0].child.wait().await;
    c.restart_coordinator(0).await.expect("coordinator restarts");
}

#[tokio::test]
async fn key_retirement_rewraps_every_result_and_refuses_a_ring_missing_a_key_in_use() {
    let mut c = Cluster::single(Settings::default()).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let original: Value = serde_json::from_slice(&std::fs::read(&c.config).expect("config")).expect("json");
    let k1 = original["security"]["execution_payload_keys"][0].clone();
    assert_eq!(k1["id"], "k1");
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).expect("random");
    let k2 = json!({"id": "k2", "key": base64::engine::general_purpose::STANDARD.encode(key)});

    let mut runs = Vec::new();
    for i in 0..4 {
        let text = format!("sealed under k1 #{i}");
        let started = alice.start("Demo.Echo", json!({"text": text}), None).await.expect("start").json();
        let id = started["execution_id"].as_str().expect("id").to_owned();
        assert_eq!(alice.until_terminal(&id, Duration::from_secs(20)).await.expect("done")["status"], "completed");
        runs.push((id, text));
    }

    // Step 1: the new key first, the old one still in the ring.
    write(&c.config, &with_ring(&c.config, &[&k2, &k1]));
    restart_coordinator(&mut c).await;
    let text = "sealed under k2".to_owned();
    let started = alice.start("Demo.Echo", json!({"text": text}), None).await.expect("start").json();
    let id = started["execution_id"].as_str().expect("id").to_owned();
    assert_eq!(alice.until_terminal(&id, Duration::from_secs(20)).await.expect("done")["status"], "completed");
    runs.push((id, text));

    // Dropping the old key now would strand its values: refused, saying why.
    let premature: PathBuf = c.dir.join(format!("k2-only-{}.yaml", random_suffix()));
    write(&premature, &with_ring(&c.config, &[&k2]));
    let (code, stderr) = refused_start(&premature).await;
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("\"k1\"") && stderr.contains("baton admin payload-keys rewrap"), "{stderr}");
    assert!(!stderr.contains(k1["key"].as_str().expect("key")), "a key is never printed");

    // Step 2: rewrap, in small batches.
    let status = c.admin(&["payload-keys", "status"]).await.expect("status");
    assert!(status["retained"]["k1"].as_i64().unwrap_or(0) >= 8, "{status}");
    let report = c.admin(&["payload-keys", "rewrap", "--batch", "2"]).await.expect("rewrap");
    assert_eq!(report["retired"], json!(["k1"]), "{report}");
    assert_eq!(report["retained"]["k1"], 0, "{report}");
    assert_eq!(report["resealed"]["k1"], status["retained"]["k1"], "{report}");
    let again = c.admin(&["payload-keys", "rewrap"]).await.expect("second rewrap");
    assert_eq!(again["resealed"], json!({}), "a second run does nothing: {again}");

    // Step 3: the old key leaves the ring; every result is still its owner's.
    write(&c.config, &with_ring(&c.config, &[&k2]));
    restart_coordinator(&mut c).await;
    for (id, text) in &runs {
        let result = alice.get(&format!("/tool-executions/{id}/result")).await.expect("result");
        assert_eq!(result.status, 200, "{id}: {:?}", result.json());
        assert_eq!(result.json()["result"]["structuredContent"]["text"], text.as_str(), "{id}");
    }
    let bob = c.rest(0, &c.id.other_user_token);
    let (id, _) = &runs[0];
    assert_eq!(bob.get(&format!("/tool-executions/{id}/result")).await.expect("result").status, 404);
}
