//! Thin tonic adapters over the engine: decode, authorize via the engine, encode.

pub(crate) mod admin;
pub(crate) mod api;
pub(crate) mod convert;
pub(crate) mod history;
pub(crate) mod measure;
pub(crate) mod operator;
pub(crate) mod peer;
pub mod peer_auth;
pub(crate) mod skew;
pub(crate) mod status;
#[cfg(test)]
mod tolerance_tests;
pub(crate) mod webhooks;
pub mod worker;
// Waiting at scale (issue #21): a gateway's one stream for its parked waits.
pub(crate) mod waits;

/// The `authorization` metadata value, if present.
pub(crate) fn authorization<T>(req: &tonic::Request<T>) -> Option<&str> {
    req.metadata().get("authorization").and_then(|v| v.to_str().ok())
}

/// A server span of `baton.coordinator.v1.Coordinator/{method}` that
/// continues the caller's trace, named and attributed as the OpenTelemetry
/// RPC conventions say.
pub(crate) fn span<T>(method: &'static str, req: &tonic::Request<T>) -> tracing::Span {
    const SERVICE: &str = "baton.coordinator.v1.Coordinator";
    let span = tracing::info_span!(
        "rpc",
        otel.name = %format!("{SERVICE}/{method}"),
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = SERVICE,
        rpc.method = method,
        rpc.grpc.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        trace_id = tracing::field::Empty,
    );
    baton_proto::trace::adopt(req.metadata(), &span);
    baton_proto::trace::record_trace_id(&span);
    span
}

/// Runs `call` in `span` and records its gRPC status there; the codes that mean
/// the server failed (not the caller) mark the span as an error, as the
/// OpenTelemetry RPC conventions say.
pub(crate) async fn traced<T>(
    span: tracing::Span,
    call: impl std::future::Future<Output = Result<T, tonic::Status>>,
) -> Result<T, tonic::Status> {
    use tracing::Instrument as _;
    let answer = call.instrument(span.clone()).await;
    let code = match &answer {
        Ok(_) => tonic::Code::Ok,
        Err(status) => status.code(),
    };
    span.record("rpc.grpc.status_code", code as i32);
    if matches!(
        code,
        tonic::Code::Unknown
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Unimplemented
            | tonic::Code::Internal
            | tonic::Code::Unavailable
            | tonic::Code::DataLoss
    ) {
        span.record("otel.status_code", "ERROR");
    }
    answer
}
