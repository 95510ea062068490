//! Who is calling and how: resolves the bearer (or the configured anonymous
//! token) with the coordinator, holds the per-request dialect facts, and wraps
//! the coordinator RPCs the MCP surface uses. Decides nothing about MCP shapes.

use super::error::RpcError;
use super::{Era, TASKS_EXTENSION};
use crate::rest::body::canonical;
use crate::{AppState, Bearer};
use base64::Engine;
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::{ErrorCode, WireError};
use futures_util::stream::BoxStream;
use http::HeaderMap;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// An authenticated caller of one gateway; cheap to clone into streams.
#[derive(Clone)]
pub struct Caller {
    pub state: AppState,
    bearer: Bearer,
    pub org_id: String,
    pub project_id: String,
    pub gateway_id: String,
    /// Hash naming the principal, stored in legacy sessions.
    pub principal: String,
}

/// The bearer of an MCP request: `Authorization: Bearer …`, or the anonymous
/// token when one is configured and no credential was sent.
pub fn bearer(state: &AppState, headers: &HeaderMap) -> Result<Bearer, RpcError> {
    if headers.get(http::header::AUTHORIZATION).is_none()
        && let Some(token) = &state.options.anonymous_mcp_token
    {
        return Ok(Bearer(token.clone()));
    }
    crate::rest::bearer(headers).map_err(|_| RpcError::unauthenticated())
}

impl Caller {
    pub async fn authenticate(state: &AppState, headers: &HeaderMap, gateway_id: &str) -> Result<Caller, RpcError> {
        Self::authenticate_in_session(state, headers, gateway_id, None).await
    }

    /// As `authenticate`; with a legacy session id, an ended session (on any
    /// replica) reads as an unknown one.
    pub async fn authenticate_in_session(
        state: &AppState,
        headers: &HeaderMap,
        gateway_id: &str,
        session_id: Option<&str>,
    ) -> Result<Caller, RpcError> {
        let bearer = bearer(state, headers)?;
        let request = pb::WhoAmIRequest { mcp_session_id: session_id.unwrap_or_default().to_owned() };
        let who = state.coordinator.call(&bearer, request, None, |mut c, r| async move { c.who_am_i(r).await }).await?;
        if who.mcp_session_ended {
            return Err(RpcError::session_not_found());
        }
        if who.org_id.is_empty() || who.project_id.is_empty() {
            return Err(RpcError::forbidden("this credential is not bound to a project"));
        }
        if !who.gateway_id.is_empty() && who.gateway_id != gateway_id {
            return Err(RpcError::forbidden("this credential is not valid for this gateway"));
        }
        let mut hash = Sha256::new();
        for part in [&who.kind, &who.org_id, &who.project_id, &who.user_id] {
            hash.update(part.as_bytes());
            hash.update([0u8]);
        }
        let principal = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash.finalize());
        Ok(Caller {
            state: state.clone(),
            bearer,
            org_id: who.org_id,
            project_id: who.project_id,
            gateway_id: gateway_id.to_owned(),
            principal,
        })
    }

    /// Ends a legacy session for every replica.
    pub async fn end_session(&self, session_id: &str) -> Result<(), WireError> {
        let request = pb::EndMcpSessionRequest { mcp_session_id: session_id.to_owned() };
        self.state
            .coordinator
            .call(&self.bearer, request, None, |mut c, r| async move { c.end_mcp_session(r).await })
            .await?;
        Ok(())
    }

    pub async fn tools(&self) -> Result<Vec<pb::ToolDefinition>, WireError> {
        let request = pb::ListToolsRequest { org_id: self.org_id.clone(), project_id: self.project_id.clone() };
        let answer = self
            .state
            .coordinator
            .call(&self.bearer, request, None, |mut c, r| async move { c.list_tools(r).await })
            .await?;
        Ok(answer.tools)
    }

    pub async fn start(&self, tool: &str, input: &Value, surface: pb::Surface) -> Result<pb::ExecutionView, WireError> {
        let fingerprint =
            canonical(&serde_json::json!({"gateway_id": self.gateway_id, "tool_name": tool, "input": input}));
        let request = pb::StartExecutionRequest {
            org_id: self.org_id.clone(),
            project_id: self.project_id.clone(),
            gateway_id: self.gateway_id.clone(),
            tool_name: tool.to_owned(),
            input_json: input.to_string(),
            user_id: String::new(),
            run_at_ms: None,
            ttl_ms: None,
            idempotency_key: String::new(),
            request_fingerprint: fingerprint.to_string(),
            surface: surface as i32,
        };
        let started = self
            .state
            .coordinator
            .call(&self.bearer, request, None, |mut c, r| async move { c.start_execution(r).await })
            .await?;
        started.execution.ok_or_else(|| WireError::new(ErrorCode::Internal, "internal error"))
    }

    pub async fn execution(&self, id: &str) -> Result<pb::ExecutionView, WireError> {
        let request = pb::GetExecutionRequest {
            org_id: self.org_id.clone(),
            project_id: self.project_id.clone(),
            execution_id: id.to_owned(),
        };
        self.state
            .coordinator
            .call(&self.bearer, request, None, |mut c, r| async move { c.get_execution(r).await })
            .await
    }

    /// Long-polls until the status differs from `known_status` or `wait` passes.
    pub async fn wait(&self, id: &str, wait: Duration, known_status: &str) -> Result<pb::ExecutionView, WireError> {
        let wait_ms = wait.as_millis().min(i64::MAX as u128) as i64;
        let request = pb::WaitExecutionRequest {
            org_id: self.org_id.clone(),
            project_id: self.project_id.clone(),
            execution_id: id.to_owned(),
            wait_ms,
            known_status: known_status.to_owned(),
        };
        let timeout = wait + Duration::from_secs(5);
        self.state
            .coordinator
            .call(&self.bearer, request, Some(timeout), |mut c, r| async move { c.wait_execution(r).await })
            .await
    }

    pub async fn result(&self, id: &str) -> Result<pb::GetResultResponse, WireError> {
        let request = pb::GetResultRequest {
            org_id: self.org_id.clone(),
            project_id: self.project_id.clone(),
            execution_id: id.to_owned(),
        };
        self.state.coordinator.call(&self.bearer, request, None, |mut c, r| async move { c.get_result(r).await }).await
    }

    pub async fn list(&self, cursor: &str, limit: u32) -> Result<pb::ListExecutionsResponse, WireError> {
        let request = pb::ListExecutionsRequest {
            org_id: self.org_id.clone(),
            project_id: self.project_id.clone(),
            limit,
            cursor: cursor.to_owned(),
            gateway_id: self.gateway_id.clone(),
        };
        self.state
            .coordinator
            .call(&self.bearer, request, None, |mut c, r| async move { c.list_executions(r).await })
            .await
    }

    pub async fn cancel(&self, id: &str) -> Result<pb::CancelExecutionResponse, WireError> {
        let request = pb::CancelExecutionRequest {
            org_id: self.org_id.clone(),
            project_id: self.project_id.clone(),
            execution_id: id.to_owned(),
        };
        self.state
            .coordinator
            .call(&self.bearer, request, None, |mut c, r| async move { c.cancel_execution(r).await })
            .await
    }

    pub async fn provide(&self, id: &str, key: &str, action: &str, content: &Value) -> Result<bool, WireError> {
        let request = pb::ProvideInputRequest {
            org_id: self.org_id.clone(),
            project_id: self.project_id.clone(),
            execution_id: id.to_owned(),
            request_key: key.to_owned(),
            response: Some(pb::InputResponse { action: action.to_owned(), content_json: content.to_string() }),
        };
        let ack = self
            .state
            .coordinator
            .call(&self.bearer, request, None, |mut c, r| async move { c.provide_input(r).await })
            .await?;
        Ok(ack.acknowledged)
    }
}

/// Everything a method handler needs about the request it serves.
#[derive(Clone)]
pub struct Ctx {
    pub caller: Caller,
    pub era: Era,
    /// 2026-07-28: the request's declared client capabilities.
    pub client_capabilities: Map<String, Value>,
    /// Legacy: the negotiated version and what the session remembers.
    pub legacy_version: String,
    pub elicitation: bool,
}

impl Ctx {
    pub fn native_enabled(&self) -> bool {
        self.caller.state.options.native_mcp_tasks
    }

    pub fn compat_enabled(&self) -> bool {
        self.caller.state.options.mcp_tasks_compatibility
    }

    /// 2026-07-28: this request declared the client capability `name`.
    pub fn declares(&self, name: &str) -> bool {
        self.client_capabilities.get(name).is_some_and(Value::is_object)
    }

    /// 2026-07-28: this request declared the tasks extension.
    pub fn declares_tasks_extension(&self) -> bool {
        self.client_capabilities
            .get("extensions")
            .and_then(Value::as_object)
            .is_some_and(|e| e.get(TASKS_EXTENSION).is_some_and(Value::is_object))
    }

    /// Legacy: this session speaks the 2025-11-25 tasks utility with us.
    pub fn legacy_tasks(&self) -> bool {
        self.era == Era::Legacy && self.native_enabled() && self.legacy_version == super::TASKS_LEGACY_VERSION
    }
}

/// A method's answer: one JSON result, or an SSE stream whose last item is the
/// response.
pub enum Reply {
    Json(Value),
    Stream(BoxStream<'static, Outgoing>),
}

pub enum Outgoing {
    /// A server→client request, sent as is.
    Message(Value),
    /// The result of the request that opened the stream.
    Result(Value),
    Error(RpcError),
}

/// `te_` followed by 27 base62 characters; anything else cannot name a task.
pub fn is_execution_id(id: &str) -> bool {
    id.strip_prefix("te_").is_some_and(|rest| rest.len() == 27 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}
