//! Version skew at the coordinator's door: every worker registration and
//! every gateway call is held to `baton_proto::version::admit` before
//! anything else is read, and a peer outside the window is refused with
//! `FailedPrecondition` (`version_unsupported`) naming both versions and the
//! way out. The refusal comes before authentication: it grants nothing, and
//! a refused peer's tools are never registered.
//!
//! Metrics: `baton.worker.sessions.by_version` (worker sessions open on this
//! replica by SDK line), `baton.gateway.calls` (gateway calls by line) and
//! `baton.version.refusals` (by role and refused line). Every label comes
//! from a bounded set (`Refusal::label`, or a line inside the window).

use baton_proto::error::{ErrorCode, WireError};
use baton_proto::version::{self, Refusal, Role, Version};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, UpDownCounter};
use std::sync::OnceLock;
use tonic::Status;

/// This coordinator's own version.
pub(crate) fn own() -> Version {
    static OWN: OnceLock<Version> = OnceLock::new();
    *OWN.get_or_init(|| version::own(env!("CARGO_PKG_VERSION")))
}

struct Instruments {
    sessions: UpDownCounter<i64>,
    gateway_calls: Counter<u64>,
    refusals: Counter<u64>,
}

fn instruments() -> &'static Instruments {
    static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
    INSTRUMENTS.get_or_init(|| {
        let meter = baton_telemetry::meter();
        Instruments {
            sessions: meter
                .i64_up_down_counter("baton.worker.sessions.by_version")
                .with_description("Worker sessions open on this coordinator, by baton-worker SDK line")
                .build(),
            gateway_calls: meter
                .u64_counter("baton.gateway.calls")
                .with_description("Calls from gateways this coordinator admitted, by gateway line")
                .build(),
            refusals: meter
                .u64_counter("baton.version.refusals")
                .with_description("Workers and gateways refused for their version, by role and refused line")
                .build(),
        }
    })
}

/// The refusal as the peer receives it, counted.
fn refused(refusal: &Refusal) -> Status {
    let labels = [KeyValue::new("role", refusal.role().name()), KeyValue::new("version", refusal.label())];
    instruments().refusals.add(1, &labels);
    tracing::warn!(role = refusal.role().name(), "refused: {refusal}");
    WireError::new(ErrorCode::VersionUnsupported, refusal.to_string()).into_status()
}

/// A worker session of an admitted SDK line, counted while it lives.
pub(crate) struct WorkerVersion {
    label: [KeyValue; 1],
}

impl Drop for WorkerVersion {
    fn drop(&mut self) {
        instruments().sessions.add(-1, &self.label);
    }
}

/// Admits a worker stating `sdk_version` (its `Register.sdk_version`); the
/// guard counts the session until it is dropped.
pub(crate) fn admit_worker(sdk_version: &str) -> Result<WorkerVersion, Status> {
    let peer = version::admit(Role::Worker, own(), Some(sdk_version)).map_err(|r| refused(&r))?;
    let label = [KeyValue::new("version", peer.line().to_string())];
    instruments().sessions.add(1, &label);
    Ok(WorkerVersion { label })
}

/// The interceptor in front of every gateway-facing service: a call whose
/// `baton-version` is outside the window is refused before its handler runs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GatewayVersion;

impl tonic::service::Interceptor for GatewayVersion {
    fn call(&mut self, request: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        let stated = request.metadata().get(version::HEADER).map(|v| v.to_str().unwrap_or("?"));
        let peer = version::admit(Role::Gateway, own(), stated).map_err(|r| refused(&r))?;
        instruments().gateway_calls.add(1, &[KeyValue::new("version", peer.line().to_string())]);
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::service::Interceptor as _;

    fn call_with(version: Option<&'static str>) -> Result<(), Status> {
        let mut request = tonic::Request::new(());
        if let Some(v) = version {
            request.metadata_mut().insert(version::HEADER, tonic::metadata::MetadataValue::from_static(v));
        }
        GatewayVersion.call(request).map(|_| ())
    }

    #[test]
    fn a_gateway_outside_the_window_is_refused_with_both_versions() {
        let own = own();
        assert!(call_with(None).is_ok(), "a gateway that states nothing is 0.1.0, inside this release's window");
        assert!(call_with(Some(env!("CARGO_PKG_VERSION"))).is_ok());
        let refusal = call_with(Some("99.0.0")).expect_err("a newer gateway");
        assert_eq!(refusal.code(), tonic::Code::FailedPrecondition);
        assert!(refusal.message().contains("99.0.0") && refusal.message().contains(&own.to_string()));
        assert_eq!(WireError::from_status(&refusal).code, ErrorCode::VersionUnsupported);
        let unreadable = call_with(Some("latest")).expect_err("an unreadable version");
        assert_eq!(unreadable.code(), tonic::Code::FailedPrecondition);
    }

    #[test]
    fn a_worker_outside_the_window_is_refused() {
        assert!(admit_worker("").is_ok(), "an SDK older than the field");
        assert!(admit_worker(env!("CARGO_PKG_VERSION")).is_ok());
        let Err(refusal) = admit_worker("0.999.0") else { panic!("a newer SDK is refused") };
        assert_eq!(WireError::from_status(&refusal).code, ErrorCode::VersionUnsupported);
        assert!(refusal.message().starts_with("worker SDK 0.999.0 is newer than this coordinator"));
    }
}
