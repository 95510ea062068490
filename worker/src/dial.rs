//! How a worker reaches its coordinator: plaintext for `http://`, TLS for
//! `https://` (the configured CA and client identity, else the system trust
//! store), HTTP/2 keepalive either way so a half-open connection is noticed
//! while the session is quiet. Also the process-wide rustls crypto provider.

use std::time::Duration;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

/// A keepalive ping goes out after this long without a frame from the coordinator…
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
/// …and the connection is dropped (and redialled) when its answer takes longer.
/// A half-open connection is so noticed within about 4 s, well inside a lease
/// (10 s by default): the worker registers again, with what it runs, before
/// its leases lapse into `owner_lost`. A slow answer costs a reconnect, never
/// an execution.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(2);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid coordinator url: {0}")]
    Url(String),
    #[error("coordinator tls: {0}")]
    Tls(String),
    #[error("cannot reach the coordinator: {0}")]
    Connect(String),
}

/// The endpoint for `url`, with TLS when the scheme is `https`.
pub fn endpoint(url: &str, tls: Option<&ClientTlsConfig>) -> Result<Endpoint, Error> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| Error::Url(baton_proto::error::with_sources(&e)))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    if endpoint.uri().scheme_str() != Some("https") {
        return Ok(endpoint);
    }
    install_crypto_provider();
    let config = tls.cloned().unwrap_or_else(|| ClientTlsConfig::new().with_enabled_roots());
    endpoint.tls_config(config).map_err(|e| Error::Tls(baton_proto::error::with_sources(&e)))
}

/// Dials the coordinator once.
pub async fn connect(url: &str, tls: Option<&ClientTlsConfig>) -> Result<Channel, Error> {
    endpoint(url, tls)?.connect().await.map_err(|e| Error::Connect(baton_proto::error::with_sources(&e)))
}

/// Makes rustls' ring provider the process default unless a provider is
/// installed already. Every TLS client in the process (reqwest, tonic, redis)
/// then agrees on it, and nothing falls back to aws-lc-rs.
pub fn install_crypto_provider() {
    // Err only means some provider is installed already, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_decides_whether_tls_is_used() {
        assert!(endpoint("http://127.0.0.1:7070", None).is_ok());
        let tls = ClientTlsConfig::new().domain_name("coordinator.internal");
        assert!(endpoint("https://127.0.0.1:7070", Some(&tls)).is_ok());
        let err = endpoint("not a url", None).expect_err("invalid");
        assert!(matches!(err, Error::Url(_)), "{err}");
    }
}
