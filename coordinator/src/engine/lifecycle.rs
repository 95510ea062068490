//! The owner lifecycle: start, read, wait, list, result, input and cancel, each
//! authorized here against the current credential.

use super::batch::Claim;
use super::workers::sessions::{Reserved, Session};
use super::{Engine, Error, Result, Scope, token_hash};
use crate::admission::{Rejection, Ticket};
use crate::audit::{action, outcome};
use crate::authz::{self, Principal};
use crate::crypto::Field;
use crate::domain::{
    Background, Deadlines, Event, ExecutionId, FailureReason, Ignored, Lifetime, Millis, Status, Surface,
};
use crate::store::{
    Claimed, Created, EventData, ExecutionRecord, ListFilter, NewExecution, RetentionSettings, ToolRecord,
};
use base64::Engine as _;
use baton_proto::clock::now_ms;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// What a caller asks to start.
#[derive(Clone, Debug, Default)]
pub struct StartRequest {
    pub org_id: String,
    pub project_id: String,
    pub gateway_id: String,
    pub tool_name: String,
    pub input_json: String,
    pub user_id: String,
    pub run_at_ms: Option<i64>,
    pub ttl_ms: Option<i64>,
    pub idempotency_key: Option<String>,
    pub request_fingerprint: String,
    pub surface: Surface,
}

/// What the owner reads of a finished execution besides its view.
#[derive(Debug)]
pub struct ResultRead {
    pub record: ExecutionRecord,
    /// The tool result, once completed.
    pub result: Option<String>,
    /// The detail the tool attached to its own failure (payload, like the result).
    pub(crate) error_detail: Option<String>,
}

/// The provable outcome of a cancel request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    Accepted,
    Unsupported,
    AlreadyTerminal,
    StopDeliveryUnknown,
    StopAlreadyRequested,
}

impl CancelOutcome {
    /// The outcome's name on every surface (held to the wire's by a test in `grpc::convert`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CancelOutcome::Accepted => "accepted",
            CancelOutcome::Unsupported => "unsupported",
            CancelOutcome::AlreadyTerminal => "already_terminal",
            CancelOutcome::StopDeliveryUnknown => "stop_delivery_unknown",
            CancelOutcome::StopAlreadyRequested => "stop_already_requested",
        }
    }
}

pub(crate) fn encode_cursor(r: &ExecutionRecord) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{}:{}", r.created_at, r.id))
}

fn decode_cursor(c: &str) -> Result<(i64, String)> {
    let bad = || Error::Invalid("`cursor` is not a cursor this server issued".into());
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(c).map_err(|_| bad())?;
    let text = String::from_utf8(raw).map_err(|_| bad())?;
    let (at, id) = text.split_once(':').ok_or_else(bad)?;
    Ok((at.parse().map_err(|_| bad())?, id.to_owned()))
}

/// Who starts an execution: the authenticated caller, on whose behalf and
/// through which gateway, and the retention of the caller's project.
struct Starter {
    principal: Principal,
    user_id: String,
    gateway_id: String,
    retention: RetentionSettings,
}

/// Every REST start runs in the background: a tool that forbids that is
/// refused before anything is admitted or created (MCP checks the same policy
/// per call in the gateway, where foreground calls exist).
fn refuse_background_forbidden_over_rest(surface: Surface, tool: &ToolRecord) -> Result<()> {
    if surface == Surface::Rest && tool.background == Some(Background::Forbidden) {
        return Err(Error::PolicyRefused(format!(
            "tool {:?} forbids background execution; call it over MCP without a task",
            tool.name
        )));
    }
    Ok(())
}

/// What admission counts of an execution about to be created.
fn admission_ticket(new: &NewExecution) -> Ticket {
    Ticket {
        execution_id: new.id.to_string(),
        org_id: new.org_id.clone(),
        project_id: new.project_id.clone(),
        user_id: new.user_id.clone(),
        payload_bytes: u64::try_from(new.payload_bytes).unwrap_or(0),
        expires_at_ms: new.execution_deadline,
        retained_until_ms: new.retention_expires_at,
    }
}

impl Engine {
    async fn resolve_owner(&self, p: &Principal, req: &StartRequest) -> Result<(String, String)> {
        match p {
            Principal::EndUser { gateway_id, user_id, .. } => {
                if !req.user_id.is_empty() && req.user_id != *user_id {
                    return Err(
                        authz::Error::Forbidden("an end-user token can only start work for its own user").into()
                    );
                }
                if !req.gateway_id.is_empty() && req.gateway_id != *gateway_id {
                    return Err(authz::Error::Forbidden("this token is bound to another gateway").into());
                }
                Ok((user_id.clone(), gateway_id.clone()))
            }
            Principal::ApiKey { project_id, .. } => {
                if req.user_id.is_empty() {
                    return Err(Error::Invalid("`user_id` is required when starting with a project API key".into()));
                }
                if self.store.gateway_project(&req.gateway_id).await?.as_deref() != Some(project_id.as_str()) {
                    return Err(Error::Invalid("`gateway_id` is not a gateway of this project".into()));
                }
                Ok((req.user_id.clone(), req.gateway_id.clone()))
            }
            Principal::Worker { .. } => {
                Err(authz::Error::Forbidden("a worker credential cannot start executions").into())
            }
        }
    }

    fn eligible_tool(tool: Option<ToolRecord>, name: &str, input: &serde_json::Value) -> Result<ToolRecord> {
        let tool = tool.ok_or_else(|| Error::UnknownTool(name.to_owned()))?;
        if tool.disabled {
            return Err(Error::PolicyRefused(format!("tool {name:?} is disabled by an administrator")));
        }
        if tool.task_time_input && !tool.remote {
            return Err(Error::PolicyRefused(format!(
                "tool {name:?} declares task-time input, which hosted tools cannot use"
            )));
        }
        // Registration refused schemas that do not compile; one stored before
        // that check is the tool's fault, not the caller's.
        let validator = crate::schema::validator(&tool.input_schema)
            .map_err(|e| Error::PolicyRefused(format!("tool {name:?}: {e}")))?;
        crate::schema::validate(&validator, input).map_err(|e| Error::InvalidInput(e.to_string()))?;
        Ok(tool)
    }

    /// Authenticates the caller (with the tool lookup, in one store round trip)
    /// and creates the execution.
    pub async fn start(&self, authorization: Option<&str>, req: StartRequest) -> Result<Created> {
        self.start_as(authorization, req, ExecutionId::generate()).await
    }

    /// As [`Engine::start`], creating the execution under `id` (minted by the
    /// caller, so it can watch the execution before it exists).
    pub(super) async fn start_as(
        &self,
        authorization: Option<&str>,
        req: StartRequest,
        id: ExecutionId,
    ) -> Result<Created> {
        let hash = token_hash(authorization)?;
        self.refuse_malformed_fields(authorization, &req).await?;
        let (starter, tool) = self.authorize_start(hash, &req).await?;
        let tool = self.startable_tool(tool, &req)?;
        let now = now_ms();
        let deadlines = self.deadlines_of_start(&req, &tool, &starter.retention, now)?;
        let mut new = self.sealed_execution(id, req, tool, &starter, deadlines, now)?;
        let ticket = admission_ticket(&new);
        let p = &starter.principal;
        match self.admission.admit(&ticket, now).await? {
            Ok(admitted) => new.admission_fence = admitted.fence,
            Err(rejection) => return self.replay_or_refuse(p, &new, rejection, now).await,
        }
        self.create_admitted(p, new, &ticket, now).await
    }

    /// The caller, authenticated together with the tool lookup and the
    /// project's retention (one store read), allowed to act in the request's
    /// scope, and whom the execution will belong to; with the tool, if the
    /// project registers it.
    async fn authorize_start(&self, hash: Vec<u8>, req: &StartRequest) -> Result<(Starter, Option<ToolRecord>)> {
        let (credential, tool, retention) = self
            .start_reads
            .credential_with_tool(hash, &req.project_id, &req.tool_name)
            .await?
            .ok_or(authz::Error::Unauthenticated)?;
        let principal = Principal::from_credential(credential)?;
        principal.in_scope(&req.org_id, &req.project_id)?;
        principal.may_act()?;
        let (user_id, gateway_id) = self.resolve_owner(&principal, req).await?;
        Ok((Starter { principal, user_id, gateway_id, retention }, tool))
    }

    /// The tool, when the request's input may start it: within the size
    /// limit, JSON its schema accepts, and a tool that may run this way.
    fn startable_tool(&self, tool: Option<ToolRecord>, req: &StartRequest) -> Result<ToolRecord> {
        if req.input_json.len() > self.options.max_input_bytes {
            return Err(Error::PayloadTooLarge { limit: self.options.max_input_bytes });
        }
        let input: serde_json::Value =
            serde_json::from_str(&req.input_json).map_err(|_| Error::Invalid("`input` is not valid JSON".into()))?;
        let tool = Self::eligible_tool(tool, &req.tool_name, &input)?;
        refuse_background_forbidden_over_rest(req.surface, &tool)?;
        Ok(tool)
    }

    /// When the execution must be over and when its record goes: the
    /// project's retention, the requested ttl and the tool's cap.
    fn deadlines_of_start(
        &self,
        req: &StartRequest,
        tool: &ToolRecord,
        retention: &RetentionSettings,
        now: Millis,
    ) -> Result<Deadlines> {
        let lifetime = Lifetime {
            retention_ms: retention.effective_ms(self.options.lifetime.retention_ms),
            ..self.options.lifetime
        };
        let deadlines = lifetime.deadlines(now, req.ttl_ms, tool.max_ttl_ms);
        if req.run_at_ms.is_some_and(|at| at >= deadlines.execution_deadline) {
            // It could never run: refuse it now rather than let it fail later.
            return Err(Error::Invalid("`run_at` must fall before the execution deadline (see `ttl_ms`)".into()));
        }
        Ok(deadlines)
    }

    /// The execution to create, its input sealed under its id.
    fn sealed_execution(
        &self,
        id: ExecutionId,
        req: StartRequest,
        tool: ToolRecord,
        starter: &Starter,
        deadlines: Deadlines,
        now: Millis,
    ) -> Result<NewExecution> {
        let input_ct = self.ring.seal(id.as_str(), Field::Input, req.input_json.as_bytes())?;
        Ok(NewExecution {
            id,
            org_id: req.org_id,
            project_id: req.project_id,
            gateway_id: starter.gateway_id.clone(),
            tool_name: tool.name,
            toolkit_name: tool.toolkit_name,
            toolkit_version: tool.toolkit_version,
            user_id: starter.user_id.clone(),
            started_by: starter.principal.credential_id().to_owned(),
            surface: req.surface.as_str().to_owned(),
            created_at: now,
            run_at: req.run_at_ms,
            execution_deadline: deadlines.execution_deadline,
            retention_expires_at: deadlines.retention_expires_at,
            poll_interval_ms: self.options.poll_interval_ms,
            max_attempts: tool.max_attempts,
            idempotency_key: req.idempotency_key,
            request_fingerprint: Some(req.request_fingerprint),
            payload_bytes: i64::try_from(input_ct.len()).unwrap_or(i64::MAX),
            input_ct,
            traceparent: Some(baton_proto::trace::current_traceparent()).filter(|t| !t.is_empty()),
            admission_fence: None,
        })
    }

    /// A start admission refused: a retry of admitted work is answered with
    /// it, even when saturated; anything else is refused for capacity.
    async fn replay_or_refuse(
        &self,
        p: &Principal,
        new: &NewExecution,
        rejection: Rejection,
        now: Millis,
    ) -> Result<Created> {
        let replayed = self.store.replay(new, now).await.map_err(|e| self.refused_by_create(p, &new.tool_name, e))?;
        if let Some(answer) = replayed {
            return Self::replay_for(p, answer?);
        }
        self.metrics.rejected(rejection.scope.as_str());
        Err(Error::Capacity(rejection))
    }

    /// A start whose fields are too long or carry control characters is
    /// refused, once the caller is authenticated (a bad credential is 401
    /// whatever the body).
    async fn refuse_malformed_fields(&self, authorization: Option<&str>, req: &StartRequest) -> Result<()> {
        for (name, value, max) in [
            ("user_id", req.user_id.as_str(), 512),
            ("gateway_id", req.gateway_id.as_str(), 128),
            ("tool_name", req.tool_name.as_str(), 128),
            ("Idempotency-Key", req.idempotency_key.as_deref().unwrap_or_default(), 255),
        ] {
            if value.len() > max || value.chars().any(char::is_control) {
                self.authenticate(authorization).await?;
                return Err(Error::Invalid(format!("`{name}` must be at most {max} bytes without control characters")));
            }
        }
        Ok(())
    }

    /// Creates an admitted execution: leased at once to a free session here
    /// when there is one, else pending for dispatch. Its admission is given
    /// back when it is not created (an error, or a replay of earlier work).
    async fn create_admitted(&self, p: &Principal, new: NewExecution, ticket: &Ticket, now: Millis) -> Result<Created> {
        let run_at = new.run_at;
        let tool_name = new.tool_name.clone();
        let due_now = run_at.is_none_or(|at| at <= now);
        // A start that finds a free slot of a session here is created leased
        // to it: one commit instead of a create and a claim, and no dispatch
        // round. Not while pending work may be waiting for that slot.
        let found = if due_now && !self.pending_seen.load(Ordering::Relaxed) {
            self.sessions.reserve(&new.project_id, &new.tool_name)
        } else {
            Reserved::NotServed
        };
        // Every session here that serves the tool is busy: later starts queue
        // behind this one until a dispatch round drains what is pending.
        let scarce = matches!(found, Reserved::Full);
        let reserved = match found {
            Reserved::Slot(session) => Some(session),
            Reserved::Full | Reserved::NotServed => None,
        };
        let claim = reserved
            .as_ref()
            .map(|s| Claim { worker_id: s.worker_id.clone(), lease_until: now + self.options.lease_ms });
        let created = match self.creates.create(new, claim).await {
            Ok(c) => c,
            Err(e) => {
                if let Some(session) = &reserved {
                    session.return_slots(1);
                }
                // An execution whose commit answer was lost may exist: it keeps
                // its place (the owner's retry finds it by its key), or, if it
                // does not, the place is freed at its deadline or by a rebuild.
                if !e.may_have_committed() {
                    let _ = self.admission.withdraw(ticket, now).await;
                }
                return Err(self.refused_by_create(p, &tool_name, e));
            }
        };
        let leased = !created.replayed && created.record.status() == Status::Working;
        if let Some(session) = reserved.as_ref().filter(|_| !leased) {
            session.return_slots(1);
        }
        if created.replayed {
            let _ = self.admission.withdraw(ticket, now).await;
            return Self::replay_for(p, created);
        }
        self.metrics.started(&created.record.surface);
        match (reserved, run_at) {
            (Some(session), _) if leased => self.assign_created(&session, &created.record, now).await,
            (_, Some(at)) if at > now => self.wake_at(at),
            _ => {
                if scarce {
                    self.pending_seen.store(true, Ordering::Relaxed);
                }
                self.wake_dispatch();
            }
        }
        tracing::debug!(execution_id = %created.record.id, tool = %created.record.tool_name, "execution created");
        Ok(created)
    }

    /// What a start whose create failed answers. A start reads its caller and
    /// tool from memory; the create's own statement refuses a credential
    /// revoked or a tool disabled since, and what memory held is forgotten.
    fn refused_by_create(&self, p: &Principal, tool_name: &str, e: crate::store::Error) -> Error {
        match e {
            crate::store::Error::CredentialRevoked => {
                self.start_reads.forget(p.credential_id());
                authz::Error::Unauthenticated.into()
            }
            crate::store::Error::ToolDisabled => {
                self.start_reads.forget(p.credential_id());
                Error::PolicyRefused(format!("tool {tool_name:?} is disabled by an administrator"))
            }
            e => e.into(),
        }
    }

    /// Sends an execution created leased to `session` on its way: to the
    /// worker (or back to pending, provably undelivered), then out of the
    /// backlog, so the tool does not wait for admission's round trip.
    async fn assign_created(&self, session: &Session, record: &ExecutionRecord, now: Millis) {
        let claimed = Claimed { attempt: record.state.attempts, record: record.clone() };
        let undelivered = self.assign(session, &claimed).await;
        if let Err(e) = self.admission.started(&super::ticket(record), now).await {
            tracing::warn!(error = %e, "admission backlog release failed");
        }
        if let Some(undelivered) = undelivered {
            session.return_slots(1);
            if let Err(e) = self.undelivered(&session.worker_id, vec![undelivered], now_ms()).await {
                tracing::warn!(error = %e, "an undelivered assignment waits for its lease to lapse");
            }
        }
    }

    /// A replay answers only a caller who may read the execution: a key another
    /// principal holds (an API key naming someone's user id, say) is a
    /// conflict, never someone else's execution.
    fn replay_for(p: &Principal, replayed: Created) -> Result<Created> {
        if p.may_own(&replayed.record) { Ok(replayed) } else { Err(crate::store::Error::IdempotencyConflict.into()) }
    }

    /// Returns once the status differs from `known_status` (or from the current
    /// status when `None`), or after `wait_ms`.
    pub(crate) async fn wait(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
        wait_ms: u64,
        known_status: Option<Status>,
    ) -> Result<ExecutionRecord> {
        let watched = self.watched(id);
        let (_, record) = self.read_owned(authorization, scope, id).await?;
        let baseline = known_status.unwrap_or(record.status());
        let until = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        let watched = watched.with(record);
        let changed = |s: Status| s != baseline || s.is_terminal();
        self.wait_until(authorization, scope, watched, until, changed).await
    }

    pub(crate) async fn list(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        gateway_id: Option<String>,
        limit: u32,
        cursor: &str,
    ) -> Result<(Vec<ExecutionRecord>, Option<String>)> {
        let p = &self.authenticate(authorization).await?;
        let project_id = scope.project_id;
        p.in_scope(scope.org_id, project_id)?;
        let filter = match p {
            Principal::EndUser { user_id, .. } => {
                ListFilter::User { project_id: project_id.to_owned(), user_id: user_id.clone(), gateway_id }
            }
            Principal::ApiKey { credential_id, .. } => {
                ListFilter::StartedBy { project_id: project_id.to_owned(), credential_id: credential_id.clone() }
            }
            Principal::Worker { .. } => return Err(authz::Error::Forbidden("a worker credential cannot list").into()),
        };
        let after = if cursor.is_empty() { None } else { Some(decode_cursor(cursor)?) };
        let limit = limit.clamp(1, 200);
        let rows = self.store.list_executions(&filter, now_ms(), limit + 1, after).await?;
        let more = rows.len() > limit as usize;
        let rows: Vec<_> = rows.into_iter().take(limit as usize).collect();
        let next = if more { rows.last().map(encode_cursor) } else { None };
        Ok((rows, next))
    }

    /// The original tool result when the execution completed, or the detail
    /// the tool attached to its own failure.
    pub async fn result(&self, authorization: Option<&str>, scope: Scope<'_>, id: &str) -> Result<ResultRead> {
        let (_, record) = self.read_owned(authorization, scope, id).await?;
        let open = |field, ct: &[u8]| -> Result<String> {
            Ok(String::from_utf8(self.ring.open(record.id.as_str(), field, ct)?).unwrap_or_default())
        };
        let result = match (&record.output_ct, record.status()) {
            (Some(ct), Status::Completed) => Some(open(Field::Output, ct)?),
            _ => None,
        };
        let error_detail = match (&record.error_detail_ct, record.failure_reason()) {
            (Some(ct), Some(FailureReason::ToolError)) => Some(open(Field::ErrorDetail, ct)?),
            _ => None,
        };
        Ok(ResultRead { record, result, error_detail })
    }

    pub async fn cancel(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
    ) -> Result<(CancelOutcome, ExecutionRecord)> {
        let (p, record) = self.read_owned(authorization, scope, id).await?;
        if let Err(e) = p.may_act() {
            self.audit(&p, scope, action::EXECUTION_CANCEL, Some(id), outcome::REFUSED, Some(e.to_string())).await?;
            return Err(e.into());
        }
        let (answer, record) = self.request_cancel(record).await?;
        self.audit(&p, scope, action::EXECUTION_CANCEL, Some(id), answer.as_str(), None).await?;
        Ok((answer, record))
    }

    /// Asks `record`'s execution to stop and answers what can be proven. The
    /// tool's current policy is re-evaluated first (seed 000: a revoked
    /// permission fails closed before owner contact): a removed or disabled
    /// tool is refused, one that declares it cannot be stopped answers
    /// `unsupported`, and neither reaches the worker.
    pub(super) async fn request_cancel(&self, record: ExecutionRecord) -> Result<(CancelOutcome, ExecutionRecord)> {
        if !record.status().is_terminal() {
            let tool = self.current_tool(&record).await?;
            if tool.cancel_unsupported {
                return Ok((CancelOutcome::Unsupported, record));
            }
        }
        let id = &record.id;
        match self.store.apply(id, &Event::RequestCancel, &EventData::default(), now_ms()).await? {
            None => Err(authz::Error::NotFound.into()),
            Some(Err((Ignored::Terminal, r))) => Ok((CancelOutcome::AlreadyTerminal, r)),
            Some(Err((Ignored::AlreadyRequested, r))) => Ok((CancelOutcome::StopAlreadyRequested, r)),
            Some(Err((_, r))) => Ok((CancelOutcome::StopDeliveryUnknown, r)),
            Some(Ok(applied)) => {
                let delivered = self.after_commit(&applied).await;
                let outcome = match (applied.record.status(), delivered) {
                    (Status::Cancelled, _) | (_, Some(true)) => CancelOutcome::Accepted,
                    _ => CancelOutcome::StopDeliveryUnknown,
                };
                tracing::info!(execution_id = %id, outcome = ?outcome, "cancel requested");
                Ok((outcome, applied.record))
            }
        }
    }

    /// The execution's tool as its project now registers it; a tool removed
    /// or disabled since the execution started is a policy refusal.
    pub(super) async fn current_tool(&self, record: &ExecutionRecord) -> Result<ToolRecord> {
        match self.store.tool(&record.project_id, &record.tool_name).await? {
            Some(tool) if !tool.disabled => Ok(tool),
            Some(_) => Err(Error::PolicyRefused(format!(
                "tool {:?} is disabled by an administrator; it takes no input or cancellation",
                record.tool_name
            ))),
            None => Err(Error::PolicyRefused(format!("tool {:?} is no longer registered", record.tool_name))),
        }
    }

    pub(crate) async fn tools(&self, authorization: Option<&str>, scope: Scope<'_>) -> Result<Vec<ToolRecord>> {
        let p = self.authenticate(authorization).await?;
        p.in_scope(scope.org_id, scope.project_id)?;
        Ok(self.store.list_tools(scope.project_id).await?)
    }
}
