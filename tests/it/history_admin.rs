//! Retention per organization and project, execution logging, and disabled
//! tools, through real processes on Postgres: the windows decide what the
//! history and the owner still see, the sweeper deletes what is past them,
//! and every change is in the audit log.

use crate::harness::{Cluster, Rest, Settings, eventually};
use anyhow::{Result, anyhow};
use serde_json::{Value, json};
use std::time::Duration;

async fn put(rest: &Rest, path: &str, body: Value) -> Result<(u16, Value)> {
    let r = rest.send(reqwest::Method::PUT, path, Some(body), None).await?;
    Ok((r.status, serde_json::from_slice(&r.bytes).unwrap_or(Value::Null)))
}

async fn finished(rest: &Rest, text: &str, ttl_ms: Option<u64>) -> Result<String> {
    let mut body = json!({"gateway_id": rest.gateway_id, "tool_name": "Demo.Echo", "input": {"text": text},
        "user_id": "alice@example.com"});
    if let Some(ttl) = ttl_ms {
        body["ttl_ms"] = json!(ttl);
    }
    let v = rest.post("/tool-executions", body).await?.json();
    let id = v["execution_id"].as_str().ok_or_else(|| anyhow!("start: {v}"))?.to_owned();
    rest.until_terminal(&id, Duration::from_secs(20)).await?;
    Ok(id)
}

#[tokio::test]
async fn history_retention_override_is_honoured_by_the_sweeper() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let admin = c.rest(0, &c.id.admin_key);
    let member = c.rest(0, &c.id.member_key);
    let before = admin.get("/retention").await.expect("get").json();
    assert_eq!((before["source"].as_str(), before["retention_seconds"].as_i64()), (Some("default"), Some(604_800)));

    // Only an admin changes it; the member's attempt is refused and recorded.
    let (status, _) = put(&member, "/retention", json!({"retention_seconds": 1})).await.expect("put");
    assert_eq!(status, 403);
    for bad in [json!({}), json!({"retention_seconds": -5}), json!({"retention_seconds": "1d"})] {
        assert_eq!(put(&admin, "/retention", bad.clone()).await.expect("put").0, 400, "{bad}");
    }

    // Executions whose deadline is three seconds out, kept one second past it.
    let short = finished(&member, "short-lived", Some(3_000)).await.expect("run");
    let (status, set) = put(&admin, "/retention", json!({"retention_seconds": 1})).await.expect("put");
    assert_eq!((status, set["source"].as_str(), set["retention_seconds"].as_i64()), (200, Some("project"), Some(1)));
    let visible = admin.get(&format!("/tool_executions/{short}")).await.expect("detail");
    assert_eq!(visible.status, 200, "within the window it is still there");
    // Past the window it is gone for every reader at once; its rows leave
    // with the rest of their day when the day ends (the store's tests drop one).
    eventually(Duration::from_secs(30), "the window to pass", || async {
        let status = admin.get(&format!("/tool_executions/{short}")).await?.status;
        Ok((status == 404).then_some(()))
    })
    .await
    .expect("expired");
    assert_eq!(member.get(&format!("/tool-executions/{short}")).await.expect("owner").status, 404);
    let listed = admin.get("/tool_executions").await.expect("history").json();
    let items = listed["items"].as_array().expect("a page of the history");
    assert!(items.iter().all(|r| r["id"] != short.as_str()), "an expired run is not listed: {listed}");

    // Cleared, the organization's default applies; with none, the configured one.
    let org = c.id.org_id.clone();
    c.admin(&["set-retention", "--org", &org, "--days", "30"]).await.expect("org default");
    assert_eq!(admin.get("/retention").await.expect("get").json()["source"], "project");
    let (_, cleared) = put(&admin, "/retention", json!({"retention_seconds": null})).await.expect("clear");
    assert_eq!(
        (cleared["source"].as_str(), cleared["retention_seconds"].as_i64()),
        (Some("organization"), Some(2_592_000))
    );

    let log = admin.get("/audit_logs?action=retention.set").await.expect("audit").json();
    let rows: Vec<(String, String)> = log["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|e| {
            (e["outcome"].as_str().unwrap_or_default().to_owned(), e["scope"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    for expected in [("allowed", "project"), ("allowed", "organization"), ("refused", "project")] {
        assert!(rows.contains(&(expected.0.to_owned(), expected.1.to_owned())), "no {expected:?} in {log}");
    }
}

#[tokio::test]
async fn history_logging_off_deletes_the_history_and_keeps_work_in_flight_for_its_owner() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let admin = c.rest(0, &c.id.admin_key);
    let owner = c.rest(0, &c.id.member_key);
    let done = finished(&owner, "before", None).await.expect("run");
    let sleeping = owner.start("Demo.Sleep", json!({"seconds": 60}), None).await.expect("start").json();
    let sleeping = sleeping["execution_id"].as_str().expect("id").to_owned();
    assert_eq!(admin.get("/tool_executions/count").await.expect("count").json()["count"], 2);

    c.admin(&["execution-logging", "--org", &c.id.org_id, "--off"]).await.expect("off");
    assert_eq!(admin.get("/tool_executions/count").await.expect("count").json()["count"], 0);
    assert_eq!(admin.get("/tool_executions").await.expect("list").json()["total_count"], 0);
    assert_eq!(admin.get(&format!("/tool_executions/{sleeping}")).await.expect("detail").status, 404);
    // The finished run is gone for its owner too; the running one is not.
    assert_eq!(owner.get(&format!("/tool-executions/{done}")).await.expect("get").status, 404);
    let live = owner.get(&format!("/tool-executions/{sleeping}")).await.expect("get");
    assert_eq!((live.status, live.json()["status"].clone()), (200, json!("working")));
    let retention = admin.get("/retention").await.expect("get").json();
    assert_eq!(
        (retention["source"].as_str(), retention["execution_logging"].as_bool()),
        (Some("execution_logging_off"), Some(false))
    );
    let log = admin.get("/audit_logs?action=execution_logging.set").await.expect("audit").json();
    assert_eq!(
        (log["total_count"].as_u64(), log["items"][0]["scope"].as_str()),
        (Some(1), Some("organization")),
        "{log}"
    );

    c.admin(&["execution-logging", "--org", &c.id.org_id, "--on"]).await.expect("on");
    let after = finished(&owner, "after", None).await.expect("run");
    let list = admin.get("/tool_executions").await.expect("list").json();
    assert!(list.to_string().contains(&after), "{list}");
    assert!(!list.to_string().contains(&done), "deleted history stays deleted: {list}");
}

#[tokio::test]
async fn history_of_a_disabled_tool_refuses_new_work_and_cancellation_before_the_worker_hears_of_it() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let owner = c.rest(0, &c.id.member_key);
    let v = owner.start("Demo.Sleep", json!({"seconds": 60}), None).await.expect("start").json();
    let id = v["execution_id"].as_str().expect("id").to_owned();
    eventually(Duration::from_secs(20), "working", || async {
        Ok((owner.get(&format!("/tool-executions/{id}")).await?.json()["status"] == "working").then_some(()))
    })
    .await
    .expect("working");

    c.admin(&["disable-tool", "--project", &c.id.project_id, "--tool", "Demo.Sleep"]).await.expect("disable");
    let r = owner.post(&format!("/tool-executions/{id}/cancel"), json!({})).await.expect("cancel");
    assert_eq!((r.status, r.json()["error"]["code"].clone()), (403, json!("policy_refused")), "{}", r.json());
    let detail = c.rest(0, &c.id.admin_key).get(&format!("/tool_executions/{id}")).await.expect("detail").json();
    assert_eq!(detail["execution_status"], "working", "{detail}");
    let events: Vec<&str> =
        detail["timeline"].as_array().expect("timeline").iter().filter_map(|e| e["event"].as_str()).collect();
    assert!(!events.contains(&"cancel_requested"), "the cancel never reached the execution: {events:?}");
    let again = owner.start("Demo.Sleep", json!({"seconds": 1}), None).await.expect("start");
    assert_eq!((again.status, again.json()["error"]["code"].clone()), (403, json!("policy_refused")));

    c.admin(&["enable-tool", "--project", &c.id.project_id, "--tool", "Demo.Sleep"]).await.expect("enable");
    let r = owner.post(&format!("/tool-executions/{id}/cancel"), json!({})).await.expect("cancel");
    assert_eq!(r.json()["outcome"], "accepted", "{}", r.json());
    let log = c.rest(0, &c.id.admin_key).get("/audit_logs?target=x").await.expect("audit");
    assert_eq!(log.status, 400, "unknown filters are refused");
    let log = c.rest(0, &c.id.admin_key).get("/audit_logs").await.expect("audit").json();
    for action in ["tool.disable", "tool.enable"] {
        assert!(log.to_string().contains(action), "no {action} in {log}");
    }
}
