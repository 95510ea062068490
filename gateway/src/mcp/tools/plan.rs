//! How a `tools/call` goes, decided before anything is done: one pure function
//! of what the request, the tool and this gateway's options say, so every
//! kind of call can be read (and tested, see `plan_tests`) as one row of a
//! table. `tools::call` only acts on the answer.

use crate::mcp::error::{METHOD_NOT_FOUND, RpcError};
use crate::mcp::protocol::{Era, TASKS_LEGACY_VERSION};
use baton_proto::worker::v1::BackgroundPolicy as Policy;

/// How an execution that is not over is given to the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Handoff {
    Task,
    /// The compatibility handle.
    Handle,
    /// The request stays open on SSE until the execution ends.
    Wait,
}

/// What a call's plan depends on; all of it is known before anything starts.
#[derive(Clone, Copy, Debug)]
pub(super) struct Inputs<'a> {
    /// The tool's name, for the refusals.
    pub(crate) name: &'a str,
    pub(crate) era: Era,
    /// The tool's background policy (one this gateway does not know is forbidden).
    pub(crate) policy: Policy,
    /// The caller takes a task: before 2026-07-28, the request asks for one
    /// (its `task` member, once the session negotiated tasks); at 2026-07-28,
    /// native tasks are on and the request declared the tasks extension.
    pub(crate) takes_task: bool,
    /// The compatibility surface is on.
    pub(crate) compat: bool,
    /// The tool may ask for input while it runs.
    pub(crate) task_time_input: bool,
    /// 2026-07-28: the request declared the elicitation capability.
    pub(crate) elicitation: bool,
    /// The request carries a `requestState` (it answers an MRTR round).
    pub(crate) retry: bool,
    /// A foreground budget is configured.
    pub(crate) budget: bool,
}

/// How a call goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CallPlan {
    /// Start, and answer with the task at once.
    Task,
    /// 2026-07-28, a task-required tool that may ask for input, and a client
    /// that can answer: start and hold the call for the first input window.
    /// Input asked there is an MRTR round; otherwise the task, so a client
    /// need not choose between the two surfaces up front.
    FirstInputThenTask,
    /// The retry answering that round: the answers are relayed, then the task
    /// whatever the tool does next (later questions arrive through `tasks/get`).
    TaskAfterAnswers,
    /// Wait in the foreground for up to the budget: the tool's outcome when it
    /// ends in time, else the execution is handed over.
    Foreground(Foreground),
}

/// A foreground call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Foreground {
    /// How the execution is given to the caller if the budget runs out first.
    pub(crate) handoff: Handoff,
    pub(crate) origin: Origin,
    /// Input the tool asks for while the caller waits travels as an MRTR
    /// round (InputRequiredResult, then a retry carrying the answers).
    pub(crate) mrtr: bool,
    /// The call holds a wait place.
    pub(crate) holds_place: bool,
}

/// Where a foreground call's execution comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// The one the answered round's `requestState` names.
    Resume,
    /// A new one.
    Start,
    /// A new one, started and waited for in one coordinator call, since the
    /// call waits for its result anyway.
    StartAndWait,
}

impl CallPlan {
    /// The call holds a wait place, taken before anything starts.
    pub(super) fn holds_place(self) -> bool {
        match self {
            CallPlan::FirstInputThenTask => true,
            CallPlan::Foreground(f) => f.holds_place,
            CallPlan::Task | CallPlan::TaskAfterAnswers => false,
        }
    }
}

/// How a call of a known tool goes, or why the client cannot make it.
pub(super) fn plan(i: &Inputs<'_>) -> Result<CallPlan, RpcError> {
    let modern = i.era == Era::Modern;
    let handoff = match handover(i)? {
        Handover::AtOnce if modern && i.task_time_input && i.elicitation => {
            return Ok(if i.retry { CallPlan::TaskAfterAnswers } else { CallPlan::FirstInputThenTask });
        }
        Handover::AtOnce => return Ok(CallPlan::Task),
        Handover::Later(handoff) => handoff,
    };
    // A caller that would get the compatibility handle takes an MRTR round
    // only when it declared elicitation; the handle serves the others.
    let mrtr = modern
        && match handoff {
            Handoff::Wait => true,
            Handoff::Handle => i.elicitation,
            Handoff::Task => false,
        };
    let origin = match (i.retry && mrtr, i.budget) {
        (true, _) => Origin::Resume,
        (false, true) => Origin::StartAndWait,
        (false, false) => Origin::Start,
    };
    // With no budget a call still waits when the caller asked to (no task, no handle).
    let holds_place = i.budget || handoff == Handoff::Wait;
    Ok(CallPlan::Foreground(Foreground { handoff, origin, mrtr, holds_place }))
}

/// When a call gives its execution to the caller.
enum Handover {
    /// As a task, as soon as it exists.
    AtOnce,
    /// After the foreground budget, if it is not over.
    Later(Handoff),
}

fn handover(i: &Inputs<'_>) -> Result<Handover, RpcError> {
    let later = |handoff| Ok(Handover::Later(handoff));
    match i.era {
        Era::Legacy => match (i.policy, i.takes_task) {
            (Policy::Forbidden | Policy::Unspecified, true) => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("tool {} does not support task-augmented execution", i.name),
            )),
            (_, true) => Ok(Handover::AtOnce),
            (Policy::Forbidden | Policy::Unspecified, false) => later(Handoff::Wait),
            (_, false) if i.compat => later(Handoff::Handle),
            (Policy::Required, false) => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("tool {} requires task-augmented execution (protocol {TASKS_LEGACY_VERSION})", i.name),
            )),
            (Policy::Optional, false) => later(Handoff::Wait),
        },
        Era::Modern => match i.policy {
            Policy::Forbidden | Policy::Unspecified => later(Handoff::Wait),
            Policy::Required if i.takes_task => Ok(Handover::AtOnce),
            Policy::Optional if i.takes_task => later(Handoff::Task),
            _ if i.compat => later(Handoff::Handle),
            Policy::Required => Err(RpcError::missing_tasks_capability()),
            Policy::Optional => later(Handoff::Wait),
        },
    }
}
