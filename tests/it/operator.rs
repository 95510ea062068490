//! Operator recovery (seed 000) through real processes on Postgres: each
//! route opened by its own permission on an API key, never by a role alone;
//! status never carries a payload; cancellation reports what it can prove.

use crate::harness::{Cluster, Settings, eventually};
use anyhow::{Context as _, Result};
use serde_json::json;
use std::time::Duration;

const CANARY: &str = "canary-op-91c2";
const UNKNOWN: &str = "te_000000000000000000000000000";

async fn key(c: &Cluster, project: &str, role: &str, permissions: &str) -> Result<String> {
    let args = ["create-api-key", "--project", project, "--role", role, "--permissions", permissions];
    c.admin(&args).await?["token"].as_str().map(str::to_owned).context("token")
}

#[tokio::test]
async fn each_operator_route_takes_its_own_permission() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let p = c.id.project_id.clone();
    let status = key(&c, &p, "member", "status").await.expect("key");
    let payload = key(&c, &p, "member", "payload").await.expect("key");
    let cancel = key(&c, &p, "member", "cancel").await.expect("key");
    let read_only_all = key(&c, &p, "read_only", "status,payload,cancel").await.expect("key");
    let elsewhere = c.admin(&["create-project", "--org", &c.id.org_id, "--name", "x"]).await.expect("project")["id"]
        .as_str()
        .map(str::to_owned)
        .expect("id");
    let foreign = key(&c, &elsewhere, "admin", "status,payload,cancel").await.expect("key");

    let member = c.rest(0, &c.id.member_key);
    let done = member.start("Demo.Echo", json!({"text": CANARY}), None).await.expect("start").json();
    let done = done["execution_id"].as_str().expect("id").to_owned();
    member.until_terminal(&done, Duration::from_secs(20)).await.expect("terminal");

    let routes = [
        ("GET", "/operator/tool-executions".to_owned()),
        ("GET", format!("/operator/tool-executions/{done}")),
        ("GET", format!("/operator/tool-executions/{done}/payload")),
        ("POST", format!("/operator/tool-executions/{done}/cancel")),
    ];
    let unknown = c.rest(0, &status).get(&format!("/operator/tool-executions/{UNKNOWN}")).await.expect("unknown");
    assert_eq!(unknown.status, 404);
    let args = ["create-api-key", "--project", &p, "--role", "admin", "--permissions", "status,payload,cancel"];
    let revoked = c.admin(&args).await.expect("key");
    c.admin(&["revoke", "--id", revoked["id"].as_str().expect("id")]).await.expect("revoke");
    let revoked = revoked["token"].as_str().expect("token").to_owned();
    let callers: [(&str, &str, [u16; 4]); 9] = [
        ("revoked operator", &revoked, [401; 4]),
        ("status", &status, [200, 200, 403, 403]),
        ("payload", &payload, [403, 403, 200, 403]),
        ("cancel", &cancel, [403, 403, 403, 200]),
        ("read_only with all", &read_only_all, [200, 200, 200, 403]),
        ("admin without permissions", &c.id.admin_key, [403; 4]),
        ("end user", &c.id.user_token, [403; 4]),
        ("worker", &c.id.worker_token, [403; 4]),
        ("other project's operator", &foreign, [404; 4]),
    ];
    for (who, token, expected) in callers {
        let rest = c.rest(0, token);
        for ((method, route), code) in routes.iter().zip(expected) {
            let r = match *method {
                "GET" => rest.get(route).await,
                _ => rest.post(route, json!({})).await,
            }
            .expect("request");
            assert_eq!(r.status, code, "{who} {method} {route}: {}", String::from_utf8_lossy(&r.bytes));
            if code == 404 {
                assert_eq!(r.bytes, unknown.bytes, "{who} {route}: the uniform not-found");
            }
        }
    }

    // Status never carries the payload; the payload route does.
    let operator = c.rest(0, &status);
    for route in ["/operator/tool-executions".to_owned(), format!("/operator/tool-executions/{done}")] {
        let r = operator.get(&route).await.expect("get");
        assert!(!String::from_utf8_lossy(&r.bytes).contains(CANARY), "{route} leaked the payload");
    }
    let seen = operator.get(&format!("/operator/tool-executions/{done}")).await.expect("status").json();
    assert_eq!((seen["execution_id"].clone(), seen["status"].clone()), (json!(done), json!("completed")));
    let body = c.rest(0, &payload).get(&format!("/operator/tool-executions/{done}/payload")).await.expect("payload");
    let body = body.json();
    assert_eq!(body["input"]["text"], CANARY, "{body}");
    assert_eq!(body["result"]["structuredContent"]["text"], CANARY, "{body}");

    // Every execution of the project, whoever started it, in cursor pages.
    c.rest(0, &c.id.user_token).start("Demo.Echo", json!({"text": "b"}), None).await.expect("start");
    let first = operator.get("/operator/tool-executions?limit=1").await.expect("page").json();
    let cursor = first["next_cursor"].as_str().expect("a next page").to_owned();
    let second = operator.get(&format!("/operator/tool-executions?limit=1&cursor={cursor}")).await.expect("page");
    let second = second.json();
    assert_ne!(first["items"][0]["execution_id"], second["items"][0]["execution_id"]);
    assert_eq!(second["next_cursor"], serde_json::Value::Null, "{second}");
    assert_eq!(operator.get("/operator/tool-executions?limit=201").await.expect("limit").status, 400);

    // Cancellation of a running execution the operator does not own.
    let sleeping = member.start("Demo.Sleep", json!({"seconds": 60}), None).await.expect("start").json();
    let sleeping = sleeping["execution_id"].as_str().expect("id").to_owned();
    eventually(Duration::from_secs(20), "working", || async {
        Ok((member.get(&format!("/tool-executions/{sleeping}")).await?.json()["status"] == "working").then_some(()))
    })
    .await
    .expect("working");
    let canceller = c.rest(0, &cancel);
    let r = canceller.post(&format!("/operator/tool-executions/{sleeping}/cancel"), json!({})).await.expect("cancel");
    assert_eq!(r.json()["outcome"], "accepted", "{}", String::from_utf8_lossy(&r.bytes));
    let v = member.until_terminal(&sleeping, Duration::from_secs(20)).await.expect("terminal");
    assert_eq!(v["status"], "cancelled");
    let again =
        canceller.post(&format!("/operator/tool-executions/{sleeping}/cancel"), json!({})).await.expect("again");
    assert_eq!(again.json()["outcome"], "already_terminal");
}
