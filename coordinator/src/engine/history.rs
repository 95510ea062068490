//! The project's execution history (seed 002): every run of a project, for
//! callers with a role on it. Who may call what is `authz::history::TABLE`;
//! each use case authenticates, checks the table, then reads.
//!
//! List and count never carry a payload. The detail adds the timeline (the
//! event log) and the attempts with their errors, which every reader sees; the
//! input, and the outputs and free-form error details, are opened from their
//! sealed columns only when asked for, by an admin.

use super::{Engine, Error, Result, Scope};
use crate::audit::{action, outcome};
use crate::authz::{self, history::Route};
use crate::crypto::Field;
use crate::domain::{EventKind, ExecutionId, FailureReason, Millis, Status};
use crate::store::{AttemptRecord, EventRecord, ExecutionRecord, HistoryFilter, HistoryRow};
use baton_proto::clock::now_ms;

/// A page holds at most this many runs.
pub(crate) const MAX_LIMIT: u32 = 1_000;
/// Filter values (tool, toolkit, user) are at most this many characters.
const MAX_FILTER_CHARS: usize = 512;

/// What an attempt stopped by a cancel says where a failure would say why.
pub(crate) const STOPPED_BY_CANCEL: &str = "stopped because the execution was cancelled";

/// The outcome filter: success is `completed`, failure is `failed`. A
/// cancelled run is neither (the owner stopped it; nothing failed), so it
/// matches no outcome and appears only when the outcome is not filtered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunOutcome {
    Success,
    Failure,
}

impl RunOutcome {
    fn status(self) -> Status {
        match self {
            RunOutcome::Success => Status::Completed,
            RunOutcome::Failure => Status::Failed,
        }
    }
}

/// What a history read narrows to; `None` narrows nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HistoryQuery {
    pub(crate) tool_name: Option<String>,
    pub(crate) toolkit_name: Option<String>,
    pub(crate) user_id: Option<String>,
    pub(crate) outcome: Option<RunOutcome>,
    pub(crate) failure_reason: Option<FailureReason>,
    /// Runs created at or after this.
    pub(crate) start_ms: Option<Millis>,
    /// Runs created before this.
    pub(crate) end_ms: Option<Millis>,
}

/// One page, and how many runs the filter matches in all.
#[derive(Clone, Debug)]
pub(crate) struct HistoryPage {
    pub(crate) items: Vec<HistoryRow>,
    pub(crate) total: u64,
}

/// The payloads a detail read asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reveal {
    pub(crate) inputs: bool,
    pub(crate) outputs: bool,
}

/// One attempt as the history shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AttemptView {
    pub(crate) number: u32,
    pub(crate) started_at: Millis,
    pub(crate) finished_at: Option<Millis>,
    /// `None` while the attempt runs.
    pub(crate) success: Option<bool>,
    /// The attempt ended because its execution was cancelled (the tool was
    /// stopped; it did not fail).
    pub(crate) cancelled: bool,
    /// What the attempt reported when it failed (its settlement's message).
    pub(crate) error: Option<String>,
    /// The system's message when the system, not the tool, ended the attempt
    /// (deadline, lost worker).
    pub(crate) system_error: Option<String>,
    /// With `Reveal::outputs` only: the result the attempt returned.
    pub(crate) output: Option<String>,
    /// With `Reveal::outputs` only: the free-form detail the tool attached to its error.
    pub(crate) error_detail: Option<String>,
}

/// One run in full.
#[derive(Clone, Debug)]
pub(crate) struct HistoryDetail {
    pub(crate) record: ExecutionRecord,
    pub(crate) timeline: Vec<EventRecord>,
    pub(crate) attempts: Vec<AttemptView>,
    /// With `Reveal::inputs` only.
    pub(crate) input: Option<String>,
    /// With `Reveal::outputs` only: the final tool result, once completed.
    pub(crate) output: Option<String>,
}

fn check_text(name: &str, value: &Option<String>) -> Result<()> {
    match value {
        Some(v) if v.is_empty() || v.chars().count() > MAX_FILTER_CHARS || v.chars().any(char::is_control) => Err(
            Error::Invalid(format!("`{name}` must be 1 to {MAX_FILTER_CHARS} characters without control characters")),
        ),
        _ => Ok(()),
    }
}

impl HistoryQuery {
    fn filter(&self, project_id: &str) -> Result<HistoryFilter> {
        check_text("tool_name", &self.tool_name)?;
        check_text("toolkit_name", &self.toolkit_name)?;
        check_text("user_id", &self.user_id)?;
        if let (Some(start), Some(end)) = (self.start_ms, self.end_ms)
            && start > end
        {
            return Err(Error::Invalid("`start_time` must not be after `end_time`".into()));
        }
        Ok(HistoryFilter {
            project_id: project_id.to_owned(),
            tool_name: self.tool_name.clone(),
            toolkit_name: self.toolkit_name.clone(),
            user_id: self.user_id.clone(),
            status: self.outcome.map(RunOutcome::status),
            failure_reason: self.failure_reason,
            created_from: self.start_ms,
            created_before: self.end_ms,
        })
    }
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).into_owned()
}

impl Engine {
    /// Authenticates the caller and checks `route` in the table; false when
    /// the organization has turned execution logging off, so there is no
    /// history to show (work in flight is kept for its owner only).
    async fn history_caller(&self, authorization: Option<&str>, scope: Scope<'_>, route: Route) -> Result<bool> {
        let p = self.authenticate(authorization).await?;
        authz::history::check(&p, scope.org_id, scope.project_id, route)?;
        Ok(self.store.execution_logging(scope.org_id).await?)
    }

    /// Runs of the scope's project matching `query`, newest first: `limit`
    /// (1 to [`MAX_LIMIT`]) after skipping `offset`, with the total count.
    pub(crate) async fn history_list(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        query: &HistoryQuery,
        limit: u32,
        offset: u32,
    ) -> Result<HistoryPage> {
        let logging = self.history_caller(authorization, scope, Route::List).await?;
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::Invalid(format!("`limit` must be between 1 and {MAX_LIMIT}")));
        }
        let filter = query.filter(scope.project_id)?;
        if !logging {
            return Ok(HistoryPage { items: Vec::new(), total: 0 });
        }
        let now = now_ms();
        let total = self.store.history_count(&filter, now).await?;
        // Past the end there is nothing to read.
        let items = if u64::from(offset) >= total {
            Vec::new()
        } else {
            self.store.history_page(&filter, now, limit, offset).await?
        };
        Ok(HistoryPage { items, total })
    }

    /// How many runs of the scope's project match `query`.
    pub(crate) async fn history_count(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        query: &HistoryQuery,
    ) -> Result<u64> {
        let logging = self.history_caller(authorization, scope, Route::Count).await?;
        let filter = query.filter(scope.project_id)?;
        if !logging {
            return Ok(0);
        }
        Ok(self.store.history_count(&filter, now_ms()).await?)
    }

    /// One run of the scope's project: its timeline and attempts, and the
    /// payloads `reveal` asks for (admin only). An id the project does not
    /// hold, or no longer retains, is the uniform not-found.
    pub(crate) async fn history_detail(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
        reveal: Reveal,
    ) -> Result<HistoryDetail> {
        let route = if reveal.inputs || reveal.outputs { Route::DetailWithPayloads } else { Route::Detail };
        let Some(id) = ExecutionId::parse(id) else {
            // No such id can exist; the caller is still told 401 or 403 first.
            self.history_caller(authorization, scope, route).await?;
            return Err(authz::Error::NotFound.into());
        };
        let id = &id;
        let (credential, record) = self.credential_with_execution(authorization, id).await?;
        let p = authz::Principal::from_credential(credential)?;
        p.in_scope(scope.org_id, scope.project_id)?;
        let revealed = match (reveal.inputs, reveal.outputs) {
            (true, true) => "inputs and outputs",
            (true, false) => "inputs",
            _ => "outputs",
        };
        if let Err(e) = authz::history::check(&p, scope.org_id, scope.project_id, route) {
            if route == Route::DetailWithPayloads {
                let detail = Some(format!("{revealed}: {e}"));
                self.audit(&p, scope, action::HISTORY_REVEAL, Some(id.as_str()), outcome::REFUSED, detail).await?;
            }
            return Err(e.into());
        }
        let record = match record {
            Some(r)
                if r.org_id == scope.org_id
                    && r.project_id == scope.project_id
                    && r.retention_expires_at > now_ms()
                    && self.store.execution_logging(scope.org_id).await? =>
            {
                r
            }
            _ => return Err(authz::Error::NotFound.into()),
        };
        // The replica may be behind the record just read from the primary: a
        // timeline that has not reached the record's status is read again there.
        let mut timeline = self.store.history_events(id).await?;
        let mut attempts = self.store.history_attempts(id).await?;
        if timeline.last().and_then(|e| e.status) != Some(record.status()) {
            timeline = self.store.list_events(id).await?;
            attempts = self.store.list_attempts(id).await?;
        }
        let attempts = attempts
            .into_iter()
            .map(|a| self.attempt_view(&record.id, a, &timeline, reveal.outputs))
            .collect::<Result<Vec<_>>>()?;
        let input = match (&record.input_ct, reveal.inputs) {
            (Some(ct), true) => Some(text(self.ring.open(record.id.as_str(), Field::Input, ct)?)),
            _ => None,
        };
        let output = match (&record.output_ct, reveal.outputs, record.status()) {
            (Some(ct), true, Status::Completed) => Some(text(self.ring.open(record.id.as_str(), Field::Output, ct)?)),
            _ => None,
        };
        if route == Route::DetailWithPayloads {
            // Every reveal is on the record before the payload leaves.
            let detail = Some(revealed.to_owned());
            self.audit(&p, scope, action::HISTORY_REVEAL, Some(id.as_str()), outcome::ALLOWED, detail).await?;
        }
        Ok(HistoryDetail { record, timeline, attempts, input, output })
    }

    /// An attempt's error is the tool's when a settlement ended it (the
    /// `settled` event written with it), the system's otherwise.
    fn attempt_view(
        &self,
        id: &ExecutionId,
        a: AttemptRecord,
        timeline: &[EventRecord],
        outputs: bool,
    ) -> Result<AttemptView> {
        let ending: Vec<&EventRecord> =
            a.finished_at.map(|at| timeline.iter().filter(|e| e.at == at).collect()).unwrap_or_default();
        let settled = ending.iter().any(|e| e.kind == Some(EventKind::Settled));
        let cancelled = a.success == Some(false) && ending.iter().any(|e| e.status == Some(Status::Cancelled));
        let (error, mut system_error) = if settled { (a.error_message, None) } else { (None, a.error_message) };
        if cancelled && error.is_none() && system_error.is_none() {
            system_error = Some(STOPPED_BY_CANCEL.to_owned());
        }
        let open = |ct: &Option<Vec<u8>>, field: Field| -> Result<Option<String>> {
            match ct {
                Some(ct) if outputs => Ok(Some(text(self.ring.open(id.as_str(), field, ct)?))),
                _ => Ok(None),
            }
        };
        Ok(AttemptView {
            number: a.attempt,
            started_at: a.started_at,
            finished_at: a.finished_at,
            success: a.success,
            cancelled,
            output: open(&a.output_ct, Field::Output)?,
            error_detail: open(&a.error_detail_ct, Field::ErrorDetail)?,
            error,
            system_error,
        })
    }
}

#[cfg(test)]
mod tests;
