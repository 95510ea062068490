//! How a `tools/call` goes, as a table: every row is a kind of caller and
//! tool, and the plan the call then follows.

use super::plan::{CallPlan, Foreground, Handoff, Inputs, Origin, plan};
use crate::mcp::error::{METHOD_NOT_FOUND, RpcError};
use crate::mcp::protocol::{Era, TASKS_LEGACY_VERSION};
use baton_proto::worker::v1::BackgroundPolicy as Policy;

/// A call of tool `t` with nothing declared, asked or configured.
fn of(era: Era, policy: Policy) -> Inputs<'static> {
    Inputs {
        name: "t",
        era,
        policy,
        takes_task: false,
        compat: false,
        task_time_input: false,
        elicitation: false,
        retry: false,
        budget: false,
    }
}

fn fg(handoff: Handoff, origin: Origin, mrtr: bool, holds_place: bool) -> Result<CallPlan, RpcError> {
    Ok(CallPlan::Foreground(Foreground { handoff, origin, mrtr, holds_place }))
}

#[test]
fn every_kind_of_call_has_its_plan() {
    use CallPlan::{FirstInputThenTask, Task, TaskAfterAnswers};
    use Era::{Legacy as L, Modern as M};
    use Handoff::{Handle as H, Task as T, Wait as W};
    use Origin::{Resume, Start, StartAndWait};
    use Policy::{Forbidden, Optional, Required, Unspecified};
    let asks = Inputs { task_time_input: true, elicitation: true, budget: true, ..of(M, Required) };
    #[rustfmt::skip]
    let table: Vec<(Inputs<'_>, Result<CallPlan, RpcError>)> = vec![
        // 2026-07-28
        // A task-required tool that may ask, a client that can answer: MRTR first, then the task.
        (Inputs { takes_task: true, ..asks }, Ok(FirstInputThenTask)),
        // ...and the retry that answers that round gets the task.
        (Inputs { takes_task: true, retry: true, ..asks }, Ok(TaskAfterAnswers)),
        // A task-required tool that never asks, or a client that cannot answer: the task at once.
        (Inputs { takes_task: true, task_time_input: false, ..asks }, Ok(Task)),
        (Inputs { takes_task: true, elicitation: false, ..asks }, Ok(Task)),
        // A task-optional tool and a client that takes tasks: the task only past the budget.
        (Inputs { takes_task: true, budget: true, ..of(M, Optional) }, fg(T, StartAndWait, false, true)),
        (Inputs { takes_task: true, ..of(M, Optional) }, fg(T, Start, false, false)),
        // A tool that forbids the background: the caller waits, input as MRTR,
        // start and wait in one coordinator call when there is a budget.
        (Inputs { budget: true, ..of(M, Forbidden) }, fg(W, StartAndWait, true, true)),
        (of(M, Forbidden), fg(W, Start, true, true)),
        (Inputs { takes_task: true, compat: true, ..of(M, Forbidden) }, fg(W, Start, true, true)),
        // A policy this gateway does not know is forbidden.
        (of(M, Unspecified), fg(W, Start, true, true)),
        // The retry answering that wait's round goes on with its execution.
        (Inputs { retry: true, budget: true, ..of(M, Forbidden) }, fg(W, Resume, true, true)),
        // No tasks, the compatibility handle: MRTR only for a caller that can answer.
        (Inputs { compat: true, elicitation: true, budget: true, ..of(M, Optional) }, fg(H, StartAndWait, true, true)),
        (Inputs { compat: true, budget: true, ..of(M, Optional) }, fg(H, StartAndWait, false, true)),
        (Inputs { compat: true, ..of(M, Required) }, fg(H, Start, false, false)),
        // ...so only that caller's `requestState` resumes; another's starts anew.
        (Inputs { compat: true, elicitation: true, retry: true, ..of(M, Optional) }, fg(H, Resume, true, false)),
        (Inputs { compat: true, retry: true, budget: true, ..of(M, Optional) }, fg(H, StartAndWait, false, true)),
        // No tasks, no handle: a task-optional tool waits, a task-required one is refused.
        (Inputs { budget: true, ..of(M, Optional) }, fg(W, StartAndWait, true, true)),
        (of(M, Required), Err(RpcError::missing_tasks_capability())),
        // Before 2026-07-28
        // A task asked for is handed over at once, never after an MRTR round.
        (Inputs { takes_task: true, ..asks }.with_era(L), Ok(Task)),
        (Inputs { takes_task: true, ..of(L, Optional) }, Ok(Task)),
        (Inputs { takes_task: true, ..of(L, Forbidden) }, Err(RpcError::new(
            METHOD_NOT_FOUND, "tool t does not support task-augmented execution"))),
        // No task asked: the caller waits (never with MRTR), or gets the handle.
        (Inputs { budget: true, ..of(L, Forbidden) }, fg(W, StartAndWait, false, true)),
        (Inputs { retry: true, ..of(L, Optional) }, fg(W, Start, false, true)),
        (Inputs { compat: true, budget: true, ..of(L, Required) }, fg(H, StartAndWait, false, true)),
        (Inputs { compat: true, ..of(L, Required) }, fg(H, Start, false, false)),
        (of(L, Required), Err(RpcError::new(METHOD_NOT_FOUND, format!(
            "tool t requires task-augmented execution (protocol {TASKS_LEGACY_VERSION})")))),
    ];
    for (inputs, want) in table {
        assert_eq!(plan(&inputs), want, "{inputs:?}");
    }
}

impl Inputs<'_> {
    fn with_era(self, era: Era) -> Self {
        Inputs { era, ..self }
    }
}

#[test]
fn a_call_holds_a_wait_place_when_it_may_wait() {
    let foreground =
        |holds_place| Foreground { handoff: Handoff::Handle, origin: Origin::Start, mrtr: false, holds_place };
    for (plan, holds) in [
        (CallPlan::Task, false),
        (CallPlan::FirstInputThenTask, true),
        (CallPlan::TaskAfterAnswers, false),
        (CallPlan::Foreground(foreground(true)), true),
        (CallPlan::Foreground(foreground(false)), false),
    ] {
        assert_eq!(plan.holds_place(), holds, "{plan:?}");
    }
}
