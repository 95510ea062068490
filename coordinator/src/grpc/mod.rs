//! Thin tonic adapters over the engine: decode, authorize via the engine, encode.

pub mod api;
pub mod convert;
pub mod history;
pub mod operator;
pub mod peer;
pub mod peer_auth;
pub mod status;
pub mod worker;

/// The `authorization` metadata value, if present.
pub fn authorization<T>(req: &tonic::Request<T>) -> Option<&str> {
    req.metadata().get("authorization").and_then(|v| v.to_str().ok())
}

/// A span that continues the caller's trace.
pub fn span<T>(name: &'static str, req: &tonic::Request<T>) -> tracing::Span {
    let span = tracing::info_span!("rpc", rpc = name);
    baton_proto::trace::adopt(req.metadata(), &span);
    span
}
