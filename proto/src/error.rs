//! The one table of error codes: each stable, machine-readable code maps to a
//! gRPC code (coordinator side) and an HTTP status (gateway side). The code and
//! any retry hint travel in gRPC metadata so the gateway can rebuild the error.

use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

const CODE_KEY: &str = "baton-error-code";
const RETRY_AFTER_KEY: &str = "baton-retry-after-ms";
const SCOPE_KEY: &str = "baton-scope";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidRequest,
    InvalidInput,
    Unauthenticated,
    PermissionDenied,
    NotFound,
    UnknownTool,
    IdempotencyConflict,
    ResultUnavailable,
    PayloadTooLarge,
    CapacityExceeded,
    PolicyRefused,
    Unavailable,
    /// The coordinator refuses the calling gateway's or worker's version
    /// (`crate::version`). Between processes only: a gateway answers its own
    /// callers `unavailable`.
    VersionUnsupported,
    Internal,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::InvalidRequest,
        ErrorCode::InvalidInput,
        ErrorCode::Unauthenticated,
        ErrorCode::PermissionDenied,
        ErrorCode::NotFound,
        ErrorCode::UnknownTool,
        ErrorCode::IdempotencyConflict,
        ErrorCode::ResultUnavailable,
        ErrorCode::PayloadTooLarge,
        ErrorCode::CapacityExceeded,
        ErrorCode::PolicyRefused,
        ErrorCode::Unavailable,
        ErrorCode::VersionUnsupported,
        ErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::NotFound => "not_found",
            ErrorCode::UnknownTool => "unknown_tool",
            ErrorCode::IdempotencyConflict => "idempotency_conflict",
            ErrorCode::ResultUnavailable => "result_unavailable",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::CapacityExceeded => "capacity_exceeded",
            ErrorCode::PolicyRefused => "policy_refused",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::VersionUnsupported => "version_unsupported",
            ErrorCode::Internal => "internal",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    pub fn grpc(self) -> Code {
        match self {
            ErrorCode::InvalidRequest | ErrorCode::InvalidInput => Code::InvalidArgument,
            ErrorCode::Unauthenticated => Code::Unauthenticated,
            ErrorCode::PermissionDenied | ErrorCode::PolicyRefused => Code::PermissionDenied,
            ErrorCode::NotFound | ErrorCode::UnknownTool => Code::NotFound,
            ErrorCode::IdempotencyConflict => Code::AlreadyExists,
            ErrorCode::ResultUnavailable | ErrorCode::VersionUnsupported => Code::FailedPrecondition,
            ErrorCode::PayloadTooLarge => Code::OutOfRange,
            ErrorCode::CapacityExceeded => Code::ResourceExhausted,
            ErrorCode::Unavailable => Code::Unavailable,
            ErrorCode::Internal => Code::Internal,
        }
    }

    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidRequest | ErrorCode::InvalidInput => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::PermissionDenied | ErrorCode::PolicyRefused => 403,
            ErrorCode::NotFound | ErrorCode::UnknownTool => 404,
            ErrorCode::IdempotencyConflict | ErrorCode::ResultUnavailable => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::CapacityExceeded => 429,
            ErrorCode::Unavailable | ErrorCode::VersionUnsupported => 503,
            ErrorCode::Internal => 500,
        }
    }

    /// The code a bare gRPC status implies when no Baton code is attached
    /// (transport failures, deadlines), or one this release does not know (a
    /// newer coordinator's).
    fn from_grpc(code: Code) -> Self {
        match code {
            Code::InvalidArgument => ErrorCode::InvalidRequest,
            Code::Unauthenticated => ErrorCode::Unauthenticated,
            Code::PermissionDenied => ErrorCode::PermissionDenied,
            Code::NotFound => ErrorCode::NotFound,
            Code::ResourceExhausted => ErrorCode::CapacityExceeded,
            // Our coordinator never answers `Unknown` itself: tonic reports a
            // connection that broke mid-call (a coordinator killed, a reset
            // stream) that way. Retrying elsewhere is the right answer: 503.
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => ErrorCode::Unavailable,
            // The coordinator cannot serve this caller as things stand (a
            // newer coordinator's refusal this release cannot name): retrying
            // later, or elsewhere, is the caller's way out; it is no server fault.
            Code::FailedPrecondition => ErrorCode::Unavailable,
            _ => ErrorCode::Internal,
        }
    }
}

/// An error as it crosses the wire: code, client-safe message, retry hints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    pub code: ErrorCode,
    pub message: String,
    pub retry_after_ms: Option<u64>,
    /// The saturated admission scope, for `capacity_exceeded`.
    pub scope: Option<String>,
}

impl WireError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        WireError { code, message: message.into(), retry_after_ms: None, scope: None }
    }

    pub fn into_status(self) -> Status {
        let mut status = Status::new(self.code.grpc(), self.message);
        let md = status.metadata_mut();
        md.insert(CODE_KEY, MetadataValue::from_static(self.code.as_str()));
        if let Some(ms) = self.retry_after_ms {
            md.insert(RETRY_AFTER_KEY, MetadataValue::from(ms));
        }
        if let Some(scope) = self.scope.and_then(|s| MetadataValue::try_from(s.as_str()).ok()) {
            md.insert(SCOPE_KEY, scope);
        }
        status
    }

    pub fn from_status(status: &Status) -> Self {
        let md = status.metadata();
        let text = |k: &str| md.get(k).and_then(|v| v.to_str().ok()).map(str::to_owned);
        match text(CODE_KEY).as_deref().and_then(ErrorCode::parse) {
            Some(code) => WireError {
                code,
                message: status.message().to_owned(),
                retry_after_ms: text(RETRY_AFTER_KEY).and_then(|v| v.parse().ok()),
                scope: text(SCOPE_KEY),
            },
            // Not from the coordinator's own mapping (transport or tonic itself):
            // never pass its message on, it may describe internals.
            None => {
                let code = match ErrorCode::from_grpc(status.code()) {
                    // A stream the coordinator reset while it shut down (h2
                    // reads NO_ERROR and INTERNAL_ERROR resets as `Internal`)
                    // carries the transport's error as its source; tonic's
                    // own faults, such as a message it cannot decode, carry
                    // none. The first is a coordinator going away: 503.
                    ErrorCode::Internal if std::error::Error::source(status).is_some() => ErrorCode::Unavailable,
                    code => code,
                };
                let message = match code {
                    ErrorCode::Unavailable => "the coordinator is unavailable",
                    _ => "internal error",
                };
                WireError { code, message: message.into(), retry_after_ms: Some(1000), scope: None }
            }
        }
    }
}

/// An error and its sources on one line. tonic's transport errors say only
/// "transport error" at the top; the cause (a bad certificate, a refused
/// connection) is in the chain.
pub fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_survive_the_wire() {
        for code in ErrorCode::ALL {
            let mut e = WireError::new(code, "m");
            e.retry_after_ms = Some(1500);
            e.scope = Some("principal".into());
            assert_eq!(WireError::from_status(&e.clone().into_status()), e);
        }
    }

    #[test]
    fn a_code_from_a_newer_coordinator_falls_back_to_its_grpc_code() {
        let mut status = Status::failed_precondition("refused for a reason from the future");
        status.metadata_mut().insert(CODE_KEY, MetadataValue::from_static("reason_from_the_future"));
        let e = WireError::from_status(&status);
        assert_eq!(e.code, ErrorCode::Unavailable, "never internal");
        assert!(!e.message.contains("future"), "an unknown code's text is not passed on");
        let e = WireError::from_status(&Status::permission_denied("x"));
        assert_eq!(e.code, ErrorCode::PermissionDenied);
    }

    #[test]
    fn a_stream_reset_by_a_stopping_coordinator_is_unavailable_not_internal() {
        let mut reset = Status::internal("h2 protocol error: stream no longer needed");
        reset.set_source(std::sync::Arc::new(std::io::Error::other("stream reset")));
        assert_eq!(WireError::from_status(&reset).code, ErrorCode::Unavailable);
        // tonic's own fault (nothing from the transport beneath it) stays one.
        let undecodable = Status::internal("failed to decode Protobuf message");
        assert_eq!(WireError::from_status(&undecodable).code, ErrorCode::Internal);
    }

    #[test]
    fn foreign_statuses_hide_their_message() {
        let e = WireError::from_status(&Status::unavailable("tcp connect error 10.0.0.1"));
        assert_eq!(e.code, ErrorCode::Unavailable);
        assert!(!e.message.contains("10.0.0.1"));
    }
}
