//! `rpc.server.duration` for every gRPC call this coordinator serves, by
//! service and method (from the request path, so bounded by the proto), as a
//! tower layer around the whole server. A streaming call (a worker session)
//! is measured to its response headers.

use opentelemetry::KeyValue;
use opentelemetry::metrics::Histogram;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;
use tonic::codegen::http;

#[derive(Clone)]
pub(crate) struct RpcMetricsLayer {
    duration: Histogram<f64>,
}

impl RpcMetricsLayer {
    pub(crate) fn new() -> RpcMetricsLayer {
        let duration = baton_telemetry::meter()
            .f64_histogram("rpc.server.duration")
            .with_unit("s")
            .with_description("gRPC calls served, by rpc.service and rpc.method")
            .with_boundaries(vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0])
            .build();
        RpcMetricsLayer { duration }
    }
}

impl Default for RpcMetricsLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> tower::Layer<S> for RpcMetricsLayer {
    type Service = RpcMetrics<S>;

    fn layer(&self, inner: S) -> RpcMetrics<S> {
        RpcMetrics { inner, duration: self.duration.clone() }
    }
}

#[derive(Clone)]
pub(crate) struct RpcMetrics<S> {
    inner: S,
    duration: Histogram<f64>,
}

/// The labels of a call: tonic answers a path it does not serve with
/// UNIMPLEMENTED (12) before any handler, so such a call is `unknown`, and a
/// caller cannot mint series by making paths up.
fn served(service: String, method: String, code: &str) -> (String, String) {
    if code == "12" { ("unknown".to_owned(), "unknown".to_owned()) } else { (service, method) }
}

/// `("baton.coordinator.v1.Coordinator", "StartExecution")` from `/baton.coordinator.v1.Coordinator/StartExecution`.
fn service_and_method(path: &str) -> (String, String) {
    match path.trim_start_matches('/').split_once('/') {
        Some((service, method)) => (service.to_owned(), method.to_owned()),
        None => ("unknown".to_owned(), "unknown".to_owned()),
    }
}

impl<S, B, R> tower::Service<http::Request<B>> for RpcMetrics<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let (service, method) = service_and_method(req.uri().path());
        let duration = self.duration.clone();
        let started = Instant::now();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let answer = answer.await;
            // An immediate error carries grpc-status in the headers; a call
            // that answered normally reports it in trailers, after this point.
            let code = match &answer {
                Ok(r) => r.headers().get("grpc-status").and_then(|v| v.to_str().ok()).unwrap_or("0").to_owned(),
                Err(_) => "transport".to_owned(),
            };
            let (service, method) = served(service, method, &code);
            let labels = [
                KeyValue::new("rpc.system", "grpc"),
                KeyValue::new("rpc.service", service),
                KeyValue::new("rpc.method", method),
                KeyValue::new("rpc.grpc.status_code", code),
            ];
            duration.record(started.elapsed().as_secs_f64(), &labels);
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn paths_split_into_service_and_method() {
        let (s, m) = super::service_and_method("/baton.coordinator.v1.Coordinator/StartExecution");
        assert_eq!((s.as_str(), m.as_str()), ("baton.coordinator.v1.Coordinator", "StartExecution"));
        assert_eq!(super::service_and_method("/").0, "unknown");
    }

    #[test]
    fn paths_nobody_serves_share_one_label() {
        let made_up = super::service_and_method("/evil.Service/Method123");
        assert_eq!(super::served(made_up.0, made_up.1, "12"), ("unknown".to_owned(), "unknown".to_owned()));
        let real = super::service_and_method("/baton.coordinator.v1.Coordinator/GetExecution");
        assert_eq!(super::served(real.0, real.1, "5").1, "GetExecution");
    }
}
