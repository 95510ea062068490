//! What operators see, through real processes: each role's `/metrics` moves
//! with the load and holds no execution or user id, and a caller's
//! `traceparent` (an HTTP header, or MCP `params._meta`) is continued by the
//! gateway, the coordinator and the worker, with spans named as the
//! OpenTelemetry conventions say and no token or payload in them.

use crate::harness::{Cluster, Settings, eventually};
use crate::tracing_export::{Collector, tokio_stream_listener};
use anyhow::{Context as _, Result, anyhow};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;
use serde_json::json;
use std::time::Duration;

const CANARY: &str = "telemetry-canary-5d1e";

/// The address a role logged for its metrics listener.
pub(crate) fn metrics_addr(log: &std::path::Path) -> Result<String> {
    let text = std::fs::read_to_string(log)?;
    // Not the worker's own tool-metrics listener ("worker metrics listening").
    let line = text
        .lines()
        .find(|l| l.contains(" metrics listening") && !l.contains("worker metrics listening"))
        .ok_or_else(|| anyhow!("no metrics listener"))?;
    line.split("addr=").nth(1).and_then(|r| r.split_whitespace().next()).map(str::to_owned).context("addr")
}

pub(crate) async fn scrape(http: &reqwest::Client, addr: &str) -> Result<String> {
    Ok(http.get(format!("http://{addr}/metrics")).send().await?.error_for_status()?.text().await?)
}

/// The value of the first sample of `name` whose labels contain every one of `labels`.
pub(crate) fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let matches = (series == name || series.starts_with(&format!("{name}{{")))
            && labels.iter().all(|want| series.contains(want));
        matches.then(|| value.parse().ok()).flatten()
    })
}

#[tokio::test]
async fn telemetry_metrics_move_with_load_and_traces_continue_the_callers() {
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let otlp = listener.local_addr().expect("addr");
    let server = tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(collector.clone()))
        .serve_with_incoming(tokio_stream_listener(listener));
    tokio::spawn(server);

    let settings =
        Settings { otlp_endpoint: Some(format!("http://{otlp}")), principal_concurrency: 2, ..Settings::default() };
    let mut c = Cluster::new(settings).await.expect("cluster");
    let metrics_env = [("BATON_TELEMETRY__METRICS_ADDR", "127.0.0.1:0".to_owned())];
    c.start_coordinator_with(&metrics_env).await.expect("coordinator");
    c.start_gateway_with(0, &metrics_env).await.expect("gateway");
    c.start_worker_with(0, &metrics_env).await.expect("worker");
    let coordinator = metrics_addr(&c.coordinators[0].log).expect("coordinator metrics");
    let worker = metrics_addr(&c.workers[0].log).expect("worker metrics");
    let gateway = metrics_addr(&c.gateways[0].log).expect("gateway metrics");

    // A REST start carrying the caller's trace.
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let alice = c.rest(0, &c.id.user_token);
    let body = json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Echo", "input": {"text": CANARY}});
    let started = alice
        .http
        .post(format!("{}/tool-executions", alice.base))
        .bearer_auth(&alice.token)
        .header("traceparent", format!("00-{caller_trace}-00f067aa0ba902b7-01"))
        .json(&body)
        .send()
        .await
        .expect("start");
    let v: serde_json::Value = started.json().await.expect("json");
    let id = v["execution_id"].as_str().expect("id").to_owned();
    alice.until_terminal(&id, Duration::from_secs(20)).await.expect("terminal");

    // An MCP call whose trace rides in `_meta`.
    let mcp_trace = "0af7651916cd43dd8448eb211c80319c";
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "Demo.Echo", "arguments": {"text": "mcp"},
        "_meta": {"traceparent": format!("00-{mcp_trace}-b7ad6b7169203331-01"),
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let r = alice
        .http
        .post(format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id))
        .bearer_auth(&c.id.user_token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "Demo.Echo")
        .json(&call)
        .send()
        .await
        .expect("mcp");
    let status = r.status();
    let answer = r.text().await.unwrap_or_default();
    assert!(status == 200 && answer.contains("\"result\"") && !answer.contains("\"error\""), "{status} {answer}");

    // Two long sleeps fill the principal's bound; a third start is refused.
    for _ in 0..2 {
        alice.start("Demo.Sleep", json!({"seconds": 30}), None).await.expect("start");
    }
    assert_eq!(alice.start("Demo.Sleep", json!({"seconds": 1}), None).await.expect("start").status, 429);

    let http = reqwest::Client::new();
    let g = eventually(Duration::from_secs(20), "gateway metrics", || async {
        let text = scrape(&http, &gateway).await?;
        Ok(sample(&text, "mcp_server_operation_duration_seconds_count", &["mcp_method_name=\"tools/call\""])
            .is_some()
            .then_some(text))
    })
    .await
    .expect("gateway metrics");
    let route = "http_route=\"/v1/orgs/{org_id}/projects/{project_id}/tool-executions\"";
    let accepted = sample(&g, "http_server_request_duration_seconds_count", &[route, "status_code=\"202\""]);
    assert!(accepted.unwrap_or(0.0) >= 3.0, "{g}");
    let refused = sample(&g, "http_server_request_duration_seconds_count", &[route, "status_code=\"429\""]);
    assert_eq!(refused, Some(1.0), "{g}");
    let k = eventually(Duration::from_secs(20), "coordinator metrics", || async {
        let text = scrape(&http, &coordinator).await?;
        let done = sample(&text, "baton_executions_finished_total", &["outcome=\"completed\""]).unwrap_or(0.0);
        Ok((done >= 2.0).then_some(text))
    })
    .await;
    let k = match k {
        Ok(k) => k,
        Err(e) => panic!("{e}: {}", scrape(&http, &coordinator).await.unwrap_or_else(|e| e.to_string())),
    };
    for (name, labels) in [
        ("rpc_server_duration_seconds_count", vec!["rpc_method=\"StartExecution\""]),
        ("baton_executions_started_total", vec!["surface=\"rest\""]),
        ("baton_executions_started_total", vec!["surface=\"mcp_"]),
        ("baton_execution_start_latency_seconds_count", vec![]),
        ("baton_execution_run_seconds_count", vec!["outcome=\"completed\""]),
        ("baton_admission_rejections_total", vec!["scope=\"principal\""]),
        ("baton_worker_sessions", vec![]),
        ("baton_db_pool_connections", vec!["state=\"idle\""]),
    ] {
        assert!(sample(&k, name, &labels).is_some_and(|v| v >= 1.0), "{name} {labels:?} in\n{k}");
    }
    // A run scheduled an hour out waits in the backlog, per project.
    let later = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    let later = later.format(&time::format_description::well_known::Rfc3339).expect("time");
    let scheduled = json!({"gateway_id": c.id.gateway_id, "tool_name": "Demo.Echo", "input": {"text": "later"},
        "run_at": later, "user_id": "bob@example.com"});
    let admin = c.rest(0, &c.id.admin_key);
    assert_eq!(admin.post("/tool-executions", scheduled).await.expect("schedule").status, 202);
    let project = format!("project_id=\"{}\"", c.id.project_id);
    let k = eventually(Duration::from_secs(30), "the backlog gauge", || async {
        let text = scrape(&http, &coordinator).await?;
        Ok((sample(&text, "baton_pending_backlog", &[&project]) == Some(1.0)).then_some(text))
    })
    .await
    .expect("backlog");
    let w = scrape(&http, &worker).await.expect("worker metrics");
    assert!(sample(&w, "baton_worker_tool_invocations_total", &["tool=\"Demo.Echo\""]).unwrap_or(0.0) >= 2.0, "{w}");
    assert!(sample(&w, "baton_worker_tools_running", &[]).is_some(), "{w}");
    for text in [&g, &k, &w] {
        for secret in [id.as_str(), "alice@example.com", c.id.user_token.as_str(), CANARY] {
            assert!(!text.contains(secret), "{secret} in metrics");
        }
    }

    // Both callers' traces continue through every process.
    let spans = collector.spans.clone();
    let traced = eventually(Duration::from_secs(20), "spans of the callers' traces", || {
        let spans = spans.clone();
        async move {
            let spans = spans.lock().map_err(|_| anyhow!("lock"))?.clone();
            let of = |trace: &str, service: &str, name: &str| {
                spans.iter().any(|s| s.trace_hex() == trace && s.service.contains(service) && s.name == name)
            };
            let rest =
                of(caller_trace, "baton-gateway", "POST /v1/orgs/{org_id}/projects/{project_id}/tool-executions")
                    && of(caller_trace, "baton-coordinator", "baton.coordinator.v1.Coordinator/StartExecution")
                    && of(caller_trace, "baton-coordinator", "dispatch Demo.Echo")
                    && of(caller_trace, "baton-worker", "execute_tool Demo.Echo");
            let mcp = of(mcp_trace, "baton-gateway", "tools/call Demo.Echo")
                && of(mcp_trace, "baton-worker", "execute_tool Demo.Echo");
            Ok((rest && mcp).then_some(spans))
        }
    })
    .await
    .expect("traces continued");
    let server_span = traced.iter().find(|s| s.name == "tools/call Demo.Echo").expect("mcp span");
    for attribute in ["mcp.method.name", "gen_ai.tool.name"] {
        assert!(server_span.attributes.contains(attribute), "{attribute} in {}", server_span.attributes);
    }
    for s in &traced {
        assert!(!s.attributes.contains(CANARY) && !s.attributes.contains(&c.id.user_token), "leak in {}", s.name);
    }
    for p in c.coordinators.iter().chain(&c.gateways).chain(&c.workers) {
        let log = std::fs::read_to_string(&p.log).expect("log");
        assert!(!log.contains(CANARY) && !log.contains(&c.id.user_token), "a payload or token in {}", p.log.display());
    }
}

/// With `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`, spans go to `POST /v1/traces` as
/// protobuf, here to an in-test receiver, still one trace per execution.
#[tokio::test]
async fn telemetry_spans_export_over_http_protobuf() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;
    // (span name, trace id) of every span received.
    type Received = std::sync::Arc<std::sync::Mutex<Vec<(String, Vec<u8>)>>>;
    let names: Received = Default::default();
    let seen = names.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                let Ok(req) = ExportTraceServiceRequest::decode(body) else {
                    return axum::http::StatusCode::BAD_REQUEST;
                };
                let spans = req.resource_spans.into_iter().flat_map(|r| r.scope_spans).flat_map(|s| s.spans);
                if let Ok(mut seen) = seen.lock() {
                    seen.extend(spans.map(|s| (s.name, s.trace_id)));
                }
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });

    let settings = Settings { otlp_endpoint: Some(format!("http://{addr}")), ..Settings::default() };
    let mut c = Cluster::new(settings).await.expect("cluster");
    let http = [("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_owned())];
    c.start_coordinator_with(&http).await.expect("coordinator");
    c.start_gateway_with(0, &http).await.expect("gateway");
    c.start_worker_with(0, &http).await.expect("worker");
    let alice = c.rest(0, &c.id.user_token);
    let v = alice.start("Demo.Echo", json!({"text": "over http"}), None).await.expect("start").json();
    alice.until_terminal(v["execution_id"].as_str().expect("id"), Duration::from_secs(20)).await.expect("done");
    eventually(Duration::from_secs(20), "spans over HTTP from every role", || async {
        let seen = names.lock().map_err(|_| anyhow!("lock"))?.clone();
        let Some((_, trace)) = seen.iter().find(|(n, _)| n == "execute_tool Demo.Echo") else { return Ok(None) };
        let of_trace = |name: &str| seen.iter().any(|(n, t)| n == name && t == trace);
        Ok((of_trace("baton.coordinator.v1.Coordinator/StartExecution") && of_trace("dispatch Demo.Echo"))
            .then_some(()))
    })
    .await
    .expect("exported over http/protobuf");
}
