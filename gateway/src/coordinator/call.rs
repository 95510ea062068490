//! The foreground call in one coordinator call (`CallExecution`): the start
//! is answered first, then the execution once it settles. A caller that stops
//! reading (the gateway is shutting down, say) still holds the started
//! execution and can hand it over.

use super::{Bearer, Coordinator, NewExecution, Scope, WAIT_GRACE, start_request};
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::{ErrorCode, WireError};
use std::time::Duration;
use tonic::{Code, Streaming};

/// A started call whose settlement is still to be read.
pub(crate) struct Calling {
    pub(crate) started: pb::ExecutionView,
    rest: Streaming<pb::StartExecutionResponse>,
}

/// The execution as the wait left it, with its tool result once completed.
pub(crate) struct CallSettled {
    pub(crate) view: pb::ExecutionView,
    pub(crate) result_json: Option<String>,
}

fn missing() -> WireError {
    WireError::new(ErrorCode::Unavailable, "the coordinator ended the call early")
}

impl Coordinator {
    /// Starts `new` and waits up to `wait` for it to end (or, with
    /// `stop_on_input`, to ask for input). `None` from a coordinator that
    /// predates the call (during a rolling upgrade): the caller then starts
    /// and waits separately.
    pub(crate) async fn call_execution(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        new: &NewExecution<'_>,
        wait: Duration,
        stop_on_input: bool,
    ) -> Result<Option<Calling>, WireError> {
        let request = pb::CallExecutionRequest {
            start: Some(start_request(scope, new)),
            wait_ms: i64::try_from(wait.as_millis()).unwrap_or(i64::MAX),
            stop_on_input,
        };
        let timeout = Some(wait.saturating_add(WAIT_GRACE));
        let called =
            self.raw_call(bearer, request, timeout, |mut c, r| async move { c.call_execution(r).await }).await?;
        let mut rest = match called {
            Ok(response) => response.into_inner(),
            Err(status) if status.code() == Code::Unimplemented => return Ok(None),
            Err(status) => return Err(super::for_callers(WireError::from_status(&status))),
        };
        let first = rest.message().await.map_err(|s| WireError::from_status(&s))?.ok_or_else(missing)?;
        let started = first.execution.ok_or_else(missing)?;
        Ok(Some(Calling { started, rest }))
    }
}

impl Calling {
    /// The execution once the coordinator's wait ended.
    pub(crate) async fn settled(mut self) -> Result<CallSettled, WireError> {
        let last = self.rest.message().await.map_err(|s| WireError::from_status(&s))?.ok_or_else(missing)?;
        // Read to the end (the trailers): a stream dropped unfinished is reset,
        // and a server seeing many resets ends the whole connection.
        let _ = self.rest.message().await;
        Ok(CallSettled { view: last.execution.ok_or_else(missing)?, result_json: last.result_json })
    }
}
