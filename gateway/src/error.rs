//! HTTP errors: one JSON shape `{"error":{"code","message"}}`, the status chosen
//! by the code table in `baton_proto::error` (and, for the gateway's own load
//! shedding, `too_many_waits`: 429). Saturation and unavailability carry
//! `Retry-After` in whole seconds. A refusal the gateway decided before the
//! coordinator checked the caller's credential is marked [`Unverified`], so
//! the credential is checked first on that error path (see `credentials`).

use crate::coordinator::MissingBearer;
use crate::waits::{self, TooManyWaits};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_proto::error::{ErrorCode, WireError};

#[derive(Debug)]
pub(crate) enum ApiError {
    /// Decided by the gateway (a malformed request), before any coordinator
    /// call: the caller's credential is still unchecked.
    Gateway(WireError),
    /// Answered by the coordinator, which authenticates every call first.
    Coordinator(WireError),
    /// Load the gateway sheds on its own.
    TooManyWaits(TooManyWaits),
}

/// Marks a response refusing a request whose credential nobody checked yet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unverified;

impl ApiError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError::Gateway(WireError::new(code, message))
    }

    /// The one not-found answer for unknown, unauthorized and expired ids: the
    /// same bytes whichever it was.
    pub(crate) fn execution_not_found() -> Self {
        ApiError::Coordinator(WireError::new(ErrorCode::NotFound, "execution not found"))
    }

    /// The client-safe message.
    #[cfg(test)]
    pub(crate) fn message(&self) -> String {
        match self {
            ApiError::Gateway(e) | ApiError::Coordinator(e) => e.message.clone(),
            ApiError::TooManyWaits(e) => e.to_string(),
        }
    }
}

impl From<WireError> for ApiError {
    fn from(e: WireError) -> Self {
        // Every not-found from the coordinator becomes the uniform body.
        if e.code == ErrorCode::NotFound {
            return ApiError::execution_not_found();
        }
        ApiError::Coordinator(e)
    }
}

/// 401 before any coordinator call.
impl From<MissingBearer> for ApiError {
    fn from(e: MissingBearer) -> Self {
        ApiError::Coordinator(WireError::new(ErrorCode::Unauthenticated, e.to_string()))
    }
}

impl From<TooManyWaits> for ApiError {
    fn from(e: TooManyWaits) -> Self {
        ApiError::TooManyWaits(e)
    }
}

/// Seconds for `Retry-After`, rounded up, at least 1.
pub(crate) fn retry_after_secs(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

/// Statuses of requests refused as malformed: checked for credentials first.
pub(crate) fn is_validation_status(status: StatusCode) -> bool {
    matches!(status.as_u16(), 400 | 406 | 411 | 413 | 415 | 422)
}

fn too_many_waits(e: TooManyWaits) -> Response {
    let ms = waits::RETRY_AFTER_MS;
    let body = serde_json::json!({"error": {
        "code": TooManyWaits::CODE, "message": e.to_string(), "scope": e.scope(), "retry_after_ms": ms,
    }});
    let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs(ms)));
    response
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (e, unverified) = match self {
            ApiError::TooManyWaits(e) => return too_many_waits(e),
            ApiError::Gateway(e) => (e, true),
            ApiError::Coordinator(e) => (e, false),
        };
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
        if unverified && is_validation_status(status) {
            response.extensions_mut().insert(Unverified);
        }
        response
    }
}

/// Errors produced by the framework rather than a handler (unknown route,
/// wrong method, body over the limit) get the same JSON shape as ours; headers
/// such as `Allow` are kept. Malformed requests it refused are [`Unverified`]:
/// no handler, hence no coordinator, saw their credential. Any body type: the
/// body limit's own answers come through here too. A plain function, applied
/// with `tower::util::MapResponseLayer`: axum's `map_response` boxed every
/// request's future once more, and a parked wait keeps that box.
pub(crate) fn json_framework_errors<B>(response: http::Response<B>) -> Response
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response.map(axum::body::Body::new);
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
    if is_validation_status(status) {
        rebuilt.extensions_mut().insert(Unverified);
    }
    rebuilt
}
