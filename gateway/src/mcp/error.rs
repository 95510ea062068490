//! JSON-RPC errors of the MCP surface: one error type, the one table that turns
//! a coordinator `WireError` into a JSON-RPC error, and the HTTP status each era
//! gives an error. Owns no transport logic beyond choosing that status.

use super::protocol::{Era, MODERN_VERSION, TASKS_EXTENSION};
use crate::coordinator::MissingBearer;
use crate::waits::{self, TooManyWaits};
use baton_proto::error::{ErrorCode, WireError};
use http::StatusCode;
use serde_json::{Map, Value, json};

pub(super) const PARSE_ERROR: i64 = -32700;
pub(super) const INVALID_REQUEST: i64 = -32600;
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
pub(super) const INVALID_PARAMS: i64 = -32602;
pub(super) const INTERNAL_ERROR: i64 = -32603;
pub(super) const HEADER_MISMATCH: i64 = -32020;
pub(super) const MISSING_CAPABILITY: i64 = -32021;
pub(super) const UNSUPPORTED_VERSION: i64 = -32022;
/// `tasks/cancel` (2026-07-28): the task cannot be cancelled; nothing was sent.
pub(super) const CANCEL_NOT_DELIVERED: i64 = -32023;
/// `tasks/cancel` (2026-07-28): the cancel is recorded, but whether the stop
/// reached the tool is unknown; get the task before starting new work.
pub(super) const CANCEL_DELIVERY_UNKNOWN: i64 = -32024;
/// Capacity pressure (`capacity_exceeded`, `too_many_waits`): nothing was
/// started or parked; retry after `data.retryAfterMs` (`data` also names the
/// scope). Sent with HTTP 200 and `Retry-After`, not 429: python `mcp` 1.30's
/// transport raises on any 4xx but 404 and ends the whole session, while
/// every client tried surfaces a JSON-RPC error on 200 as a call error.
pub(super) const OVER_CAPACITY: i64 = -32025;

/// A JSON-RPC error on its way to the client. Messages are client-safe: they
/// never carry tokens, payloads or internal addresses.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("json-rpc error {code}: {message}")]
pub(super) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
    /// Set when the transport fixes the HTTP status (credentials, sessions,
    /// envelope validation); otherwise the era's table decides.
    pub(crate) status: Option<StatusCode>,
    pub(crate) retry_after_ms: Option<u64>,
}

impl RpcError {
    pub(super) fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None, status: None, retry_after_ms: None }
    }

    pub(super) fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub(super) fn with_status(mut self, status: StatusCode) -> Self {
        self.status = Some(status);
        self
    }

    pub(super) fn parse_error() -> Self {
        RpcError::new(PARSE_ERROR, "parse error: the body is not valid JSON").with_status(StatusCode::BAD_REQUEST)
    }

    pub(super) fn invalid_request(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_REQUEST, message).with_status(StatusCode::BAD_REQUEST)
    }

    pub(super) fn method_not_found(method: &str) -> Self {
        RpcError::new(METHOD_NOT_FOUND, format!("method not found: {method}"))
    }

    pub(super) fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub(super) fn internal() -> Self {
        RpcError::new(INTERNAL_ERROR, "internal error")
    }

    pub(super) fn header_mismatch(message: impl Into<String>) -> Self {
        RpcError::new(HEADER_MISMATCH, message).with_status(StatusCode::BAD_REQUEST)
    }

    /// -32021 naming the tasks extension, as the 2026-07-28 schema shapes it.
    pub(super) fn missing_tasks_capability() -> Self {
        RpcError::missing_capabilities(json!({"extensions": {TASKS_EXTENSION: {}}}))
    }

    /// -32021: `required` is a ClientCapabilities object of what the request lacked.
    pub(super) fn missing_capabilities(required: Value) -> Self {
        RpcError::new(MISSING_CAPABILITY, "missing required client capability")
            .with_data(json!({"requiredCapabilities": required}))
            .with_status(StatusCode::BAD_REQUEST)
    }

    pub(super) fn unsupported_version(requested: &str) -> Self {
        RpcError::new(UNSUPPORTED_VERSION, "unsupported protocol version")
            .with_data(json!({"supported": [MODERN_VERSION], "requested": requested}))
            .with_status(StatusCode::BAD_REQUEST)
    }

    /// The one answer for unknown, foreign and expired task ids: identical bytes
    /// whichever it was.
    pub(super) fn task_not_found() -> Self {
        RpcError::invalid_params("task not found")
    }

    pub(super) fn unauthenticated() -> Self {
        RpcError::new(INVALID_REQUEST, "missing or invalid bearer token").with_status(StatusCode::UNAUTHORIZED)
    }

    pub(super) fn forbidden(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_REQUEST, message).with_status(StatusCode::FORBIDDEN)
    }

    pub(super) fn session_not_found() -> Self {
        RpcError::new(INVALID_REQUEST, "session not found").with_status(StatusCode::NOT_FOUND)
    }

    /// The gateway is shutting down while `execution_id` goes on: a stream
    /// waiting for it ends now. `resumable` when the same request may simply
    /// be sent again (to any replica) to wait on.
    pub(super) fn shutting_down(execution_id: &str, resumable: bool) -> Self {
        let mut data = json!({"code": ErrorCode::Unavailable.as_str(), "shutdown": true, "executionId": execution_id});
        let retry = resumable.then_some(0);
        if let Some(ms) = retry {
            data["retryAfterMs"] = ms.into();
        }
        let message = format!("this gateway is shutting down; execution {execution_id} goes on");
        RpcError { code: INTERNAL_ERROR, message, data: Some(data), status: None, retry_after_ms: retry }
    }

    /// The HTTP status that carries this error in `era`.
    pub(super) fn http_status(&self, era: Era) -> StatusCode {
        if let Some(status) = self.status {
            return status;
        }
        match (era, self.code) {
            (_, PARSE_ERROR | INVALID_REQUEST) => StatusCode::BAD_REQUEST,
            (Era::Modern, HEADER_MISMATCH | MISSING_CAPABILITY | UNSUPPORTED_VERSION) => StatusCode::BAD_REQUEST,
            (Era::Modern, METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        }
    }

    /// The error object (`{code, message, data?}`) as it appears inside a
    /// response or a failed task.
    pub(super) fn object(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }

    /// The full JSON-RPC error response; `id` is null when the request could
    /// not be read far enough to know it.
    pub(super) fn response(&self, id: Option<&Value>) -> Value {
        json!({"jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null), "error": self.object()})
    }
}

/// The single mapping from coordinator errors to JSON-RPC errors. `data.code`
/// keeps Baton's stable machine-readable code; saturation names its scope and
/// how long to wait.
impl From<WireError> for RpcError {
    fn from(e: WireError) -> Self {
        let (code, status, message) = match e.code {
            ErrorCode::InvalidRequest
            | ErrorCode::InvalidInput
            | ErrorCode::UnknownTool
            | ErrorCode::IdempotencyConflict
            | ErrorCode::ResultUnavailable
            | ErrorCode::PayloadTooLarge
            | ErrorCode::PolicyRefused => (INVALID_PARAMS, None, e.message.clone()),
            ErrorCode::NotFound => (INVALID_PARAMS, None, "not found".to_owned()),
            ErrorCode::Unauthenticated => (INVALID_REQUEST, Some(StatusCode::UNAUTHORIZED), e.message.clone()),
            ErrorCode::PermissionDenied => (INVALID_REQUEST, Some(StatusCode::FORBIDDEN), e.message.clone()),
            ErrorCode::CapacityExceeded => (OVER_CAPACITY, None, e.message.clone()),
            // The typed client already made a version refusal `unavailable`.
            ErrorCode::Unavailable | ErrorCode::VersionUnsupported => (INTERNAL_ERROR, None, e.message.clone()),
            ErrorCode::Internal => (INTERNAL_ERROR, None, "internal error".to_owned()),
        };
        let mut data = Map::new();
        data.insert("code".into(), e.code.as_str().into());
        if let Some(scope) = &e.scope {
            data.insert("scope".into(), scope.clone().into());
        }
        let retry = e.retry_after_ms.filter(|_| matches!(e.code, ErrorCode::CapacityExceeded | ErrorCode::Unavailable));
        if let Some(ms) = retry {
            data.insert("retryAfterMs".into(), ms.into());
        }
        RpcError { code, message, data: Some(Value::Object(data)), status, retry_after_ms: retry }
    }
}

/// Over a wait bound: -32025 with `Retry-After`, shaped like the
/// coordinator's `capacity_exceeded` (`data.code`, `scope`, `retryAfterMs`).
impl From<TooManyWaits> for RpcError {
    fn from(e: TooManyWaits) -> Self {
        let ms = waits::RETRY_AFTER_MS;
        RpcError {
            code: OVER_CAPACITY,
            message: e.to_string(),
            data: Some(json!({"code": TooManyWaits::CODE, "scope": e.scope(), "retryAfterMs": ms})),
            status: None,
            retry_after_ms: Some(ms),
        }
    }
}

/// A request without credentials: 401 before any coordinator call.
impl From<MissingBearer> for RpcError {
    fn from(_: MissingBearer) -> Self {
        RpcError::unauthenticated()
    }
}

/// Like `From<WireError>`, but for a request naming a task: every not-found
/// becomes the uniform task-not-found answer.
pub(super) fn task_error(e: WireError) -> RpcError {
    if e.code == ErrorCode::NotFound {
        return RpcError::task_not_found();
    }
    RpcError::from(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_names_scope_and_retry() {
        let mut wire = WireError::new(ErrorCode::CapacityExceeded, "too many executions for this principal");
        wire.scope = Some("principal".into());
        wire.retry_after_ms = Some(2500);
        let e = RpcError::from(wire);
        let data = e.data.clone().expect("data");
        assert_eq!(data["code"], "capacity_exceeded");
        assert_eq!(data["scope"], "principal");
        assert_eq!(data["retryAfterMs"], 2500);
        assert_eq!(e.retry_after_ms, Some(2500));
        assert_eq!(e.code, OVER_CAPACITY);
        assert_eq!(e.http_status(Era::Legacy), StatusCode::OK);
        assert_eq!(e.http_status(Era::Modern), StatusCode::OK);
    }

    #[test]
    fn too_many_waits_is_over_capacity_with_retry() {
        let e = RpcError::from(TooManyWaits::Principal);
        assert_eq!(e.code, OVER_CAPACITY);
        assert_eq!(e.http_status(Era::Legacy), StatusCode::OK);
        assert_eq!(e.http_status(Era::Modern), StatusCode::OK);
        let data = e.data.clone().expect("data");
        assert_eq!(data["code"], "too_many_waits");
        assert_eq!(data["scope"], "principal");
        assert_eq!(e.retry_after_ms, Some(waits::RETRY_AFTER_MS));
    }

    #[test]
    fn internal_errors_hide_their_message() {
        let e = RpcError::from(WireError::new(ErrorCode::Internal, "db at 10.0.0.3 refused"));
        assert_eq!(e.code, INTERNAL_ERROR);
        assert!(!e.message.contains("10.0.0.3"));
    }

    #[test]
    fn not_found_is_uniform_for_tasks() {
        let a = task_error(WireError::new(ErrorCode::NotFound, "execution te_x owned by bob"));
        assert_eq!(a, RpcError::task_not_found());
    }

    #[test]
    fn era_decides_the_status() {
        let e = RpcError::method_not_found("x");
        assert_eq!(e.http_status(Era::Modern), StatusCode::NOT_FOUND);
        assert_eq!(e.http_status(Era::Legacy), StatusCode::OK);
    }
}
