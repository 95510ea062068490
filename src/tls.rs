//! TLS material from the configuration, turned into what each role needs.
//!
//! - **Coordinator** serves TLS when `tls.cert_file` and `tls.key_file` are set,
//!   and verifies client certificates against `tls.client_ca_file` when that is
//!   set (refusing clients without one unless `tls.require_client_cert: false`).
//!   Calling an `https://` peer it verifies it with `tls.ca_file` and presents
//!   its own certificate, which therefore needs the clientAuth usage too when
//!   peers require client certificates.
//! - **Gateway and worker** dial an `https://` coordinator URL with TLS: the
//!   coordinator is verified with `tls.ca_file` (the system trust store when
//!   unset) under the URL's host or `tls.server_name`, and `tls.cert_file` /
//!   `tls.key_file` are their client certificate. An `http://` URL is plaintext.
//! - **Telemetry**: an `https://` OTLP endpoint is verified with
//!   `telemetry.otlp_ca_file` (else the system trust store), with an optional
//!   client certificate.
//!
//! Every file is read and checked here, at load, so a bad path or a key that
//! does not belong to its certificate is a configuration error naming the
//! field (exit 64), never a failure at the first connection. File contents
//! never appear in a message.

use crate::config::{Config, Error};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::Path;
use std::time::Duration;
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn field(field: &'static str, problem: impl Into<String>) -> Error {
    Error::Field { field, problem: problem.into() }
}

fn read(name: &'static str, path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| field(name, format!("cannot read {}: {e}", path.display())))
}

/// A PEM file of one or more certificates, parsed.
fn certificates(name: &'static str, path: &Path) -> Result<(Vec<u8>, Vec<CertificateDer<'static>>), Error> {
    let pem = read(name, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| field(name, format!("{} is not a valid PEM certificate file", path.display())))?;
    if certs.is_empty() {
        return Err(field(name, format!("{} holds no PEM certificate", path.display())));
    }
    Ok((pem, certs))
}

/// A CA bundle, as tonic takes it.
fn ca(name: &'static str, path: &Path) -> Result<Certificate, Error> {
    Ok(Certificate::from_pem(certificates(name, path)?.0))
}

/// A certificate chain and its private key; both must be set, and must belong together.
fn identity(
    (cert_field, cert): (&'static str, Option<&Path>),
    (key_field, key): (&'static str, Option<&Path>),
) -> Result<Option<Identity>, Error> {
    let (cert, key) = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(c), Some(k)) => (c, k),
        (Some(_), None) => return Err(field(key_field, format!("is required with {cert_field}"))),
        (None, Some(_)) => return Err(field(cert_field, format!("is required with {key_field}"))),
    };
    let (cert_pem, chain) = certificates(cert_field, cert)?;
    let key_pem = read(key_field, key)?;
    let private = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|_| field(key_field, format!("{} holds no PEM private key", key.display())))?;
    rustls::sign::CertifiedKey::from_der(chain, private, &rustls::crypto::ring::default_provider())
        .map_err(|e| field(key_field, format!("{} does not fit {cert_field}: {e}", key.display())))?;
    Ok(Some(Identity::from_pem(cert_pem, key_pem)))
}

/// The coordinator's server side; `None` serves plaintext.
pub(crate) fn server(c: &Config) -> Result<Option<ServerTlsConfig>, Error> {
    let t = &c.tls;
    if t.require_client_cert.is_some() && t.client_ca_file.is_none() {
        return Err(field("tls.require_client_cert", "needs tls.client_ca_file"));
    }
    let identity = identity(("tls.cert_file", t.cert_file.as_deref()), ("tls.key_file", t.key_file.as_deref()))?;
    let Some(identity) = identity else {
        if t.client_ca_file.is_some() {
            return Err(field(
                "tls.client_ca_file",
                "needs tls.cert_file and tls.key_file (the coordinator serves TLS)",
            ));
        }
        return Ok(None);
    };
    let mut config = ServerTlsConfig::new().identity(identity).timeout(HANDSHAKE_TIMEOUT);
    if let Some(path) = &t.client_ca_file {
        config = config
            .client_ca_root(ca("tls.client_ca_file", path)?)
            .client_auth_optional(!t.require_client_cert.unwrap_or(true));
    }
    Ok(Some(config))
}

/// How gateways, workers and coordinators (to peers) dial an `https://`
/// coordinator; `None` when nothing is configured (the system trust store).
pub(crate) fn client(c: &Config) -> Result<Option<ClientTlsConfig>, Error> {
    let t = &c.tls;
    let identity = identity(("tls.cert_file", t.cert_file.as_deref()), ("tls.key_file", t.key_file.as_deref()))?;
    if t.ca_file.is_none() && identity.is_none() && t.server_name.is_none() {
        return Ok(None);
    }
    let mut config = match &t.ca_file {
        Some(path) => ClientTlsConfig::new().ca_certificate(ca("tls.ca_file", path)?),
        None => ClientTlsConfig::new().with_enabled_roots(),
    };
    if let Some(identity) = identity {
        config = config.identity(identity);
    }
    if let Some(name) = &t.server_name {
        if ServerName::try_from(name.as_str()).is_err() {
            return Err(field("tls.server_name", "must be a DNS name or an IP address"));
        }
        config = config.domain_name(name.clone());
    }
    Ok(Some(config.timeout(HANDSHAKE_TIMEOUT)))
}

/// For an `https://` OTLP endpoint: the configured CA and client certificate,
/// else the system trust store.
pub(crate) fn otlp(c: &Config) -> Result<ClientTlsConfig, Error> {
    let t = &c.telemetry;
    let mut config = match &t.otlp_ca_file {
        Some(path) => ClientTlsConfig::new().ca_certificate(ca("telemetry.otlp_ca_file", path)?),
        None => ClientTlsConfig::new().with_enabled_roots(),
    };
    let identity = identity(
        ("telemetry.otlp_cert_file", t.otlp_cert_file.as_deref()),
        ("telemetry.otlp_key_file", t.otlp_key_file.as_deref()),
    )?;
    if let Some(identity) = identity {
        config = config.identity(identity);
    }
    Ok(config)
}

/// Checks every configured file (run at load, for every role).
pub(crate) fn validate(c: &Config) -> Result<(), Error> {
    server(c)?;
    client(c)?;
    otlp(c)?;
    Ok(())
}

/// Makes rustls' ring provider the process default (once, at start), so every
/// TLS client in the process agrees on it.
pub(crate) fn install_crypto_provider() {
    baton_worker::dial::install_crypto_provider();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Tls;
    use std::path::PathBuf;

    fn scratch() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("baton-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    /// A self-signed certificate and its key, written as `{name}.pem` / `{name}.key`.
    fn self_signed(name: &str) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let (cert_path, key_path) = (scratch().join(format!("{name}.pem")), scratch().join(format!("{name}.key")));
        std::fs::write(&cert_path, cert.pem()).expect("write cert");
        std::fs::write(&key_path, key.serialize_pem()).expect("write key");
        (cert_path, key_path)
    }

    fn config(tls: Tls) -> Config {
        Config { tls, ..Config::default() }
    }

    #[test]
    fn fields_that_need_another_are_refused_at_validation() {
        let c = config(Tls { require_client_cert: Some(false), ..Tls::default() });
        let err = validate(&c).expect_err("no client CA");
        assert!(err.to_string().contains("tls.require_client_cert"), "{err}");
        let mut c = Config::default();
        c.telemetry.otlp_key_file = Some(PathBuf::from("/nonexistent/key.pem"));
        let err = validate(&c).expect_err("half a pair");
        assert!(err.to_string().contains("telemetry.otlp_cert_file"), "{err}");
    }

    #[test]
    fn nothing_configured_means_plaintext_server_and_default_clients() {
        let c = Config::default();
        assert!(server(&c).expect("valid").is_none());
        assert!(client(&c).expect("valid").is_none());
        assert!(validate(&c).is_ok());
    }

    #[test]
    fn a_full_configuration_builds_server_and_client() {
        let (cert, key) = self_signed("full");
        let c = config(Tls {
            ca_file: Some(cert.clone()),
            cert_file: Some(cert.clone()),
            key_file: Some(key),
            client_ca_file: Some(cert),
            require_client_cert: None,
            server_name: Some("localhost".into()),
        });
        assert!(server(&c).expect("valid").is_some());
        assert!(client(&c).expect("valid").is_some());
    }

    #[test]
    fn a_missing_file_names_its_field() {
        let missing = scratch().join("absent.pem");
        let err = validate(&config(Tls { ca_file: Some(missing.clone()), ..Default::default() })).expect_err("missing");
        assert!(err.to_string().contains("tls.ca_file"), "{err}");
        let (cert, _) = self_signed("nokey");
        let err = validate(&config(Tls { cert_file: Some(cert), key_file: Some(missing), ..Default::default() }))
            .expect_err("missing");
        assert!(err.to_string().contains("tls.key_file"), "{err}");
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let (cert, _) = self_signed("one");
        let (_, other_key) = self_signed("two");
        let err = validate(&config(Tls { cert_file: Some(cert), key_file: Some(other_key), ..Default::default() }))
            .expect_err("mismatch");
        assert!(err.to_string().contains("tls.key_file") && !err.to_string().contains("PRIVATE KEY"), "{err}");
    }

    #[test]
    fn half_an_identity_or_a_dangling_option_is_refused() {
        let (cert, _) = self_signed("half");
        let err = validate(&config(Tls { cert_file: Some(cert.clone()), ..Default::default() })).expect_err("no key");
        assert!(err.to_string().contains("tls.key_file"), "{err}");
        let err = validate(&config(Tls { client_ca_file: Some(cert), ..Default::default() }))
            .expect_err("no server identity");
        assert!(err.to_string().contains("tls.client_ca_file"), "{err}");
        let err = validate(&config(Tls { require_client_cert: Some(false), ..Default::default() }))
            .expect_err("nothing to require");
        assert!(err.to_string().contains("tls.require_client_cert"), "{err}");
    }

    #[test]
    fn a_file_without_pem_and_a_bad_server_name_are_refused() {
        let path = scratch().join("garbage.pem");
        std::fs::write(&path, "not a certificate, and a s3cret").expect("write");
        let err = validate(&config(Tls { ca_file: Some(path), ..Default::default() })).expect_err("garbage");
        assert!(err.to_string().contains("tls.ca_file") && !err.to_string().contains("s3cret"), "{err}");
        let err =
            validate(&config(Tls { server_name: Some("not a name!".into()), ..Default::default() })).expect_err("name");
        assert!(err.to_string().contains("tls.server_name"), "{err}");
    }
}
