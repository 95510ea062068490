//! The execution history (seed 002) through real processes on Postgres: who
//! may call which route (docs/rest.md, "History"), payloads only for admins who ask,
//! every attempt's error for every reader, filters, paging and counts, and
//! every kind of run (REST, MCP, scheduled) in one history.

use crate::harness::{Cluster, Reply, Rest, Settings};
use anyhow::{Context as _, Result, anyhow};
use serde_json::{Value, json};
use std::time::Duration;

const CANARY_INPUT: &str = "canary-7f3a-in";
const UNKNOWN: &str = "te_000000000000000000000000000";

fn id_of(r: &Reply) -> Result<String> {
    r.json()["execution_id"].as_str().map(str::to_owned).ok_or_else(|| anyhow!("no execution id: {}", r.json()))
}

fn text(r: &Reply) -> String {
    String::from_utf8_lossy(&r.bytes).into_owned()
}

/// A REST client for `project` (another project than the cluster's, say).
fn rest_for(c: &Cluster, project: &str, token: &str) -> Rest {
    let mut rest = c.rest(0, token);
    rest.base = format!("http://{}/v1/orgs/{}/projects/{project}", c.gateways[0].addr, c.id.org_id);
    rest
}

/// A project of the cluster's organization and an admin key of it.
async fn other_project(c: &Cluster) -> Result<(String, String)> {
    let project = c.admin(&["create-project", "--org", &c.id.org_id, "--name", "elsewhere"]).await?["id"]
        .as_str()
        .map(str::to_owned)
        .context("project id")?;
    let key = c.admin(&["create-api-key", "--project", &project, "--role", "admin"]).await?["token"]
        .as_str()
        .map(str::to_owned)
        .context("token")?;
    Ok((project, key))
}

/// A foreground MCP `tools/call` (2026-07-28, stateless) with the end user's token.
async fn mcp_call(c: &Cluster, tool: &str, arguments: Value) -> Result<Value> {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "baton-it-history", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta}});
    let text = c
        .http
        .post(format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id))
        .bearer_auth(&c.id.user_token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .send()
        .await?
        .text()
        .await?;
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .chain(std::iter::once(text.trim()))
        .find_map(|d| serde_json::from_str::<Value>(d).ok().filter(|v| v["id"] == 7))
        .and_then(|m| m.get("result").cloned())
        .ok_or_else(|| anyhow!("tools/call answered {text}"))
}

#[tokio::test]
async fn who_may_read_the_history_and_its_payloads() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let member = c.rest(0, &c.id.member_key);
    let echo = member.start("Demo.Echo", json!({"text": CANARY_INPUT}), None).await.expect("start");
    let echo = id_of(&echo).expect("id");
    let flaky = member.start("Demo.Fail", json!({"retryable": true, "times": 2}), None).await.expect("start");
    let flaky = id_of(&flaky).expect("id");
    for id in [&echo, &flaky] {
        let done = member.until_terminal(id, Duration::from_secs(30)).await.expect("terminal");
        assert_eq!(done["status"], "completed", "{done}");
    }
    let (foreign_project, foreign_key) = other_project(&c).await.expect("other project");

    // Every route × every caller, with and without the payload flags.
    let routes = [
        "/tool_executions".to_owned(),
        "/tool_executions/count".to_owned(),
        format!("/tool_executions/{flaky}"),
        format!("/tool_executions/{flaky}?include_inputs=true"),
        format!("/tool_executions/{flaky}?include_outputs=true"),
        format!("/tool_executions/{flaky}?include_inputs=true&include_outputs=true"),
    ];
    // An admin key revoked a moment ago authenticates nowhere.
    let revoked = c.admin(&["create-api-key", "--project", &c.id.project_id, "--role", "admin"]).await.expect("key");
    c.admin(&["revoke", "--id", revoked["id"].as_str().expect("id")]).await.expect("revoke");
    let revoked = revoked["token"].as_str().expect("token").to_owned();
    let callers: [(&str, &str, [u16; 6]); 7] = [
        ("revoked admin", &revoked, [401; 6]),
        ("admin", &c.id.admin_key, [200, 200, 200, 200, 200, 200]),
        ("member", &c.id.member_key, [200, 200, 200, 403, 403, 403]),
        ("read_only", &c.id.read_only_key, [403; 6]),
        ("end user", &c.id.user_token, [403; 6]),
        ("worker", &c.id.worker_token, [403; 6]),
        ("other project's admin", &foreign_key, [404; 6]),
    ];
    let unknown = c.rest(0, &c.id.admin_key).get(&format!("/tool_executions/{UNKNOWN}")).await.expect("unknown");
    assert_eq!(unknown.status, 404);
    for (who, token, expected) in callers {
        let rest = c.rest(0, token);
        for (route, status) in routes.iter().zip(expected) {
            let r = rest.get(route).await.expect("get");
            assert_eq!(r.status, status, "{who} GET {route}: {}", text(&r));
            if status == 404 {
                assert_eq!(r.bytes, unknown.bytes, "{who} GET {route}: the uniform not-found");
            }
            if status == 403 {
                assert_eq!(r.json()["error"]["code"], "permission_denied", "{who} GET {route}");
            }
        }
    }
    assert_eq!(c.rest(0, "").get("/tool_executions").await.expect("no token").status, 401);
    assert_eq!(c.rest(0, "bt_forged").get("/tool_executions?limit=0").await.expect("forged").status, 401);
    // The other project's admin, on its own project's path, still cannot see ours.
    let own_path = rest_for(&c, &foreign_project, &foreign_key);
    let r = own_path.get(&format!("/tool_executions/{flaky}")).await.expect("get");
    assert_eq!((r.status, &r.bytes), (404, &unknown.bytes));
    let theirs = own_path.get("/tool_executions").await.expect("list").json();
    assert_eq!((theirs["total_count"].clone(), theirs["items"].clone()), (json!(0), json!([])));
    // The owner route's not-found is the same bytes too.
    let owner_unknown = c.rest(0, &c.id.member_key).get(&format!("/tool-executions/{UNKNOWN}")).await.expect("get");
    assert_eq!(owner_unknown.bytes, unknown.bytes);

    // A canary in an input and an output never reaches list or count bodies.
    let admin = c.rest(0, &c.id.admin_key);
    for route in [
        "/tool_executions",
        "/tool_executions?tool_name=Demo.Echo",
        "/tool_executions/count",
        "/tool_executions/count?outcome=success",
    ] {
        let r = admin.get(route).await.expect("get");
        assert_eq!(r.status, 200, "{route}");
        assert!(!text(&r).contains(CANARY_INPUT), "{route} leaked a payload: {}", text(&r));
    }
    let plain = admin.get(&format!("/tool_executions/{echo}")).await.expect("detail");
    assert!(!text(&plain).contains(CANARY_INPUT), "no payload without the flags");
    let revealed = admin.get(&format!("/tool_executions/{echo}?include_inputs=true&include_outputs=true")).await;
    let revealed = revealed.expect("detail").json();
    assert_eq!(revealed["input"]["text"], CANARY_INPUT, "{revealed}");
    assert_eq!(revealed["output"]["structuredContent"]["text"], CANARY_INPUT, "{revealed}");
    assert_eq!(revealed["attempts"][0]["output"]["structuredContent"]["text"], CANARY_INPUT);

    // Three attempts: each error for a member, the tool's detail only for an admin who asks.
    let seen = member.get(&format!("/tool_executions/{flaky}")).await.expect("detail");
    let v = seen.json();
    let attempts = v["attempts"].as_array().cloned().unwrap_or_default();
    assert_eq!(attempts.len(), 3, "{v}");
    let errors: Vec<&Value> = attempts.iter().map(|a| &a["error"]).collect();
    assert_eq!(errors, [&json!("planned failure 1 of 2"), &json!("planned failure 2 of 2"), &Value::Null]);
    let success: Vec<&Value> = attempts.iter().map(|a| &a["success"]).collect();
    assert_eq!(success, [&json!(false), &json!(false), &json!(true)]);
    for (n, a) in attempts.iter().enumerate() {
        assert_eq!(a["id"], format!("{flaky}:{}", n + 1));
        assert_eq!(a["attempt"], n + 1);
        assert!(a["duration_ms"].as_i64().is_some_and(|d| d >= 0), "{a}");
        assert!(a.get("error_detail").is_none() && a.get("output").is_none(), "{a}");
        assert_eq!(a["system_error_message"], Value::Null);
    }
    assert!(!text(&seen).contains("developer_message"), "the tool's detail is payload");
    let events: Vec<&str> =
        v["timeline"].as_array().map(|t| t.iter().filter_map(|e| e["event"].as_str()).collect()).unwrap_or_default();
    assert_eq!(events, ["created", "claimed", "settled", "claimed", "settled", "claimed", "settled"], "{v}");
    assert_eq!(v["timeline"][6]["status"], "completed");
    assert_eq!((v["execution_status"].clone(), v["tool_name"].clone()), (json!("completed"), json!("Demo.Fail")));
    let full = admin.get(&format!("/tool_executions/{flaky}?include_outputs=true")).await.expect("detail").json();
    let detail = &full["attempts"][0]["error_detail"];
    assert!(detail["developer_message"].as_str().is_some_and(|m| m.contains("Demo.Fail")), "{full}");
    assert_eq!(full["attempts"][2]["output"]["structuredContent"]["attempt"], 3, "{full}");
    assert_eq!(full["output"]["structuredContent"]["attempt"], 3, "{full}");
    assert!(full.get("input").is_none(), "inputs only with include_inputs");
}

#[tokio::test]
async fn filters_paging_counts_and_every_kind_of_run() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let member = c.rest(0, &c.id.member_key);
    let admin = c.rest(0, &c.id.admin_key);
    let start = |tool: &str, input: Value, user: &str| {
        let body = json!({"gateway_id": c.id.gateway_id, "tool_name": tool, "input": input, "user_id": user});
        member.send(reqwest::Method::POST, "/tool-executions", Some(body), None)
    };
    let echo = id_of(&start("Demo.Echo", json!({"text": "a"}), "alice@example.com").await.expect("start")).expect("id");
    let flaky = start("Demo.Fail", json!({"retryable": true, "times": 1}), "alice@example.com").await.expect("start");
    let flaky = id_of(&flaky).expect("id");
    let failed = start("Demo.Fail", json!({"retryable": false}), "bob@example.com").await.expect("start");
    let failed = id_of(&failed).expect("id");
    let called = mcp_call(&c, "Demo.Echo", json!({"text": "over mcp"})).await.expect("mcp call");
    assert_eq!(called["structuredContent"]["text"], "over mcp", "{called}");
    let later = time::OffsetDateTime::now_utc() + time::Duration::minutes(10);
    let run_at = later.format(&time::format_description::well_known::Rfc3339).expect("format");
    let body = json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Echo", "input": {"text": "later"},
        "user_id": "alice@example.com", "run_at": run_at, "ttl_ms": 3_600_000});
    let scheduled = member.send(reqwest::Method::POST, "/tool-executions", Some(body), None).await.expect("start");
    let scheduled = id_of(&scheduled).expect("id");
    for id in [&echo, &flaky, &failed] {
        member.until_terminal(id, Duration::from_secs(30)).await.expect("terminal");
    }

    // Every run, newest first, whichever surface started it.
    let all = admin.get("/tool_executions").await.expect("list").json();
    assert_eq!((all["limit"].clone(), all["offset"].clone()), (json!(100), json!(0)), "{all}");
    assert_eq!((all["total_count"].clone(), all["page_count"].clone()), (json!(5), json!(5)), "{all}");
    let items = all["items"].as_array().cloned().unwrap_or_default();
    let ids: Vec<&str> = items.iter().filter_map(|i| i["id"].as_str()).collect();
    assert_eq!(ids[0], scheduled, "newest first");
    for id in [&echo, &flaky, &failed, &scheduled] {
        assert!(ids.contains(&id.as_str()), "{id} listed");
    }
    let mcp_id = ids.iter().find(|i| ![&echo, &flaky, &failed, &scheduled].iter().any(|k| k == i)).expect("mcp run");
    let mcp = admin.get(&format!("/tool_executions/{mcp_id}")).await.expect("detail").json();
    assert!(mcp["surface"].as_str().is_some_and(|s| s.starts_with("mcp_")), "{mcp}");
    assert_eq!(mcp["user_id"], "alice@example.com");
    let sched = items.iter().find(|i| i["id"] == scheduled.as_str()).expect("scheduled");
    assert_eq!(
        (sched["execution_type"].clone(), sched["execution_status"].clone()),
        (json!("scheduled"), json!("pending"))
    );
    assert_eq!(sched["started_at"], Value::Null);
    for field in [
        "id",
        "created_at",
        "updated_at",
        "execution_type",
        "execution_status",
        "tool_name",
        "toolkit_name",
        "toolkit_version",
        "user_id",
        "started_at",
        "finished_at",
    ] {
        assert!(items.iter().all(|i| i.get(field).is_some()), "every item has {field}");
    }
    assert_eq!(items.iter().map(|i| i.as_object().map_or(0, |o| o.len())).max(), Some(11), "only the list fields");
    let stamps: Vec<&str> = items.iter().filter_map(|i| i["created_at"].as_str()).collect();
    assert!(stamps.iter().all(|t| t.ends_with('Z')), "UTC: {stamps:?}");
    let rfc3339 = time::format_description::well_known::Rfc3339;
    let created: Vec<time::OffsetDateTime> =
        stamps.iter().map(|t| time::OffsetDateTime::parse(t, &rfc3339).expect("RFC 3339")).collect();
    assert!(created.windows(2).all(|w| w[0] >= w[1]), "newest first: {stamps:?}");

    // Paging: page_count is this page's length; total_count is every match.
    let mut paged = Vec::new();
    for (offset, expected) in [(0, 2), (2, 2), (4, 1), (5, 0), (9, 0)] {
        let page = member.get(&format!("/tool_executions?limit=2&offset={offset}")).await.expect("page").json();
        assert_eq!(page["page_count"], expected, "offset {offset}: {page}");
        assert_eq!(
            (page["total_count"].clone(), page["limit"].clone(), page["offset"].clone()),
            (json!(5), json!(2), json!(offset))
        );
        paged.extend(
            page["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|i| i["id"].as_str().map(str::to_owned)),
        );
    }
    assert_eq!(paged, ids, "the pages, in order, are the list");

    // Each filter, on the list and the count alike.
    let third = stamps[2];
    let from_third = created.iter().filter(|t| **t >= created[2]).count();
    let cases: Vec<(String, usize)> = vec![
        ("tool_name=Demo.Fail".into(), 2),
        ("tool_name=Demo.Echo".into(), 3),
        ("toolkit_name=Demo".into(), 5),
        ("toolkit_name=Nope".into(), 0),
        ("user_id=bob%40example.com".into(), 1),
        ("outcome=success".into(), 3),
        ("outcome=failure".into(), 1),
        ("failure_reason=tool_error".into(), 1),
        ("failure_reason=owner_lost".into(), 0),
        ("outcome=failure&tool_name=Demo.Echo".into(), 0),
        ("start_time=2000-01-01T00:00:00Z".into(), 5),
        ("end_time=2000-01-01T00:00:00Z".into(), 0),
        (format!("start_time={third}"), from_third),
        (format!("end_time={third}"), 5 - from_third),
    ];
    for (filter, expected) in cases {
        let page = admin.get(&format!("/tool_executions?{filter}")).await.expect("list").json();
        assert_eq!(page["total_count"], expected, "list ?{filter}: {page}");
        assert_eq!(page["page_count"], expected, "list ?{filter}");
        let count = admin.get(&format!("/tool_executions/count?{filter}")).await.expect("count").json();
        assert_eq!(count, json!({"count": expected}), "count ?{filter}");
    }
    let failures = admin.get("/tool_executions?outcome=failure").await.expect("list").json();
    assert_eq!(failures["items"][0]["id"], failed.as_str());
    let failed_detail = member.get(&format!("/tool_executions/{failed}")).await.expect("detail").json();
    assert_eq!(
        (failed_detail["failure_reason"].clone(), failed_detail["error_message"].clone()),
        (json!("tool_error"), json!("planned failure 1 of 1"))
    );

    // Malformed values are 400 naming the parameter, on both routes.
    for (query, named) in [
        ("start_time=yesterday", "start_time"),
        ("end_time=2026-13-01T00:00:00Z", "end_time"),
        ("start_time=2026-08-08", "start_time"),
        ("outcome=cancelled", "outcome"),
        ("failure_reason=boom", "failure_reason"),
        ("tool_name=", "tool_name"),
        ("start_time=2026-08-09T00:00:00Z&end_time=2026-08-08T00:00:00Z", "start_time"),
        ("toolName=Demo.Echo", "toolName"),
        ("user_id=a&user_id=b", "user_id"),
    ] {
        for route in ["/tool_executions", "/tool_executions/count"] {
            let r = admin.get(&format!("{route}?{query}")).await.expect("get");
            assert_eq!(r.status, 400, "{route}?{query}: {}", text(&r));
            let message = r.json()["error"]["message"].as_str().unwrap_or_default().to_owned();
            assert!(message.contains(&format!("`{named}`")), "{route}?{query}: {message}");
        }
    }
    for (query, named) in
        [("limit=0", "limit"), ("limit=1001", "limit"), ("offset=-1", "offset"), ("limit=ten", "limit")]
    {
        let r = admin.get(&format!("/tool_executions?{query}")).await.expect("get");
        assert_eq!(r.status, 400, "?{query}");
        assert!(text(&r).contains(&format!("`{named}`")), "?{query}: {}", text(&r));
    }
    let r = admin.get(&format!("/tool_executions/{echo}?include_inputs=yes")).await.expect("get");
    assert!(r.status == 400 && text(&r).contains("`include_inputs`"), "{}", text(&r));
    assert_eq!(admin.get("/tool_executions?limit=1000").await.expect("max").status, 200);
}
