//! What the gateway tells operators about each HTTP request: a server span
//! named by method and route (`http.route`, never the raw path, which holds
//! ids) that continues the caller's `traceparent`, marked as an error on 5xx;
//! and `http.server.request.duration` by route, method and status.

use axum::extract::{MatchedPath, Request};
use axum::response::Response;
use opentelemetry::KeyValue;
use opentelemetry::metrics::Histogram;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;
use tracing::field::Empty;

/// The route a request matched, or `unmatched` (an unknown path is never a label).
fn route(req: &Request) -> String {
    req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "unmatched".to_owned())
}

/// The root span of a request.
pub(crate) fn span(req: &Request) -> tracing::Span {
    let route = route(req);
    let method = req.method().as_str();
    let span = tracing::info_span!(
        "http",
        otel.name = %format!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = Empty,
        otel.status_code = Empty,
        trace_id = Empty,
    );
    baton_proto::trace::adopt_headers(req.headers(), &span);
    baton_proto::trace::record_trace_id(&span);
    span
}

/// Records the answer's status on the request's span.
pub(crate) fn on_response(response: &Response, span: &tracing::Span) {
    let status = response.status().as_u16();
    span.record("http.response.status_code", status);
    if status >= 500 {
        span.record("otel.status_code", "ERROR");
    }
}

/// `http.server.request.duration`, made once per router.
#[derive(Clone)]
pub(crate) struct HttpMetrics {
    duration: Histogram<f64>,
}

impl HttpMetrics {
    pub(crate) fn new() -> HttpMetrics {
        let duration = baton_telemetry::meter()
            .f64_histogram("http.server.request.duration")
            .with_unit("s")
            .with_description("HTTP requests served, by http.route, method and status")
            .with_boundaries(vec![
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            ])
            .build();
        HttpMetrics { duration }
    }
}

/// Records `http.server.request.duration` around the service it wraps. A
/// layer with a small future of its own, not a `from_fn` middleware: every
/// parked long poll carries this future for as long as it waits, and the
/// `from_fn` one held the request twice and the next service's call inline
/// (its boxed future was 1.2 KiB per request, measured with heaptrack).
impl<S> tower::Layer<S> for HttpMetrics {
    type Service = Measured<S>;

    fn layer(&self, inner: S) -> Measured<S> {
        Measured { inner, duration: self.duration.clone() }
    }
}

#[derive(Clone)]
pub(crate) struct Measured<S> {
    inner: S,
    duration: Histogram<f64>,
}

impl<S> tower::Service<Request> for Measured<S>
where
    S: tower::Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = MeasuredFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let mut labels = Vec::with_capacity(3);
        labels.push(KeyValue::new("http.route", route(&req)));
        labels.push(KeyValue::new("http.request.method", req.method().to_string()));
        MeasuredFuture { inner: self.inner.call(req), labels, started: Instant::now(), duration: self.duration.clone() }
    }
}

pin_project_lite::pin_project! {
    pub(crate) struct MeasuredFuture<F> {
        #[pin]
        inner: F,
        labels: Vec<KeyValue>,
        started: Instant,
        duration: Histogram<f64>,
    }
}

impl<F, E> Future for MeasuredFuture<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let answer = std::task::ready!(this.inner.poll(cx));
        if let Ok(response) = &answer {
            let mut labels = std::mem::take(this.labels);
            labels.push(KeyValue::new("http.response.status_code", i64::from(response.status().as_u16())));
            this.duration.record(this.started.elapsed().as_secs_f64(), &labels);
        }
        Poll::Ready(answer)
    }
}

impl Default for HttpMetrics {
    fn default() -> Self {
        Self::new()
    }
}

/// `mcp.server.operation.duration`, made on first use (after the process
/// installed its meter provider).
fn mcp_duration() -> &'static Histogram<f64> {
    static DURATION: std::sync::OnceLock<Histogram<f64>> = std::sync::OnceLock::new();
    DURATION.get_or_init(|| {
        baton_telemetry::meter()
            .f64_histogram("mcp.server.operation.duration")
            .with_unit("s")
            .with_description("MCP requests served, by mcp.method.name")
            .with_boundaries(vec![
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            ])
            .build()
    })
}

/// Runs one MCP request in a server span named by its method (with the tool's
/// name for `tools/call`) that continues a `traceparent` the client put in
/// `params._meta`, and measures it. Arguments never become attributes.
pub(crate) async fn mcp_operation<T>(
    method: &str,
    params: &serde_json::Map<String, serde_json::Value>,
    operation: impl std::future::Future<Output = T>,
) -> T {
    use tracing::Instrument as _;
    let tool = (method == "tools/call").then(|| params.get("name").and_then(|n| n.as_str())).flatten();
    let name = match tool {
        Some(tool) => format!("{method} {tool}"),
        None => method.to_owned(),
    };
    let span = tracing::info_span!(
        "mcp",
        otel.name = %name,
        otel.kind = "server",
        mcp.method.name = %method,
        gen_ai.tool.name = tool.unwrap_or_default(),
        trace_id = Empty,
    );
    let meta = params.get("_meta").and_then(|m| m.as_object());
    if let Some(traceparent) = meta.and_then(|m| m.get("traceparent")).and_then(|t| t.as_str()) {
        baton_proto::trace::adopt_traceparent(traceparent, &span);
    }
    baton_proto::trace::record_trace_id(&span);
    let started = Instant::now();
    let answer = operation.instrument(span).await;
    mcp_duration().record(started.elapsed().as_secs_f64(), &[KeyValue::new("mcp.method.name", method_label(method))]);
    answer
}

/// The methods Baton serves, in either era.
const SERVED_METHODS: [&str; 10] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
];

/// A method as a metric label: a method a caller made up is `other`, so
/// callers cannot mint series.
fn method_label(method: &str) -> &'static str {
    SERVED_METHODS.into_iter().find(|m| *m == method).unwrap_or("other")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_method_nobody_serves_is_labelled_other() {
        assert_eq!(super::method_label("tools/call"), "tools/call");
        assert_eq!(super::method_label("tasks/update"), "tasks/update");
        for made_up in ["evil/1", "tools/call2", "", "notifications/whatever"] {
            assert_eq!(super::method_label(made_up), "other", "{made_up}");
        }
    }
}
