//! How a planned `tools/call` proceeds, as a table: every row is a kind of
//! caller and tool, and what the call then does.

use super::{Course, Facts, Handoff, Plan, course};
use crate::mcp::Era;

#[test]
fn every_kind_of_call_takes_its_course() {
    use Era::{Legacy as L, Modern as M};
    use Handoff::{Handle as H, Task as T, Wait as W};
    // era, handoff, immediate, task-time input, elicitation, retry, budget
    //   => compose, waits, mrtr, call at once
    #[rustfmt::skip]
    let table = [
        // 2026-07-28 task-required tool that may ask, client can answer: MRTR first, then the task.
        ((M, T, true, true, true, false, true), (true, true, true, false)),
        // ...and the retry that answers that round holds no second wait place.
        ((M, T, true, true, true, true, true), (true, false, true, false)),
        // A task-required tool that never asks: the task at once, nothing waits.
        ((M, T, true, false, true, false, true), (false, false, false, false)),
        // A foreground call: waits, input as MRTR, start and wait in one call.
        ((M, W, false, false, false, false, true), (false, true, true, true)),
        // ...with no budget it still waits (the caller asked to), in two calls.
        ((M, W, false, false, false, false, false), (false, true, true, false)),
        // The compatibility handle: MRTR only for a caller that can answer.
        ((M, H, false, true, true, false, true), (false, true, true, true)),
        ((M, H, false, true, false, false, true), (false, true, false, true)),
        // Legacy: never MRTR; a task is handed over at once.
        ((L, T, true, true, true, false, true), (false, false, false, false)),
        ((L, H, false, false, false, false, true), (false, true, false, true)),
        ((L, H, false, false, false, false, false), (false, false, false, false)),
    ];
    for ((era, handoff, immediate, task_time_input, elicitation, retry, budget), want) in table {
        let plan = Plan { handoff, immediate };
        let facts = Facts { era, task_time_input, elicitation, retry, budget };
        let (compose, waits, mrtr, call_at_once) = want;
        assert_eq!(
            course(&plan, facts),
            Course { compose, waits, mrtr, call_at_once },
            "{facts:?} {handoff:?} immediate={immediate}"
        );
    }
}
