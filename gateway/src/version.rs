//! The version this gateway states on every coordinator call
//! (`baton-version`), which the coordinator holds to its window
//! (docs/upgrading.md). Shared by the typed client and the hub's stream.

use tonic::metadata::{AsciiMetadataValue, MetadataMap};

/// Puts this gateway's version in `metadata`.
pub(crate) fn state(metadata: &mut MetadataMap) {
    static VERSION: std::sync::OnceLock<Option<AsciiMetadataValue>> = std::sync::OnceLock::new();
    let value = VERSION.get_or_init(|| {
        let own = baton_proto::version::own(env!("CARGO_PKG_VERSION"));
        AsciiMetadataValue::try_from(own.to_string()).ok()
    });
    if let Some(v) = value {
        metadata.insert(baton_proto::version::HEADER, v.clone());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_call_states_the_gateway_version() {
        let mut metadata = tonic::metadata::MetadataMap::new();
        super::state(&mut metadata);
        let stated = metadata.get(baton_proto::version::HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        assert_eq!(stated, Some(baton_proto::version::own(env!("CARGO_PKG_VERSION")).to_string()));
    }
}
