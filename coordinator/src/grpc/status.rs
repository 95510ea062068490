//! Engine errors to wire errors, in one place. Client mistakes get their own
//! codes; internal failures are logged here once and reach the client as a bare
//! `internal` or `unavailable` without detail.

use crate::engine::Error;
use crate::{authz, store};
use baton_proto::error::{ErrorCode, WireError};
use tonic::Status;

use crate::oidc;

pub(crate) fn to_status(e: Error) -> Status {
    wire(e).into_status()
}

pub(crate) fn wire(e: Error) -> WireError {
    match e {
        Error::Auth(authz::Error::Unauthenticated) => {
            WireError::new(ErrorCode::Unauthenticated, "missing, invalid or revoked credential")
        }
        Error::Auth(authz::Error::Forbidden(why)) => WireError::new(ErrorCode::PermissionDenied, why),
        Error::Auth(authz::Error::NotFound) => WireError::new(ErrorCode::NotFound, "execution not found"),
        Error::Invalid(m) => WireError::new(ErrorCode::InvalidRequest, m),
        Error::Missing(what) => WireError::new(ErrorCode::NotFound, format!("{what} not found")),
        Error::InvalidInput(m) => WireError::new(ErrorCode::InvalidInput, m),
        Error::UnknownTool(name) => WireError::new(ErrorCode::UnknownTool, format!("unknown tool {name:?}")),
        Error::PolicyRefused(m) => WireError::new(ErrorCode::PolicyRefused, m),
        Error::PayloadTooLarge { limit } => {
            WireError::new(ErrorCode::PayloadTooLarge, format!("input exceeds the limit of {limit} bytes"))
        }
        Error::Capacity(r) => WireError {
            code: ErrorCode::CapacityExceeded,
            message: format!("the {} admission bound is reached", r.scope),
            retry_after_ms: Some(r.retry_after_ms),
            scope: Some(r.scope.as_str().to_owned()),
        },
        Error::Store(store::Error::IdempotencyConflict) => WireError::new(
            ErrorCode::IdempotencyConflict,
            "this Idempotency-Key was already used for a different request",
        ),
        Error::Store(store::Error::Busy) => WireError {
            code: ErrorCode::Unavailable,
            message: "the coordinator is busy; retry shortly".into(),
            retry_after_ms: Some(1_000),
            scope: None,
        },
        Error::Store(e) if e.is_unavailable() => {
            tracing::warn!(error = %e, "database unavailable");
            unavailable("the database is unavailable")
        }
        Error::SignIn(oidc::Error::Unavailable(why)) => {
            tracing::warn!(error = %why, "identity provider unavailable");
            unavailable("the identity provider is unavailable")
        }
        Error::SignIn(oidc::Error::Refused(why)) => {
            WireError::new(ErrorCode::InvalidRequest, format!("the identity provider refused the code: {why}"))
        }
        Error::SignIn(e @ (oidc::Error::InvalidToken(_) | oidc::Error::UnknownKey | oidc::Error::NoEmail)) => {
            tracing::warn!(error = %e, "a person's sign-in was refused");
            WireError::new(ErrorCode::Unauthenticated, e.to_string())
        }
        Error::Admission(e) => {
            tracing::warn!(error = %e, "admission unavailable; failing closed");
            unavailable("admission is unavailable")
        }
        other => {
            tracing::error!(error = %other, "internal error");
            WireError::new(ErrorCode::Internal, "internal error")
        }
    }
}

fn unavailable(message: &str) -> WireError {
    WireError { code: ErrorCode::Unavailable, message: message.into(), retry_after_ms: Some(2_000), scope: None }
}
