//! Logging, tracing and metrics for every role: `tracing` to stderr (filter
//! from `RUST_LOG`, default `info`; JSON lines with trace and span ids when
//! `BATON_LOG_FORMAT=json`), plus OTLP/gRPC export of spans and metrics when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (`https://` is TLS: the CA and client
//! certificate of `telemetry.*`, else the system trust store). W3C trace
//! context is the propagator. Metrics are also served for Prometheus at
//! `/metrics` on `telemetry.metrics_addr`.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer as _};

/// Flushes exported spans and metrics at shutdown.
pub(crate) struct Guard {
    spans: Option<SdkTracerProvider>,
    metrics: baton_telemetry::Metrics,
}

impl Guard {
    pub(crate) fn metrics(&self) -> baton_telemetry::Metrics {
        self.metrics.clone()
    }

    pub(crate) async fn shutdown(mut self) {
        if let Some(provider) = self.spans.take() {
            let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
            if let Ok(Err(e)) = done {
                eprintln!("span export shutdown: {e}");
            }
        }
        let metrics = self.metrics.clone();
        let _ = tokio::task::spawn_blocking(move || metrics.shutdown()).await;
    }
}

/// Serves `/metrics` (Prometheus text) on `addr` until `shutdown` fires.
pub(crate) async fn serve_metrics(
    addr: std::net::SocketAddr,
    metrics: baton_telemetry::Metrics,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "metrics listening");
    let router = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let text = metrics.render();
            async move { ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text) }
        }),
    );
    baton_worker::supervise::spawn_supervised("metrics server", async move {
        let served = axum::serve(listener, router).with_graceful_shutdown(shutdown.cancelled_owned()).await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "metrics server stopped");
        }
    });
    Ok(())
}

/// OTLP over HTTP with protobuf bodies (`OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`)
/// rather than gRPC, the default. Over HTTP the exporters read the endpoint
/// (plus `/v1/traces`, `/v1/metrics`) and headers from the `OTEL_*` variables
/// themselves, and verify `https://` with the system trust store.
fn over_http() -> bool {
    std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").is_ok_and(|p| p.trim() == "http/protobuf")
}

const EXPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// A periodic OTLP metrics export to `endpoint`, or `None` (logged) when it cannot be built.
fn metrics_push(
    endpoint: &str,
    tls: Option<tonic::transport::ClientTlsConfig>,
) -> Option<baton_telemetry::PeriodicReader<opentelemetry_otlp::MetricExporter>> {
    let built = if over_http() {
        opentelemetry_otlp::MetricExporter::builder().with_http().with_timeout(EXPORT_TIMEOUT).build()
    } else {
        let mut builder = opentelemetry_otlp::MetricExporter::builder().with_tonic();
        if endpoint.starts_with("https://") {
            builder = builder
                .with_tls_config(tls.unwrap_or_else(|| tonic::transport::ClientTlsConfig::new().with_enabled_roots()));
        }
        builder.with_endpoint(endpoint).with_timeout(EXPORT_TIMEOUT).build()
    };
    match built {
        Ok(exporter) => Some(baton_telemetry::PeriodicReader::builder(exporter).build()),
        Err(e) => {
            eprintln!("OTLP metrics export disabled: {e}");
            None
        }
    }
}

/// `tls` is how an `https://` endpoint is verified (`crate::tls::otlp`); the
/// system trust store when `None`.
pub(crate) fn init(service: &'static str, tls: Option<tonic::transport::ClientTlsConfig>) -> Guard {
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,h2=warn,tower=warn,hyper=warn"));
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok().filter(|e| !e.is_empty());
    let metrics = match endpoint.as_deref().and_then(|e| metrics_push(e, tls.clone())) {
        Some(push) => baton_telemetry::Metrics::install_with_push(service, push),
        None => baton_telemetry::Metrics::install(service),
    };
    let provider = endpoint.and_then(|endpoint| {
        let exporter = if over_http() {
            opentelemetry_otlp::SpanExporter::builder().with_http().with_timeout(EXPORT_TIMEOUT).build()
        } else {
            let mut builder = opentelemetry_otlp::SpanExporter::builder().with_tonic();
            if endpoint.starts_with("https://") {
                builder = builder.with_tls_config(
                    tls.unwrap_or_else(|| tonic::transport::ClientTlsConfig::new().with_enabled_roots()),
                );
            }
            builder.with_endpoint(endpoint).with_timeout(EXPORT_TIMEOUT).build()
        };
        match exporter {
            Ok(exporter) => Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(Resource::builder().with_service_name(service).build())
                    .build(),
            ),
            Err(e) => {
                eprintln!("OTLP exporter disabled: {e}");
                None
            }
        }
    });
    let otel = provider.as_ref().map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service)));
    let output = if std::env::var("BATON_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json")) {
        // One JSON object per line, with the current span and its parents
        // (the request spans carry `trace_id`).
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .boxed()
    } else {
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_target(false).with_ansi(ansi).boxed()
    };
    let _ = tracing_subscriber::registry().with(filter).with(otel).with(output).try_init();
    Guard { spans: provider, metrics }
}
