//! The execution state machine: `apply(state, event, now)` returns the next state
//! and the effects to carry out after the transition commits, or says why the
//! event is ignored. Pure: no clock, no I/O. A terminal state never changes, and
//! the only effect that runs the business tool (`Effect::Invoke`) arises from a
//! claim of a pending execution, which exists again only after the tool itself
//! reported a retryable failure, or after the lease holder proved the attempt
//! never reached the tool (`Event::Undelivered`).

use super::policy::retry_backoff_ms;
use super::status::{FailureReason, Status};

pub(crate) use super::Millis;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    pub worker_id: String,
    pub attempt: u32,
    pub expires_at: Millis,
}

/// The status together with the data only that status has.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Admitted, not running; claimable from `not_before` (scheduled runs, retry backoff).
    Pending {
        not_before: Millis,
    },
    Working {
        lease: Lease,
    },
    InputRequired {
        lease: Lease,
    },
    Completed,
    Failed {
        reason: FailureReason,
    },
    Cancelled,
}

impl Phase {
    pub fn status(&self) -> Status {
        match self {
            Phase::Pending { .. } => Status::Pending,
            Phase::Working { .. } => Status::Working,
            Phase::InputRequired { .. } => Status::InputRequired,
            Phase::Completed => Status::Completed,
            Phase::Failed { .. } => Status::Failed,
            Phase::Cancelled => Status::Cancelled,
        }
    }

    pub fn lease(&self) -> Option<&Lease> {
        match self {
            Phase::Working { lease } | Phase::InputRequired { lease } => Some(lease),
            _ => None,
        }
    }

    fn lease_mut(&mut self) -> Option<&mut Lease> {
        match self {
            Phase::Working { lease } | Phase::InputRequired { lease } => Some(lease),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub phase: Phase,
    /// Attempts started so far (each one invoked the tool once).
    pub attempts: u32,
    pub max_attempts: u32,
    pub deadline: Millis,
    pub cancel_requested: bool,
    pub owner_loss_detection_at: Option<Millis>,
    /// The current attempt started a remote MCP task whose id is recorded: a new
    /// owner resumes polling it instead of calling the tool.
    pub remote_task: bool,
}

impl State {
    pub fn new(not_before: Millis, deadline: Millis, max_attempts: u32) -> Self {
        State {
            phase: Phase::Pending { not_before },
            attempts: 0,
            max_attempts: max_attempts.max(1),
            deadline,
            cancel_requested: false,
            owner_loss_detection_at: None,
            remote_task: false,
        }
    }

    pub fn status(&self) -> Status {
        self.phase.status()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    Success,
    ToolError {
        retryable: bool,
    },
    /// The tool stopped because it was asked to.
    Cancelled,
    /// A remote server asked for an interaction Baton does not support.
    UnsupportedInteraction,
    /// The tool's server failed the call at protocol level. Never retried:
    /// whether the tool ran is unknown.
    ProtocolError,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Claim {
        worker_id: String,
        lease_until: Millis,
    },
    Heartbeat {
        worker_id: String,
        attempt: u32,
        lease_until: Millis,
    },
    /// The lease holder reports how its attempt ended.
    Settle {
        worker_id: String,
        attempt: u32,
        outcome: Outcome,
    },
    RequestCancel,
    LeaseLapsed {
        detect_at: Millis,
    },
    OwnerLossDue,
    DeadlinePassed,
    /// Refused before invocation (e.g. a hosted tool that needs task-time input).
    Refuse,
    /// The lease holder proved it never started this attempt (it re-registered
    /// without it): the assignment was lost in transit, so the execution is
    /// claimable again and the attempt does not count.
    Undelivered {
        worker_id: String,
        attempt: u32,
    },
    /// The owner's remote tool call created a remote task, now recorded; a
    /// shorter remote ttl shortens the deadline.
    RemoteTaskRecorded {
        worker_id: String,
        attempt: u32,
        deadline: Option<Millis>,
    },
    /// The remote server published input requests for the owner.
    InputRequested {
        worker_id: String,
        attempt: u32,
    },
    /// The owner answered; `all_answered` when no published request stays open.
    InputAnswered {
        all_answered: bool,
    },
}

impl Event {
    /// The name recorded in the execution's event log.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Claim { .. } => "claimed",
            Event::Heartbeat { .. } => "heartbeat",
            Event::Settle { .. } => "settled",
            Event::RequestCancel => "cancel_requested",
            Event::LeaseLapsed { .. } => "lease_lapsed",
            Event::OwnerLossDue => "owner_lost",
            Event::DeadlinePassed => "deadline_exceeded",
            Event::Refuse => "refused",
            Event::Undelivered { .. } => "undelivered",
            Event::RemoteTaskRecorded { .. } => "remote_task_recorded",
            Event::InputRequested { .. } => "input_requested",
            Event::InputAnswered { .. } => "input_answered",
        }
    }
}

/// Why a worker is asked to stop an attempt (spelled on the wire by
/// `baton-proto`; the domain never needs its name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Cancelled,
    DeadlineExceeded,
    OwnerLost,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Run the tool: send the assignment for `attempt` to `worker_id`.
    Invoke { worker_id: String, attempt: u32 },
    /// Resume the recorded remote task of `attempt` on `worker_id`: no tool call.
    Resume { worker_id: String, attempt: u32 },
    /// Ask the owner worker to stop.
    Stop { worker_id: String, attempt: u32, reason: StopReason },
    /// A retry becomes claimable at this time.
    RetryAt(Millis),
    /// The attempt that `Invoke` started ended (`success` only when the tool
    /// reported success): recorded in the attempt history.
    AttemptFinished { attempt: u32, success: bool },
    /// The assignment never reached the tool: this was no attempt after all.
    AttemptVoided { attempt: u32 },
    /// The execution reached a terminal state: release admission, wake waiters.
    Terminal,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub next: State,
    pub effects: Vec<Effect>,
}

/// Why an event changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Ignored {
    #[error("execution is terminal")]
    Terminal,
    #[error("event does not apply in this status")]
    WrongStatus,
    #[error("event names an attempt that is not the current one")]
    StaleAttempt,
    #[error("event is not due yet")]
    NotDue,
    #[error("cancellation was already requested")]
    AlreadyRequested,
    /// The event names the current attempt, but another worker holds its lease.
    #[error("another worker holds this attempt's lease")]
    NotHolder,
}

/// Whether `worker_id` holds `lease` for `attempt`. A worker naming an older
/// attempt is stale (it may have held it once); one naming the current attempt
/// of somebody else's lease never held it.
fn held(lease: &Lease, worker_id: &str, attempt: u32) -> Result<(), Ignored> {
    if lease.attempt != attempt {
        Err(Ignored::StaleAttempt)
    } else if lease.worker_id != worker_id {
        Err(Ignored::NotHolder)
    } else {
        Ok(())
    }
}

pub fn apply(state: &State, event: &Event, now: Millis) -> Result<Transition, Ignored> {
    if state.status().is_terminal() {
        return Err(Ignored::Terminal);
    }
    let mut next = state.clone();
    let mut effects = Vec::new();
    match event {
        Event::Claim { worker_id, lease_until } => {
            let Phase::Pending { not_before } = state.phase else {
                return Err(Ignored::WrongStatus);
            };
            if now < not_before || now >= state.deadline {
                return Err(Ignored::NotDue);
            }
            if state.cancel_requested || (!state.remote_task && state.attempts >= state.max_attempts) {
                return Err(Ignored::WrongStatus);
            }
            next.owner_loss_detection_at = None;
            // With a recorded remote task the attempt lives on remotely: a new
            // owner only resumes it. Otherwise this is a new attempt: a tool call.
            if !state.remote_task {
                next.attempts += 1;
            }
            next.phase = Phase::Working {
                lease: Lease { worker_id: worker_id.clone(), attempt: next.attempts, expires_at: *lease_until },
            };
            let (worker_id, attempt) = (worker_id.clone(), next.attempts);
            effects.push(if state.remote_task {
                Effect::Resume { worker_id, attempt }
            } else {
                Effect::Invoke { worker_id, attempt }
            });
        }
        Event::Heartbeat { worker_id, attempt, lease_until } => {
            let lease = next.phase.lease_mut().ok_or(Ignored::WrongStatus)?;
            held(lease, worker_id, *attempt)?;
            lease.expires_at = lease.expires_at.max(*lease_until);
            next.owner_loss_detection_at = None;
        }
        Event::Settle { worker_id, attempt, outcome } => {
            let lease = state.phase.lease().ok_or(Ignored::WrongStatus)?;
            held(lease, worker_id, *attempt)?;
            next.owner_loss_detection_at = None;
            match outcome {
                Outcome::Success => next.phase = Phase::Completed,
                Outcome::Cancelled if state.cancel_requested => next.phase = Phase::Cancelled,
                // A tool that stopped unasked stopped for its deadline (the worker
                // enforces it too), or gave up on its own: neither is a cancellation.
                Outcome::Cancelled if now >= state.deadline => {
                    next.phase = Phase::Failed { reason: FailureReason::DeadlineExceeded }
                }
                Outcome::Cancelled => next.phase = Phase::Failed { reason: FailureReason::ToolError },
                Outcome::UnsupportedInteraction => {
                    next.phase = Phase::Failed { reason: FailureReason::UnsupportedInteraction }
                }
                Outcome::ProtocolError => next.phase = Phase::Failed { reason: FailureReason::ProtocolError },
                Outcome::ToolError { retryable: true }
                    if state.attempts < state.max_attempts && !state.cancel_requested =>
                {
                    let at = now + retry_backoff_ms(state.attempts);
                    // A new attempt is a new tool call, with no remote task yet.
                    next.remote_task = false;
                    next.phase = Phase::Pending { not_before: at };
                    effects.push(Effect::RetryAt(at));
                }
                Outcome::ToolError { .. } => next.phase = Phase::Failed { reason: FailureReason::ToolError },
            }
        }
        Event::RequestCancel => {
            if state.cancel_requested {
                return Err(Ignored::AlreadyRequested);
            }
            next.cancel_requested = true;
            match state.phase.lease() {
                None => next.phase = Phase::Cancelled,
                Some(lease) => effects.push(Effect::Stop {
                    worker_id: lease.worker_id.clone(),
                    attempt: lease.attempt,
                    reason: StopReason::Cancelled,
                }),
            }
        }
        Event::LeaseLapsed { detect_at } => {
            let lease = state.phase.lease().ok_or(Ignored::WrongStatus)?;
            if now < lease.expires_at {
                return Err(Ignored::NotDue);
            }
            if state.owner_loss_detection_at.is_some() {
                return Err(Ignored::WrongStatus);
            }
            next.owner_loss_detection_at = Some(*detect_at);
        }
        Event::OwnerLossDue => {
            let lease = state.phase.lease().ok_or(Ignored::WrongStatus)?;
            match state.owner_loss_detection_at {
                Some(at) if now >= at => {}
                _ => return Err(Ignored::NotDue),
            }
            if state.remote_task {
                // The work lives on the remote server: another worker resumes it.
                next.owner_loss_detection_at = None;
                next.phase = Phase::Pending { not_before: now };
                return Ok(Transition { next, effects });
            }
            effects.push(Effect::Stop {
                worker_id: lease.worker_id.clone(),
                attempt: lease.attempt,
                reason: StopReason::OwnerLost,
            });
            next.phase = Phase::Failed { reason: FailureReason::OwnerLost };
        }
        Event::DeadlinePassed => {
            if now < state.deadline {
                return Err(Ignored::NotDue);
            }
            if let Some(lease) = state.phase.lease() {
                effects.push(Effect::Stop {
                    worker_id: lease.worker_id.clone(),
                    attempt: lease.attempt,
                    reason: StopReason::DeadlineExceeded,
                });
            }
            next.phase = Phase::Failed { reason: FailureReason::DeadlineExceeded };
        }
        Event::Undelivered { worker_id, attempt } => {
            let lease = state.phase.lease().ok_or(Ignored::WrongStatus)?;
            held(lease, worker_id, *attempt)?;
            if !state.remote_task {
                next.attempts -= 1;
            }
            next.owner_loss_detection_at = None;
            next.phase = Phase::Pending { not_before: now };
        }
        Event::RemoteTaskRecorded { worker_id, attempt, deadline } => {
            let lease = state.phase.lease().ok_or(Ignored::WrongStatus)?;
            held(lease, worker_id, *attempt)?;
            next.remote_task = true;
            if let Some(d) = deadline {
                next.deadline = next.deadline.min(*d);
            }
        }
        Event::InputRequested { worker_id, attempt } => {
            let lease = state.phase.lease().ok_or(Ignored::WrongStatus)?;
            held(lease, worker_id, *attempt)?;
            next.phase = Phase::InputRequired { lease: lease.clone() };
        }
        Event::InputAnswered { all_answered } => {
            let Phase::InputRequired { lease } = &state.phase else {
                return Err(Ignored::WrongStatus);
            };
            if *all_answered {
                next.phase = Phase::Working { lease: lease.clone() };
            }
        }
        Event::Refuse => {
            if !matches!(state.phase, Phase::Pending { .. }) {
                return Err(Ignored::WrongStatus);
            }
            next.phase = Phase::Failed { reason: FailureReason::InvocationRefused };
        }
    }
    effects.extend(attempt_bookkeeping(state, &next, event));
    if next.status().is_terminal() {
        effects.push(Effect::Terminal);
    }
    Ok(Transition { next, effects })
}

/// How the attempt history changes with an applied event. (`Effect::Invoke`
/// says an attempt started.)
fn attempt_bookkeeping(before: &State, next: &State, event: &Event) -> Option<Effect> {
    match event {
        Event::Settle { attempt, outcome, .. } => {
            Some(Effect::AttemptFinished { attempt: *attempt, success: *outcome == Outcome::Success })
        }
        // With a recorded remote task the lease came from a resume, which
        // started no attempt of its own.
        Event::Undelivered { attempt, .. } => {
            (!before.remote_task).then_some(Effect::AttemptVoided { attempt: *attempt })
        }
        _ => {
            let lease = before.phase.lease()?;
            next.phase.lease().is_none().then_some(Effect::AttemptFinished { attempt: lease.attempt, success: false })
        }
    }
}
