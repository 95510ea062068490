//! The typed client the gateway uses for every request: one coordinator RPC per
//! HTTP or MCP request, the caller's bearer forwarded, trace context injected.

use baton_proto::coordinator::v1::coordinator_client::CoordinatorClient;
use baton_proto::error::{ErrorCode, WireError};
use std::future::Future;
use std::time::Duration;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Response, Status};

/// The caller's credential, forwarded verbatim; never logged.
#[derive(Clone)]
pub struct Bearer(pub String);

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(<redacted>)")
    }
}

#[derive(Clone, Debug)]
pub struct Coordinator {
    client: CoordinatorClient<Channel>,
    channel: Channel,
}

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);
/// A ping goes out after this long without a frame from the coordinator, idle
/// or not, and a connection whose answer takes longer than the timeout is
/// dropped and redialled: a half-open connection fails fast instead of
/// swallowing requests until their deadlines.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);

impl Coordinator {
    /// Connects lazily: the gateway starts (and reports not-ready) while the
    /// coordinator is still coming up. An `https://` url is dialled with TLS:
    /// `tls` (CA, client identity, name to verify) or else the system roots.
    pub fn connect_lazy(url: &str, tls: Option<ClientTlsConfig>) -> Result<Self, crate::Error> {
        let endpoint = Endpoint::from_shared(url.to_owned())?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        let endpoint = if endpoint.uri().scheme_str() == Some("https") {
            let config = tls.unwrap_or_else(|| ClientTlsConfig::new().with_enabled_roots());
            endpoint
                .tls_config(config)
                .map_err(|e| crate::Error::CoordinatorTls(baton_proto::error::with_sources(&e)))?
        } else {
            endpoint
        };
        let channel = endpoint.connect_lazy();
        Ok(Coordinator { client: CoordinatorClient::new(channel.clone()), channel })
    }

    /// Calls the coordinator with the caller's bearer; `timeout` bounds long polls.
    pub async fn call<Req, Resp, F, Fut>(
        &self,
        bearer: &Bearer,
        message: Req,
        timeout: Option<Duration>,
        f: F,
    ) -> Result<Resp, WireError>
    where
        F: FnOnce(CoordinatorClient<Channel>, Request<Req>) -> Fut,
        Fut: Future<Output = Result<Response<Resp>, Status>>,
    {
        let mut request = Request::new(message);
        request.set_timeout(timeout.unwrap_or(DEFAULT_TIMEOUT));
        let value = format!("Bearer {}", bearer.0);
        match tonic::metadata::MetadataValue::try_from(value.as_str()) {
            Ok(v) => {
                request.metadata_mut().insert("authorization", v);
            }
            Err(_) => return Err(WireError::new(ErrorCode::Unauthenticated, "invalid bearer credential")),
        }
        baton_proto::trace::inject(request.metadata_mut());
        f(self.client.clone(), request).await.map(Response::into_inner).map_err(|s| WireError::from_status(&s))
    }

    /// Ready when the coordinator answers its gRPC health check.
    pub async fn ready(&self) -> bool {
        let mut health = tonic_health::pb::health_client::HealthClient::new(self.channel.clone());
        let mut req = Request::new(tonic_health::pb::HealthCheckRequest { service: String::new() });
        req.set_timeout(Duration::from_secs(2));
        matches!(
            health.check(req).await,
            Ok(r) if r.get_ref().status == tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        )
    }
}
