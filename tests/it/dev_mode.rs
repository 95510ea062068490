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

/// Starts `tool` as the dev end user once the dev worker has registered it
/// (it does just after the gateway is ready): the same Idempotency-Key on every
/// try, so never two executions.
async fn start_registered(http: &reqwest::Client, dev: &Value, key: &str, tool: &str, input: Value) -> Value {
    let base = dev["rest_base"].as_str().expect("rest_base");
    let token = dev["credentials"]["end_user"]["token"].as_str().expect("token");
    eventually(Duration::from_secs(30), "tool registered", || async {
        let r = http
            .post(format!("{base}/tool-executions"))
            .bearer_auth(token)
            .header("Idempotency-Key", key)
            .json(&json!({"gateway_id": dev["gateway_id"], "tool_name": tool, "input": input}))
            .send()
            .await?;
        Ok(if r.status() == 202 { Some(r.json().await?) } else { None })
    })
    .await
    .expect("started")
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
    let started = start_registered(&http, &dev, "dev-drain", "Demo.Sleep", json!({"seconds": 1.5})).await;
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

/// GETs `route` under the project with `key`: (status, body).
async fn get(http: &reqwest::Client, base: &str, key: &str, route: &str) -> (u16, Value) {
    let r = http.get(format!("{base}{route}")).bearer_auth(key).send().await.expect("get");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn dev_serves_the_history_operator_and_audit_routes_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("baton-dev-{}", random_suffix()));
    crate::harness::install_crypto_provider();
    let http = reqwest::Client::new();
    let (_child, dev) = start_dev(&dir).await;
    let base = dev["rest_base"].as_str().expect("rest_base").to_owned();
    let key = |name: &str| dev["credentials"][name].as_str().expect("key").to_owned();
    let (admin, member, read_only, operator) =
        (key("admin_key"), key("member_key"), key("read_only_key"), key("operator_key"));
    let user = dev["credentials"]["end_user"]["token"].as_str().expect("token").to_owned();
    let canary = format!("canary-{}", random_suffix());
    let started = start_registered(&http, &dev, "dev-history", "Demo.Echo", json!({"text": canary})).await;
    let id = started["execution_id"].as_str().expect("id").to_owned();
    eventually(Duration::from_secs(20), "completed", || async {
        let v: Value = http.get(format!("{base}/tool-executions/{id}")).bearer_auth(&user).send().await?.json().await?;
        Ok((v["status"] == "completed").then_some(()))
    })
    .await
    .expect("completed");

    // The history: list, count and detail for any role, payloads for admins only.
    let (status, list) = get(&http, &base, &member, "/tool_executions?tool_name=Demo.Echo").await;
    assert_eq!((status, list["total_count"].as_u64(), list["items"][0]["id"].as_str()), (200, Some(1), Some(&*id)));
    assert!(!list.to_string().contains(&canary), "a list never carries payloads: {list}");
    assert_eq!(get(&http, &base, &member, "/tool_executions/count").await, (200, json!({"count": 1})));
    let detail = format!("/tool_executions/{id}");
    let (status, seen) = get(&http, &base, &member, &detail).await;
    assert_eq!((status, seen["attempts"].as_array().map(Vec::len)), (200, Some(1)), "{seen}");
    let revealed = format!("{detail}?include_inputs=true&include_outputs=true");
    assert_eq!(get(&http, &base, &member, &revealed).await.0, 403);
    let (status, full) = get(&http, &base, &admin, &revealed).await;
    assert_eq!((status, full["input"]["text"].as_str()), (200, Some(&*canary)), "{full}");
    assert_eq!(get(&http, &base, &read_only, "/tool_executions").await.0, 403);
    assert_eq!(get(&http, &base, &user, "/tool_executions").await.0, 403);
    assert_eq!(get(&http, &base, &admin, "/tool_executions?start_time=yesterday").await.0, 400);

    // Operator routes by permission; the cancel answers what it can prove.
    let (status, op) = get(&http, &base, &operator, &format!("/operator/tool-executions/{id}")).await;
    assert_eq!((status, op["status"].as_str()), (200, Some("completed")), "{op}");
    let r = http
        .post(format!("{base}/operator/tool-executions/{id}/cancel"))
        .bearer_auth(&operator)
        .json(&json!({}))
        .send()
        .await
        .expect("cancel");
    assert_eq!(r.json::<Value>().await.expect("json")["outcome"], "already_terminal");

    // Retention set by an admin, and both operations in the audit log.
    let r = http
        .put(format!("{base}/retention"))
        .bearer_auth(&admin)
        .json(&json!({"retention_seconds": 86_400}))
        .send()
        .await
        .expect("put");
    assert_eq!(r.status(), 200);
    assert_eq!(get(&http, &base, &member, "/audit_logs").await.0, 403);
    let (status, log) = get(&http, &base, &admin, "/audit_logs").await;
    let actions: Vec<&str> =
        log["items"].as_array().into_iter().flatten().filter_map(|i| i["action"].as_str()).collect();
    assert_eq!(status, 200);
    for action in ["retention.set", "operator.cancel", "history.reveal"] {
        assert!(actions.contains(&action), "{action} missing from {actions:?}");
    }
}
