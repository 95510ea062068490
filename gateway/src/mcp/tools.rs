//! `tools/list` and `tools/call` in both eras. A call runs in the foreground up
//! to `options.foreground_budget`; a tool that outlives it is handed over as a
//! task (when this request can take one), as the compatibility handle (when
//! that surface is on), or waited for on an SSE stream (background forbidden,
//! or no other way out). A call that will wait holds a wait place
//! (`crate::waits`), taken before anything starts; when the gateway shuts
//! down, a foreground wait hands over at once and a stream ends saying so.
//! At 2026-07-28 input asked while a call without a task waits travels as an
//! MRTR round, and a task-required tool that may ask for input is held for a
//! short first-input window: input asked there is an MRTR round too, and the
//! retry carrying the answers gets the task (the same execution). Which of
//! these a call does is decided first, by one pure function (`plan`), and then
//! carried out here. Does not shape tasks (see `task_view`) nor serve the
//! compatibility tools (see `compat`).

mod plan;
#[cfg(test)]
mod plan_tests;
mod progress;

use super::compat;
use super::context::{Ctx, Outgoing, Reply};
use super::error::RpcError;
use super::jsonrpc::str_param;
use super::protocol::Era;
use super::request_state::{self, RequestState};
use super::task_view::{self, Snapshot};
use crate::coordinator::NewExecution;
use crate::execution::is_terminal;
use crate::waits::WaitPermit;
use baton_proto::coordinator::v1::{self as pb, ExecutionStatus, ExecutionView, InputRequestState};
use baton_proto::error::{ErrorCode, WireError};
use baton_proto::worker::v1::BackgroundPolicy as Policy;
use futures_util::StreamExt;
use plan::{CallPlan, Foreground, Handoff, Inputs, Origin, plan};
use serde_json::{Map, Value, json};
use std::time::Duration;
use tokio::time::Instant;

/// One long poll never asks the coordinator for more than this.
const WAIT_SLICE: Duration = Duration::from_secs(25);

/// How long a task-required call is held before its task is handed over, when
/// the tool may ask for input and the client can answer an MRTR round: input
/// asked in this window is gathered first (MRTR, then the task), so a client
/// need not choose between the two surfaces up front. A tool that neither asks
/// nor ends in the window costs its caller this much latency, no more.
const FIRST_INPUT_WINDOW: Duration = Duration::from_secs(1);

/// The tool's background policy; one this gateway does not know is forbidden.
fn policy(def: &pb::ToolDefinition) -> Policy {
    match def.background() {
        Policy::Unspecified => Policy::Forbidden,
        p => p,
    }
}

pub(super) async fn list(ctx: &Ctx) -> Result<Value, RpcError> {
    let caller = &ctx.caller;
    let defs = caller.coordinator().tools(&caller.bearer, &caller.scope).await?;
    let mut tools: Vec<Value> = defs.iter().map(|d| tool(ctx, d)).collect();
    if ctx.compat_enabled() {
        tools.extend(compat::definitions(ctx));
    }
    let mut result = json!({"tools": tools});
    if ctx.era == Era::Modern {
        // The list depends on the caller's project: never share it across credentials.
        result["ttlMs"] = 0.into();
        result["cacheScope"] = "private".into();
    }
    Ok(result)
}

fn tool(ctx: &Ctx, def: &pb::ToolDefinition) -> Value {
    let mut schema = match serde_json::from_str::<Value>(&def.input_schema_json) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    schema.entry("type").or_insert_with(|| "object".into());
    let mut tool = json!({"name": def.name, "inputSchema": schema});
    if !def.description.is_empty() {
        tool["description"] = def.description.clone().into();
    }
    metadata(&mut tool, def);
    if ctx.legacy_tasks() {
        // MCP's `taskSupport` words are the policy's names.
        tool["execution"] = json!({"taskSupport": policy(def).name()});
    }
    tool
}

/// The MCP metadata the tool declared (`title`, `annotations`, `outputSchema`,
/// `icons`), shown as given; the coordinator checked each is JSON of its shape.
fn metadata(tool: &mut Value, def: &pb::ToolDefinition) {
    if !def.title.is_empty() {
        tool["title"] = def.title.clone().into();
    }
    for (key, text) in
        [("annotations", &def.annotations_json), ("outputSchema", &def.output_schema_json), ("icons", &def.icons_json)]
    {
        if let Ok(v) = serde_json::from_str::<Value>(text) {
            tool[key] = v;
        }
    }
}

/// The tool `name` among `defs` and how a call of it goes; refused when the
/// tool is unknown or the client lacks what the tool requires.
fn plan_call(
    ctx: &Ctx,
    name: &str,
    params: &Map<String, Value>,
    defs: &[pb::ToolDefinition],
) -> Result<CallPlan, RpcError> {
    let def = defs
        .iter()
        .find(|d| d.name == name)
        .ok_or_else(|| RpcError::invalid_params(format!("unknown tool: {name}")))?;
    if ctx.era == Era::Modern {
        // A server must not rely on what the client did not declare (2026-07-28).
        let missing: Map<String, Value> = def
            .required_client_capabilities
            .iter()
            .filter(|c| !ctx.declares(c))
            .map(|c| (c.clone(), json!({})))
            .collect();
        if !missing.is_empty() {
            return Err(RpcError::missing_capabilities(Value::Object(missing)));
        }
    }
    let takes_task = match ctx.era {
        // The `task` member only counts once the session negotiated the utility.
        Era::Legacy => ctx.legacy_tasks() && params.get("task").is_some_and(Value::is_object),
        Era::Modern => ctx.native_enabled() && ctx.declares_tasks_extension(),
    };
    plan(&Inputs {
        name,
        era: ctx.era,
        policy: policy(def),
        takes_task,
        compat: ctx.compat_enabled(),
        task_time_input: def.task_time_input,
        elicitation: ctx.declares("elicitation"),
        retry: params.get("requestState").is_some(),
        budget: !ctx.caller.state.options.foreground_budget.is_zero(),
    })
}

/// The plan for calling `name`. A plan the cached definitions would refuse is
/// made again from fresh ones, fetched with the caller's credential (401
/// comes first).
async fn planned(ctx: &Ctx, name: &str, params: &Map<String, Value>) -> Result<CallPlan, RpcError> {
    let caller = &ctx.caller;
    let scope = &caller.scope;
    let cached = caller.state.tool_defs.fresh(&scope.org_id, &scope.project_id);
    if let Some(Ok(plan)) = cached.as_deref().map(|defs| plan_call(ctx, name, params, defs)) {
        return Ok(plan);
    }
    let defs = caller.coordinator().tools(&caller.bearer, scope).await?;
    let defs = caller.state.tool_defs.keep(&scope.org_id, &scope.project_id, defs);
    plan_call(ctx, name, params, &defs)
}

pub(super) async fn call(ctx: &Ctx, params: &Map<String, Value>) -> Result<Reply, RpcError> {
    let name = str_param(params, "name").ok_or_else(|| RpcError::invalid_params("`name` must be a string"))?;
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => return Err(RpcError::invalid_params("`arguments` must be an object")),
    };
    if ctx.compat_enabled()
        && let Some(tool) = compat::Tool::parse(&ctx.caller.state.options.compat_prefix, name)
    {
        return compat::call(ctx, tool, &args).await.map(Reply::Json);
    }
    let plan = planned(ctx, name, params).await?;
    // Refused over a bound before anything starts, so a refusal changes nothing.
    let place = if plan.holds_place() { Some(ctx.caller.admit_wait()?) } else { None };
    act(ctx, &Call { name, args: &args, params }, plan, place).await.or_else(Stop::into_reply)
}

/// One `tools/call` of a Baton tool.
struct Call<'a> {
    name: &'a str,
    args: &'a Value,
    params: &'a Map<String, Value>,
}

impl Call<'_> {
    /// A new execution of the tool.
    async fn start(&self, ctx: &Ctx, surface: pb::Surface) -> Result<ExecutionView, Stop> {
        let caller = &ctx.caller;
        let new = NewExecution::new(self.name, self.args, surface);
        caller.coordinator().start(&caller.bearer, &caller.scope, &new).await.map_err(Stop::refused)
    }

    /// The execution of the MRTR round this call answers.
    async fn resume(&self, ctx: &Ctx) -> Result<ExecutionView, RpcError> {
        resume(ctx, self.name, self.params.get("requestState"), self.params.get("inputResponses")).await
    }

    /// A legacy caller's `progressToken`: a call that waits on SSE relays the tool's progress.
    fn progress_token(&self, era: Era) -> Option<Value> {
        let token = self.params.get("_meta").and_then(|m| m.get("progressToken"));
        token.filter(|t| (t.is_string() || t.is_number()) && era == Era::Legacy).cloned()
    }
}

/// Why a call ends before its plan is through.
enum Stop {
    /// The coordinator refused the arguments.
    BadArguments(String),
    Error(RpcError),
}

impl From<RpcError> for Stop {
    fn from(e: RpcError) -> Self {
        Stop::Error(e)
    }
}

impl Stop {
    fn refused(e: WireError) -> Self {
        if e.code == ErrorCode::InvalidInput { Stop::BadArguments(e.message) } else { Stop::Error(e.into()) }
    }

    /// Bad arguments are a tool error the model can correct, not a protocol error.
    fn into_reply(self) -> Result<Reply, RpcError> {
        match self {
            Stop::BadArguments(message) => {
                Ok(Reply::Json(json!({"content": [{"type": "text", "text": message}], "isError": true})))
            }
            Stop::Error(e) => Err(e),
        }
    }
}

/// Carries out `plan`.
async fn act(ctx: &Ctx, call: &Call<'_>, plan: CallPlan, place: Option<WaitPermit>) -> Result<Reply, Stop> {
    let reply = match plan {
        CallPlan::Task => {
            let view = call.start(ctx, pb::Surface::McpNative).await?;
            hand_over(ctx, Handoff::Task, view, false, place, None).await?
        }
        CallPlan::FirstInputThenTask => {
            let view = call.start(ctx, pb::Surface::McpNative).await?;
            let held = hold_for_first_input(ctx, view).await?;
            hand_over(ctx, Handoff::Task, held, true, place, None).await?
        }
        CallPlan::TaskAfterAnswers => {
            let view = call.resume(ctx).await?;
            hand_over(ctx, Handoff::Task, view, false, place, None).await?
        }
        CallPlan::Foreground(f) => foreground(ctx, call, f, place).await?,
    };
    Ok(reply)
}

/// Waits for up to the foreground budget: the tool's outcome when it ends in
/// time, else the execution handed over.
async fn foreground(ctx: &Ctx, call: &Call<'_>, f: Foreground, place: Option<WaitPermit>) -> Result<Reply, Stop> {
    let caller = &ctx.caller;
    let budget = caller.state.options.foreground_budget;
    let surface = if f.handoff == Handoff::Handle { pb::Surface::McpCompat } else { pb::Surface::McpNative };
    let snap = match f.origin {
        Origin::Resume => {
            let view = call.resume(ctx).await?;
            wait_until(ctx, view, Instant::now() + budget, f.mrtr).await?
        }
        Origin::Start => {
            let view = call.start(ctx, surface).await?;
            wait_until(ctx, view, Instant::now() + budget, f.mrtr).await?
        }
        Origin::StartAndWait => {
            let deadline = Instant::now() + budget;
            let new = NewExecution::new(call.name, call.args, surface);
            let wait = budget.min(WAIT_SLICE);
            let called = caller.coordinator().call_execution(&caller.bearer, &caller.scope, &new, wait, f.mrtr).await;
            match called.map_err(Stop::refused)? {
                Some(calling) => settle_call(ctx, calling, deadline, f.mrtr).await?,
                // A coordinator that predates the call: start, then wait.
                None => {
                    let view = call.start(ctx, surface).await?;
                    wait_until(ctx, view, Instant::now() + budget, f.mrtr).await?
                }
            }
        }
    };
    if let Some(outcome) = task_view::outcome(&snap) {
        return Ok(outcome.map(Reply::Json)?);
    }
    Ok(hand_over(ctx, f.handoff, snap.view, f.mrtr, place, call.progress_token(ctx.era)).await?)
}

/// The rest of a call started with `CallExecution`: its settlement, or, when
/// the coordinator's wait ended first, the ordinary wait for what is left of
/// the budget (which also hands over at once if the gateway is shutting down).
async fn settle_call(
    ctx: &Ctx,
    calling: crate::coordinator::Calling,
    deadline: Instant,
    mrtr: bool,
) -> Result<Snapshot, RpcError> {
    let started = calling.started.clone();
    let view = match ctx.caller.state.unless_shutdown(calling.settled()).await {
        Some(settled) => {
            let settled = settled?;
            if settled.view.status() == ExecutionStatus::Completed {
                return Ok(task_view::settled(settled.view, settled.result_json.as_deref()));
            }
            settled.view
        }
        None => started,
    };
    wait_until(ctx, view, deadline, mrtr).await
}

/// Holds a composed call until the tool asks for input, ends, or the first
/// input window closes (or the gateway begins shutting down).
async fn hold_for_first_input(ctx: &Ctx, mut view: ExecutionView) -> Result<ExecutionView, RpcError> {
    let caller = &ctx.caller;
    let deadline = Instant::now() + FIRST_INPUT_WINDOW;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if is_terminal(&view) || asks(&view) || left.is_zero() {
            return Ok(view);
        }
        let wait = caller.coordinator().wait(&caller.bearer, &caller.scope, &view.execution_id, left, view.status());
        match caller.state.unless_shutdown(wait).await {
            Some(waited) => view = waited?,
            None => return Ok(view),
        }
    }
}

/// The MRTR retry: `requestState` is the sealed state the first round handed
/// this principal for this tool (see `request_state`); its execution is read
/// with the caller's credential (owner-checked like any read), the answers are
/// relayed and the call goes on with it.
async fn resume(
    ctx: &Ctx,
    name: &str,
    state: Option<&Value>,
    responses: Option<&Value>,
) -> Result<ExecutionView, RpcError> {
    let caller = &ctx.caller;
    let stale = || RpcError::invalid_params("`requestState` does not name an open request of this tool");
    let token = state.and_then(Value::as_str).ok_or_else(stale)?;
    let key = &caller.state.options.session_key;
    let opened = request_state::open_for(key, token, &caller.principal, name).ok_or_else(stale)?;
    let id = opened.execution_id.as_str();
    let view = match caller.coordinator().execution(&caller.bearer, &caller.scope, id).await {
        Ok(v) if v.tool_name == name => v,
        Ok(_) => return Err(stale()),
        Err(e) if e.code == ErrorCode::NotFound => return Err(stale()),
        Err(e) => return Err(e.into()),
    };
    match responses {
        None | Some(Value::Null) => Ok(view),
        Some(Value::Object(answers)) => {
            super::tasks_v2::forward_responses(ctx, &view, answers).await?;
            Ok(caller.coordinator().execution(&caller.bearer, &caller.scope, id).await?)
        }
        Some(_) => Err(RpcError::invalid_params("`inputResponses` must be an object")),
    }
}

/// With MRTR, a call stops waiting when the execution asks something still
/// unanswered (answers already given only wait for the tool to resume).
fn asks(view: &ExecutionView) -> bool {
    view.status() == ExecutionStatus::InputRequired
        && view.input_requests.iter().any(|r| r.state() == InputRequestState::Open)
}

/// The MRTR answer for an execution waiting for input: its open requests and
/// the state to send back with the answers. A client that did not declare
/// elicitation cannot answer: the execution is cancelled and the call refused.
async fn input_required(ctx: &Ctx, view: &ExecutionView) -> Result<Value, RpcError> {
    let caller = &ctx.caller;
    if !ctx.declares("elicitation") {
        if let Err(e) = caller.coordinator().cancel(&caller.bearer, &caller.scope, &view.execution_id).await {
            tracing::warn!(execution_id = %view.execution_id, error = %e.message, "cancel of an unanswerable call failed");
        }
        return Err(RpcError::missing_capabilities(json!({"elicitation": {}})));
    }
    let state = RequestState {
        execution_id: view.execution_id.clone(),
        tool: view.tool_name.clone(),
        principal: caller.principal.clone(),
    };
    let sealed = request_state::seal(&caller.state.options.session_key, &state).map_err(|e| {
        tracing::error!(error = %e, "sealing a request state failed");
        RpcError::internal()
    })?;
    Ok(json!({
        "resultType": "input_required",
        "inputRequests": task_view::input_requests(view),
        "requestState": sealed,
    }))
}

/// Waits for a terminal status (or, with `mrtr`, for input_required) until
/// `deadline` or the gateway's shutdown, then reads the result.
async fn wait_until(ctx: &Ctx, mut view: ExecutionView, deadline: Instant, mrtr: bool) -> Result<Snapshot, RpcError> {
    let caller = &ctx.caller;
    loop {
        let settled = is_terminal(&view) || (mrtr && asks(&view));
        let left = deadline.saturating_duration_since(Instant::now());
        if settled || left.is_zero() {
            break;
        }
        let wait = caller.coordinator().wait(
            &caller.bearer,
            &caller.scope,
            &view.execution_id,
            left.min(WAIT_SLICE),
            view.status(),
        );
        match caller.state.unless_shutdown(wait).await {
            Some(waited) => view = waited?,
            // Shutting down: hand over now, as if the budget had run out.
            None => break,
        }
    }
    Ok(task_view::complete(caller, view).await?)
}

async fn hand_over(
    ctx: &Ctx,
    handoff: Handoff,
    view: ExecutionView,
    mrtr: bool,
    place: Option<WaitPermit>,
    progress_token: Option<Value>,
) -> Result<Reply, RpcError> {
    if mrtr && asks(&view) {
        return input_required(ctx, &view).await.map(Reply::Json);
    }
    match handoff {
        Handoff::Task => create_task_result(ctx, view).await.map(Reply::Json),
        Handoff::Handle => Ok(Reply::Json(compat::handle_result(ctx, &view))),
        Handoff::Wait => Ok(match progress_token {
            Some(token) => progress::wait_on_stream(ctx, view, mrtr, place, token),
            None => wait_on_stream(ctx, view, mrtr, place),
        }),
    }
}

async fn create_task_result(ctx: &Ctx, view: ExecutionView) -> Result<Value, RpcError> {
    match ctx.era {
        Era::Legacy => {
            let snap = task_view::complete(&ctx.caller, view).await?;
            Ok(json!({"task": task_view::v1_task(&snap)}))
        }
        Era::Modern => {
            let mut task = task_view::v2_task(&view);
            task.insert("resultType".into(), "task".into());
            Ok(Value::Object(task))
        }
    }
}

/// Keeps the request open on SSE (with keep-alive comments) until the
/// execution ends (or, with `mrtr`, asks for input), then answers; when the
/// gateway shuts down first, the answer is an error naming the execution,
/// which goes on.
fn wait_on_stream(ctx: &Ctx, view: ExecutionView, mrtr: bool, place: Option<WaitPermit>) -> Reply {
    let ctx = ctx.clone();
    let fut = async move {
        let _place = place;
        let caller = &ctx.caller;
        let mut view = view;
        while !is_terminal(&view) {
            if mrtr && asks(&view) {
                return match input_required(&ctx, &view).await {
                    Ok(result) => Outgoing::Result(result),
                    Err(e) => Outgoing::Error(e),
                };
            }
            let wait =
                caller.coordinator().wait(&caller.bearer, &caller.scope, &view.execution_id, WAIT_SLICE, view.status());
            view = match caller.state.unless_shutdown(wait).await {
                Some(Ok(v)) => v,
                Some(Err(e)) => return Outgoing::Error(e.into()),
                // Calling again would start another execution: not resumable.
                None => return Outgoing::Error(RpcError::shutting_down(&view.execution_id, false)),
            };
        }
        let snap = match task_view::complete(caller, view).await {
            Ok(s) => s,
            Err(e) => return Outgoing::Error(e.into()),
        };
        match task_view::outcome(&snap) {
            Some(Ok(result)) => Outgoing::Result(result),
            Some(Err(e)) => Outgoing::Error(e),
            None => Outgoing::Error(RpcError::internal()),
        }
    };
    Reply::Stream(futures_util::stream::once(fut).boxed())
}
