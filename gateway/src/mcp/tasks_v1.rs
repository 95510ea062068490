//! The 2025-11-25 tasks utility on legacy sessions: `tasks/get`, the blocking
//! `tasks/result` (an SSE stream that carries the execution's input requests as
//! server→client `elicitation/create` requests, then the original result or
//! error with the related-task `_meta`), `tasks/list` and `tasks/cancel`, plus
//! the client's answers to those requests. Request ids encode the execution and
//! the request key, so an answer may reach any replica. A blocking
//! `tasks/result` holds a wait place (`crate::waits`); when the gateway shuts
//! down its stream sends what it has and ends with an error saying so (the
//! client asks again, on any replica). Its events carry ids a client that
//! loses the stream resumes from on any replica (`super::resume`).

use super::context::{Caller, Ctx, Outgoing, Reply};
use super::error::{RpcError, task_error};
use super::jsonrpc::{self, str_param};
use super::protocol::RELATED_TASK;
use super::resume::ResumePoint;
use super::task_view::{self, Snapshot};
use crate::coordinator::InputAnswer;
use crate::execution::is_execution_id;
use crate::waits::WaitPermit;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use baton_proto::coordinator::v1::{CancelOutcome, CancelState, ExecutionStatus, InputRequestState};
use baton_proto::worker::v1::InputAction;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::{Map, Value, json};
use std::collections::VecDeque;
use std::time::Duration;

const INPUT_ID_PREFIX: &str = "baton-input.";
const LIST_PAGE: u32 = 50;
/// How long one wait of a `tasks/result` stream lasts while its execution
/// asks for input: a further request comes without a status change, so it is
/// seen within this.
const INPUT_WAIT_SLICE: Duration = Duration::from_secs(25);
/// In any other status a new state is a status change, which ends the wait
/// at once: a parked stream re-reads only this rarely (a re-read per stream
/// every 25 s was most of what 10,000 parked streams cost).
const STATUS_WAIT_SLICE: Duration = Duration::from_secs(3600);

pub(super) fn task_id(params: &Map<String, Value>) -> Result<&str, RpcError> {
    let id = str_param(params, "taskId").ok_or_else(|| RpcError::invalid_params("`taskId` must be a string"))?;
    if is_execution_id(id) { Ok(id) } else { Err(RpcError::task_not_found()) }
}

pub(super) async fn get(ctx: &Ctx, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let id = task_id(params)?;
    let snap = task_view::snapshot(&ctx.caller, id).await.map_err(task_error)?;
    Ok(task_view::v1_task(&snap))
}

fn with_related_task(mut result: Value, id: &str) -> Value {
    if let Some(obj) = result.as_object_mut() {
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(RELATED_TASK.into(), json!({"taskId": id}));
        }
    }
    result
}

fn finished(snap: &Snapshot) -> Option<Result<Value, RpcError>> {
    let id = snap.view.execution_id.clone();
    task_view::v1_outcome(snap).map(|o| o.map(|r| with_related_task(r, &id)))
}

pub(super) async fn result(ctx: &Ctx, params: &Map<String, Value>) -> Result<Reply, RpcError> {
    let id = task_id(params)?;
    let snap = task_view::snapshot_before_wait(&ctx.caller, id).await.map_err(task_error)?;
    if let Some(done) = finished(&snap) {
        return done.map(Reply::Json);
    }
    let point =
        ResumePoint { task_id: id.to_owned(), request_id: ctx.request_id.clone(), sent: Vec::new(), done: false };
    Ok(Reply::Stream(stream(ctx, point, snap)?))
}

/// The rest of a `tasks/result` stream that was cut after `point`: the input
/// requests it had not sent, then the result; on any replica. Anything that
/// stops it (the task is unknown to this caller, too many waits) is the
/// stream's one error.
pub(super) async fn resume(ctx: &Ctx, point: ResumePoint) -> BoxStream<'static, Outgoing> {
    let opened = async {
        if !ctx.legacy_tasks() {
            return Err(RpcError::method_not_found("tasks/result"));
        }
        let snap = task_view::snapshot_before_wait(&ctx.caller, &point.task_id).await.map_err(task_error)?;
        stream(ctx, point, snap)
    };
    match opened.await {
        Ok(stream) => stream,
        Err(e) => futures_util::stream::once(async move { Outgoing::Error(e) }).boxed(),
    }
}

/// A blocking `tasks/result` stream from `snap` on, resumable after `point`.
fn stream(ctx: &Ctx, point: ResumePoint, snap: Snapshot) -> Result<BoxStream<'static, Outgoing>, RpcError> {
    let place = ctx.caller.admit_wait()?;
    let mut queue = VecDeque::new();
    queue.push_back(Outgoing::Checkpoint(point.event_id()));
    let stream = ResultStream {
        _place: place,
        caller: ctx.caller.clone(),
        elicitation: ctx.elicitation,
        first: Some(Box::new(snap)),
        known_status: ExecutionStatus::Unspecified,
        point,
        queue,
        done: false,
    };
    let stream = futures_util::stream::unfold(stream, |mut s| async move {
        loop {
            if let Some(item) = s.queue.pop_front() {
                return Some((item, s));
            }
            if s.done {
                return None;
            }
            s.step().await;
            if s.done {
                s.point.done = true;
                s.queue.push_back(Outgoing::Checkpoint(s.point.event_id()));
            }
        }
    });
    Ok(stream.boxed())
}

/// The state of one blocking `tasks/result`.
struct ResultStream {
    _place: WaitPermit,
    caller: Caller,
    elicitation: bool,
    /// The first read, until the first step sends it; boxed, since a
    /// parked stream would otherwise keep room for a view inline.
    first: Option<Box<Snapshot>>,
    known_status: ExecutionStatus,
    /// The task, the request answered and the input requests already sent
    /// (on this stream, or before it on the one it resumes).
    point: ResumePoint,
    queue: VecDeque<Outgoing>,
    done: bool,
}

impl ResultStream {
    async fn step(&mut self) {
        let snap = match self.first.take() {
            Some(s) => Ok(Some(*s)),
            None => self.next_snapshot().await,
        };
        let snap = match snap {
            Ok(Some(s)) => s,
            Ok(None) => {
                let e = RpcError::shutting_down(&self.point.task_id, true);
                self.queue.push_back(Outgoing::Error(e));
                self.done = true;
                return;
            }
            Err(e) => {
                self.queue.push_back(Outgoing::Error(e));
                self.done = true;
                return;
            }
        };
        self.known_status = snap.view.status();
        if let Some(done) = finished(&snap) {
            self.queue.push_back(match done {
                Ok(r) => Outgoing::Result(r),
                Err(e) => Outgoing::Error(e),
            });
            self.done = true;
            return;
        }
        if snap.view.status() == ExecutionStatus::InputRequired && self.elicitation {
            for r in snap.view.input_requests.iter().filter(|r| r.state() == InputRequestState::Open) {
                if !self.point.sent.contains(&r.request_key) {
                    self.point.sent.push(r.request_key.clone());
                    let params = json!({
                        "message": r.message,
                        "requestedSchema": task_view::requested_schema(&r.requested_schema_json),
                        "_meta": {RELATED_TASK: {"taskId": snap.view.execution_id}},
                    });
                    let id = input_id(&snap.view.execution_id, &r.request_key);
                    let request = jsonrpc::request(&id, "elicitation/create", params);
                    self.queue.push_back(Outgoing::Resumable(request, self.point.event_id()));
                }
            }
        }
    }

    /// The next state worth a look; `None` when the gateway began shutting down.
    async fn next_snapshot(&self) -> Result<Option<Snapshot>, RpcError> {
        let caller = &self.caller;
        let slice =
            if self.known_status == ExecutionStatus::InputRequired { INPUT_WAIT_SLICE } else { STATUS_WAIT_SLICE };
        let wait =
            caller.coordinator().wait(&caller.bearer, &caller.scope, &self.point.task_id, slice, self.known_status);
        let Some(waited) = caller.state.unless_shutdown(wait).await else {
            return Ok(None);
        };
        let view = waited.map_err(task_error)?;
        // Boxed: its call future would otherwise sit in every parked stream.
        Box::pin(task_view::complete(caller, view)).await.map(Some).map_err(task_error)
    }
}

pub(super) fn input_id(execution_id: &str, request_key: &str) -> String {
    format!("{INPUT_ID_PREFIX}{execution_id}.{}", URL_SAFE_NO_PAD.encode(request_key))
}

/// The execution id and request key a server→client request id encodes.
pub(super) fn parse_input_id(id: &Value) -> Option<(String, String)> {
    let rest = id.as_str()?.strip_prefix(INPUT_ID_PREFIX)?;
    let (execution_id, key) = rest.split_once('.')?;
    let key = String::from_utf8(URL_SAFE_NO_PAD.decode(key).ok()?).ok()?;
    is_execution_id(execution_id).then(|| (execution_id.to_owned(), key))
}

/// The client's answer to an `elicitation/create` sent on a `tasks/result`
/// stream: forwarded as the input for that request key. A JSON-RPC error
/// answer cancels the request.
pub(super) async fn answer(caller: &Caller, id: &Value, result: Option<&Value>) -> Result<(), RpcError> {
    let Some((execution_id, key)) = parse_input_id(id) else {
        return Err(RpcError::invalid_request("unknown response id"));
    };
    let (action, content) = match result {
        Some(r) => {
            let Some(action) = r.get("action").and_then(Value::as_str).and_then(InputAction::from_name) else {
                return Err(RpcError::invalid_request("an elicitation result needs `action`"));
            };
            (action, r.get("content").filter(|c| c.is_object()).cloned().unwrap_or(Value::Null))
        }
        None => (InputAction::Cancel, Value::Null),
    };
    let answer = InputAnswer { request_key: &key, action, content: &content };
    match caller.coordinator().provide_input(&caller.bearer, &caller.scope, &execution_id, &answer).await {
        Ok(_) => Ok(()),
        Err(e) => Err(task_error(e)),
    }
}

pub(super) async fn list(ctx: &Ctx, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let caller = &ctx.caller;
    let cursor = match params.get("cursor") {
        None | Some(Value::Null) => "",
        Some(Value::String(c)) => c.as_str(),
        Some(_) => return Err(RpcError::invalid_params("`cursor` must be a string")),
    };
    // An invalid cursor comes back as invalid_request: -32602 through the one table.
    let page = caller.coordinator().list(&caller.bearer, &caller.scope, cursor, LIST_PAGE).await?;
    // A completed execution needs its result to tell `completed` from `failed`.
    let snaps = futures_util::future::join_all(page.executions.into_iter().map(|view| async move {
        let fallback = Snapshot::bare(view.clone());
        task_view::for_v1_status(caller, view).await.unwrap_or(fallback)
    }))
    .await;
    let tasks: Vec<Value> = snaps.iter().map(task_view::v1_task).collect();
    let mut out = json!({"tasks": tasks});
    if !page.next_cursor.is_empty() {
        out["nextCursor"] = page.next_cursor.into();
    }
    Ok(out)
}

pub(super) async fn cancel(ctx: &Ctx, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let caller = &ctx.caller;
    let id = task_id(params)?;
    let answer = caller.coordinator().cancel(&caller.bearer, &caller.scope, id).await.map_err(task_error)?;
    let outcome = answer.outcome();
    let mut view = match answer.execution {
        Some(v) => v,
        None => caller.coordinator().execution(&caller.bearer, &caller.scope, id).await.map_err(task_error)?,
    };
    match outcome {
        CancelOutcome::AlreadyTerminal => {
            let snap = task_view::for_v1_status(caller, view).await.map_err(task_error)?;
            let status = task_view::v1_status(&snap);
            Err(RpcError::invalid_params(format!("cannot cancel task in terminal state '{status}'")))
        }
        CancelOutcome::Unsupported => Err(RpcError::invalid_params("this task cannot be cancelled")),
        _ => {
            // The cancel is on record: in this dialect the task is cancelled from now on.
            view.set_cancel_state(CancelState::Requested);
            Ok(task_view::v1_task(&Snapshot::bare(view)))
        }
    }
}
