//! Findings of an outside review, each replayed as the attack or fault it
//! was, on Postgres, to show it now does no harm.

use crate::harness::{Cluster, Settings, eventually};
use anyhow::{Context, Result};
use futures_util::future::join_all;
use serde_json::json;
use std::time::Duration;

/// A coordinator crash used to fail healthy work: the worker came back only
/// after its leases had lapsed into `owner_lost`. A busy worker whose
/// coordinator is killed now registers with another one at once, its running
/// list keeps every lease, and every execution completes, once.
#[tokio::test]
async fn a_busy_worker_whose_coordinator_is_killed_loses_none_of_its_work() -> Result<()> {
    let mut c = Cluster::new(Settings::default()).await?;
    c.start_coordinator().await?;
    c.start_coordinator().await?;
    c.start_gateway(1).await?;
    let others = format!("[{}]", c.coordinator_url(1));
    c.start_worker_with(0, &[("BATON_WORKER__COORDINATOR_URLS", others)]).await?;

    let alice = c.rest(0, &c.id.user_token);
    // Each outlives lease and owner-loss grace (5 s + 5 s) after the kill.
    let starts = (0..8).map(|_| alice.start("Demo.Sleep", json!({"seconds": 12}), None));
    let mut ids = Vec::new();
    for started in join_all(starts).await {
        ids.push(started?.json()["execution_id"].as_str().context("execution_id")?.to_owned());
    }
    eventually(Duration::from_secs(20), "every sleep running", || async {
        Ok((c.invocations("Demo.Sleep").await? == 8).then_some(()))
    })
    .await?;

    c.coordinators[0].kill9();
    for id in &ids {
        let done = alice.until_terminal(id, Duration::from_secs(60)).await?;
        assert_eq!(done["status"], "completed", "{done}");
    }
    assert_eq!(c.invocations("Demo.Sleep").await?, 8, "none ran twice");
    let lost = c.scalar("SELECT COUNT(*) FROM executions WHERE failure_reason = 'owner_lost'").await?;
    assert_eq!(lost, 0);
    Ok(())
}

/// A worker is held to the strings it declares: no capacity of 0, tool names
/// from MCP's alphabet (a newline and ESC once forged log lines), and
/// descriptions and schemas of a bounded size (a 3 MB description once made
/// every `tools/list` 3 MB). Each refusal names what is wrong, and nothing
/// of the refused registration is stored.
#[tokio::test]
async fn a_worker_declaring_zero_capacity_or_outsized_tools_is_refused_and_changes_nothing() -> Result<()> {
    use crate::worker_trust::{Hostile, channel, tool};
    let c = Cluster::single(Settings::default()).await?;
    let token = c.id.worker_token.clone();
    let refused = |r: Result<Hostile, tonic::Status>| match r {
        Ok(_) => panic!("the registration was accepted"),
        Err(status) => status,
    };

    let zero =
        refused(Hostile::register(channel(&c, 0, None).await?, &token, "wk_zero", vec![tool("Ok.Tool")], 0).await?);
    assert_eq!(zero.code(), tonic::Code::InvalidArgument, "{zero:?}");
    assert!(zero.message().contains("capacity"), "{zero:?}");

    let forged = refused(
        Hostile::register(channel(&c, 0, None).await?, &token, "wk_forge", vec![tool("Evil\n\u{1b}[31mTool")], 1)
            .await?,
    );
    assert_eq!(forged.code(), tonic::Code::InvalidArgument, "{forged:?}");
    assert!(forged.message().contains(r"Evil\n\u{1b}[31mTool"), "shown escaped: {forged:?}");
    let log = std::fs::read_to_string(&c.coordinators[0].log)?;
    assert!(!log.contains("Evil\n") && !log.contains('\u{1b}'), "no raw control character reaches the log");

    let mut huge = tool("Huge.Description");
    huge.description = "x".repeat(3 << 20);
    let big = refused(Hostile::register(channel(&c, 0, None).await?, &token, "wk_huge", vec![huge], 1).await?);
    assert_eq!(big.code(), tonic::Code::InvalidArgument, "{big:?}");
    assert!(big.message().contains("coordinator.max_tool_description_bytes"), "{big:?}");

    let stored = c
        .scalar("SELECT COUNT(*) FROM tools WHERE name IN ('Ok.Tool', 'Huge.Description') OR name LIKE 'Evil%'")
        .await?;
    assert_eq!(stored, 0, "a refused registration stores no tool");
    Ok(())
}

/// A watch offer's `websocket_url` names a configured authority: a forged
/// `Host` does not send the single-use token elsewhere.
#[tokio::test]
async fn a_forged_host_header_does_not_steer_the_watch_socket_url() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let alice = c.rest(0, &c.id.user_token);
    let started = alice.start("Demo.Sleep", json!({"seconds": 5}), None).await?.json();
    let id = started["execution_id"].as_str().context("execution_id")?;
    let url = format!("{}/tool-executions/{id}?delivery=websocket&timeout_seconds=30", c.rest_base(0));
    for host in ["evil.example", "evil.example:443", "127.0.0.1.evil.example"] {
        let offer: serde_json::Value =
            c.http.get(&url).bearer_auth(&c.id.user_token).header("host", host).send().await?.json().await?;
        let socket = offer["websocket_url"].as_str().with_context(|| format!("an offer: {offer}"))?;
        assert!(socket.starts_with(&format!("ws://{}/", c.gateways[0].addr)), "{host}: {socket}");
    }
    Ok(())
}

/// Webhook targets spelled as IPv6 that carries an internal IPv4 address are
/// refused with production settings, and no endpoint is stored.
#[tokio::test]
async fn ipv6_wrapped_internal_webhook_targets_are_refused() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let admin = c.rest(0, &c.id.admin_key);
    for host in ["[::7f00:1]", "[64:ff9b::7f00:1]", "[::ffff:0:7f00:1]", "[2002:7f00:1::]", "[64:ff9b::a9fe:a9fe]"] {
        let url = format!("http://{host}:9/hook");
        let r = admin.post("/webhooks", json!({"url": url, "event_type": "tool.execution.lifecycle"})).await?;
        assert_eq!(r.status, 400, "{url}: {}", r.json());
    }
    assert_eq!(c.scalar("SELECT COUNT(*) FROM webhook_endpoints").await?, 0);
    Ok(())
}

/// A project holds a bounded number of webhook endpoints (each is one more
/// delivery written with every settlement), and the audit row of a create
/// keeps no query string, where a target's secret rides.
#[tokio::test]
async fn webhook_endpoints_are_capped_and_their_audit_rows_keep_no_query_secrets() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let admin = c.rest(0, &c.id.admin_key);
    let create = |n: usize| {
        let url = format!("http://93.184.215.14/hook/{n}?token=s3cret-{n}");
        admin.post("/webhooks", json!({"url": url, "event_type": "tool.execution.lifecycle"}))
    };
    for n in 0..10 {
        let r = create(n).await?;
        assert_eq!(r.status, 201, "endpoint {n}: {}", r.json());
    }
    let over = create(10).await?;
    assert_eq!(over.status, 400, "{}", over.json());
    let message = over.json()["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("webhooks.max_endpoints_per_project"), "{message}");
    assert_eq!(c.scalar("SELECT COUNT(*) FROM webhook_endpoints").await?, 10);

    let leaked = c.scalar("SELECT COUNT(*) FROM audit_logs WHERE detail LIKE '%s3cret%'").await?;
    assert_eq!(leaked, 0, "no audit row keeps a target's query string");
    let redacted =
        c.scalar("SELECT COUNT(*) FROM audit_logs WHERE action = 'webhook.create' AND detail LIKE '%?…'").await?;
    assert_eq!(redacted, 10);
    Ok(())
}

/// A caller refused in a loop no longer grows the audit log by a row a call:
/// a minute's refusals of one credential for one action are one row that
/// counts them, and a free-text target is not kept.
#[tokio::test]
async fn refusals_in_a_loop_fold_into_counted_audit_rows() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let alice = c.rest(0, &c.id.user_token);
    let essay = "x".repeat(3_000);
    let calls = (0..200).map(|n| {
        let path = if n % 2 == 0 {
            "/operator/tool-executions".to_owned()
        } else {
            format!("/operator/tool-executions/{essay}")
        };
        let alice = &alice;
        async move { alice.get(&path).await }
    });
    for answer in join_all(calls).await {
        let status = answer?.status;
        assert!(status == 403 || status == 404, "an end user has no operator access: {status}");
    }
    let mut db = c.db().await?;
    let rows: Vec<(String, Option<String>, i64)> =
        sqlx::query_as("SELECT action, target, occurrences FROM audit_logs WHERE actor_kind = 'end_user'")
            .fetch_all(&mut db)
            .await?;
    let total: i64 = rows.iter().map(|r| r.2).sum();
    assert_eq!(total, 200, "every refusal is counted: {rows:?}");
    // Two actions, each within at most two minutes of wall clock.
    assert!(rows.len() <= 4, "folded, not one row a call: {} rows", rows.len());
    assert!(rows.iter().all(|r| r.1.as_deref().is_none_or(|t| t.len() <= 128)), "{rows:?}");
    Ok(())
}

/// What went unrecorded is recorded: a refused read of the audit log or the
/// retention window, and an owner's cancel of its own execution.
#[tokio::test]
async fn refused_audit_and_retention_reads_and_owner_cancels_are_audited() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let member = c.rest(0, &c.id.member_key);
    assert_eq!(member.get("/audit_logs").await?.status, 403);
    assert_eq!(member.get("/retention").await?.status, 403);
    let alice = c.rest(0, &c.id.user_token);
    let started = alice.start("Demo.Sleep", json!({"seconds": 60}), None).await?.json();
    let id = started["execution_id"].as_str().context("execution_id")?.to_owned();
    let cancel = alice.post(&format!("/tool-executions/{id}/cancel"), json!({})).await?;
    let outcome = cancel.json()["outcome"].as_str().context("outcome")?.to_owned();

    let log = c.rest(0, &c.id.admin_key).get("/audit_logs?limit=100").await?.json();
    let rows = log["items"].as_array().context("items")?;
    let has = |action: &str, outcome: &str, target: Option<&str>| {
        rows.iter().any(|r| r["action"] == action && r["outcome"] == outcome && target.is_none_or(|t| r["target"] == t))
    };
    assert!(has("audit.read", "refused", None), "{log}");
    assert!(has("retention.read", "refused", None), "{log}");
    assert!(has("execution.cancel", &outcome, Some(&id)), "{log}");
    assert!(rows.iter().all(|r| r["occurrences"].as_i64().is_some_and(|n| n >= 1)), "{log}");
    Ok(())
}

/// A NUL byte where an id or a cursor goes (Postgres refuses NUL in text) is
/// answered like any other bad id or cursor, never with a 500.
#[tokio::test]
async fn nul_bytes_in_ids_and_cursors_are_client_errors_on_postgres() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let args =
        ["create-api-key", "--project", &c.id.project_id, "--role", "admin", "--permissions", "status,payload,cancel"];
    let key = c.admin(&args).await?["token"].as_str().context("token")?.to_owned();
    let operator = c.rest(0, &key);
    for path in [
        "/webhooks/wh_%00abc",
        "/webhooks/wh_abc%00",
        "/operator/tool-executions?cursor=%00",
        "/operator/tool-executions?cursor=abc%00def",
        "/operator/tool-executions/te_%00",
        "/tool_executions/te_%00",
        "/tool-executions/te_%00",
        "/audit_logs?actor_id=%00",
        "/tool_executions?user_id=%00",
    ] {
        let r = operator.get(path).await?;
        assert!((400..500).contains(&r.status), "{path}: {} {}", r.status, String::from_utf8_lossy(&r.bytes));
    }
    Ok(())
}
