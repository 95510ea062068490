//! The typed coordinator client: every coordinator call the gateway makes,
//! REST and MCP alike, is one method here taking the caller's `Bearer`, the
//! `Scope` it acts in and typed arguments. The bearer is forwarded verbatim,
//! trace context injected, and nothing else in the gateway builds a request.

use crate::hub::Hub;
use crate::json::canonical;
use crate::shared_calls::SharedCalls;
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::{ErrorCode, WireError};
use baton_proto::worker::v1::InputAction;
use http::{HeaderMap, header};
use pb::coordinator_client::CoordinatorClient;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Response, Status};

pub(crate) mod admin;
mod call;
pub(crate) use call::Calling;
pub(crate) mod history;
mod operator;
mod waiting;
pub(crate) use waiting::{StatusSet, Until};
mod webhooks;

/// The caller's credential, forwarded verbatim; never logged.
#[derive(Clone)]
pub(crate) struct Bearer(pub String);

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(<redacted>)")
    }
}

/// A request without a usable `Authorization: Bearer …` header.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("missing or malformed bearer token")]
pub(crate) struct MissingBearer;

impl Bearer {
    /// The token of `Authorization: Bearer …` (scheme case-insensitive,
    /// surrounding spaces trimmed).
    pub(crate) fn from_headers(headers: &HeaderMap) -> Result<Bearer, MissingBearer> {
        let value = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
        match value.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
                Ok(Bearer(token.trim().to_owned()))
            }
            _ => Err(MissingBearer),
        }
    }
}

/// Where a call acts; the coordinator decides whether the bearer may.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Scope {
    pub(crate) org_id: String,
    pub(crate) project_id: String,
    /// The gateway a start goes through and the only one a listing shows;
    /// `None` lists every gateway's executions. Reads by id ignore it.
    pub(crate) gateway_id: Option<String>,
}

impl Scope {
    fn gateway(&self) -> String {
        self.gateway_id.clone().unwrap_or_default()
    }
}

/// What a start asks for, besides its scope.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewExecution<'a> {
    pub(crate) tool_name: &'a str,
    pub(crate) input: &'a Value,
    /// On whose behalf a project API key starts it.
    pub(crate) user_id: Option<&'a str>,
    pub(crate) run_at_ms: Option<i64>,
    pub(crate) ttl_ms: Option<i64>,
    pub(crate) idempotency_key: Option<&'a str>,
    pub(crate) surface: pb::Surface,
}

impl<'a> NewExecution<'a> {
    /// Runs `tool_name` on `input` as soon as possible, with no `user_id`
    /// (an end-user token acts for its own user) and no idempotency key.
    pub(crate) fn new(tool_name: &'a str, input: &'a Value, surface: pb::Surface) -> Self {
        NewExecution { tool_name, input, user_id: None, run_at_ms: None, ttl_ms: None, idempotency_key: None, surface }
    }
}

/// The request fingerprint, what an `Idempotency-Key` promises: canonical
/// JSON of the semantic request (gateway, tool, input, user, run-at, ttl; not
/// the key nor the surface). One form for every surface; executions already
/// stored carry it, so it must not change.
pub(crate) fn fingerprint(gateway_id: &str, new: &NewExecution<'_>) -> String {
    canonical(&serde_json::json!({
        "gateway_id": gateway_id,
        "tool_name": new.tool_name,
        "input": new.input,
        "user_id": new.user_id,
        "run_at_ms": new.run_at_ms,
        "ttl_ms": new.ttl_ms,
    }))
    .to_string()
}

/// An owner's answer to one input request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InputAnswer<'a> {
    pub(crate) request_key: &'a str,
    pub(crate) action: InputAction,
    pub(crate) content: &'a Value,
}

/// The gateway could not set up its coordinator connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("invalid coordinator url: {0}")]
    Url(#[from] tonic::transport::Error),
    #[error("coordinator tls: {0}")]
    Tls(String),
}

#[derive(Clone, Debug)]
pub(crate) struct Coordinator {
    client: CoordinatorClient<Channel>,
    channel: Channel,
    /// Every parked wait of this process, on one stream (`crate::hub`).
    hub: Hub,
    /// `WhoAmI` calls shared by requests arriving while one is in flight.
    callers: Arc<SharedCalls<pb::WhoAmIResponse>>,
}

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);
/// A long poll may take this much longer than its wait before it times out.
pub(crate) const WAIT_GRACE: Duration = Duration::from_secs(5);
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
    pub(crate) fn connect_lazy(url: &str, tls: Option<ClientTlsConfig>) -> Result<Self, ConnectError> {
        let endpoint = Endpoint::from_shared(url.to_owned())?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        let endpoint = if endpoint.uri().scheme_str() == Some("https") {
            let config = tls.unwrap_or_else(|| ClientTlsConfig::new().with_enabled_roots());
            endpoint.tls_config(config).map_err(|e| ConnectError::Tls(baton_proto::error::with_sources(&e)))?
        } else {
            endpoint
        };
        let channel = endpoint.connect_lazy();
        Ok(Coordinator {
            client: CoordinatorClient::new(channel.clone()),
            hub: Hub::new(channel.clone()),
            callers: Arc::default(),
            channel,
        })
    }

    /// Ready when the coordinator answers its gRPC health check.
    pub(crate) async fn ready(&self) -> bool {
        let mut health = tonic_health::pb::health_client::HealthClient::new(self.channel.clone());
        let mut req = Request::new(tonic_health::pb::HealthCheckRequest { service: String::new() });
        req.set_timeout(Duration::from_secs(2));
        matches!(
            health.check(req).await,
            Ok(r) if r.get_ref().status == tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        )
    }

    /// Resolves the bearer; with a legacy MCP session id, also says whether
    /// that session was ended.
    pub(crate) async fn who_am_i(
        &self,
        bearer: &Bearer,
        mcp_session_id: Option<&str>,
    ) -> Result<pb::WhoAmIResponse, WireError> {
        let request = pb::WhoAmIRequest { mcp_session_id: mcp_session_id.unwrap_or_default().to_owned() };
        self.call(bearer, request, None, |mut c, r| async move { c.who_am_i(r).await }).await
    }

    /// As [`Coordinator::who_am_i`], shared with the requests of the same
    /// bearer and session that arrive while a call is in flight: they share
    /// the next call, one that began after they arrived (`shared_calls`).
    pub(crate) async fn who_am_i_shared(
        &self,
        bearer: &Bearer,
        mcp_session_id: Option<&str>,
    ) -> Result<pb::WhoAmIResponse, WireError> {
        let parts = [bearer.0.as_str(), mcp_session_id.unwrap_or_default()];
        self.callers.call(&parts, || self.who_am_i(bearer, mcp_session_id)).await
    }

    /// The coordinator's refusal of `bearer` (401), if it refuses it; `None`
    /// when it knows the credential or could not be asked. Only error paths
    /// ask: every other call authenticates as it goes.
    pub(crate) async fn credential_refused(&self, bearer: &Bearer) -> Option<WireError> {
        match self.who_am_i(bearer, None).await {
            Err(e) if e.code == ErrorCode::Unauthenticated => Some(e),
            Err(e) => {
                tracing::debug!(code = e.code.as_str(), "credential check on an error path failed");
                None
            }
            Ok(_) => None,
        }
    }

    /// Ends a legacy MCP session for every replica.
    pub(crate) async fn end_mcp_session(&self, bearer: &Bearer, mcp_session_id: &str) -> Result<(), WireError> {
        let request = pb::EndMcpSessionRequest { mcp_session_id: mcp_session_id.to_owned() };
        self.call(bearer, request, None, |mut c, r| async move { c.end_mcp_session(r).await }).await?;
        Ok(())
    }

    /// Trades a project API key for a dashboard session token.
    pub(crate) async fn open_dashboard_session(
        &self,
        key: &Bearer,
    ) -> Result<pb::OpenDashboardSessionResponse, WireError> {
        let request = pb::OpenDashboardSessionRequest {};
        self.call(key, request, None, |mut c, r| async move { c.open_dashboard_session(r).await }).await
    }

    /// Ends the dashboard session `session` (its token) for every replica;
    /// for a person's, where to end it at the OpenID provider too, if anywhere.
    pub(crate) async fn end_dashboard_session(&self, session: &Bearer) -> Result<Option<String>, WireError> {
        let request = pb::EndDashboardSessionRequest {};
        let ended =
            self.call(session, request, None, |mut c, r| async move { c.end_dashboard_session(r).await }).await?;
        Ok(Some(ended.provider_logout_url).filter(|u| !u.is_empty()))
    }

    /// Starts a person's sign-in with the OpenID provider (no credential: anyone may).
    pub(crate) async fn begin_person_sign_in(
        &self,
        org_id: &str,
        project_id: &str,
        another_account: bool,
    ) -> Result<pb::BeginPersonSignInResponse, WireError> {
        let request = pb::BeginPersonSignInRequest {
            org_id: org_id.to_owned(),
            project_id: project_id.to_owned(),
            another_account,
        };
        let anonymous = Bearer("anonymous".into());
        self.call(&anonymous, request, None, |mut c, r| async move { c.begin_person_sign_in(r).await }).await
    }

    /// Completes it: the coordinator exchanges the code and validates the ID token.
    pub(crate) async fn complete_person_sign_in(
        &self,
        request: pb::CompletePersonSignInRequest,
    ) -> Result<pb::CompletePersonSignInResponse, WireError> {
        let anonymous = Bearer("anonymous".into());
        self.call(&anonymous, request, None, |mut c, r| async move { c.complete_person_sign_in(r).await }).await
    }

    /// The changes of the caller's execution after cursor `after`, oldest first.
    pub(crate) async fn changes_after(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
        after: i64,
    ) -> Result<pb::ListExecutionChangesResponse, WireError> {
        let request = pb::ListExecutionChangesRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            execution_id: id.to_owned(),
            after,
        };
        self.call(bearer, request, None, |mut c, r| async move { c.list_execution_changes(r).await }).await
    }

    /// Uses a single-use watch token for every replica: `true` on its first
    /// use by `bearer`, `false` when it was used before.
    pub(crate) async fn use_watch_token(
        &self,
        bearer: &Bearer,
        token_id: &str,
        expires_at_ms: i64,
    ) -> Result<bool, WireError> {
        let request = pb::UseWatchTokenRequest { token_id: token_id.to_owned(), expires_at_ms };
        let answer = self.call(bearer, request, None, |mut c, r| async move { c.use_watch_token(r).await }).await?;
        Ok(answer.first_use)
    }

    /// The tools of the scope's project.
    pub(crate) async fn tools(&self, bearer: &Bearer, scope: &Scope) -> Result<Vec<pb::ToolDefinition>, WireError> {
        let request = pb::ListToolsRequest { org_id: scope.org_id.clone(), project_id: scope.project_id.clone() };
        let answer = self.call(bearer, request, None, |mut c, r| async move { c.list_tools(r).await }).await?;
        Ok(answer.tools)
    }

    /// Starts an execution through the scope's gateway, fingerprinted by
    /// [`fingerprint`].
    pub(crate) async fn start(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        new: &NewExecution<'_>,
    ) -> Result<pb::ExecutionView, WireError> {
        let request = start_request(scope, new);
        let started = self.call(bearer, request, None, |mut c, r| async move { c.start_execution(r).await }).await?;
        started.execution.ok_or_else(|| WireError::new(ErrorCode::Internal, "internal error"))
    }

    pub(crate) async fn execution(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
    ) -> Result<pb::ExecutionView, WireError> {
        self.execution_within(bearer, scope, id, DEFAULT_TIMEOUT).await
    }

    /// As [`Coordinator::execution`], given up after `timeout` (a gateway
    /// that is shutting down answers promptly or not at all).
    pub(crate) async fn execution_within(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
        timeout: Duration,
    ) -> Result<pb::ExecutionView, WireError> {
        let request = pb::GetExecutionRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            execution_id: id.to_owned(),
        };
        self.call(bearer, request, Some(timeout), |mut c, r| async move { c.get_execution(r).await }).await
    }

    /// The execution and, once it completed, its tool result.
    pub(crate) async fn result(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
    ) -> Result<pb::GetResultResponse, WireError> {
        let request = pb::GetResultRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            execution_id: id.to_owned(),
        };
        self.call(bearer, request, None, |mut c, r| async move { c.get_result(r).await }).await
    }

    /// One page of the scope's executions (of its gateway only, when it names one).
    pub(crate) async fn list(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        cursor: &str,
        limit: u32,
    ) -> Result<pb::ListExecutionsResponse, WireError> {
        let request = list_request(scope, cursor, limit, scope.gateway());
        self.call(bearer, request, None, |mut c, r| async move { c.list_executions(r).await }).await
    }

    pub(crate) async fn cancel(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
    ) -> Result<pb::CancelExecutionResponse, WireError> {
        let request = pb::CancelExecutionRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            execution_id: id.to_owned(),
        };
        self.call(bearer, request, None, |mut c, r| async move { c.cancel_execution(r).await }).await
    }

    /// Relays an answer to an input request; true when the coordinator acknowledged it.
    pub(crate) async fn provide_input(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
        answer: &InputAnswer<'_>,
    ) -> Result<bool, WireError> {
        let request = pb::ProvideInputRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            execution_id: id.to_owned(),
            request_key: answer.request_key.to_owned(),
            response: Some(pb::InputResponse {
                action: answer.action as i32,
                content_json: answer.content.to_string(),
            }),
        };
        let ack = self.call(bearer, request, None, |mut c, r| async move { c.provide_input(r).await }).await?;
        Ok(ack.acknowledged)
    }

    /// Calls the coordinator with the caller's bearer; `timeout` replaces the
    /// default bound (long polls, reads during shutdown).
    async fn call<Req, Resp, F, Fut>(
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
        match self.raw_call(bearer, message, timeout, f).await? {
            Ok(response) => Ok(response.into_inner()),
            Err(status) => Err(for_callers(WireError::from_status(&status))),
        }
    }

    /// As `call`, with the coordinator's status as it came (the outer error
    /// is a bearer that cannot be sent).
    async fn raw_call<Req, Resp, F, Fut>(
        &self,
        bearer: &Bearer,
        message: Req,
        timeout: Option<Duration>,
        f: F,
    ) -> Result<Result<Response<Resp>, Status>, WireError>
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
        crate::version::state(request.metadata_mut());
        Ok(f(self.client.clone(), request).await)
    }
}

/// The coordinator's error as this gateway's callers get it. A refusal of
/// the gateway's own version is the operator's to fix, not the caller's: it
/// is logged (at most once a minute, it repeats on every call) with the
/// coordinator's words, and callers get `503 unavailable`.
fn for_callers(e: WireError) -> WireError {
    if e.code != ErrorCode::VersionUnsupported {
        return e;
    }
    static LOGGED: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    let mut last = LOGGED.lock().unwrap_or_else(|p| p.into_inner());
    if last.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
        *last = Some(std::time::Instant::now());
        tracing::error!("the coordinator refuses this gateway's version: {}", e.message);
    }
    WireError {
        code: ErrorCode::Unavailable,
        message: "this gateway's version is not supported by its coordinator; the operator must upgrade it".into(),
        retry_after_ms: Some(30_000),
        scope: None,
    }
}

/// The start of `new` through the scope's gateway, fingerprinted by [`fingerprint`].
fn start_request(scope: &Scope, new: &NewExecution<'_>) -> pb::StartExecutionRequest {
    let gateway_id = scope.gateway();
    pb::StartExecutionRequest {
        org_id: scope.org_id.clone(),
        project_id: scope.project_id.clone(),
        request_fingerprint: fingerprint(&gateway_id, new),
        gateway_id,
        tool_name: new.tool_name.to_owned(),
        input_json: new.input.to_string(),
        user_id: new.user_id.unwrap_or_default().to_owned(),
        run_at_ms: new.run_at_ms,
        ttl_ms: new.ttl_ms,
        idempotency_key: new.idempotency_key.unwrap_or_default().to_owned(),
        surface: new.surface as i32,
    }
}

/// One page of a project's executions, of one gateway when `gateway_id` is set.
fn list_request(scope: &Scope, cursor: &str, limit: u32, gateway_id: String) -> pb::ListExecutionsRequest {
    pb::ListExecutionsRequest {
        org_id: scope.org_id.clone(),
        project_id: scope.project_id.clone(),
        limit,
        cursor: cursor.to_owned(),
        gateway_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    fn new(input: &Value) -> NewExecution<'_> {
        NewExecution::new("T", input, pb::Surface::Rest)
    }

    #[test]
    fn fingerprint_is_the_stored_canonical_form() {
        let input = json!({"b": [{"y": 1, "x": 2}], "a": 1});
        assert_eq!(
            fingerprint("g", &new(&input)),
            r#"{"gateway_id":"g","input":{"a":1,"b":[{"x":2,"y":1}]},"run_at_ms":null,"tool_name":"T","ttl_ms":null,"user_id":null}"#
        );
    }

    #[test]
    fn fingerprint_ignores_the_key_and_the_surface() {
        let input = json!({});
        let plain = new(&input);
        let keyed = NewExecution { idempotency_key: Some("k"), surface: pb::Surface::McpNative, ..plain };
        assert_eq!(fingerprint("g", &plain), fingerprint("g", &keyed));
        let other_user = NewExecution { user_id: Some("u"), ..plain };
        assert_ne!(fingerprint("g", &plain), fingerprint("g", &other_user));
    }

    #[test]
    fn a_refused_gateway_version_is_unavailable_to_callers() {
        let refusal = WireError::new(
            ErrorCode::VersionUnsupported,
            "gateway 0.1.0 is older than this coordinator (0.3.0) supports",
        );
        let seen = for_callers(refusal);
        assert_eq!((seen.code, seen.code.http_status()), (ErrorCode::Unavailable, 503));
        assert!(!seen.message.contains("0.3.0"), "versions are the operator's business");
        let other = WireError::new(ErrorCode::NotFound, "execution not found");
        assert_eq!(for_callers(other.clone()), other);
    }

    #[test]
    fn bearer_needs_the_scheme_and_a_token() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_static(v));
            Bearer::from_headers(&h).map(|b| b.0)
        };
        assert_eq!(with("Bearer abc"), Ok("abc".to_owned()));
        assert_eq!(with("bearer  abc "), Ok("abc".to_owned()));
        assert_eq!(with("Basic abc"), Err(MissingBearer));
        assert_eq!(with("Bearer "), Err(MissingBearer));
        assert_eq!(Bearer::from_headers(&HeaderMap::new()).map(|b| b.0), Err(MissingBearer));
    }
}
