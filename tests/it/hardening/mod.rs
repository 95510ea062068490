//! Findings of an outside review, each replayed as the attack or fault it
//! was, on Postgres, to show it now does no harm.

use crate::harness::{Cluster, Settings, eventually};
use anyhow::{Context, Result};
use futures_util::future::join_all;
use serde_json::json;
use std::time::Duration;

mod ownership;

use ownership::issued;

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

/// The dashboard cookie holds a session the coordinator keeps: after sign-out
/// a copy of the cookie opens nothing, and the session row says it ended.
#[tokio::test]
async fn a_copied_dashboard_cookie_is_dead_after_sign_out() -> Result<()> {
    use crate::dashboard::{Browser, key};
    let c = Cluster::single(Settings::default()).await?;
    let project = c.id.project_id.clone();
    let (_, admin_key) = key(&c, &project, "admin", None).await?;
    let mut browser = Browser::new(&c, &project)?;
    assert_eq!(browser.sign_in(&admin_key).await?.status, 303);
    let cookie = browser.session.clone().context("a session cookie")?;
    assert!(!cookie.contains(&admin_key), "the cookie does not carry the key");
    let mut thief = Browser::new(&c, &project)?;
    thief.session = Some(cookie);
    assert_eq!(thief.get("/tool-executions").await?.status, 200, "a copy works while the session is open");

    let csrf = browser.csrf().await?;
    let out = browser.post("/sign-out", &[("csrf", &csrf)], false).await?;
    assert_eq!(out.status, 303, "{}", out.body);
    let page = thief.get("/tool-executions").await?;
    assert_eq!(page.status, 303, "the copied cookie is dead after sign-out");
    assert!(page.location.contains("/sign-in?") && page.location.ends_with("&ended=1"), "{}", page.location);
    let ended = c.scalar("SELECT COUNT(*) FROM dashboard_sessions WHERE ended_at IS NOT NULL").await?;
    assert_eq!(ended, 1);

    // Only an admin or member key opens a session, and a session cannot open
    // another (which would outlive its absolute lifetime).
    use baton_proto::coordinator::v1::{OpenDashboardSessionRequest, coordinator_client::CoordinatorClient};
    let mut coordinator = CoordinatorClient::new(crate::worker_trust::channel(&c, 0, None).await?);
    let mut open = async |bearer: &str| {
        let mut r = tonic::Request::new(OpenDashboardSessionRequest {});
        r.metadata_mut().insert("authorization", format!("Bearer {bearer}").parse()?);
        anyhow::Ok(coordinator.open_dashboard_session(r).await)
    };
    let session = open(&admin_key).await??.into_inner();
    assert!(session.session_token.starts_with("bds_") && session.idle_ms == 30 * 60_000, "{session:?}");
    for (who, bearer) in [
        ("a session", session.session_token.as_str()),
        ("a read-only key", c.id.read_only_key.as_str()),
        ("an end user", c.id.user_token.as_str()),
        ("a worker", c.id.worker_token.as_str()),
    ] {
        let refused = open(bearer).await?.err().with_context(|| format!("{who} opened a session"))?;
        assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{who}: {refused}");
    }
    // Only a session ends itself: a key, or another user's token, is not a session.
    use baton_proto::coordinator::v1::{EndDashboardSessionRequest, WhoAmIRequest};
    for bearer in [admin_key.as_str(), c.id.user_token.as_str()] {
        let mut r = tonic::Request::new(EndDashboardSessionRequest {});
        r.metadata_mut().insert("authorization", format!("Bearer {bearer}").parse()?);
        let refused = coordinator.end_dashboard_session(r).await.err().context("a non-session ended one")?;
        assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused}");
    }
    let mut r = tonic::Request::new(WhoAmIRequest::default());
    r.metadata_mut().insert("authorization", format!("Bearer {}", session.session_token).parse()?);
    assert!(coordinator.who_am_i(r).await.is_ok(), "the session is still open");
    Ok(())
}

/// `body` carrying peer token `token`.
fn with<T>(body: T, token: &str) -> Result<tonic::Request<T>> {
    let mut r = tonic::Request::new(body);
    r.metadata_mut().insert(baton_coordinator::grpc::peer_auth::METADATA_KEY, token.parse()?);
    Ok(r)
}

/// A peer token read off the wire is good for the one call it was made for:
/// replayed, or put on another request or method, it is refused.
#[tokio::test]
async fn a_peer_token_seen_on_the_wire_is_good_for_one_call_only() -> Result<()> {
    use baton_coordinator::grpc::peer_auth;
    use baton_proto::coordinator::v1::{DeliverCancelRequest, DeliverInputRequest, peer_client::PeerClient};
    use baton_proto::worker::v1::StopReason;
    let c = Cluster::single(Settings::default()).await?;
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(&c.config)?)?;
    let secret = config["security"]["cluster_secret"].as_str().context("the cluster secret")?.to_owned();
    let cancel = |execution: &str| DeliverCancelRequest {
        worker_id: "wk_nobody".into(),
        execution_id: execution.into(),
        attempt: 1,
        reason: StopReason::Cancelled as i32,
    };
    let minted = |r: &DeliverCancelRequest| {
        let fields = [r.worker_id.as_str(), &r.execution_id, &r.attempt.to_string(), &r.reason.to_string()];
        peer_auth::token(
            secret.as_bytes(),
            baton_proto::clock::unix_seconds(),
            "DeliverCancel",
            &peer_auth::digest(&fields),
        )
    };
    let mut peer = PeerClient::new(crate::worker_trust::channel(&c, 0, None).await?);
    let a = "te_00000000000000000000000001";
    let token = minted(&cancel(a));
    let first = peer.deliver_cancel(with(cancel(a), &token)?).await?;
    assert!(!first.get_ref().delivered, "accepted, and nobody holds that worker id");
    let replayed = peer.deliver_cancel(with(cancel(a), &token)?).await.err().context("a replay was accepted")?;
    assert_eq!(replayed.code(), tonic::Code::Unauthenticated, "{replayed}");
    let other = peer
        .deliver_cancel(with(cancel("te_00000000000000000000000002"), &minted(&cancel(a)))?)
        .await
        .err()
        .context("a token carried another request")?;
    assert_eq!(other.code(), tonic::Code::Unauthenticated, "{other}");
    let input = DeliverInputRequest { worker_id: "wk_nobody".into(), execution_id: a.into(), ..Default::default() };
    let method = peer.deliver_input(with(input, &minted(&cancel(a)))?).await.err().context("another method")?;
    assert_eq!(method.code(), tonic::Code::Unauthenticated, "{method}");
    let log = std::fs::read_to_string(&c.coordinators[0].log)?;
    assert!(log.contains("peer call without a valid cluster credential refused"));
    Ok(())
}

/// What a hostile tool writes into its error reaches an operator's terminal
/// escaped: a tool whose error carries ESC and BEL sequences (a colour, a
/// window title) is shown by `baton executions get` as visible text.
#[tokio::test]
async fn a_tools_terminal_escapes_reach_the_cli_as_text() -> Result<()> {
    use crate::worker_trust::{Hostile, channel, tool};
    use baton_proto::worker::v1::{self as wpb, coordinator_message::Msg, settlement, worker_message};
    let c = Cluster::single(Settings::default()).await?;
    let mut h =
        Hostile::register(channel(&c, 0, None).await?, &c.id.worker_token, "wk_escapes", vec![tool("Evil.Escapes")], 1)
            .await?
            .map_err(|s| anyhow::anyhow!("registration: {s}"))?;
    let rest = c.rest(0, &c.id.member_key);
    let id = rest.start("Evil.Escapes", json!({}), None).await?.json()["execution_id"]
        .as_str()
        .context("execution_id")?
        .to_owned();
    let assigned = h.next(Duration::from_secs(20), |m| if let Msg::Assignment(a) = m { Some(a) } else { None }).await?;
    let message = "\u{1b}[31mred\u{1b}]0;owned\u{7} and a\rcarriage return".to_owned();
    let error = wpb::ToolError { message, ..Default::default() };
    h.send(worker_message::Msg::Settlement(wpb::Settlement {
        execution_id: id.clone(),
        attempt: assigned.attempt,
        outcome: Some(settlement::Outcome::Error(error)),
    }))
    .await?;
    assert_eq!(rest.until_terminal(&id, Duration::from_secs(20)).await?["status"], "failed");
    let shown = crate::ops_cli::executions(&c, &c.id.admin_key, &["get", &id]).await?;
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(shown.stdout.contains("red"), "{}", shown.stdout);
    assert!(
        !shown.stdout.contains(['\u{1b}', '\u{7}', '\r']),
        "no control character reaches the terminal: {:?}",
        shown.stdout
    );
    Ok(())
}

/// Made-up gRPC paths and MCP methods do not become metric series: each
/// collapses into one label, however many a caller invents.
#[tokio::test]
async fn made_up_methods_do_not_grow_the_metric_label_space() -> Result<()> {
    use crate::telemetry::{metrics_addr, scrape};
    let mut c = Cluster::new(Settings::default()).await?;
    let metrics = [("BATON_TELEMETRY__METRICS_ADDR", "127.0.0.1:0".to_owned())];
    c.start_coordinator_with(&metrics).await?;
    c.start_gateway_with(0, &metrics).await?;
    let mcp = format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id);
    let h2 = reqwest::Client::builder().http2_prior_knowledge().build()?;
    for i in 0..20 {
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "baton-it-hardening", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}});
        let body =
            json!({"jsonrpc": "2.0", "id": i, "method": format!("invented/method{i}"), "params": {"_meta": meta}});
        let answer = c
            .http
            .post(&mcp)
            .bearer_auth(&c.id.user_token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", format!("invented/method{i}"))
            .json(&body)
            .send()
            .await?
            .text()
            .await?;
        assert!(answer.contains("-32601"), "an unknown method: {answer}");
        let path = format!("{}/baton.Invented/Method{i}", c.coordinator_url(0));
        h2.post(path).header("content-type", "application/grpc").header("te", "trailers").send().await?;
    }
    let gateway = scrape(&c.http, &metrics_addr(&c.gateways[0].log)?).await?;
    let coordinator = scrape(&c.http, &metrics_addr(&c.coordinators[0].log)?).await?;
    assert!(!gateway.contains("invented/method"), "no series per made-up MCP method");
    assert!(gateway.contains("http_route=\"/mcp/{gateway_id}\""), "one route label for every MCP request");
    assert!(!coordinator.contains("Invented") && !coordinator.contains("Method1"), "no series per made-up gRPC path");
    assert!(coordinator.contains("\"unknown\""), "they share the label `unknown`");
    Ok(())
}

/// A dashboard panel that polls one run's status is one audit row per
/// opening, not a row per poll; sign-in's `next` cannot walk out of the
/// project with dot segments.
#[tokio::test]
async fn a_polling_panel_is_one_audit_row_and_sign_in_stays_in_its_project() -> Result<()> {
    let c = Cluster::single(Settings::default()).await?;
    let (key_id, key) =
        issued(&c, &["create-api-key", "--project", &c.id.project_id, "--role", "member", "--permissions", "status"])
            .await?;
    let rest = c.rest(0, &c.id.member_key);
    let id = rest.start("Demo.Echo", json!({"text": "polled"}), None).await?.json()["execution_id"]
        .as_str()
        .context("execution_id")?
        .to_owned();
    let operator = c.rest(0, &key);
    for _ in 0..10 {
        assert_eq!(operator.get(&format!("/operator/tool-executions/{id}")).await?.status, 200);
    }
    let mut db = c.db().await?;
    let (rows, occurrences): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COALESCE(SUM(occurrences), 0)::BIGINT FROM audit_logs \
         WHERE action = 'operator.status' AND actor_id = $1 AND target = $2",
    )
    .bind(&key_id)
    .bind(&id)
    .fetch_one(&mut db)
    .await?;
    assert_eq!((rows, occurrences), (1, 10), "ten polls, one row that counts them");

    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
    let base = format!("http://{}/dashboard/orgs/{}/projects/{}", c.gateways[0].addr, c.id.org_id, c.id.project_id);
    let form = http.get(format!("{base}/sign-in")).send().await?;
    let token = form
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("baton_dashboard_sign_in="))
        .and_then(|v| v.split(';').next())
        .context("the sign-in form's cookie")?
        .to_owned();
    let next = format!("/dashboard/orgs/{}/projects/{}/../../../../admin", c.id.org_id, c.id.project_id);
    let body = format!("key={}&csrf={token}&next={}", c.id.admin_key, next.replace('/', "%2F"));
    let signed = http
        .post(format!("{base}/sign-in"))
        .header("cookie", format!("baton_dashboard_sign_in={token}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await?;
    assert_eq!(signed.status(), 303);
    let location = signed.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let list = format!("/dashboard/orgs/{}/projects/{}/tool-executions", c.id.org_id, c.id.project_id);
    assert_eq!(location, list, "dot segments in `next` lead to the project's list");
    Ok(())
}
