//! One execution is one trace: the gateway's request span, the coordinator's
//! RPC and dispatch spans and the worker's tool span arrive at an OTLP
//! collector with one trace id, and no span carries a token or payload.

use crate::harness::{Cluster, Settings, eventually};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Debug)]
pub(crate) struct Span {
    pub(crate) service: String,
    pub(crate) name: String,
    trace_id: Vec<u8>,
    pub(crate) attributes: String,
}

impl Span {
    /// The trace id as W3C `traceparent` spells it.
    pub(crate) fn trace_hex(&self) -> String {
        self.trace_id.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A fake OTLP/gRPC collector that keeps every span it is sent.
#[derive(Clone, Default)]
pub(crate) struct Collector {
    pub(crate) spans: Arc<Mutex<Vec<Span>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut out = self.spans.lock().expect("lock");
        for rs in req.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|a| a.key == "service.name")
                .map(|a| format!("{:?}", a.value))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    out.push(Span {
                        service: service.clone(),
                        name: s.name,
                        trace_id: s.trace_id,
                        attributes: format!("{:?}", s.attributes),
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

#[tokio::test]
async fn one_execution_is_one_trace_across_three_processes() {
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(collector.clone()))
        .serve_with_incoming(tokio_stream_listener(listener));
    tokio::spawn(server);

    let settings = Settings { otlp_endpoint: Some(format!("http://{addr}")), ..Settings::default() };
    let c = Cluster::single(settings).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let v = alice.start("Demo.Echo", json!({"text": "traced-canary"}), None).await.expect("start").json();
    let id = v["execution_id"].as_str().expect("id").to_owned();
    alice.until_terminal(&id, Duration::from_secs(20)).await.expect("terminal");

    let spans = collector.spans.clone();
    let id_for_wait = id.clone();
    let trace = eventually(Duration::from_secs(20), "spans from all three processes", || {
        let spans = spans.clone();
        let id = id_for_wait.clone();
        async move {
            let spans = spans.lock().expect("lock").clone();
            let Some(tool) = spans.iter().find(|s| {
                s.name.ends_with("Demo.Echo") && s.service.contains("baton-worker") && s.attributes.contains(&id)
            }) else {
                return Ok(None);
            };
            let same: Vec<&Span> = spans.iter().filter(|s| s.trace_id == tool.trace_id).collect();
            let has = |service: &str, name: &str| same.iter().any(|s| s.service.contains(service) && s.name == name);
            // Spans are named as the OpenTelemetry conventions say: by route, by RPC, by tool.
            let complete = has("baton-gateway", "POST /v1/orgs/{org_id}/projects/{project_id}/tool-executions")
                && has("baton-coordinator", "baton.coordinator.v1.Coordinator/StartExecution")
                && has("baton-coordinator", "dispatch Demo.Echo");
            Ok(complete.then(|| same.into_iter().cloned().collect::<Vec<_>>()))
        }
    })
    .await
    .expect("one trace");
    let all = collector.spans.lock().expect("lock").clone();
    for s in &all {
        assert!(!s.attributes.contains("traced-canary"), "a payload leaked into span {}", s.name);
        assert!(!s.attributes.contains(&c.id.user_token), "a token leaked into span {}", s.name);
    }
    assert!(trace.len() >= 4);
}

pub(crate) fn tokio_stream_listener(
    listener: tokio::net::TcpListener,
) -> impl futures_util::Stream<Item = Result<tokio::net::TcpStream, std::io::Error>> {
    futures_util::stream::unfold(listener, |l| async move {
        let next = l.accept().await.map(|(s, _)| s);
        Some((next, l))
    })
}
