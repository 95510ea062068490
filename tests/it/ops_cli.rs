//! The operator's terminal, as a person or a script uses it: the real `baton`
//! binary, configured only by environment variables, against real processes.
//! `baton executions …` goes through a gateway's public API (so its refusals
//! are the API's, with their messages and distinct exit codes); `baton admin
//! list-…` reads the database and never prints a secret.

use crate::harness::{Cluster, Settings, baton_bin, eventually};
use anyhow::{Context as _, Result, anyhow};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::process::Command;

const CANARY: &str = "canary-ops-5d1e";

/// What one run of the binary left behind.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or(Value::Null)
    }
}

async fn baton(args: &[&str], env: &[(&str, &str)]) -> Result<Run> {
    let mut cmd = Command::new(baton_bin());
    cmd.args(args);
    for var in ["BATON_URL", "BATON_API_KEY", "BATON_ORG", "BATON_PROJECT"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await?;
    Ok(Run {
        code: out.status.code().ok_or_else(|| anyhow!("killed by a signal"))?,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// `baton executions ARGS` as `key`, against the cluster's first gateway.
pub(crate) async fn executions(c: &Cluster, key: &str, args: &[&str]) -> Result<Run> {
    let url = format!("http://{}", c.gateways[0].addr);
    let mut all = vec!["executions"];
    all.extend_from_slice(args);
    let env = [
        ("BATON_URL", url.as_str()),
        ("BATON_API_KEY", key),
        ("BATON_ORG", &c.id.org_id),
        ("BATON_PROJECT", &c.id.project_id),
    ];
    baton(&all, &env).await
}

/// `baton admin ARGS` against the cluster's database, raw.
async fn admin(c: &Cluster, args: &[&str]) -> Result<Run> {
    let config = c.config.display().to_string();
    let mut all = vec!["admin", "--config", config.as_str()];
    all.extend_from_slice(args);
    baton(&all, &[]).await
}

async fn started(c: &Cluster, tool: &str, input: Value) -> Result<String> {
    let r = c.rest(0, &c.id.member_key).start(tool, input, None).await?;
    r.json()["execution_id"].as_str().map(str::to_owned).ok_or_else(|| anyhow!("start answered {}", r.json()))
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .map(|a| a.iter().filter_map(|i| i["id"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn executions_are_listed_counted_shown_and_cancelled_through_the_api() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let member = c.rest(0, &c.id.member_key);
    let echo = started(&c, "Demo.Echo", json!({"text": CANARY})).await.expect("echo");
    let fail = started(&c, "Demo.Fail", json!({"retryable": false, "times": 1})).await.expect("fail");
    for id in [&echo, &fail] {
        member.until_terminal(id, Duration::from_secs(30)).await.expect("terminal");
    }
    let admin_key = c.id.admin_key.as_str();

    // A page as JSON is the API's own answer; as a table, one row per run.
    let page = executions(&c, admin_key, &["list", "--json"]).await.expect("run");
    assert_eq!(page.code, 0, "{}", page.stderr);
    assert_eq!(page.json()["total_count"], 2, "{}", page.stdout);
    let all = ids(&page.json());
    let mut sorted = all.clone();
    sorted.sort();
    let mut want = vec![echo.clone(), fail.clone()];
    want.sort();
    assert_eq!(sorted, want, "{}", page.stdout);
    let table = executions(&c, &c.id.member_key, &["list"]).await.expect("run");
    assert_eq!(table.code, 0, "{}", table.stderr);
    let mut lines = table.stdout.lines();
    let header = lines.next().unwrap_or_default();
    assert!(header.starts_with("ID") && header.contains("STATUS") && header.contains("TOOL"), "{}", table.stdout);
    let row = table.stdout.lines().find(|l| l.starts_with(&echo)).expect("the echo's row");
    assert!(row.contains("completed") && row.contains("Demo.Echo") && row.contains("alice@example.com"), "{row}");
    assert!(table.stdout.trim_end().ends_with("1–2 of 2"), "{}", table.stdout);
    assert!(!table.stdout.contains(CANARY), "a list never carries a payload");

    // The API's filters, by their CLI names.
    let failed = executions(&c, admin_key, &["list", "--json", "--tool", "Demo.Fail", "--outcome", "failure"]).await;
    assert_eq!(ids(&failed.expect("run").json()), [fail.as_str()]);
    let by_reason = executions(&c, admin_key, &["count", "--failure-reason", "tool_error"]).await.expect("run");
    assert_eq!((by_reason.code, by_reason.stdout.trim()), (0, "1"), "{}", by_reason.stderr);
    let none = executions(&c, admin_key, &["count", "--json", "--user", "nobody@example.com"]).await.expect("run");
    assert_eq!(none.json(), json!({"count": 0}));
    let paged = executions(&c, admin_key, &["list", "--json", "--limit", "1", "--offset", "1"]).await.expect("run");
    assert_eq!(ids(&paged.json()), all[1..], "the second of the same order");
    let window = executions(
        &c,
        admin_key,
        &["count", "--start-time", "2000-01-01T00:00:00Z", "--end-time", "2001-01-01T00:00:00Z"],
    );
    assert_eq!(window.await.expect("run").stdout.trim(), "0");

    // One run: its fields and attempts; the payload only for an admin who asks.
    let shown = executions(&c, &c.id.member_key, &["get", &fail]).await.expect("run");
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(shown.stdout.contains("status:") && shown.stdout.contains("failed"), "{}", shown.stdout);
    assert!(shown.stdout.contains("planned failure 1 of 1"), "every reader sees the attempt's error: {}", shown.stdout);
    let revealed = executions(&c, admin_key, &["get", &echo, "--include-inputs", "--json"]).await.expect("run");
    assert_eq!(revealed.json()["input"]["text"], CANARY, "{}", revealed.stderr);
    let refused = executions(&c, &c.id.member_key, &["get", &echo, "--include-inputs"]).await.expect("run");
    assert_eq!(refused.code, 3, "403 exits 3: {}", refused.stderr);
    assert!(refused.stderr.contains("403") && refused.stderr.contains("need an admin API key"), "{}", refused.stderr);
    assert!(refused.stdout.is_empty() && !refused.stderr.contains(CANARY));

    // Cancellation takes the operator route and its permission.
    let sleeper = started(&c, "Demo.Sleep", json!({"seconds": 300})).await.expect("sleep");
    eventually(Duration::from_secs(20), "the sleep to run", || async {
        let v = member.get(&format!("/tool-executions/{sleeper}")).await?.json();
        Ok((v["status"] == "working").then_some(()))
    })
    .await
    .expect("working");
    let denied = executions(&c, &c.id.member_key, &["cancel", &sleeper]).await.expect("run");
    assert_eq!(denied.code, 3, "{}", denied.stderr);
    assert!(denied.stderr.contains("`cancel` permission"), "{}", denied.stderr);
    let args = ["create-api-key", "--project", &c.id.project_id, "--role", "member", "--permissions", "status,cancel"];
    let operator = c.admin(&args).await.expect("key")["token"].as_str().map(str::to_owned).expect("token");
    let cancelled = executions(&c, &operator, &["cancel", &sleeper]).await.expect("run");
    assert_eq!(cancelled.code, 0, "{}", cancelled.stderr);
    assert!(cancelled.stdout.starts_with(&format!("cancel {sleeper}: accepted")), "{}", cancelled.stdout);
    let settled = member.until_terminal(&sleeper, Duration::from_secs(30)).await.expect("terminal");
    assert_eq!(settled["status"], "cancelled");
    let again = executions(&c, &operator, &["cancel", &sleeper, "--json"]).await.expect("run");
    assert_eq!((again.code, again.json()["outcome"].clone()), (0, json!("already_terminal")), "{}", again.stderr);
}

#[tokio::test]
async fn executions_refusals_are_explained_and_exit_non_zero() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let unknown = "te_000000000000000000000000000";
    let missing = executions(&c, &c.id.admin_key, &["get", unknown]).await.expect("run");
    assert_eq!(missing.code, 4, "{}", missing.stderr);
    assert!(missing.stderr.contains("404") && missing.stderr.contains("not found"), "{}", missing.stderr);
    let bad_time = executions(&c, &c.id.admin_key, &["list", "--start-time", "yesterday"]).await.expect("run");
    assert_eq!(bad_time.code, 1, "{}", bad_time.stderr);
    assert!(
        bad_time.stderr.contains("400") && bad_time.stderr.contains("`start_time` must be an RFC 3339"),
        "{}",
        bad_time.stderr
    );
    let read_only = executions(&c, &c.id.read_only_key, &["count"]).await.expect("run");
    assert_eq!(read_only.code, 3, "{}", read_only.stderr);
    assert!(read_only.stderr.contains("read-only key cannot read the execution history"), "{}", read_only.stderr);
    let stranger = executions(&c, "btk_not-a-key", &["list"]).await.expect("run");
    assert_eq!(stranger.code, 3, "{}", stranger.stderr);
    assert!(stranger.stderr.contains("401") && stranger.stderr.contains("BATON_API_KEY"), "{}", stranger.stderr);
    assert!(!stranger.stderr.contains("btk_not-a-key"), "the key is never echoed");
    // A typo in a closed set never reaches the API: clap lists the choices.
    let outcome = executions(&c, &c.id.admin_key, &["list", "--outcome", "cancelled"]).await.expect("run");
    assert_eq!(outcome.code, 2);
    assert!(outcome.stderr.contains("[possible values: success, failure]"), "{}", outcome.stderr);
    // MCP through a host name the gateway was not told about: 403, and the log says which setting.
    let refused = c
        .http
        .post(format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id))
        .header("host", "baton.example.com")
        .bearer_auth(&c.id.user_token)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .expect("send");
    assert_eq!(refused.status().as_u16(), 403);
    let log = c.gateways[0].log.clone();
    eventually(Duration::from_secs(10), "the gateway's warning", || {
        let log = log.clone();
        async move {
            let text = std::fs::read_to_string(&log)?;
            Ok(text.lines().find(|l| l.contains("WARN") && l.contains("gateway.allowed_hosts")).map(str::to_owned))
        }
    })
    .await
    .map(|line| assert!(line.contains("baton.example.com") && line.contains("gateway.allowedHosts"), "{line}"))
    .expect("warned");
    // No gateway there, or none named.
    let env = [("BATON_URL", "http://127.0.0.1:1"), ("BATON_API_KEY", "k"), ("BATON_ORG", "o"), ("BATON_PROJECT", "p")];
    let down = baton(&["executions", "count"], &env).await.expect("run");
    assert_eq!(down.code, 69, "{}", down.stderr);
    assert!(down.stderr.contains("cannot reach the gateway at http://127.0.0.1:1"), "{}", down.stderr);
    let unnamed = baton(&["executions", "count"], &env[1..]).await.expect("run");
    assert_eq!(unnamed.code, 2);
    assert!(unnamed.stderr.contains("--url"), "{}", unnamed.stderr);
}

#[tokio::test]
async fn admin_lists_show_identity_and_revocation_without_secrets() {
    let c = Cluster::new(Settings::default()).await.expect("cluster");
    let tokens = [
        &c.id.user_token,
        &c.id.other_user_token,
        &c.id.admin_key,
        &c.id.member_key,
        &c.id.read_only_key,
        &c.id.worker_token,
    ];
    let orgs = c.admin(&["list-orgs", "--json"]).await.expect("orgs");
    let org =
        orgs.as_array().and_then(|a| a.iter().find(|o| o["id"] == c.id.org_id.as_str())).cloned().expect("our org");
    assert_eq!((org["name"].as_str(), org["execution_logging"].as_bool()), (Some("it"), Some(true)));
    let projects = c.admin(&["list-projects", "--org", &c.id.org_id, "--json"]).await.expect("projects");
    assert_eq!(projects.as_array().map(Vec::len), Some(1));
    assert_eq!(projects[0]["id"], c.id.project_id.as_str());
    let gateways = c.admin(&["list-gateways", "--project", &c.id.project_id, "--json"]).await.expect("gateways");
    assert_eq!(gateways[0]["id"], c.id.gateway_id.as_str());

    let args = ["create-api-key", "--project", &c.id.project_id, "--role", "member", "--permissions", "cancel,status"];
    let member = c.admin(&args).await.expect("key");
    let member_id = member["id"].as_str().context("id").expect("id").to_owned();
    c.admin(&["revoke", "--id", &member_id]).await.expect("revoke");
    let listed = c.admin(&["list-credentials", "--project", &c.id.project_id, "--json"]).await.expect("credentials");
    let creds = listed.as_array().cloned().expect("array");
    assert_eq!(creds.len(), 7, "six from the harness, one revoked: {listed}");
    let revoked = creds.iter().find(|c| c["id"] == member_id.as_str()).expect("listed");
    assert_eq!((revoked["revoked"].as_bool(), revoked["role"].as_str()), (Some(true), Some("member")));
    assert_eq!(revoked["permissions"], json!(["cancel", "status"]));
    assert!(revoked["revoked_at"].is_string());
    let kinds: Vec<&str> = creds.iter().filter_map(|c| c["kind"].as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "end_user").count(), 2);
    for cred in &creds {
        let keys: Vec<&String> = cred.as_object().map(|o| o.keys().collect()).unwrap_or_default();
        assert!(keys.iter().all(|k| !k.contains("hash") && !k.contains("token")), "{keys:?}");
    }
    let table = admin(&c, &["list-credentials", "--project", &c.id.project_id]).await.expect("run");
    assert_eq!(table.code, 0, "{}", table.stderr);
    let row = table.stdout.lines().find(|l| l.starts_with(&member_id)).expect("the revoked key's row");
    assert!(row.contains("revoked") && row.contains("role member, permissions cancel,status"), "{row}");
    assert_eq!(table.stdout.lines().filter(|l| l.ends_with(" live")).count(), 6, "{}", table.stdout);
    assert!(table.stdout.contains("user alice@example.com"), "{}", table.stdout);
    let everything = [
        listed.to_string(),
        table.stdout,
        admin(&c, &["list-orgs"]).await.expect("run").stdout,
        admin(&c, &["list-gateways"]).await.expect("run").stdout,
    ]
    .concat();
    for token in tokens {
        assert!(!everything.contains(token.as_str()), "a token was printed");
    }

    // Roles and permissions are closed sets, named in the refusal.
    let role = admin(&c, &["create-api-key", "--project", &c.id.project_id, "--role", "owner"]).await.expect("run");
    assert_eq!(role.code, 2);
    assert!(role.stderr.contains("[possible values: admin, member, read_only]"), "{}", role.stderr);
    let args = ["create-api-key", "--project", &c.id.project_id, "--role", "admin", "--permissions", "status,delete"];
    let permission = admin(&c, &args).await.expect("run");
    assert_eq!(permission.code, 2);
    assert!(permission.stderr.contains("[possible values: status, payload, cancel]"), "{}", permission.stderr);
}

#[tokio::test]
async fn bench_is_hidden_from_the_help_but_runs() {
    let help = baton(&["--help"], &[]).await.expect("run");
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("executions") && help.stdout.contains("admin"), "{}", help.stdout);
    assert!(!help.stdout.contains("bench"), "{}", help.stdout);
    let bench = baton(&["bench", "--help"], &[]).await.expect("run");
    assert_eq!(bench.code, 0, "{}", bench.stderr);
    let sub = baton(&["executions", "--help"], &[]).await.expect("run");
    for command in ["list", "count", "get", "cancel"] {
        assert!(sub.stdout.contains(command), "{}", sub.stdout);
    }
    let list = baton(&["executions", "list", "--help"], &[("BATON_API_KEY", "btk_help-canary")]).await.expect("run");
    for flag in [
        "--tool",
        "--toolkit",
        "--user",
        "--outcome",
        "--failure-reason",
        "--start-time",
        "--end-time",
        "--limit",
        "--offset",
        "--json",
    ] {
        assert!(list.stdout.contains(flag), "{flag}: {}", list.stdout);
    }
    assert!(list.stdout.contains("BATON_API_KEY") && !list.stdout.contains("btk_help-canary"), "{}", list.stdout);
}
