//! HTTP errors: one JSON shape `{"error":{"code","message"}}`, the status chosen
//! by the code table in `baton_proto::error`. Saturation and unavailability carry
//! `Retry-After` in whole seconds.

use crate::coordinator::MissingBearer;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_proto::error::{ErrorCode, WireError};

#[derive(Debug)]
pub struct ApiError(pub WireError);

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError(WireError::new(code, message))
    }

    /// The one not-found answer for unknown, unauthorized and expired ids: the
    /// same bytes whichever it was.
    pub fn execution_not_found() -> Self {
        ApiError::new(ErrorCode::NotFound, "execution not found")
    }
}

impl From<WireError> for ApiError {
    fn from(e: WireError) -> Self {
        // Every not-found from the coordinator becomes the uniform body.
        if e.code == ErrorCode::NotFound {
            return ApiError::execution_not_found();
        }
        ApiError(e)
    }
}

/// 401 before any coordinator call.
impl From<MissingBearer> for ApiError {
    fn from(e: MissingBearer) -> Self {
        ApiError::new(ErrorCode::Unauthenticated, e.to_string())
    }
}

/// Seconds for `Retry-After`, rounded up, at least 1.
pub fn retry_after_secs(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let e = self.0;
        let status = StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut error = serde_json::json!({"code": e.code.as_str(), "message": e.message});
        if let Some(scope) = &e.scope {
            error["scope"] = scope.clone().into();
        }
        if let Some(ms) = e.retry_after_ms.filter(|_| matches!(status.as_u16(), 429 | 503)) {
            error["retry_after_ms"] = ms.into();
        }
        let mut response = (status, axum::Json(serde_json::json!({ "error": error }))).into_response();
        let retry = match (status.as_u16(), e.retry_after_ms) {
            (429 | 503, Some(ms)) => Some(retry_after_secs(ms)),
            (429 | 503, None) => Some(1),
            _ => None,
        };
        if let Some(secs) = retry {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// Errors produced by the framework rather than a handler (unknown route,
/// wrong method, body over the limit) get the same JSON shape as ours; headers
/// such as `Allow` are kept.
pub async fn json_framework_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (code, message) = match status.as_u16() {
        400 => ("invalid_request", "malformed request"),
        401 => ("unauthenticated", "missing or malformed bearer token"),
        403 => ("permission_denied", "forbidden"),
        404 => ("not_found", "not found"),
        405 => ("method_not_allowed", "method not allowed"),
        406 => ("not_acceptable", "not acceptable"),
        413 => ("payload_too_large", "request body too large"),
        415 => ("unsupported_media_type", "unsupported media type"),
        _ if status.is_client_error() => ("invalid_request", "invalid request"),
        _ => ("internal", "internal error"),
    };
    let (parts, _) = response.into_parts();
    let mut rebuilt =
        (status, axum::Json(serde_json::json!({"error": {"code": code, "message": message}}))).into_response();
    for name in [header::ALLOW, header::RETRY_AFTER, header::WWW_AUTHENTICATE] {
        if let Some(v) = parts.headers.get(&name) {
            rebuilt.headers_mut().insert(name, v.clone());
        }
    }
    rebuilt
}
