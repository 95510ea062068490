//! W3C trace context carried in gRPC metadata, so one trace spans
//! gateway -> coordinator -> worker.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct MetadataInjector<'a>(&'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (MetadataKey::from_bytes(key.as_bytes()), MetadataValue::try_from(value.as_str())) {
            self.0.insert(k, v);
        }
    }
}

struct MetadataExtractor<'a>(&'a MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

/// Writes the current span's context into outgoing metadata.
pub fn inject(metadata: &mut MetadataMap) {
    let cx = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&cx, &mut MetadataInjector(metadata));
}

/// Makes `span` a child of the context carried by incoming metadata, if any.
pub fn adopt(metadata: &MetadataMap, span: &tracing::Span) {
    let cx = TraceContextPropagator::new().extract(&MetadataExtractor(metadata));
    let _ = span.set_parent(cx);
}

/// The current span's context as a `traceparent` header value (for assignments).
pub fn current_traceparent() -> String {
    let cx = tracing::Span::current().context();
    let mut map = std::collections::HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut map);
    map.remove("traceparent").unwrap_or_default()
}

/// Makes `span` a child of a `traceparent` value.
pub fn adopt_traceparent(traceparent: &str, span: &tracing::Span) {
    if traceparent.is_empty() {
        return;
    }
    let carrier = std::collections::HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(cx);
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Makes `span` a child of the W3C context (`traceparent`, `tracestate`) in
/// incoming HTTP headers, if any: a caller's trace continues through Baton.
pub fn adopt_headers(headers: &http::HeaderMap, span: &tracing::Span) {
    if headers.contains_key("traceparent") {
        let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
        let _ = span.set_parent(cx);
    }
}

struct HeaderInjector<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (http::HeaderName::from_bytes(key.as_bytes()), http::HeaderValue::from_str(&value)) {
            self.0.insert(k, v);
        }
    }
}

/// Writes the current span's context into outgoing HTTP headers.
pub fn inject_headers(headers: &mut http::HeaderMap) {
    let cx = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(headers));
}

/// Records the trace id `span` belongs to in its `trace_id` field (declared
/// `Empty` by the span), so JSON log lines within it can be joined to the trace.
pub fn record_trace_id(span: &tracing::Span) {
    use opentelemetry::trace::TraceContextExt as _;
    let id = span.context().span().span_context().trace_id();
    if id != opentelemetry::trace::TraceId::INVALID {
        span.record("trace_id", tracing::field::display(id));
    }
}
