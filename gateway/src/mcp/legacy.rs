//! The legacy era (2025-11-25 and 2025-06-18): `initialize` negotiates a
//! version and mints a sealed session, every later message must bring that
//! session back (opened, checked against the caller and the terminated set),
//! and the methods of that era are dispatched here, including the 2025-11-25
//! tasks utility when the session negotiated it.

use super::context::{Caller, Ctx, Reply};
use super::error::RpcError;
use super::guard::{PROTOCOL_VERSION_HEADER, header};
use super::protocol::{LEGACY_VERSIONS, TASKS_LEGACY_VERSION, server_info};
use super::session::{self, Claims, Terminated};
use super::{tasks_v1, tools};
use http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};

pub(super) const SESSION_HEADER: &str = "mcp-session-id";

/// The version answered to an `initialize` asking for `requested`.
pub(super) fn negotiate(requested: Option<&str>) -> &'static str {
    LEGACY_VERSIONS.iter().copied().find(|v| Some(*v) == requested).unwrap_or(TASKS_LEGACY_VERSION)
}

/// Handles `initialize`: the result and the sealed session id to send back.
pub(super) fn initialize(caller: &Caller, params: &Map<String, Value>) -> Result<(Value, String), RpcError> {
    let version = negotiate(params.get("protocolVersion").and_then(Value::as_str));
    let caps = params.get("capabilities").and_then(Value::as_object);
    let has = |name: &str| caps.is_some_and(|c| c.get(name).is_some_and(Value::is_object));
    let claims = Claims {
        sid: session::random_sid().map_err(|_| RpcError::internal())?,
        principal: caller.principal.clone(),
        gateway_id: caller.gateway_id().to_owned(),
        version: version.to_owned(),
        elicitation: has("elicitation"),
        tasks: has("tasks"),
    };
    let token = session::seal(&caller.state.options.session_key, &claims).map_err(|_| RpcError::internal())?;
    let mut capabilities = json!({"tools": {"listChanged": false}});
    if version == TASKS_LEGACY_VERSION && caller.state.options.native_mcp_tasks {
        capabilities["tasks"] = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    }
    let result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info(),
    });
    Ok((result, token))
}

/// Checks that an opened session belongs to this caller and that any version
/// header agrees with it; a session of someone else reads as unknown.
pub(super) fn check(claims: &Claims, caller: &Caller, headers: &HeaderMap) -> Result<(), RpcError> {
    if claims.principal != caller.principal {
        return Err(RpcError::session_not_found());
    }
    if let Ok(Some(v)) = header(headers, PROTOCOL_VERSION_HEADER)
        && v != claims.version
    {
        return Err(RpcError::invalid_request(format!("unsupported protocol version {v} for this session")));
    }
    Ok(())
}

/// Opens the session a non-initialize message brings; any failure to prove it
/// is a live session of this gateway reads as an unknown session.
pub(super) fn claims(
    key: &[u8; 32],
    headers: &HeaderMap,
    gateway_id: &str,
    terminated: &Terminated,
) -> Result<Claims, RpcError> {
    let Ok(Some(token)) = header(headers, SESSION_HEADER) else {
        return Err(RpcError::invalid_request("the mcp-session-id header is required; send initialize first")
            .with_status(StatusCode::BAD_REQUEST));
    };
    let claims = session::open(key, &token).map_err(|_| RpcError::session_not_found())?;
    if claims.gateway_id != gateway_id || terminated.contains(&claims.sid) {
        return Err(RpcError::session_not_found());
    }
    Ok(claims)
}

pub(super) async fn dispatch(ctx: &Ctx, method: &str, params: &Map<String, Value>) -> Result<Reply, RpcError> {
    let tasks = ctx.legacy_tasks();
    match method {
        "ping" => Ok(Reply::Json(json!({}))),
        "initialize" => Err(RpcError::invalid_request("the session is already initialized")),
        "tools/list" => tools::list(ctx).await.map(Reply::Json),
        "tools/call" => tools::call(ctx, params).await,
        "tasks/get" if tasks => tasks_v1::get(ctx, params).await.map(Reply::Json),
        "tasks/result" if tasks => tasks_v1::result(ctx, params).await,
        "tasks/list" if tasks => tasks_v1::list(ctx, params).await.map(Reply::Json),
        "tasks/cancel" if tasks => tasks_v1::cancel(ctx, params).await.map(Reply::Json),
        _ => Err(RpcError::method_not_found(method)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_known_versions() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2025-11-25")), "2025-11-25");
        assert_eq!(negotiate(Some("2024-11-05")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }
}
