//! Metrics for every role through the OpenTelemetry metrics SDK. Instruments
//! are made from the global meter (`opentelemetry::global::meter("baton")`), so
//! the libraries depend on the API only; a process installs one provider with
//! [`Metrics::install`], which feeds two readers: a pull reader rendered in the
//! Prometheus text format for `/metrics`, and, when configured, an OTLP
//! exporter. Labels never carry execution or user ids.

mod prometheus;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality};
use std::sync::{Arc, Weak};
use std::time::Duration;

pub use opentelemetry_sdk::metrics::PeriodicReader;
pub use opentelemetry_sdk::metrics::reader::MetricReader as PushReader;

/// The meter every Baton instrument comes from.
pub fn meter() -> opentelemetry::metrics::Meter {
    opentelemetry::global::meter("baton")
}

/// The pull reader, shared between the provider (which drives it) and `/metrics` (which asks it).
#[derive(Debug, Clone)]
struct Pull(Arc<ManualReader>);

impl MetricReader for Pull {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
    }

    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

/// This process's meter provider and its Prometheus view.
#[derive(Clone, Debug)]
pub struct Metrics {
    provider: SdkMeterProvider,
    pull: Pull,
}

impl Metrics {
    /// Installs the global meter provider for `service`, read by `/metrics`
    /// only. Instruments made before this are no-ops, so roles make theirs after it.
    pub fn install(service: &'static str) -> Metrics {
        Self::build(service, |b| b)
    }

    /// As [`Metrics::install`], with `push` reading too (e.g. a
    /// `PeriodicReader` over an OTLP exporter).
    pub fn install_with_push<R: MetricReader>(service: &'static str, push: R) -> Metrics {
        Self::build(service, |b| b.with_reader(push))
    }

    fn build(
        service: &'static str,
        more: impl FnOnce(
            opentelemetry_sdk::metrics::MeterProviderBuilder,
        ) -> opentelemetry_sdk::metrics::MeterProviderBuilder,
    ) -> Metrics {
        let pull = Pull(Arc::new(ManualReader::builder().build()));
        let resource = opentelemetry_sdk::Resource::builder().with_service_name(service).build();
        let provider = more(SdkMeterProvider::builder().with_resource(resource).with_reader(pull.clone())).build();
        opentelemetry::global::set_meter_provider(provider.clone());
        Metrics { provider, pull }
    }

    /// Everything measured so far, in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut rm = ResourceMetrics::default();
        match self.pull.collect(&mut rm) {
            Ok(()) => prometheus::render(&rm),
            Err(e) => format!("# metrics unavailable: {e}\n"),
        }
    }

    /// Flushes the push reader; call before exit (blocking: run it off the runtime).
    pub fn shutdown(&self) -> OTelSdkResult {
        self.provider.shutdown()
    }
}
