//! Lifecycle webhooks through real processes on Postgres: an in-test receiver
//! (axum) records every POST, and the Standard Webhooks reference crate
//! (`standardwebhooks` 1.0.1) verifies each signature with the endpoint's
//! secret. Checked: exactly the four signalled states, exactly the five body
//! keys, signatures (both secrets during a rotation), retries with a stable
//! `webhook-id` after 500s, delivery after kill -9 of the delivering
//! coordinator, executions untouched by failing deliveries, refused private
//! targets, who may manage endpoints, and the audit rows of every change.

use crate::harness::{Cluster, Settings, eventually};
use anyhow::{Context as _, Result, anyhow};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// One POST the receiver got.
#[derive(Clone, Debug)]
struct Hit {
    id: String,
    headers: HeaderMap,
    body: Vec<u8>,
    /// What the receiver answered (0: it never answered).
    answered: u16,
}

impl Hit {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Default)]
struct Behaviour {
    /// Answer 500 to this many requests first.
    fail_first: usize,
    /// Hold requests without answering while set.
    hang: bool,
    hits: Vec<Hit>,
}

/// A webhook receiver on loopback, stopped when dropped.
struct Receiver {
    url: String,
    state: Arc<Mutex<Behaviour>>,
    stop: CancellationToken,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn receive(State(state): State<Arc<Mutex<Behaviour>>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let (hang, answer) = {
        let Ok(mut s) = state.lock() else { return StatusCode::INTERNAL_SERVER_ERROR };
        let answer = if s.hang {
            0
        } else if s.fail_first > 0 {
            s.fail_first -= 1;
            500
        } else {
            204
        };
        s.hits.push(Hit { id: header("webhook-id"), headers: headers.clone(), body: body.to_vec(), answered: answer });
        (s.hang, answer)
    };
    if hang {
        // Never answered: the sender's connection dies with it.
        std::future::pending::<()>().await;
    }
    StatusCode::from_u16(answer).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl Receiver {
    async fn start() -> Result<Receiver> {
        let state = Arc::new(Mutex::new(Behaviour::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hooks", listener.local_addr()?);
        let app = axum::Router::new().route("/hooks", axum::routing::post(receive)).with_state(state.clone());
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).with_graceful_shutdown(stopped.cancelled_owned()).await;
        });
        Ok(Receiver { url, state, stop })
    }

    fn set(&self, f: impl FnOnce(&mut Behaviour)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
    }

    fn hits(&self) -> Vec<Hit> {
        self.state.lock().map(|s| s.hits.clone()).unwrap_or_default()
    }

    /// Hits answered 2xx, by (execution_id, state).
    fn delivered(&self) -> BTreeMap<(String, String), Hit> {
        self.hits()
            .into_iter()
            .filter(|h| (200..300).contains(&h.answered))
            .map(|h| {
                let v = h.json();
                let key =
                    (v["execution_id"].as_str().unwrap_or("").to_owned(), v["state"].as_str().unwrap_or("").to_owned());
                (key, h)
            })
            .collect()
    }
}

/// Verifies a hit with the reference crate and `secret`.
fn verify(secret: &str, hit: &Hit) -> Result<()> {
    let wh = standardwebhooks::Webhook::new(secret).map_err(|e| anyhow!("secret: {e:?}"))?;
    wh.verify(&hit.body, &hit.headers).map_err(|e| anyhow!("signature of {}: {e:?}", hit.id))
}

/// Turns on what the cluster's coordinators need for a loopback receiver and
/// quick retries; `allow_loopback` off keeps the production policy.
fn configure(c: &Cluster, allow_loopback: bool) -> Result<()> {
    let mut config: Value = serde_json::from_slice(&std::fs::read(&c.config)?)?;
    config["webhooks"] = json!({
        "allow_loopback_targets": allow_loopback,
        "retry_initial_ms": 200,
        "retry_max_delay_ms": 1_000,
        "request_timeout_ms": 2_000,
        "poll_interval_ms": 200,
    });
    std::fs::write(&c.config, serde_json::to_vec_pretty(&config)?)?;
    Ok(())
}

fn text(v: &Value, key: &str) -> Result<String> {
    v[key].as_str().map(str::to_owned).with_context(|| format!("no {key} in {v}"))
}

/// The example remote MCP server of the worker crate, in this process, for a
/// tool that asks for input (`confirm_delete`).
async fn example_server() -> Result<(String, CancellationToken)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let stop = CancellationToken::new();
    tokio::spawn(baton_worker::remote::example_server::serve(listener, stop.clone()));
    Ok((format!("[{{url: \"{url}\", toolkit_name: Example, toolkit_version: \"1.0.0\"}}]"), stop))
}

async fn started(rest: &crate::harness::Rest, tool: &str, input: Value) -> Result<String> {
    let r = rest.start(tool, input, None).await?;
    anyhow::ensure!(r.status == 202, "start {tool}: {} {}", r.status, r.json());
    text(&r.json(), "execution_id")
}

async fn create(c: &Cluster, token: &str, url: &str) -> Result<crate::harness::Reply> {
    c.rest(0, token).post("/webhooks", json!({"url": url, "event_type": "tool.execution.lifecycle"})).await
}

async fn audit_actions(c: &Cluster, webhook_id: &str) -> Result<BTreeSet<String>> {
    let mut db = c.db().await?;
    let rows: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT action, outcome FROM audit_logs WHERE target = '{webhook_id}'"
    )))
    .fetch_all(&mut db)
    .await?;
    Ok(rows.into_iter().map(|(a, o)| format!("{a}:{o}")).collect())
}

#[tokio::test]
async fn webhooks_signal_the_four_states_signed_retried_and_rotated() {
    let receiver = Receiver::start().await.expect("receiver");
    let (remote, _example) = example_server().await.expect("example server");
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    configure(&c, true).expect("config");
    c.start_coordinator().await.expect("coordinator");
    c.start_coordinator().await.expect("second coordinator");
    c.start_gateway(0).await.expect("gateway");
    c.start_worker_remote(1, &remote).await.expect("worker");

    let created = create(&c, &c.id.admin_key, &receiver.url).await.expect("create");
    assert_eq!(created.status, 201, "{}", created.json());
    let endpoint = created.json();
    let secret = text(&endpoint, "secret").expect("secret");
    assert!(secret.starts_with("whsec_"), "{endpoint}");
    let webhook_id = text(&endpoint, "webhook_id").expect("id");
    assert_eq!(endpoint["enabled"], true);
    // The secret is shown once: never in a read or a listing.
    let admin = c.rest(0, &c.id.admin_key);
    let read = admin.get(&format!("/webhooks/{webhook_id}")).await.expect("read").json();
    assert!(read.get("secret").is_none() && !read.to_string().contains(&secret), "{read}");
    let listed = admin.get("/webhooks").await.expect("list").json();
    assert_eq!(listed["items"][0]["webhook_id"], webhook_id.as_str(), "{listed}");
    assert!(!listed.to_string().contains(&secret));

    // The first three deliveries fail: they are retried under the same webhook-id.
    receiver.set(|b| b.fail_first = 3);
    let user = c.rest(0, &c.id.user_token);
    let completed = started(&user, "Demo.Echo", json!({"text": "canary-payload-7f1"})).await.expect("echo");
    let failed = started(&user, "Demo.Fail", json!({"times": 1, "retryable": false})).await.expect("fail");
    let cancelled = started(&user, "Demo.Sleep", json!({"seconds": 60})).await.expect("sleep");
    let asking = started(&user, "confirm_delete", json!({"filename": "a.txt"})).await.expect("ask");
    eventually(Duration::from_secs(30), "the sleep to run", || async {
        let v = user.get(&format!("/tool-executions/{cancelled}")).await?.json();
        Ok((v["status"] == "working").then_some(()))
    })
    .await
    .expect("working");
    let cancel = user.post(&format!("/tool-executions/{cancelled}/cancel"), json!({})).await.expect("cancel");
    assert_eq!(cancel.status, 200, "{}", cancel.json());
    let key = eventually(Duration::from_secs(30), "an input request", || async {
        let v = user.get(&format!("/tool-executions/{asking}?wait_ms=2000")).await?.json();
        Ok(v["input_requests"][0]["request_key"]
            .as_str()
            .filter(|_| v["status"] == "input_required")
            .map(str::to_owned))
    })
    .await
    .expect("input request");
    let answer = json!({"request_key": key, "response": {"action": "accept", "content": {"confirm": true}}});
    assert_eq!(user.post(&format!("/tool-executions/{asking}/input"), answer).await.expect("answer").status, 200);
    for id in [&completed, &failed, &cancelled, &asking] {
        user.until_terminal(id, Duration::from_secs(60)).await.expect("terminal");
    }

    let expected: BTreeSet<(String, String)> = [
        (completed.clone(), "completed"),
        (failed.clone(), "failed"),
        (cancelled.clone(), "cancelled"),
        (asking.clone(), "input_required"),
        (asking.clone(), "completed"),
    ]
    .into_iter()
    .map(|(id, s)| (id, s.to_owned()))
    .collect();
    eventually(Duration::from_secs(60), "every signal delivered", || async {
        let got: BTreeSet<_> = receiver.delivered().into_keys().collect();
        Ok(expected.is_subset(&got).then_some(()))
    })
    .await
    .expect("delivered");

    let hits = receiver.hits();
    // The four signals and no others: no pending or working, nothing else.
    let states: BTreeSet<(String, String)> = hits
        .iter()
        .map(|h| (text(&h.json(), "execution_id").unwrap_or_default(), text(&h.json(), "state").unwrap_or_default()))
        .collect();
    assert_eq!(states, expected, "signals other than the expected ones");
    for h in &hits {
        verify(&secret, h).expect("signature");
        let body = h.json();
        let keys: BTreeSet<&str> = body.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
        assert_eq!(
            keys,
            BTreeSet::from(["execution_id", "state", "created_at", "updated_at", "summary"]),
            "{}",
            h.json()
        );
        let body = String::from_utf8_lossy(&h.body);
        assert!(!body.contains("canary-payload"), "a payload leaked into a signal: {body}");
        assert!(h.id.starts_with("msg_") && !h.id.contains('.'), "{}", h.id);
    }
    // Retries carry the same webhook-id and body, and the 500s cost nothing but time.
    let failures: Vec<&Hit> = hits.iter().filter(|h| h.answered == 500).collect();
    assert_eq!(failures.len(), 3, "three answered 500");
    for f in failures {
        let later =
            hits.iter().find(|h| h.id == f.id && h.answered == 204).expect("the same webhook-id delivered later");
        assert_eq!(later.body, f.body, "a retry sends the same body");
    }
    let summary = &receiver.delivered()[&(failed.clone(), "failed".to_owned())];
    assert_eq!(summary.json()["summary"], "Demo.Fail failed: the tool reported an error");
    // Executions are as they were: failed deliveries changed nothing.
    for (id, status) in
        [(&completed, "completed"), (&failed, "failed"), (&cancelled, "cancelled"), (&asking, "completed")]
    {
        assert_eq!(user.get(&format!("/tool-executions/{id}")).await.expect("read").json()["status"], status);
    }
    // Delivery state is readable by the admin: last attempt, status, next retry.
    let deliveries = admin.get(&format!("/webhooks/{webhook_id}/deliveries")).await.expect("deliveries").json();
    let items = deliveries["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), expected.len(), "{deliveries}");
    assert!(items.iter().all(|d| d["status"] == "delivered" && d["last_status_code"] == 204), "{deliveries}");
    assert!(items.iter().any(|d| d["attempts"].as_i64() > Some(1)), "{deliveries}");

    // Rotation: deliveries carry both signatures; each secret verifies alone.
    let rotated = admin.post(&format!("/webhooks/{webhook_id}/rotate-secret"), json!({})).await.expect("rotate");
    assert_eq!(rotated.status, 200, "{}", rotated.json());
    let new_secret = text(&rotated.json(), "secret").expect("new secret");
    assert_ne!(new_secret, secret);
    assert!(rotated.json()["previous_secret_expires_at"].is_string(), "{}", rotated.json());
    let after_rotation = started(&user, "Demo.Echo", json!({"text": "x"})).await.expect("echo");
    let hit = eventually(Duration::from_secs(30), "the signal after rotation", || async {
        Ok(receiver.delivered().get(&(after_rotation.clone(), "completed".to_owned())).cloned())
    })
    .await
    .expect("signal");
    let signature = hit.headers.get("webhook-signature").and_then(|v| v.to_str().ok()).unwrap_or_default();
    assert_eq!(signature.split(' ').count(), 2, "{signature}");
    verify(&new_secret, &hit).expect("new secret verifies");
    verify(&secret, &hit).expect("old secret verifies during the overlap");

    // Disabled: no signal is even written for it; enabled again, signals flow.
    let off = admin.post(&format!("/webhooks/{webhook_id}/disable"), json!({})).await.expect("disable");
    assert_eq!(off.json()["enabled"], false, "{}", off.json());
    let quiet = started(&user, "Demo.Echo", json!({"text": "x"})).await.expect("echo");
    user.until_terminal(&quiet, Duration::from_secs(30)).await.expect("terminal");
    let on = admin.post(&format!("/webhooks/{webhook_id}/enable"), json!({})).await.expect("enable");
    assert_eq!(on.json()["enabled"], true, "{}", on.json());
    let loud = started(&user, "Demo.Echo", json!({"text": "x"})).await.expect("echo");
    eventually(Duration::from_secs(30), "the signal after enabling", || async {
        Ok(receiver.delivered().contains_key(&(loud.clone(), "completed".to_owned())).then_some(()))
    })
    .await
    .expect("signal");
    assert!(!receiver.hits().iter().any(|h| h.json()["execution_id"] == quiet.as_str()), "signalled while disabled");

    let deleted =
        admin.send(reqwest::Method::DELETE, &format!("/webhooks/{webhook_id}"), None, None).await.expect("delete");
    assert_eq!(deleted.status, 204);
    assert_eq!(admin.get(&format!("/webhooks/{webhook_id}")).await.expect("read").status, 404);
    let actions = audit_actions(&c, &webhook_id).await.expect("audit");
    for action in ["webhook.create", "webhook.rotate_secret", "webhook.disable", "webhook.enable", "webhook.delete"] {
        assert!(actions.contains(&format!("{action}:allowed")), "{action} not audited: {actions:?}");
    }
}

#[tokio::test]
async fn webhook_signals_survive_kill9_of_the_delivering_coordinator() {
    let receiver = Receiver::start().await.expect("receiver");
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    configure(&c, true).expect("config");
    c.start_coordinator().await.expect("coordinator");
    c.start_gateway(0).await.expect("gateway");
    c.start_worker(0).await.expect("worker");
    let created = create(&c, &c.id.admin_key, &receiver.url).await.expect("create");
    assert_eq!(created.status, 201, "{}", created.json());
    let secret = text(&created.json(), "secret").expect("secret");

    // The receiver takes the first delivery and never answers: the
    // coordinator dies holding it.
    receiver.set(|b| b.hang = true);
    let user = c.rest(0, &c.id.user_token);
    let first = started(&user, "Demo.Echo", json!({"text": "x"})).await.expect("echo");
    user.until_terminal(&first, Duration::from_secs(30)).await.expect("terminal");
    eventually(Duration::from_secs(30), "a delivery in flight", || async {
        Ok((!receiver.hits().is_empty()).then_some(()))
    })
    .await
    .expect("in flight");
    c.coordinators[0].kill9();
    receiver.set(|b| b.hang = false);
    c.restart_coordinator(0).await.expect("restart");

    let second = eventually(Duration::from_secs(60), "a start after the restart", || async {
        let r = user.start("Demo.Echo", json!({"text": "y"}), None).await?;
        (r.status == 202).then(|| text(&r.json(), "execution_id")).transpose()
    })
    .await
    .expect("echo");
    user.until_terminal(&second, Duration::from_secs(30)).await.expect("terminal");
    // Receivers may see duplicates, never gaps: both arrive, the first under its original id.
    let first_id = receiver.hits()[0].id.clone();
    eventually(Duration::from_secs(60), "both signals delivered", || async {
        let got = receiver.delivered();
        let first_ok = got.get(&(first.clone(), "completed".to_owned())).is_some_and(|h| h.id == first_id);
        Ok((first_ok && got.contains_key(&(second.clone(), "completed".to_owned()))).then_some(()))
    })
    .await
    .expect("delivered after restart");
    for h in receiver.hits() {
        verify(&secret, &h).expect("signature");
    }
    assert_eq!(user.get(&format!("/tool-executions/{first}")).await.expect("read").json()["status"], "completed");
}

#[tokio::test]
async fn webhook_management_is_for_project_admins_and_private_targets_are_refused() {
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    configure(&c, true).expect("config");
    c.start_coordinator().await.expect("coordinator");
    c.start_gateway(0).await.expect("gateway");
    let admin = c.rest(0, &c.id.admin_key);

    // Targets resolving to private or link-local addresses are refused even
    // where loopback is allowed; so are other schemes and other event types.
    for url in ["http://10.0.0.7/hook", "http://169.254.169.254/latest", "http://[fd00::1]/h", "ftp://example.com/"] {
        let r = create(&c, &c.id.admin_key, url).await.expect("create");
        assert_eq!(r.status, 400, "{url}: {}", r.json());
    }
    let other_type =
        admin.post("/webhooks", json!({"url": "http://127.0.0.1:9/h", "event_type": "x"})).await.expect("post");
    assert_eq!(other_type.status, 400, "{}", other_type.json());
    let ok = create(&c, &c.id.admin_key, "http://127.0.0.1:9/h").await.expect("create");
    assert_eq!(ok.status, 201, "{}", ok.json());
    let id = text(&ok.json(), "webhook_id").expect("id");

    // Who may manage: the project's admin keys only.
    let elsewhere =
        text(&c.admin(&["create-project", "--org", &c.id.org_id, "--name", "x"]).await.expect("project"), "id")
            .expect("id");
    let foreign = c.admin(&["create-api-key", "--project", &elsewhere, "--role", "admin"]).await.expect("key");
    let foreign = text(&foreign, "token").expect("token");
    let revoked = c.admin(&["create-api-key", "--project", &c.id.project_id, "--role", "admin"]).await.expect("key");
    c.admin(&["revoke", "--id", &text(&revoked, "id").expect("id")]).await.expect("revoke");
    let revoked = text(&revoked, "token").expect("token");
    let routes: [(reqwest::Method, String, Option<Value>); 8] = [
        (
            reqwest::Method::POST,
            "/webhooks".into(),
            Some(json!({"url": "http://127.0.0.1:9/h", "event_type": "tool.execution.lifecycle"})),
        ),
        (reqwest::Method::GET, "/webhooks".into(), None),
        (reqwest::Method::GET, format!("/webhooks/{id}"), None),
        (reqwest::Method::POST, format!("/webhooks/{id}/disable"), Some(json!({}))),
        (reqwest::Method::POST, format!("/webhooks/{id}/enable"), Some(json!({}))),
        (reqwest::Method::POST, format!("/webhooks/{id}/rotate-secret"), Some(json!({}))),
        (reqwest::Method::GET, format!("/webhooks/{id}/deliveries"), None),
        (reqwest::Method::DELETE, format!("/webhooks/{id}"), None),
    ];
    let callers: [(&str, &str, u16); 7] = [
        ("member", &c.id.member_key, 403),
        ("read-only", &c.id.read_only_key, 403),
        ("end user", &c.id.user_token, 403),
        ("worker", &c.id.worker_token, 403),
        ("other project's admin", &foreign, 404),
        ("revoked admin", &revoked, 401),
        ("no credential", "", 401),
    ];
    for (who, token, expected) in callers {
        let rest = c.rest(0, token);
        for (method, path, body) in &routes {
            let r = rest.send(method.clone(), path, body.clone(), None).await.expect("send");
            assert_eq!(r.status, expected, "{who} {method} {path}: {}", r.json());
        }
    }
    // Nothing those callers tried changed the endpoint.
    let read = admin.get(&format!("/webhooks/{id}")).await.expect("read");
    assert_eq!((read.status, read.json()["enabled"].clone()), (200, json!(true)), "{}", read.json());
    let unknown = admin.get("/webhooks/wh_unknown").await.expect("read");
    assert_eq!(unknown.status, 404, "{}", unknown.json());
    let refused =
        c.scalar("SELECT COUNT(*) FROM audit_logs WHERE action LIKE 'webhook.%' AND outcome = 'refused'").await;
    assert!(refused.expect("audit") >= 4 * 8, "refusals of the project's own callers are audited");

    // `baton admin webhook`: the same rules, with the deployment's policy.
    let listed = c.admin(&["webhook", "list", "--project", &c.id.project_id]).await.expect("list");
    assert_eq!(listed["items"][0]["webhook_id"], id.as_str(), "{listed}");
    let rotated = c.admin(&["webhook", "rotate-secret", "--id", &id]).await.expect("rotate");
    assert!(text(&rotated, "secret").expect("secret").starts_with("whsec_"));
    let strict = c.dir.join("strict.yaml");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&c.config).expect("config")).expect("json");
    config["webhooks"]["allow_loopback_targets"] = json!(false);
    std::fs::write(&strict, serde_json::to_vec(&config).expect("json")).expect("write");
    let out = tokio::process::Command::new(crate::harness::baton_bin())
        .args(["admin", "--config"])
        .arg(&strict)
        .args(["webhook", "create", "--project", &c.id.project_id, "--url", "http://127.0.0.1:9/h"])
        .output()
        .await
        .expect("run");
    assert!(!out.status.success(), "loopback accepted without the allow option");
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"), "{}", String::from_utf8_lossy(&out.stderr));
    let actions = audit_actions(&c, &id).await.expect("audit");
    assert!(
        actions.contains("webhook.create:allowed") && actions.contains("webhook.rotate_secret:allowed"),
        "{actions:?}"
    );
}
