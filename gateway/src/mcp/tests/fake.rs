//! An in-memory coordinator served over real gRPC on 127.0.0.1:0: tokens
//! `alice` and `bob` are end users of gateway `gw1`, `carol` of `gw2`.
//! Executions of `echo` and `oops` complete at once (the latter with
//! `isError: true`); every other tool stays `working` until a test drives it.
//! Waits block on a change signal, so tests never sleep.

use baton_proto::coordinator::v1::coordinator_server::{Coordinator, CoordinatorServer};
use baton_proto::coordinator::v1::*;
use baton_proto::error::{ErrorCode, WireError};
use baton_proto::worker::v1::BackgroundPolicy;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

#[derive(Default)]
struct Exec {
    owner: String,
    view: ExecutionView,
    result: Option<String>,
    error_detail: Option<String>,
}

#[derive(Default)]
struct State {
    seq: u64,
    executions: BTreeMap<String, Exec>,
    provided: Vec<(String, String, String, String)>,
    next_start_error: Option<WireError>,
    /// What the next cancel of a running execution answers (default: accepted).
    next_cancel_outcome: Option<CancelOutcome>,
    ended_sessions: std::collections::BTreeSet<String>,
    /// Users whose token was revoked: every call of theirs is refused.
    revoked: std::collections::BTreeSet<&'static str>,
    who_am_i_calls: u64,
}

struct Inner {
    state: Mutex<State>,
    tools: Vec<ToolDefinition>,
    changed: watch::Sender<u64>,
    waits: watch::Sender<u64>,
}

#[derive(Clone)]
pub(crate) struct Fake(Arc<Inner>);

fn tool(name: &str, background: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        toolkit_name: "Test".into(),
        toolkit_version: "1.0.0".into(),
        description: format!("{name} test tool"),
        input_schema_json: r#"{"type":"object","properties":{"text":{"type":"string"}}}"#.into(),
        background: BackgroundPolicy::from_name(background).unwrap_or_default() as i32,
        task_time_input: false,
        required_client_capabilities: Vec::new(),
        ..Default::default()
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

pub(super) fn text_result(text: &str, is_error: bool) -> String {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error}).to_string()
}

fn token_user<T>(request: &Request<T>) -> Result<&'static str, Status> {
    let token = request.metadata().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
    match token {
        "Bearer alice" => Ok("alice"),
        "Bearer bob" => Ok("bob"),
        "Bearer carol" => Ok("carol"),
        _ => Err(WireError::new(ErrorCode::Unauthenticated, "invalid credential").into_status()),
    }
}

fn not_found() -> Status {
    WireError::new(ErrorCode::NotFound, "execution not found").into_status()
}

impl Fake {
    pub(crate) fn new() -> Fake {
        let tools = vec![
            tool("echo", "forbidden"),
            tool("slow", "optional"),
            tool("long_only", "required"),
            tool("slow_fg", "forbidden"),
            tool("oops", "optional"),
            ToolDefinition {
                required_client_capabilities: vec!["sampling".into()],
                ..tool("asks_sampling", "forbidden")
            },
            // Task-required and may ask for input: the MRTR → task composition.
            ToolDefinition { task_time_input: true, ..tool("asks_first", "required") },
        ];
        Fake(Arc::new(Inner {
            state: Mutex::new(State::default()),
            tools,
            changed: watch::channel(0).0,
            waits: watch::channel(0).0,
        }))
    }

    /// Serves the fake on an ephemeral loopback port.
    pub(crate) async fn serve(&self) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake coordinator");
        let addr = listener.local_addr().expect("fake coordinator address");
        let service = CoordinatorServer::new(self.clone());
        let handle = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming).await;
        });
        (addr, handle)
    }

    /// The user of the request's token, unless it is unknown or revoked.
    fn user_of<T>(&self, request: &Request<T>) -> Result<&'static str, Status> {
        let user = token_user(request)?;
        if self.lock().revoked.contains(user) {
            return Err(WireError::new(ErrorCode::Unauthenticated, "invalid credential").into_status());
        }
        Ok(user)
    }

    /// Revokes `user`'s token.
    pub(crate) fn revoke(&self, user: &'static str) {
        self.lock().revoked.insert(user);
    }

    /// How many `WhoAmI` calls were made.
    pub(crate) fn who_am_i_calls(&self) -> u64 {
        self.lock().who_am_i_calls
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().expect("fake state")
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut Exec)) {
        {
            let mut state = self.lock();
            let exec = state.executions.get_mut(id).expect("known execution");
            f(exec);
            exec.view.updated_at_ms = now_ms();
        }
        self.0.changed.send_modify(|v| *v += 1);
    }

    pub(crate) fn finish(&self, id: &str, result_json: &str) {
        self.update(id, |e| {
            e.view.set_status(ExecutionStatus::Completed);
            e.result = Some(result_json.to_owned());
        });
    }

    /// The tool itself failed, with `message` and no detail.
    pub(crate) fn fail(&self, id: &str, message: &str) {
        self.fail_with(id, "tool_error", message, None);
    }

    /// The execution failed for `reason`; `detail` is what the tool attached.
    pub(crate) fn fail_with(&self, id: &str, reason: &str, message: &str, detail: Option<&str>) {
        self.update(id, |e| {
            e.view.set_status(ExecutionStatus::Failed);
            e.view.write_failure_reason(FailureReason::from_name(reason).unwrap_or_default());
            e.view.error_message = message.into();
            e.error_detail = detail.map(str::to_owned);
        });
    }

    pub(crate) fn ask(&self, id: &str, key: &str, message: &str) {
        self.update(id, |e| {
            e.view.set_status(ExecutionStatus::InputRequired);
            e.view.input_requests.push(InputRequest {
                request_key: key.into(),
                message: message.into(),
                requested_schema_json: r#"{"type":"object","properties":{"name":{"type":"string"}}}"#.into(),
                state: InputRequestState::Open as i32,
            });
        });
    }

    pub(crate) fn status(&self, id: &str) -> &'static str {
        self.lock().executions.get(id).map(|e| e.view.status().name()).unwrap_or_default()
    }

    pub(crate) fn cancel_state(&self, id: &str) -> &'static str {
        self.lock().executions.get(id).map(|e| e.view.cancel_state().name()).unwrap_or_default()
    }

    pub(crate) fn surface(&self, id: &str) -> i32 {
        self.lock().executions.get(id).map(|e| e.view.surface).unwrap_or_default()
    }

    pub(crate) fn last_id(&self) -> String {
        self.lock().executions.keys().next_back().cloned().unwrap_or_default()
    }

    pub(crate) fn count(&self) -> usize {
        self.lock().executions.len()
    }

    /// `(execution, key, action, content_json)` of every input provided.
    pub(crate) fn provided(&self) -> Vec<(String, String, String, String)> {
        self.lock().provided.clone()
    }

    pub(crate) fn fail_next_start(&self, e: WireError) {
        self.lock().next_start_error = Some(e);
    }

    /// The next cancel of a running execution answers `outcome`.
    pub(crate) fn next_cancel_answers(&self, outcome: CancelOutcome) {
        self.lock().next_cancel_outcome = Some(outcome);
    }

    /// WaitExecution calls started so far.
    pub(crate) fn waits(&self) -> u64 {
        *self.0.waits.borrow()
    }

    /// Resolves once more than `seen` WaitExecution calls have started.
    pub(crate) async fn until_waits_exceed(&self, seen: u64) {
        let mut rx = self.0.waits.subscribe();
        rx.wait_for(|n| *n > seen).await.expect("fake alive");
    }

    fn owned(&self, user: &str, id: &str) -> Result<ExecutionView, Status> {
        match self.lock().executions.get(id) {
            Some(e) if e.owner == user => Ok(e.view.clone()),
            _ => Err(not_found()),
        }
    }
}

#[tonic::async_trait]
impl Coordinator for Fake {
    async fn start_execution(
        &self,
        request: Request<StartExecutionRequest>,
    ) -> Result<Response<StartExecutionResponse>, Status> {
        let user = self.user_of(&request)?;
        let r = request.into_inner();
        let mut state = self.lock();
        if let Some(e) = state.next_start_error.take() {
            return Err(e.into_status());
        }
        if !self.0.tools.iter().any(|t| t.name == r.tool_name) {
            return Err(WireError::new(ErrorCode::UnknownTool, "unknown tool").into_status());
        }
        state.seq += 1;
        let id = format!("te_{:0>27}", state.seq);
        let now = now_ms();
        let input: Value = serde_json::from_str(&r.input_json).unwrap_or(Value::Null);
        let (status, result) = match r.tool_name.as_str() {
            "echo" => {
                let text = format!("echo {}", input["text"].as_str().unwrap_or(""));
                (ExecutionStatus::Completed, Some(text_result(&text, false)))
            }
            "oops" => (ExecutionStatus::Completed, Some(text_result("the tool could not do it", true))),
            // As a real start answers: admitted, not yet claimed.
            _ => (ExecutionStatus::Pending, None),
        };
        let view = ExecutionView {
            execution_id: id.clone(),
            status: status as i32,
            org_id: r.org_id,
            project_id: r.project_id,
            gateway_id: r.gateway_id,
            tool_name: r.tool_name,
            user_id: user.into(),
            surface: r.surface,
            execution_type: ExecutionType::Immediate as i32,
            created_at_ms: now,
            updated_at_ms: now,
            execution_deadline_ms: now + 86_400_000,
            retention_expires_at_ms: now + 8 * 86_400_000,
            poll_interval_ms: 500,
            cancel_state: CancelState::None as i32,
            ..Default::default()
        };
        state.executions.insert(id, Exec { owner: user.into(), view: view.clone(), result, error_detail: None });
        Ok(Response::new(StartExecutionResponse { execution: Some(view), replayed: false, result_json: None }))
    }

    type CallExecutionStream = futures_util::stream::Empty<Result<StartExecutionResponse, Status>>;

    /// As a coordinator from before `CallExecution`: the gateway starts and
    /// waits separately (so these tests hold that path).
    async fn call_execution(
        &self,
        _: Request<baton_proto::coordinator::v1::CallExecutionRequest>,
    ) -> Result<Response<Self::CallExecutionStream>, Status> {
        Err(Status::unimplemented("CallExecution"))
    }

    async fn get_execution(&self, request: Request<GetExecutionRequest>) -> Result<Response<ExecutionView>, Status> {
        let user = self.user_of(&request)?;
        self.owned(user, &request.get_ref().execution_id).map(Response::new)
    }

    async fn wait_execution(&self, request: Request<WaitExecutionRequest>) -> Result<Response<ExecutionView>, Status> {
        let user = self.user_of(&request)?;
        let r = request.into_inner();
        let mut rx = self.0.changed.subscribe();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(r.wait_ms.max(0) as u64);
        self.0.waits.send_modify(|n| *n += 1);
        loop {
            let view = self.owned(user, &r.execution_id)?;
            if view.status != r.known_status {
                return Ok(Response::new(view));
            }
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return Ok(Response::new(view)) },
                _ = tokio::time::sleep_until(deadline) => return Ok(Response::new(view)),
            }
        }
    }

    async fn list_executions(
        &self,
        request: Request<ListExecutionsRequest>,
    ) -> Result<Response<ListExecutionsResponse>, Status> {
        let user = self.user_of(&request)?;
        let r = request.into_inner();
        let start: usize = match r.cursor.as_str() {
            "" => 0,
            c => c.parse().map_err(|_| WireError::new(ErrorCode::InvalidRequest, "invalid cursor").into_status())?,
        };
        // Pages of at most two, so pagination shows with a handful of executions.
        let limit = (r.limit as usize).clamp(1, 2);
        let mine: Vec<ExecutionView> = self
            .lock()
            .executions
            .values()
            .rev()
            .filter(|e| e.owner == user && (r.gateway_id.is_empty() || e.view.gateway_id == r.gateway_id))
            .map(|e| e.view.clone())
            .collect();
        let page: Vec<_> = mine.iter().skip(start).take(limit).cloned().collect();
        let next = if start + limit < mine.len() { (start + limit).to_string() } else { String::new() };
        Ok(Response::new(ListExecutionsResponse { executions: page, next_cursor: next }))
    }

    async fn get_result(&self, request: Request<GetResultRequest>) -> Result<Response<GetResultResponse>, Status> {
        let user = self.user_of(&request)?;
        let view = self.owned(user, &request.get_ref().execution_id)?;
        let (result, detail) = match self.lock().executions.get(&view.execution_id) {
            Some(e) => (e.result.clone(), e.error_detail.clone()),
            None => (None, None),
        };
        let result_json = if view.status() == ExecutionStatus::Completed { result } else { None };
        let error_detail_json = if view.read_failure_reason() == FailureReason::ToolError { detail } else { None };
        Ok(Response::new(GetResultResponse { execution: Some(view), result_json, error_detail_json }))
    }

    async fn provide_input(
        &self,
        request: Request<ProvideInputRequest>,
    ) -> Result<Response<ProvideInputResponse>, Status> {
        let user = self.user_of(&request)?;
        let r = request.into_inner();
        self.owned(user, &r.execution_id)?;
        let response = r.response.unwrap_or_default();
        self.lock().provided.push((
            r.execution_id.clone(),
            r.request_key.clone(),
            response.action().name().to_owned(),
            response.content_json,
        ));
        self.update(&r.execution_id, |e| {
            for req in e.view.input_requests.iter_mut().filter(|q| q.request_key == r.request_key) {
                req.set_state(InputRequestState::Answered);
            }
            let open = e.view.input_requests.iter().any(|q| q.state() == InputRequestState::Open);
            if !open && e.view.status() == ExecutionStatus::InputRequired {
                e.view.set_status(ExecutionStatus::Working);
            }
        });
        Ok(Response::new(ProvideInputResponse { acknowledged: true }))
    }

    async fn cancel_execution(
        &self,
        request: Request<CancelExecutionRequest>,
    ) -> Result<Response<CancelExecutionResponse>, Status> {
        let user = self.user_of(&request)?;
        let id = request.into_inner().execution_id;
        let view = self.owned(user, &id)?;
        if view.status().is_terminal() {
            return Ok(Response::new(CancelExecutionResponse {
                outcome: CancelOutcome::AlreadyTerminal as i32,
                execution: Some(view),
            }));
        }
        let outcome = if view.cancel_state() == CancelState::Requested {
            CancelOutcome::StopAlreadyRequested
        } else {
            self.lock().next_cancel_outcome.take().unwrap_or(CancelOutcome::Accepted)
        };
        // The tool stops cooperatively: the request is recorded, the status stays.
        self.update(&id, |e| e.view.set_cancel_state(CancelState::Requested));
        let view = self.owned(user, &id)?;
        Ok(Response::new(CancelExecutionResponse { outcome: outcome as i32, execution: Some(view) }))
    }

    async fn list_tools(&self, request: Request<ListToolsRequest>) -> Result<Response<ListToolsResponse>, Status> {
        self.user_of(&request)?;
        Ok(Response::new(ListToolsResponse { tools: self.0.tools.clone() }))
    }

    async fn who_am_i(&self, request: Request<WhoAmIRequest>) -> Result<Response<WhoAmIResponse>, Status> {
        self.lock().who_am_i_calls += 1;
        let user = self.user_of(&request)?;
        let gateway = if user == "carol" { "gw2" } else { "gw1" };
        let session = &request.get_ref().mcp_session_id;
        let ended = self.0.state.lock().map(|s| s.ended_sessions.contains(session)).unwrap_or(false);
        let mut who = WhoAmIResponse {
            mcp_session_ended: ended,
            kind: PrincipalKind::EndUser as i32,
            org_id: "org1".into(),
            project_id: "proj1".into(),
            gateway_id: gateway.into(),
            user_id: user.into(),
            ..Default::default()
        };
        who.write_role(Role::Member);
        Ok(Response::new(who))
    }

    async fn end_mcp_session(
        &self,
        request: Request<EndMcpSessionRequest>,
    ) -> Result<Response<EndMcpSessionResponse>, Status> {
        self.user_of(&request)?;
        if let Ok(mut s) = self.0.state.lock() {
            s.ended_sessions.insert(request.into_inner().mcp_session_id);
        }
        Ok(Response::new(EndMcpSessionResponse {}))
    }

    /// Watches are not part of the MCP surface.
    async fn use_watch_token(
        &self,
        _request: Request<UseWatchTokenRequest>,
    ) -> Result<Response<UseWatchTokenResponse>, Status> {
        Err(Status::unimplemented("watches are not faked"))
    }

    /// The dashboard is not part of the MCP surface.
    async fn open_dashboard_session(
        &self,
        _request: Request<OpenDashboardSessionRequest>,
    ) -> Result<Response<OpenDashboardSessionResponse>, Status> {
        Err(Status::unimplemented("dashboard sessions are not faked"))
    }

    /// Watches are not part of the MCP surface.
    async fn list_execution_changes(
        &self,
        _request: Request<ListExecutionChangesRequest>,
    ) -> Result<Response<ListExecutionChangesResponse>, Status> {
        Err(Status::unimplemented("watches are not faked"))
    }

    /// Any session ends (the dashboard's router tests sign out).
    async fn end_dashboard_session(
        &self,
        request: Request<EndDashboardSessionRequest>,
    ) -> Result<Response<EndDashboardSessionResponse>, Status> {
        // A person's session (`bdp_…`) ends at the provider too.
        let person = request.metadata().get("authorization").is_some_and(|v| v.as_bytes().starts_with(b"Bearer bdp_"));
        let provider_logout_url =
            if person { "http://idp.test/session/end?client_id=baton".into() } else { String::new() };
        Ok(Response::new(EndDashboardSessionResponse { provider_logout_url }))
    }

    /// The dashboard's sign-in with a provider, scripted by the project and the code.
    async fn begin_person_sign_in(
        &self,
        request: Request<BeginPersonSignInRequest>,
    ) -> Result<Response<BeginPersonSignInResponse>, Status> {
        if request.get_ref().project_id == "down" {
            return Err(WireError::new(ErrorCode::Unavailable, "the identity provider is unavailable").into_status());
        }
        // Asked to let the person choose another account, the provider authenticates again.
        let prompt = if request.get_ref().another_account { "&prompt=login" } else { "" };
        Ok(Response::new(BeginPersonSignInResponse {
            authorize_url: format!("http://idp.test/auth?state=st-1{prompt}"),
            state: "st-1".into(),
            nonce: "n-1".into(),
            pkce_verifier: "v-1".into(),
        }))
    }

    /// `good` signs Ann in as an admin; `used` is a replayed code, `nobody`
    /// a person without a grant, `forged` a token that fails validation.
    async fn complete_person_sign_in(
        &self,
        request: Request<CompletePersonSignInRequest>,
    ) -> Result<Response<CompletePersonSignInResponse>, Status> {
        let r = request.get_ref();
        if (r.nonce.as_str(), r.pkce_verifier.as_str()) != ("n-1", "v-1") {
            return Err(WireError::new(ErrorCode::Unauthenticated, "nonce or verifier lost").into_status());
        }
        let refused = |code, message: &str| Err(WireError::new(code, message).into_status());
        match r.code.as_str() {
            "good" => {
                let mut signed_in = CompletePersonSignInResponse {
                    session_token: "bdp_fake".into(),
                    idle_ms: 60_000,
                    expires_at_ms: now_ms() + 60_000,
                    email: "ann@x.org".into(),
                    ..Default::default()
                };
                signed_in.write_role(Role::Admin);
                Ok(Response::new(signed_in))
            }
            "used" => refused(ErrorCode::InvalidRequest, "the identity provider refused the code: invalid_grant"),
            "nobody" => refused(ErrorCode::PermissionDenied, "no_role: the person holds no role in this project"),
            _ => refused(ErrorCode::Unauthenticated, "the ID token is not valid: expired"),
        }
    }
}
