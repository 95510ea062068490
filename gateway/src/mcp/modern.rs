//! The stateless 2026-07-28 era: recognising it, validating the per-request
//! envelope (`_meta` protocol version and client capabilities, the
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers), and
//! dispatching its methods (`server/discover`, tools, and the tasks extension
//! gated on the request's own declaration). Holds no state between requests.

use super::context::{Ctx, Reply};
use super::error::RpcError;
use super::guard::{BadHeader, PROTOCOL_VERSION_HEADER, header};
use super::jsonrpc::{Message, str_param};
use super::protocol::{LEGACY_VERSIONS, MODERN_VERSION, TASKS_EXTENSION};
use super::{compat, tasks_v2, tools};
use crate::app::AppState;
use http::HeaderMap;
use serde_json::{Map, Value, json};

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// Versions a legacy client may name in `MCP-Protocol-Version`.
const OLDER_VERSIONS: [&str; 2] = ["2025-03-26", "2024-11-05"];

/// A message belongs to the stateless era when its `_meta` names a protocol
/// version, or its `MCP-Protocol-Version` header names one that is not a
/// legacy version.
pub(super) fn is_modern(headers: &HeaderMap, message: &Message) -> bool {
    if let Message::Request { params, .. } = message
        && params.get("_meta").and_then(|m| m.get(META_VERSION)).is_some()
    {
        return true;
    }
    match header(headers, PROTOCOL_VERSION_HEADER) {
        Ok(Some(v)) => !LEGACY_VERSIONS.contains(&v.as_str()) && !OLDER_VERSIONS.contains(&v.as_str()),
        _ => false,
    }
}

/// The body field `Mcp-Name` must mirror for `method`, if any.
fn name_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// Validates a request's envelope and returns its declared client capabilities.
pub(super) fn envelope(
    headers: &HeaderMap,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Map<String, Value>, RpcError> {
    let bad_meta = |what: &str| RpcError::invalid_params(what.to_owned()).with_status(http::StatusCode::BAD_REQUEST);
    let meta = params.get("_meta").and_then(Value::as_object).ok_or_else(|| bad_meta("`params._meta` is required"))?;
    let version = meta
        .get(META_VERSION)
        .and_then(Value::as_str)
        .ok_or_else(|| bad_meta("`_meta` must name io.modelcontextprotocol/protocolVersion"))?;
    let capabilities = meta
        .get(META_CAPABILITIES)
        .and_then(Value::as_object)
        .ok_or_else(|| bad_meta("`_meta` must carry io.modelcontextprotocol/clientCapabilities"))?;
    let mismatch = |what: &str| RpcError::header_mismatch(what.to_owned());
    match header(headers, PROTOCOL_VERSION_HEADER) {
        Ok(Some(h)) if h == version => {}
        Ok(Some(_)) => return Err(mismatch("mcp-protocol-version header does not match _meta protocolVersion")),
        Ok(None) => return Err(mismatch("the mcp-protocol-version header is required")),
        Err(BadHeader) => return Err(mismatch("the mcp-protocol-version header is not valid text")),
    }
    if version != MODERN_VERSION {
        return Err(RpcError::unsupported_version(version));
    }
    match header(headers, "mcp-method") {
        Ok(Some(h)) if h == method => {}
        Ok(Some(_)) => return Err(mismatch("mcp-method header does not match the request method")),
        Ok(None) => return Err(mismatch("the mcp-method header is required")),
        Err(BadHeader) => return Err(mismatch("the mcp-method header is not valid text")),
    }
    if let Some(field) = name_field(method)
        && let Some(expected) = str_param(params, field)
    {
        match header(headers, "mcp-name") {
            Ok(Some(h)) if h == expected => {}
            Ok(Some(_)) => {
                return Err(mismatch(&format!("mcp-name header does not match the request body's '{field}'")));
            }
            Ok(None) => return Err(mismatch("the mcp-name header is required")),
            Err(BadHeader) => return Err(mismatch("the mcp-name header is not valid text")),
        }
    }
    Ok(capabilities.clone())
}

/// Methods this era serves; anything else is HTTP 404 / -32601.
pub(super) fn serves(method: &str, native_tasks: bool) -> bool {
    match method {
        "server/discover" | "tools/list" | "tools/call" => true,
        "tasks/get" | "tasks/update" | "tasks/cancel" => native_tasks,
        _ => false,
    }
}

pub(super) fn discover(native_tasks: bool) -> Value {
    let mut capabilities = json!({"tools": {}});
    if native_tasks {
        capabilities["extensions"] = json!({TASKS_EXTENSION: {}});
    }
    json!({
        "supportedVersions": [MODERN_VERSION],
        "capabilities": capabilities,
        "ttlMs": 60_000,
        "cacheScope": "public",
    })
}

/// Whether every answer of `method` but an error comes from a coordinator
/// call made with the caller's own credential, so the gateway need not
/// authenticate it first: a `tools/call` of a Baton tool (the compatibility
/// tools answer some mistakes themselves), and the task methods.
pub(super) fn authenticated_downstream(state: &AppState, method: &str, params: &Map<String, Value>) -> bool {
    match method {
        "tasks/get" | "tasks/update" | "tasks/cancel" => true,
        "tools/call" => params
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|name| compat::Tool::parse(&state.options.compat_prefix, name).is_none()),
        _ => false,
    }
}

pub(super) async fn dispatch(ctx: &Ctx, method: &str, params: &Map<String, Value>) -> Result<Reply, RpcError> {
    if method.starts_with("tasks/") && !ctx.declares_tasks_extension() {
        return Err(RpcError::missing_tasks_capability());
    }
    match method {
        "server/discover" => Ok(Reply::Json(discover(ctx.native_enabled()))),
        "tools/list" => tools::list(ctx).await.map(Reply::Json),
        "tools/call" => tools::call(ctx, params).await,
        "tasks/get" => tasks_v2::get(ctx, params).await.map(Reply::Json),
        "tasks/update" => tasks_v2::update(ctx, params).await.map(Reply::Json),
        "tasks/cancel" => tasks_v2::cancel(ctx, params).await.map(Reply::Json),
        _ => Err(RpcError::method_not_found(method)),
    }
}
