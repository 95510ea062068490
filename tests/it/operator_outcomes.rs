//! Every outcome of an operator cancel produced for real, each on a worker
//! session driven by hand so the test decides what the worker does; the
//! current tool policy re-checked before the owner is contacted; and every
//! operator operation in the audit log, refusals included.

use crate::harness::{Cluster, Rest, Settings, eventually};
use crate::worker_trust::{Hostile, channel, lease, tool};
use anyhow::{Context as _, Result, anyhow};
use baton_proto::worker::v1::ToolRegistration;
use baton_proto::worker::v1::coordinator_message::Msg;
use serde_json::{Value, json};
use std::time::Duration;

async fn key(c: &Cluster, role: &str, permissions: &str) -> Result<String> {
    let args = ["create-api-key", "--project", &c.id.project_id, "--role", role, "--permissions", permissions];
    c.admin(&args).await?["token"].as_str().map(str::to_owned).context("token")
}

/// Starts `tool` and waits until a worker holds it.
pub(crate) async fn running(c: &Cluster, owner: &Rest, tool: &str) -> Result<String> {
    let r = owner.start(tool, json!({}), None).await?;
    let id = r.json()["execution_id"].as_str().ok_or_else(|| anyhow!("start: {}", r.json()))?.to_owned();
    lease(c, &id).await?;
    Ok(id)
}

/// A worker session of the cluster's project serving `t`, driven by the test.
pub(crate) async fn register(c: &Cluster, id: &str, t: ToolRegistration) -> Result<Hostile> {
    Hostile::register(channel(c, 0, None).await?, &c.id.worker_token, id, vec![t], 4)
        .await?
        .map_err(|s| anyhow!("registration: {s}"))
}

async fn cancel(rest: &Rest, route: &str) -> Result<(u16, Value)> {
    let r = rest.post(route, json!({})).await?;
    Ok((r.status, r.json()))
}

#[tokio::test]
async fn operator_cancel_answers_every_outcome_and_each_is_audited() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let operator = c.rest(0, &key(&c, "member", "status,cancel").await.expect("key"));
    let owner = c.rest(0, &c.id.member_key);
    let mut commit = tool("Op.Commit");
    commit.cancel_unsupported = true;
    let mut unstoppable = register(&c, "wk_commit", commit).await.expect("worker");
    let mut stubborn = register(&c, "wk_stubborn", tool("Op.Stubborn")).await.expect("worker");
    let vanishing = register(&c, "wk_vanishing", tool("Op.Vanishing")).await.expect("worker");
    let route = |id: &str| format!("/operator/tool-executions/{id}/cancel");

    // A tool that declares it cannot be stopped: `unsupported`, to the
    // operator and to the owner alike, and the worker is never told to stop.
    let id = running(&c, &owner, "Op.Commit").await.expect("running");
    assert_eq!(cancel(&operator, &route(&id)).await.expect("cancel").1["outcome"], "unsupported");
    let (status, mine) = cancel(&owner, &format!("/tool-executions/{id}/cancel")).await.expect("cancel");
    assert_eq!((status, mine["outcome"].clone()), (200, json!("unsupported")), "{mine}");
    assert_eq!(owner.get(&format!("/tool-executions/{id}")).await.expect("get").json()["status"], "working");
    let stop = unstoppable.next(Duration::from_secs(2), |m| matches!(m, Msg::Stop(_)).then_some(())).await;
    assert!(stop.is_err(), "an unsupported cancel never reaches the worker");

    // Delivered to the holder's live session: `accepted`; asked again while the
    // worker has not stopped: `stop_already_requested`.
    let id = running(&c, &owner, "Op.Stubborn").await.expect("running");
    assert_eq!(cancel(&operator, &route(&id)).await.expect("cancel").1["outcome"], "accepted");
    stubborn.next(Duration::from_secs(10), |m| matches!(m, Msg::Stop(_)).then_some(())).await.expect("stop");
    assert_eq!(cancel(&operator, &route(&id)).await.expect("again").1["outcome"], "stop_already_requested");

    // The holder's session is gone but its lease has not lapsed: nobody can
    // say whether the stop arrives.
    let id = running(&c, &owner, "Op.Vanishing").await.expect("running");
    drop(vanishing);
    eventually(Duration::from_secs(20), "the coordinator to see the session end", || async {
        Ok((c.scalar("SELECT COUNT(*) FROM workers WHERE id = 'wk_vanishing'").await? == 0).then_some(()))
    })
    .await
    .expect("disconnected");
    assert_eq!(cancel(&operator, &route(&id)).await.expect("cancel").1["outcome"], "stop_delivery_unknown");

    // A terminal execution: `already_terminal`.
    let done = owner.start("Demo.Echo", json!({"text": "x"}), None).await.expect("start").json();
    let done = done["execution_id"].as_str().expect("id").to_owned();
    owner.until_terminal(&done, Duration::from_secs(20)).await.expect("terminal");
    assert_eq!(cancel(&operator, &route(&done)).await.expect("cancel").1["outcome"], "already_terminal");

    // A refused operator (no cancel permission) is recorded too.
    let status_only = c.rest(0, &key(&c, "member", "status").await.expect("key"));
    assert_eq!(cancel(&status_only, &route(&done)).await.expect("cancel").0, 403);

    let admin = c.rest(0, &c.id.admin_key);
    let log = admin.get("/audit_logs?action=operator.cancel&limit=100").await.expect("audit").json();
    let outcomes: Vec<&str> =
        log["items"].as_array().expect("items").iter().filter_map(|e| e["outcome"].as_str()).collect();
    for expected in
        ["unsupported", "accepted", "stop_already_requested", "stop_delivery_unknown", "already_terminal", "refused"]
    {
        assert!(outcomes.contains(&expected), "no {expected} row in {log}");
    }
    assert_eq!(log["total_count"], outcomes.len(), "{log}");
    let refused = &log["items"][0];
    assert_eq!((refused["outcome"].as_str(), refused["target"].as_str()), (Some("refused"), Some(done.as_str())));
    assert!(refused["detail"].as_str().unwrap_or_default().contains("cancel"), "{refused}");
}

#[tokio::test]
async fn the_audit_log_is_for_the_projects_admins_only() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let other = c.admin(&["create-project", "--org", &c.id.org_id, "--name", "x"]).await.expect("project")["id"]
        .as_str()
        .map(str::to_owned)
        .expect("id");
    let foreign = c.admin(&["create-api-key", "--project", &other, "--role", "admin"]).await.expect("key");
    let revoked = c.admin(&["create-api-key", "--project", &c.id.project_id, "--role", "admin"]).await.expect("key");
    let revoked_id = revoked["id"].as_str().expect("id").to_owned();
    c.admin(&["revoke", "--id", &revoked_id]).await.expect("revoke");
    let read_only = key(&c, "read_only", "status,payload,cancel").await.expect("key");
    let operator = key(&c, "member", "status,payload,cancel").await.expect("key");
    let callers: [(&str, &str, u16); 8] = [
        ("admin", &c.id.admin_key, 200),
        ("member", &c.id.member_key, 403),
        ("member operator", &operator, 403),
        ("read only", &read_only, 403),
        ("end user", &c.id.user_token, 403),
        ("worker", &c.id.worker_token, 403),
        ("revoked admin", revoked["token"].as_str().expect("token"), 401),
        ("other project's admin", foreign["token"].as_str().expect("token"), 404),
    ];
    for (who, token, code) in callers {
        let r = c.rest(0, token).get("/audit_logs").await.expect("get");
        assert_eq!(r.status, code, "{who}: {}", String::from_utf8_lossy(&r.bytes));
    }
    // The administrative changes made above are on record, by `baton admin`.
    let admin = c.rest(0, &c.id.admin_key);
    let revocations = admin.get("/audit_logs?action=credential.revoke").await.expect("audit").json();
    assert_eq!(revocations["total_count"], 1, "{revocations}");
    let row = &revocations["items"][0];
    assert_eq!((row["actor_id"].as_str(), row["target"].as_str()), (Some("cli"), Some(revoked_id.as_str())));
    let created = admin.get("/audit_logs?action=credential.create&actor_id=cli").await.expect("audit").json();
    assert!(created["total_count"].as_u64().unwrap_or(0) >= 3, "{created}");
    // The other project's key appears in its own project's log, not here.
    let elsewhere = foreign["id"].as_str().expect("id");
    assert!(!created.to_string().contains(elsewhere), "{created}");
    for bad in ["/audit_logs?start_time=yesterday", "/audit_logs?limit=0", "/audit_logs?who=me"] {
        assert_eq!(admin.get(bad).await.expect("get").status, 400, "{bad}");
    }
    // Every payload reveal of the history is on record, and so is a refused one.
    let run = c.rest(0, &c.id.member_key).start("Demo.Echo", json!({"text": "x"}), None).await.expect("start");
    let run = run.json()["execution_id"].as_str().expect("id").to_owned();
    let revealed = admin.get(&format!("/tool_executions/{run}?include_inputs=true")).await.expect("reveal");
    assert_eq!(revealed.status, 200);
    let member = c.rest(0, &c.id.member_key);
    assert_eq!(member.get(&format!("/tool_executions/{run}?include_outputs=true")).await.expect("reveal").status, 403);
    let reveals = admin.get("/audit_logs?action=history.reveal").await.expect("audit").json();
    let outcomes: Vec<(&str, &str)> = reveals["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|e| Some((e["outcome"].as_str()?, e["detail"].as_str()?)))
        .collect();
    assert!(outcomes.iter().any(|(o, d)| *o == "allowed" && d.starts_with("inputs")), "{reveals}");
    assert!(outcomes.iter().any(|(o, d)| *o == "refused" && d.starts_with("outputs")), "{reveals}");
    let page = admin.get("/audit_logs?limit=1&offset=1").await.expect("page").json();
    assert_eq!((page["page_count"].clone(), page["offset"].clone()), (json!(1), json!(1)), "{page}");
}
