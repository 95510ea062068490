//! Logging and tracing for every role: `tracing` to stderr (filter from
//! `RUST_LOG`, default `info`), plus OTLP/gRPC span export when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (`https://` is TLS: the CA and client
//! certificate of `telemetry.*`, else the system trust store). W3C trace
//! context is the propagator.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Flushes exported spans when dropped.
pub struct Guard(Option<SdkTracerProvider>);

impl Guard {
    pub async fn shutdown(mut self) {
        if let Some(provider) = self.0.take() {
            let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
            if let Ok(Err(e)) = done {
                eprintln!("span export shutdown: {e}");
            }
        }
    }
}

/// `tls` is how an `https://` endpoint is verified (`crate::tls::otlp`); the
/// system trust store when `None`.
pub fn init(service: &'static str, tls: Option<tonic::transport::ClientTlsConfig>) -> Guard {
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,h2=warn,tower=warn,hyper=warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_target(false).with_ansi(ansi);
    let provider = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok().filter(|e| !e.is_empty()).and_then(|endpoint| {
        let mut builder = opentelemetry_otlp::SpanExporter::builder().with_tonic();
        if endpoint.starts_with("https://") {
            builder = builder
                .with_tls_config(tls.unwrap_or_else(|| tonic::transport::ClientTlsConfig::new().with_enabled_roots()));
        }
        let exporter = builder.with_endpoint(endpoint).with_timeout(std::time::Duration::from_secs(3)).build();
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
    let _ = tracing_subscriber::registry().with(filter).with(fmt).with(otel).try_init();
    Guard(provider)
}
