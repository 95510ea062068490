//! Who is calling and how: resolves the bearer (or the configured anonymous
//! token) with the coordinator into a `Caller` (bearer, scope, principal),
//! and holds the per-request dialect facts. Coordinator calls go through the
//! typed client (`crate::coordinator`) with the caller's bearer and scope.
//! Decides nothing about MCP shapes.

use super::error::RpcError;
use super::protocol::{Era, TASKS_EXTENSION, TASKS_LEGACY_VERSION};
use crate::app::AppState;
use crate::coordinator::{Bearer, Coordinator, Scope};
use crate::known_callers::Known;
use crate::waits::WaitPermit;
use base64::Engine;
use futures_util::stream::BoxStream;
use http::HeaderMap;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// An authenticated caller of one gateway; cheap to clone into streams.
#[derive(Clone)]
pub(super) struct Caller {
    pub(crate) state: AppState,
    pub(crate) bearer: Bearer,
    /// The credential's org and project, and the gateway of the URL.
    pub(crate) scope: Scope,
    /// Hash naming the principal, stored in legacy sessions.
    pub(crate) principal: String,
}

/// The bearer of an MCP request: `Authorization: Bearer …`, or the anonymous
/// token when one is configured and no credential was sent.
pub(super) fn bearer(state: &AppState, headers: &HeaderMap) -> Result<Bearer, RpcError> {
    if headers.get(http::header::AUTHORIZATION).is_none()
        && let Some(token) = &state.options.anonymous_mcp_token
    {
        return Ok(Bearer(token.clone()));
    }
    Ok(Bearer::from_headers(headers)?)
}

/// The 401 for a request refused before authentication, when its credential
/// is missing or invalid; `None` when it is good (or could not be checked),
/// and the refusal stands. Asks the coordinator only on that error path.
pub(super) async fn credential_refusal(state: &AppState, headers: &HeaderMap) -> Option<RpcError> {
    match bearer(state, headers) {
        Err(missing) => Some(missing),
        Ok(bearer) => {
            let refused = state.coordinator.credential_refused(&bearer).await?;
            state.known_callers.forget(&bearer.0);
            Some(refused.into())
        }
    }
}

impl Caller {
    pub(super) async fn authenticate(
        state: &AppState,
        headers: &HeaderMap,
        gateway_id: &str,
    ) -> Result<Caller, RpcError> {
        Self::authenticate_in_session(state, headers, gateway_id, None).await
    }

    /// As `authenticate`; with a legacy session id, an ended session (on any
    /// replica) reads as an unknown one.
    pub(super) async fn authenticate_in_session(
        state: &AppState,
        headers: &HeaderMap,
        gateway_id: &str,
        session_id: Option<&str>,
    ) -> Result<Caller, RpcError> {
        let bearer = bearer(state, headers)?;
        let who = state.coordinator.who_am_i_shared(&bearer, session_id).await?;
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
        for part in [who.kind().name(), &who.org_id, &who.project_id, &who.user_id] {
            hash.update(part.as_bytes());
            hash.update([0u8]);
        }
        let principal = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash.finalize());
        let known = Known { org_id: who.org_id, project_id: who.project_id, gateway_id: who.gateway_id, principal };
        state.known_callers.keep(&bearer.0, known.clone());
        Ok(Self::of(state, bearer, known, gateway_id))
    }

    /// The caller of a request the coordinator will authenticate anyway, from
    /// what its credential was said to be before, without asking again
    /// (`known_callers`); `None` when it was not seen, or is bound to another
    /// gateway (the full path says why).
    pub(super) fn known(state: &AppState, headers: &HeaderMap, gateway_id: &str) -> Option<Caller> {
        let bearer = bearer(state, headers).ok()?;
        let known = state.known_callers.get(&bearer.0)?;
        if !known.gateway_id.is_empty() && known.gateway_id != gateway_id {
            return None;
        }
        Some(Self::of(state, bearer, known, gateway_id))
    }

    fn of(state: &AppState, bearer: Bearer, known: Known, gateway_id: &str) -> Caller {
        let scope =
            Scope { org_id: known.org_id, project_id: known.project_id, gateway_id: Some(gateway_id.to_owned()) };
        Caller { state: state.clone(), bearer, scope, principal: known.principal }
    }

    /// The client every coordinator call of this caller goes through, with
    /// `self.bearer` and `self.scope`.
    pub(super) fn coordinator(&self) -> &Coordinator {
        &self.state.coordinator
    }

    /// A place for one parked wait of this caller (-32025 over a bound).
    pub(super) fn admit_wait(&self) -> Result<WaitPermit, RpcError> {
        Ok(self.state.admit_wait(&self.bearer)?)
    }

    /// The gateway of the URL this caller came through.
    pub(super) fn gateway_id(&self) -> &str {
        self.scope.gateway_id.as_deref().unwrap_or_default()
    }
}

/// Everything a method handler needs about the request it serves.
#[derive(Clone)]
pub(super) struct Ctx {
    pub(crate) caller: Caller,
    pub(crate) era: Era,
    /// The JSON-RPC id of the request served.
    pub(crate) request_id: Value,
    /// 2026-07-28: the request's declared client capabilities.
    pub(crate) client_capabilities: Map<String, Value>,
    /// Legacy: the negotiated version and what the session remembers.
    pub(crate) legacy_version: String,
    pub(crate) elicitation: bool,
}

impl Ctx {
    pub(super) fn native_enabled(&self) -> bool {
        self.caller.state.options.native_mcp_tasks
    }

    pub(super) fn compat_enabled(&self) -> bool {
        self.caller.state.options.mcp_tasks_compatibility
    }

    /// 2026-07-28: this request declared the client capability `name`.
    pub(super) fn declares(&self, name: &str) -> bool {
        self.client_capabilities.get(name).is_some_and(Value::is_object)
    }

    /// 2026-07-28: this request declared the tasks extension.
    pub(super) fn declares_tasks_extension(&self) -> bool {
        self.client_capabilities
            .get("extensions")
            .and_then(Value::as_object)
            .is_some_and(|e| e.get(TASKS_EXTENSION).is_some_and(Value::is_object))
    }

    /// Legacy: this session speaks the 2025-11-25 tasks utility with us.
    pub(super) fn legacy_tasks(&self) -> bool {
        self.era == Era::Legacy && self.native_enabled() && self.legacy_version == TASKS_LEGACY_VERSION
    }
}

/// A method's answer: one JSON result, or an SSE stream whose last item is the
/// response.
pub(super) enum Reply {
    Json(Value),
    Stream(BoxStream<'static, Outgoing>),
}

pub(super) enum Outgoing {
    /// A server→client request, sent as is.
    Message(Value),
    /// A server→client request, sent with the SSE event id a client that
    /// loses the stream after it resumes from (`super::resume`).
    Resumable(Value, String),
    /// An event with an id and no data: a point to resume from before
    /// anything else was sent (it primes the client's `Last-Event-ID`).
    Checkpoint(String),
    /// The result of the request that opened the stream.
    Result(Value),
    Error(RpcError),
}
