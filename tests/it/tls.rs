//! TLS on the gRPC hops with client certificates required (mTLS): gateways and
//! workers reach the coordinator over `https://` with their certificate, and a
//! client that speaks plaintext or has no certificate is refused.

use crate::harness::{Cluster, Settings, TlsFiles, eventually};
use crate::tracing_export::{Collector, tokio_stream_listener};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;
use serde_json::json;
use std::time::Duration;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

fn tls_settings() -> Settings {
    Settings { tls: true, ..Settings::default() }
}

fn files(c: &Cluster) -> &TlsFiles {
    c.tls.as_ref().expect("a TLS cluster")
}

/// The coordinator's gRPC health check through `endpoint`: its status, or why the call failed.
async fn health(endpoint: Endpoint) -> Result<i32, String> {
    let channel: Channel =
        endpoint.connect_timeout(Duration::from_secs(5)).connect().await.map_err(|e| e.to_string())?;
    let mut request = tonic::Request::new(HealthCheckRequest { service: String::new() });
    request.set_timeout(Duration::from_secs(5));
    HealthClient::new(channel).check(request).await.map(|r| r.into_inner().status).map_err(|s| s.to_string())
}

fn ca(c: &Cluster) -> Certificate {
    Certificate::from_pem(std::fs::read(&files(c).ca).expect("ca.pem"))
}

fn https(c: &Cluster, tls: ClientTlsConfig) -> Endpoint {
    Endpoint::from_shared(c.coordinator_url(0)).expect("url").tls_config(tls).expect("tls config")
}

#[tokio::test]
async fn a_rest_round_trip_runs_over_mutual_tls() {
    let c = Cluster::single(tls_settings()).await.expect("TLS cluster: gateway and worker registered over https");
    assert!(c.coordinator_url(0).starts_with("https://"), "{}", c.coordinator_url(0));
    let alice = c.rest(0, &c.id.user_token);
    let started = alice.start("Demo.Echo", json!({"text": "over tls"}), None).await.expect("start");
    assert_eq!(started.status, 202, "{}", String::from_utf8_lossy(&started.bytes));
    let id = started.json()["execution_id"].as_str().expect("id").to_owned();
    let done = alice.until_terminal(&id, Duration::from_secs(20)).await.expect("terminal");
    assert_eq!(done["status"], "completed", "{done}");
    let result = alice.get(&format!("/tool-executions/{id}/result")).await.expect("result");
    assert_eq!(result.status, 200);
    assert_eq!(result.json()["result"]["structuredContent"]["text"], "over tls", "{}", result.json());
}

#[tokio::test]
async fn plaintext_and_certificateless_clients_are_refused() {
    let mut c = Cluster::new(tls_settings()).await.expect("cluster");
    c.start_coordinator().await.expect("coordinator");
    let serving = ServingStatus::Serving as i32;

    // The control: a client with the CA and a client certificate is served.
    let full = c.client_tls().expect("a TLS cluster");
    assert_eq!(health(https(&c, full)).await, Ok(serving), "a client with a certificate is served");

    // Plaintext gRPC to the TLS port.
    let plain = Endpoint::from_shared(format!("http://{}", c.coordinators[0].addr)).expect("url");
    let refused = health(plain).await;
    assert!(refused.is_err(), "a plaintext client was served: {refused:?}");

    // TLS that verifies the coordinator but presents no certificate.
    let anonymous = ClientTlsConfig::new().ca_certificate(ca(&c));
    let refused = health(https(&c, anonymous)).await;
    assert!(refused.is_err(), "a client without a certificate was served: {refused:?}");

    // A client that trusts another CA refuses the coordinator, certificate or not.
    let t = files(&c).clone();
    let other = TlsFiles::generate(&c.dir.join("other-ca")).expect("another CA");
    let stranger = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(&other.ca).expect("other ca.pem")))
        .identity(Identity::from_pem(
            std::fs::read(&t.client_cert).expect("client.pem"),
            std::fs::read(&t.client_key).expect("client.key"),
        ));
    let refused = health(https(&c, stranger)).await;
    assert!(refused.is_err(), "a coordinator under an unknown CA was trusted: {refused:?}");
}

#[tokio::test]
async fn spans_reach_an_https_collector_verified_with_the_configured_ca() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let settings = Settings { otlp_endpoint: Some(format!("https://{addr}")), ..tls_settings() };
    let mut c = Cluster::new(settings).await.expect("cluster");
    // The collector presents a certificate of the cluster's CA (telemetry.otlp_ca_file).
    let t = files(&c).clone();
    let identity = Identity::from_pem(
        std::fs::read(&t.server_cert).expect("coordinator.pem"),
        std::fs::read(&t.server_key).expect("coordinator.key"),
    );
    let collector = Collector::default();
    let server = tonic::transport::Server::builder()
        .tls_config(ServerTlsConfig::new().identity(identity))
        .expect("collector tls")
        .add_service(TraceServiceServer::new(collector.clone()))
        .serve_with_incoming(tokio_stream_listener(listener));
    tokio::spawn(server);
    c.start_coordinator().await.expect("coordinator");
    c.start_gateway(0).await.expect("gateway");
    c.start_worker(0).await.expect("worker");

    let alice = c.rest(0, &c.id.user_token);
    let v = alice.start("Demo.Echo", json!({"text": "exported"}), None).await.expect("start").json();
    let id = v["execution_id"].as_str().expect("id").to_owned();
    alice.until_terminal(&id, Duration::from_secs(20)).await.expect("terminal");
    eventually(Duration::from_secs(20), "spans of all three roles over https", || {
        let spans = collector.spans.lock().expect("lock").clone();
        let from = |service: &str| spans.iter().any(|s| s.service.contains(service));
        let all = from("baton-gateway") && from("baton-coordinator") && from("baton-worker");
        async move { Ok(all.then_some(())) }
    })
    .await
    .expect("spans exported over TLS");
}

/// Terminates TLS with the cluster's server certificate in front of a plaintext
/// HTTP server: an `https://` remote MCP server made of the example one.
async fn https_in_front_of(files: &TlsFiles, backend: std::net::SocketAddr) -> std::net::SocketAddr {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(&files.server_cert)
        .expect("coordinator.pem")
        .collect::<Result<Vec<_>, _>>()
        .expect("certificates");
    let key = PrivateKeyDer::from_pem_file(&files.server_key).expect("coordinator.key");
    let config =
        rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_remote_mcp_server_is_reached_over_https_with_its_ca_file() {
    let mut c = Cluster::new(tls_settings()).await.expect("cluster");
    c.start_coordinator().await.expect("coordinator");
    c.start_gateway(0).await.expect("gateway");
    let example = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let backend = example.local_addr().expect("addr");
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(baton_worker::remote::example_server::serve(example, stop.clone()));
    let front = https_in_front_of(files(&c), backend).await;
    let ca = files(&c).ca.display().to_string();
    let servers =
        format!(r#"[{{url: "https://{front}/mcp", ca_file: "{ca}", toolkit_name: Example, tools: [shout]}}]"#);
    c.start_worker_remote(0, &servers).await.expect("worker discovered the https server and registered");

    let alice = c.rest(0, &c.id.user_token);
    let started = alice.start("shout", json!({"text": "over https"}), None).await.expect("start");
    assert_eq!(started.status, 202, "{}", String::from_utf8_lossy(&started.bytes));
    let id = started.json()["execution_id"].as_str().expect("id").to_owned();
    let done = alice.until_terminal(&id, Duration::from_secs(20)).await.expect("terminal");
    assert_eq!(done["status"], "completed", "{done}");
    let result = alice.get(&format!("/tool-executions/{id}/result")).await.expect("result").json();
    assert!(result.to_string().contains("OVER HTTPS"), "{result}");
    stop.cancel();
}
