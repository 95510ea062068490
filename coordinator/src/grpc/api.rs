//! `baton.coordinator.v1.Coordinator`: the gateway's one door into the engine.

use super::convert::{self, view};
use super::status::to_status;
use super::{authorization, span, traced};
use crate::engine::call::Watched;
use crate::engine::lifecycle::StartRequest;
use crate::engine::messages::OwnerAnswer;
use crate::engine::{Engine, Scope};
use baton_proto::coordinator::v1::{self as pb, coordinator_server::Coordinator};
use futures_util::{Stream, StreamExt};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tonic::{Request, Response, Status};

pub(crate) struct Api {
    pub(crate) engine: Arc<Engine>,
}

type Reply<T> = Result<Response<T>, Status>;

impl Api {
    /// The wire view, with the open input requests when the execution waits for input.
    pub(super) async fn view(&self, record: &crate::store::ExecutionRecord) -> Result<pb::ExecutionView, Status> {
        view_with_requests(&self.engine, record).await
    }
}

/// The wire view, with the open input requests when the execution waits for input.
async fn view_with_requests(
    engine: &Engine,
    record: &crate::store::ExecutionRecord,
) -> Result<pb::ExecutionView, Status> {
    let mut v = view(record);
    if record.status() == crate::domain::Status::InputRequired {
        v.input_requests = engine
            .open_requests(&record.id)
            .await
            .map_err(to_status)?
            .into_iter()
            .map(|r| pb::InputRequest {
                request_key: r.request_key,
                message: r.message,
                requested_schema_json: r.requested_schema_json,
                state: pb::InputRequestState::Open as i32,
            })
            .collect();
    }
    Ok(v)
}

fn start_request(r: pb::StartExecutionRequest) -> StartRequest {
    let surface = convert::surface(r.surface());
    StartRequest {
        org_id: r.org_id,
        project_id: r.project_id,
        gateway_id: r.gateway_id,
        tool_name: r.tool_name,
        input_json: r.input_json,
        user_id: r.user_id,
        run_at_ms: r.run_at_ms,
        ttl_ms: r.ttl_ms,
        idempotency_key: (!r.idempotency_key.is_empty()).then_some(r.idempotency_key),
        request_fingerprint: r.request_fingerprint,
        surface,
    }
}

/// The second message of `CallExecution`: the wait after the start, then the
/// execution as it stands.
async fn settled_message(
    engine: Arc<Engine>,
    authorization: Option<String>,
    watched: Watched,
    wait: Duration,
    stop_on_input: bool,
) -> Result<pb::StartExecutionResponse, Status> {
    let (org_id, project_id) = (watched.org_id().to_owned(), watched.project_id().to_owned());
    let until = tokio::time::Instant::now() + wait;
    let settled = engine
        .settle_wait(authorization.as_deref(), scope(&org_id, &project_id), watched, until, stop_on_input)
        .await
        .map_err(to_status)?;
    Ok(pb::StartExecutionResponse {
        execution: Some(view_with_requests(&engine, &settled.record).await?),
        replayed: false,
        result_json: settled.result_json,
    })
}

/// The longest wait a `CallExecution` holds (a gateway's foreground budget is
/// far shorter; this bounds a caller that asks for more).
const MAX_CALL_WAIT: Duration = Duration::from_secs(300);

type CallStream = Pin<Box<dyn Stream<Item = Result<pb::StartExecutionResponse, Status>> + Send + 'static>>;

fn scope<'a>(org_id: &'a str, project_id: &'a str) -> Scope<'a> {
    Scope { org_id, project_id }
}

#[tonic::async_trait]
impl Coordinator for Api {
    async fn start_execution(&self, req: Request<pb::StartExecutionRequest>) -> Reply<pb::StartExecutionResponse> {
        let span = span("StartExecution", &req);
        traced(span, async move {
            let authorization = authorization(&req).map(str::to_owned);
            let start = start_request(req.into_inner());
            let created = self.engine.start(authorization.as_deref(), start).await.map_err(to_status)?;
            Ok(Response::new(pb::StartExecutionResponse {
                execution: Some(view(&created.record)),
                replayed: created.replayed,
                result_json: None,
            }))
        })
        .await
    }

    type CallExecutionStream = CallStream;

    /// The start is answered (or refused) before the stream begins; the wait
    /// runs as the stream is read, so a caller that drops it ends the wait.
    async fn call_execution(&self, req: Request<pb::CallExecutionRequest>) -> Reply<CallStream> {
        let span = span("CallExecution", &req);
        traced(span, async move {
            let authorization = authorization(&req).map(str::to_owned);
            let r = req.into_inner();
            let Some(start) = r.start else {
                return Err(Status::invalid_argument("`start` is required"));
            };
            let wait = Duration::from_millis(u64::try_from(r.wait_ms).unwrap_or(0)).min(MAX_CALL_WAIT);
            let (created, watched) =
                self.engine.start_watched(authorization.as_deref(), start_request(start)).await.map_err(to_status)?;
            let first = pb::StartExecutionResponse {
                execution: Some(view(&created.record)),
                replayed: created.replayed,
                result_json: None,
            };
            let rest = settled_message(self.engine.clone(), authorization, watched, wait, r.stop_on_input);
            let stream = futures_util::stream::once(async move { Ok(first) }).chain(futures_util::stream::once(rest));
            Ok(Response::new(Box::pin(stream) as CallStream))
        })
        .await
    }

    async fn get_execution(&self, req: Request<pb::GetExecutionRequest>) -> Reply<pb::ExecutionView> {
        let (_, record) = self
            .engine
            .read_owned(
                authorization(&req),
                Scope { org_id: &req.get_ref().org_id, project_id: &req.get_ref().project_id },
                &req.get_ref().execution_id,
            )
            .await
            .map_err(to_status)?;
        Ok(Response::new(self.view(&record).await?))
    }

    async fn wait_execution(&self, req: Request<pb::WaitExecutionRequest>) -> Reply<pb::ExecutionView> {
        let r = req.get_ref();
        let wait_ms = u64::try_from(r.wait_ms).unwrap_or(0).min(45_000);
        let known = convert::known_status(r.known_status());
        let record = self
            .engine
            .wait(authorization(&req), scope(&r.org_id, &r.project_id), &r.execution_id, wait_ms, known)
            .await
            .map_err(to_status)?;
        Ok(Response::new(self.view(&record).await?))
    }

    async fn list_executions(&self, req: Request<pb::ListExecutionsRequest>) -> Reply<pb::ListExecutionsResponse> {
        let r = req.get_ref();
        let gateway = (!r.gateway_id.is_empty()).then(|| r.gateway_id.clone());
        let limit = if r.limit == 0 { 50 } else { r.limit };
        let (rows, next) = self
            .engine
            .list(authorization(&req), scope(&r.org_id, &r.project_id), gateway, limit, &r.cursor)
            .await
            .map_err(to_status)?;
        let mut executions = Vec::with_capacity(rows.len());
        for r in &rows {
            executions.push(self.view(r).await?);
        }
        Ok(Response::new(pb::ListExecutionsResponse { executions, next_cursor: next.unwrap_or_default() }))
    }

    async fn get_result(&self, req: Request<pb::GetResultRequest>) -> Reply<pb::GetResultResponse> {
        let r = req.get_ref();
        let read = self
            .engine
            .result(authorization(&req), scope(&r.org_id, &r.project_id), &r.execution_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::GetResultResponse {
            execution: Some(self.view(&read.record).await?),
            result_json: read.result,
            error_detail_json: read.error_detail,
        }))
    }

    async fn provide_input(&self, req: Request<pb::ProvideInputRequest>) -> Reply<pb::ProvideInputResponse> {
        let r = req.get_ref();
        // An unspecified action has the empty name, which the engine refuses.
        let answer = r
            .response
            .as_ref()
            .map(|a| OwnerAnswer { action: a.action().name().to_owned(), content_json: a.content_json.clone() });
        let acknowledged = self
            .engine
            .provide_input(
                authorization(&req),
                scope(&r.org_id, &r.project_id),
                &r.execution_id,
                &r.request_key,
                answer,
            )
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ProvideInputResponse { acknowledged }))
    }

    async fn cancel_execution(&self, req: Request<pb::CancelExecutionRequest>) -> Reply<pb::CancelExecutionResponse> {
        let span = span("CancelExecution", &req);
        traced(span, async move {
            let r = req.get_ref();
            let (outcome, record) = self
                .engine
                .cancel(authorization(&req), scope(&r.org_id, &r.project_id), &r.execution_id)
                .await
                .map_err(to_status)?;
            Ok(Response::new(pb::CancelExecutionResponse {
                outcome: convert::cancel_outcome(outcome) as i32,
                execution: Some(view(&record)),
            }))
        })
        .await
    }

    async fn list_tools(&self, req: Request<pb::ListToolsRequest>) -> Reply<pb::ListToolsResponse> {
        let r = req.get_ref();
        let tools = self.engine.tools(authorization(&req), scope(&r.org_id, &r.project_id)).await.map_err(to_status)?;
        Ok(Response::new(pb::ListToolsResponse { tools: tools.iter().map(convert::tool).collect() }))
    }

    async fn who_am_i(&self, req: Request<pb::WhoAmIRequest>) -> Reply<pb::WhoAmIResponse> {
        use crate::authz::Principal;
        let p = self.engine.authenticate(authorization(&req)).await.map_err(to_status)?;
        let session = req.into_inner().mcp_session_id;
        let ended = self.engine.mcp_session_ended(&session).await.map_err(to_status)?;
        let mut out = pb::WhoAmIResponse {
            kind: convert::principal_kind(&p) as i32,
            org_id: p.org_id().to_owned(),
            project_id: p.project_id().to_owned(),
            mcp_session_ended: ended,
            ..Default::default()
        };
        match p {
            Principal::EndUser { gateway_id, user_id, .. } => {
                out.gateway_id = gateway_id;
                out.user_id = user_id;
            }
            Principal::ApiKey { role, permissions, .. } => {
                out.write_role(convert::role(role));
                out.permissions = permissions;
            }
            Principal::Worker { .. } => {}
        }
        Ok(Response::new(out))
    }

    async fn end_mcp_session(&self, req: Request<pb::EndMcpSessionRequest>) -> Reply<pb::EndMcpSessionResponse> {
        let session = &req.get_ref().mcp_session_id;
        self.engine.end_mcp_session(authorization(&req), session).await.map_err(to_status)?;
        Ok(Response::new(pb::EndMcpSessionResponse {}))
    }

    async fn open_dashboard_session(
        &self,
        req: Request<pb::OpenDashboardSessionRequest>,
    ) -> Reply<pb::OpenDashboardSessionResponse> {
        let opened = self.engine.open_dashboard_session(authorization(&req)).await.map_err(to_status)?;
        Ok(Response::new(pb::OpenDashboardSessionResponse {
            session_token: opened.token,
            idle_ms: opened.idle_ms,
            expires_at_ms: opened.expires_at_ms,
        }))
    }

    async fn end_dashboard_session(
        &self,
        req: Request<pb::EndDashboardSessionRequest>,
    ) -> Reply<pb::EndDashboardSessionResponse> {
        let logout = self.engine.end_dashboard_session(authorization(&req)).await.map_err(to_status)?;
        Ok(Response::new(pb::EndDashboardSessionResponse { provider_logout_url: logout.unwrap_or_default() }))
    }

    async fn begin_person_sign_in(
        &self,
        req: Request<pb::BeginPersonSignInRequest>,
    ) -> Reply<pb::BeginPersonSignInResponse> {
        let r = req.get_ref();
        let begun =
            self.engine.begin_person_sign_in(&r.org_id, &r.project_id, r.another_account).await.map_err(to_status)?;
        Ok(Response::new(pb::BeginPersonSignInResponse {
            authorize_url: begun.authorize_url,
            state: begun.state,
            nonce: begun.nonce,
            pkce_verifier: begun.pkce_verifier,
        }))
    }

    async fn complete_person_sign_in(
        &self,
        req: Request<pb::CompletePersonSignInRequest>,
    ) -> Reply<pb::CompletePersonSignInResponse> {
        let r = req.get_ref();
        let opened = self
            .engine
            .complete_person_sign_in(&r.org_id, &r.project_id, &r.code, &r.pkce_verifier, &r.nonce)
            .await
            .map_err(to_status)?;
        let mut out = pb::CompletePersonSignInResponse {
            session_token: opened.token,
            idle_ms: opened.idle_ms,
            expires_at_ms: opened.expires_at_ms,
            email: opened.email,
            ..Default::default()
        };
        out.write_role(convert::person_role(opened.role));
        Ok(Response::new(out))
    }

    async fn list_execution_changes(
        &self,
        req: Request<pb::ListExecutionChangesRequest>,
    ) -> Reply<pb::ListExecutionChangesResponse> {
        let r = req.get_ref();
        let scope = scope(&r.org_id, &r.project_id);
        let missed =
            self.engine.changes_after(authorization(&req), scope, &r.execution_id, r.after).await.map_err(to_status)?;
        let changes = missed
            .changes
            .iter()
            .map(|e| {
                let status = e.status.map_or(pb::ExecutionStatus::Unspecified, convert::status) as i32;
                let mut change = pb::ExecutionChange { seq: e.seq, at_ms: e.at, status, ..Default::default() };
                change.write_event(e.kind.map_or(pb::TimelineEvent::Unspecified, convert::timeline_event));
                change
            })
            .collect();
        Ok(Response::new(pb::ListExecutionChangesResponse { changes, gone: missed.gone }))
    }

    async fn use_watch_token(&self, req: Request<pb::UseWatchTokenRequest>) -> Reply<pb::UseWatchTokenResponse> {
        let r = req.get_ref();
        let first_use =
            self.engine.use_watch_token(authorization(&req), &r.token_id, r.expires_at_ms).await.map_err(to_status)?;
        Ok(Response::new(pb::UseWatchTokenResponse { first_use }))
    }
}
