//! One execution's life across coordinators, workers and its owner, every
//! change of its row made by the real `baton_domain::apply` on a
//! linearizable store (Postgres), exactly as the coordinator commits it.
//!
//! Coordinators hold no state of their own between commits (the row is the
//! truth), so "which coordinator" only decides which messages a crash loses:
//! a coordinator crash is every worker session on it dropping. A commit is
//! applied and answered, or applied with its answer lost (commit-unknown: the
//! effects are never sent, the worker never hears its ack). Workers run the
//! tool on an assignment, settle until acknowledged (resending after a
//! reconnect, the settlement possibly duplicated), heartbeat, ask for input,
//! lose their session and re-register with their running list, or crash and
//! come back as a new process (a new worker id). Worker 1 may also be
//! hostile and claim results or non-delivery for attempts it does not hold.
//! The owner cancels, answers input and reads the result. Time moves to the
//! next instant anything is due (lease expiry, owner-loss detection, retry,
//! deadline), and the sweeper acts on what is due.

use crate::checker::{Model, Property};
use baton_domain::{Effect, Event, FailureReason, Ignored, Outcome, Phase, State as Row, Status, Transition, apply};

const LEASE_MS: i64 = 1_000;
const GRACE_MS: i64 = 1_000;
const DEADLINE_MS: i64 = 3_000;
pub const WORKERS: u8 = 2;
/// Worker 1 may speak for attempts it does not hold (when `hostile` allows).
const HOSTILE: u8 = 1;

/// A copy of the protocol with one guard taken out, to show the checker
/// finds what the guard prevents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// The real protocol.
    None,
    /// A worker re-registers without the attempts it is running.
    WorkerForgetsItsRuns,
    /// The machine accepts an attempt's events from a worker that does not hold its lease.
    NoLeaseHolderCheck,
    /// The machine takes an event naming an older attempt as about the current one.
    NoStaleAttemptCheck,
    /// The machine lets a cancel request change a terminal execution.
    TerminalMayChange,
}

/// The size of the world explored.
#[derive(Clone, Copy, Debug)]
pub struct Lifecycle {
    /// 1: a tool that may not be retried; 2: one retry after a retryable error.
    pub max_attempts: u32,
    pub crashes: u8,
    pub disconnects: u8,
    pub duplicates: u8,
    pub hostile: u8,
    pub mutant: Mutant,
}

/// How a tool run ended, as the worker saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum End {
    Success,
    RetryableError,
    /// Stopped when asked (cancel, deadline, owner lost).
    Stopped,
}

impl End {
    fn outcome(self) -> Outcome {
        match self {
            End::Success => Outcome::Success,
            End::RetryableError => Outcome::ToolError { retryable: true },
            End::Stopped => Outcome::Cancelled,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    Assign { w: u8, inc: u8, attempt: u32 },
    Stop { w: u8, inc: u8, attempt: u32 },
    Settle { w: u8, inc: u8, attempt: u32, end: End },
    Ack { w: u8, inc: u8, attempt: u32 },
}

impl Msg {
    fn session(&self) -> (u8, u8) {
        match *self {
            Msg::Assign { w, inc, .. }
            | Msg::Stop { w, inc, .. }
            | Msg::Settle { w, inc, .. }
            | Msg::Ack { w, inc, .. } => (w, inc),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Worker {
    /// Which process this is (a crash starts the next one, with a new worker id).
    pub inc: u8,
    pub connected: bool,
    /// Attempts whose tool call is in progress.
    pub running: Vec<u32>,
    /// Attempts that ended and are settled until acknowledged.
    pub unacked: Vec<(u32, End)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World {
    pub now: i64,
    pub row: Row,
    pub workers: Vec<Worker>,
    /// Messages in flight, sorted (a multiset).
    pub net: Vec<Msg>,
    /// Tool invocations per attempt number, as the tools themselves count them.
    pub invocations: Vec<u8>,
    /// What each attempt's tool call produced.
    pub results: Vec<Option<End>>,
    /// The first terminal phase the row reached.
    pub first_terminal: Option<Phase>,
    /// What the owner read once the execution ended: its status and
    /// whether the current attempt's tool produced that result.
    pub owner_read: Option<(Status, bool)>,
    pub cancel_asked: bool,
    /// An input answer moved the run on.
    pub answered: bool,
    /// Budgets left.
    pub crashes: u8,
    pub disconnects: u8,
    pub duplicates: u8,
    pub hostile: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// A coordinator claims the execution for worker `w`; `answered`: false
    /// when the commit landed but its answer was lost (no assignment sent).
    Claim {
        w: u8,
        answered: bool,
    },
    /// Message `i` of the network arrives; for a settlement, `answered`
    /// says whether the commit's answer (the ack) got back.
    Deliver {
        i: usize,
        answered: bool,
    },
    /// Settlement `i` is delivered twice.
    Duplicate {
        i: usize,
    },
    /// Worker `w`'s tool call for `attempt` ends.
    Finish {
        w: u8,
        attempt: u32,
        end: End,
    },
    Heartbeat {
        w: u8,
    },
    AskInput {
        w: u8,
        attempt: u32,
    },
    /// Worker `w`'s session drops (network, or its coordinator crashed).
    Disconnect {
        w: u8,
    },
    /// Worker `w` registers again with its running list and resends.
    Reconnect {
        w: u8,
    },
    /// Worker `w`'s process dies; the next one registers with a new id.
    Crash {
        w: u8,
    },
    /// The hostile worker claims an end, or non-delivery, for the current attempt.
    HostileSettle {
        end: End,
    },
    HostileUndelivered,
    /// The sweeper's three checks.
    SweepLapse,
    SweepOwnerLoss,
    SweepDeadline,
    Tick,
    Cancel,
    AnswerInput,
    ReadResult,
}

pub fn worker_id(w: u8, inc: u8) -> String {
    format!("w{w}.{inc}")
}

impl Lifecycle {
    /// `apply`, with this world's guard taken out when it is a mutant.
    fn machine(&self, row: &Row, event: &Event, now: i64) -> Result<Transition, Ignored> {
        let lease = row.phase.lease();
        let rewritten = match (self.mutant, event, lease) {
            (Mutant::NoLeaseHolderCheck, Event::Settle { attempt, outcome, .. }, Some(l)) if *attempt == l.attempt => {
                Some(Event::Settle { worker_id: l.worker_id.clone(), attempt: *attempt, outcome: *outcome })
            }
            (Mutant::NoLeaseHolderCheck, Event::Undelivered { attempt, .. }, Some(l)) if *attempt == l.attempt => {
                Some(Event::Undelivered { worker_id: l.worker_id.clone(), attempt: *attempt })
            }
            (Mutant::NoStaleAttemptCheck, Event::Settle { worker_id, outcome, .. }, Some(l))
                if *worker_id == l.worker_id =>
            {
                Some(Event::Settle { worker_id: worker_id.clone(), attempt: l.attempt, outcome: *outcome })
            }
            (Mutant::TerminalMayChange, Event::RequestCancel, None) if row.status().is_terminal() => {
                let mut next = row.clone();
                next.phase = Phase::Cancelled;
                return Ok(Transition { next, effects: vec![Effect::Terminal] });
            }
            _ => None,
        };
        apply(row, rewritten.as_ref().unwrap_or(event), now)
    }

    /// Commits `event` to the row; sends its effects when `answered`.
    fn commit(&self, s: &mut World, event: Event, answered: bool) -> Result<(), Ignored> {
        let t = self.machine(&s.row, &event, s.now)?;
        s.row = t.next;
        if s.first_terminal.is_none() && s.row.status().is_terminal() {
            s.first_terminal = Some(s.row.phase.clone());
        }
        if answered {
            for e in t.effects {
                match e {
                    Effect::Invoke { worker_id, attempt } => {
                        s.send_to(&worker_id, |w, inc| Msg::Assign { w, inc, attempt })
                    }
                    Effect::Stop { worker_id, attempt, .. } => {
                        s.send_to(&worker_id, |w, inc| Msg::Stop { w, inc, attempt })
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn start_tool(s: &mut World, w: u8, attempt: u32) {
        let worker = &mut s.workers[w as usize];
        // An assignment the worker already has is not run again.
        if worker.running.contains(&attempt) || worker.unacked.iter().any(|(a, _)| *a == attempt) {
            return;
        }
        worker.running.push(attempt);
        worker.running.sort_unstable();
        let i = attempt as usize;
        if i < s.invocations.len() {
            s.invocations[i] = s.invocations[i].saturating_add(1);
            s.results[i] = None;
        }
    }

    fn finish_tool(s: &mut World, w: u8, attempt: u32, end: End) {
        let worker = &mut s.workers[w as usize];
        let Some(at) = worker.running.iter().position(|a| *a == attempt) else { return };
        worker.running.remove(at);
        worker.unacked.push((attempt, end));
        worker.unacked.sort_unstable();
        if let Some(r) = s.results.get_mut(attempt as usize) {
            *r = Some(end);
        }
        if worker.connected {
            let inc = worker.inc;
            s.push(Msg::Settle { w, inc, attempt, end });
        }
    }
}

impl World {
    fn push(&mut self, m: Msg) {
        // At most two copies of a message in flight: more adds no behaviour.
        if self.net.iter().filter(|x| **x == m).count() < 2 {
            self.net.push(m);
            self.net.sort();
        }
    }

    /// Sends to the session of `worker_id`, if it is connected.
    fn send_to(&mut self, worker_id: &str, msg: impl Fn(u8, u8) -> Msg) {
        let found = (0..self.workers.len() as u8).find(|w| worker_id == worker_id_of(self, *w));
        if let Some(w) = found
            && self.workers[w as usize].connected
        {
            let inc = self.workers[w as usize].inc;
            self.push(msg(w, inc));
        }
    }

    /// The attempt the row's lease names, if any.
    fn lease_attempt(&self) -> Option<u32> {
        self.row.phase.lease().map(|l| l.attempt)
    }
}

fn worker_id_of(s: &World, w: u8) -> String {
    worker_id(w, s.workers[w as usize].inc)
}

impl Model for Lifecycle {
    type State = World;
    type Action = Action;

    fn init(&self) -> Vec<World> {
        let slots = self.max_attempts as usize + 2;
        vec![World {
            now: 0,
            row: Row::new(0, DEADLINE_MS, self.max_attempts),
            workers: (0..WORKERS)
                .map(|_| Worker { inc: 0, connected: true, running: vec![], unacked: vec![] })
                .collect(),
            net: vec![],
            invocations: vec![0; slots],
            results: vec![None; slots],
            first_terminal: None,
            owner_read: None,
            cancel_asked: false,
            answered: false,
            crashes: self.crashes,
            disconnects: self.disconnects,
            duplicates: self.duplicates,
            hostile: self.hostile,
        }]
    }

    fn actions(&self, s: &World) -> Vec<Action> {
        let mut out = Vec::new();
        if matches!(s.row.phase, Phase::Pending { .. }) {
            for w in 0..WORKERS {
                if s.workers[w as usize].connected {
                    out.extend([true, false].map(|answered| Action::Claim { w, answered }));
                }
            }
        }
        for (i, m) in s.net.iter().enumerate() {
            match m {
                Msg::Settle { .. } => {
                    out.extend([true, false].map(|answered| Action::Deliver { i, answered }));
                    if s.duplicates > 0 {
                        out.push(Action::Duplicate { i });
                    }
                }
                _ => out.push(Action::Deliver { i, answered: true }),
            }
        }
        for (w, worker) in s.workers.iter().enumerate() {
            let w = w as u8;
            for &attempt in &worker.running {
                out.extend([End::Success, End::RetryableError].map(|end| Action::Finish { w, attempt, end }));
                if worker.connected {
                    out.push(Action::AskInput { w, attempt });
                }
            }
            if worker.connected && !(worker.running.is_empty() && worker.unacked.is_empty()) {
                out.push(Action::Heartbeat { w });
            }
            if worker.connected && s.disconnects > 0 {
                out.push(Action::Disconnect { w });
            }
            if !worker.connected {
                out.push(Action::Reconnect { w });
            }
            if s.crashes > 0 {
                out.push(Action::Crash { w });
            }
        }
        // A holder's word about its own attempt is all Baton has; what a
        // hostile worker must not do is speak for an attempt it does not hold.
        let foreign = s.row.phase.lease().is_some_and(|l| l.worker_id != worker_id_of(s, HOSTILE));
        if s.hostile > 0 && foreign {
            out.extend([End::Success, End::RetryableError].map(|end| Action::HostileSettle { end }));
            out.push(Action::HostileUndelivered);
        }
        out.extend([Action::SweepLapse, Action::SweepOwnerLoss, Action::SweepDeadline, Action::Tick]);
        if !s.cancel_asked {
            out.push(Action::Cancel);
        }
        if matches!(s.row.phase, Phase::InputRequired { .. }) {
            out.push(Action::AnswerInput);
        }
        if s.row.status().is_terminal() && s.owner_read.is_none() {
            out.push(Action::ReadResult);
        }
        out
    }

    fn next(&self, s: &World, a: &Action) -> Option<World> {
        let mut n = s.clone();
        match *a {
            Action::Claim { w, answered } => {
                let worker_id = worker_id_of(s, w);
                self.commit(&mut n, Event::Claim { worker_id, lease_until: s.now + LEASE_MS }, answered).ok()?;
            }
            Action::Deliver { i, answered } => {
                let m = n.net.remove(i);
                match m {
                    Msg::Assign { w, inc, attempt } if n.workers[w as usize].inc == inc => {
                        Self::start_tool(&mut n, w, attempt)
                    }
                    Msg::Stop { w, inc, attempt } if n.workers[w as usize].inc == inc => {
                        Self::finish_tool(&mut n, w, attempt, End::Stopped)
                    }
                    Msg::Ack { w, inc, attempt } if n.workers[w as usize].inc == inc => {
                        n.workers[w as usize].unacked.retain(|(a, _)| *a != attempt);
                    }
                    Msg::Settle { w, inc, attempt, end } => {
                        let worker_id = worker_id(w, inc);
                        let event = Event::Settle { worker_id, attempt, outcome: end.outcome() };
                        // Applied or ignored (stale, duplicate, terminal), the
                        // settlement is acknowledged when the answer gets back.
                        let _ = self.commit(&mut n, event, answered);
                        if answered && n.workers[w as usize].inc == inc && n.workers[w as usize].connected {
                            n.push(Msg::Ack { w, inc, attempt });
                        }
                    }
                    _ => {}
                }
            }
            Action::Duplicate { i } => {
                let m = n.net[i].clone();
                n.duplicates -= 1;
                if n.net.iter().filter(|x| **x == m).count() >= 2 {
                    return None;
                }
                n.push(m);
            }
            Action::Finish { w, attempt, end } => Self::finish_tool(&mut n, w, attempt, end),
            Action::Heartbeat { w } => {
                let worker = &s.workers[w as usize];
                let worker_id = worker_id_of(s, w);
                // Attempts running and attempts still being settled keep their lease.
                let held: Vec<u32> =
                    worker.running.iter().copied().chain(worker.unacked.iter().map(|(a, _)| *a)).collect();
                let mut changed = false;
                for attempt in held {
                    let beat =
                        Event::Heartbeat { worker_id: worker_id.clone(), attempt, lease_until: s.now + LEASE_MS };
                    changed |= self.commit(&mut n, beat, true).is_ok();
                }
                if !changed {
                    return None;
                }
            }
            Action::AskInput { w, attempt } => {
                let worker_id = worker_id_of(s, w);
                self.commit(&mut n, Event::InputRequested { worker_id, attempt }, true).ok()?;
            }
            Action::Disconnect { w } => {
                n.disconnects -= 1;
                let session = (w, n.workers[w as usize].inc);
                n.workers[w as usize].connected = false;
                n.net.retain(|m| m.session() != session);
            }
            Action::Reconnect { w } => {
                n.workers[w as usize].connected = true;
                let worker = n.workers[w as usize].clone();
                let worker_id = worker_id(w, worker.inc);
                let mut list: Vec<u32> =
                    worker.running.iter().copied().chain(worker.unacked.iter().map(|(a, _)| *a)).collect();
                if self.mutant == Mutant::WorkerForgetsItsRuns {
                    list.clear();
                }
                // A lease of this worker's that it does not report never reached the tool.
                if let Some(l) = s.row.phase.lease()
                    && l.worker_id == worker_id
                    && !list.contains(&l.attempt)
                {
                    let _ = self.commit(
                        &mut n,
                        Event::Undelivered { worker_id: worker_id.clone(), attempt: l.attempt },
                        true,
                    );
                }
                for (attempt, end) in worker.unacked {
                    n.push(Msg::Settle { w, inc: worker.inc, attempt, end });
                }
            }
            Action::Crash { w } => {
                n.crashes -= 1;
                let old = (w, n.workers[w as usize].inc);
                n.net.retain(|m| m.session() != old);
                let worker = &mut n.workers[w as usize];
                worker.inc += 1;
                worker.connected = true;
                worker.running.clear();
                worker.unacked.clear();
            }
            Action::HostileSettle { end } => {
                n.hostile -= 1;
                let attempt = s.lease_attempt()?;
                let event = Event::Settle { worker_id: worker_id_of(s, HOSTILE), attempt, outcome: end.outcome() };
                self.commit(&mut n, event, true).ok()?;
            }
            Action::HostileUndelivered => {
                n.hostile -= 1;
                let attempt = s.lease_attempt()?;
                self.commit(&mut n, Event::Undelivered { worker_id: worker_id_of(s, HOSTILE), attempt }, true).ok()?;
            }
            Action::SweepLapse => {
                self.commit(&mut n, Event::LeaseLapsed { detect_at: s.now + GRACE_MS }, true).ok()?;
            }
            Action::SweepOwnerLoss => self.commit(&mut n, Event::OwnerLossDue, true).ok()?,
            Action::SweepDeadline => self.commit(&mut n, Event::DeadlinePassed, true).ok()?,
            Action::Tick => n.now = next_instant(s)?,
            Action::Cancel => {
                n.cancel_asked = true;
                // Refused when the execution already ended: the owner still asked.
                let _ = self.commit(&mut n, Event::RequestCancel, true);
            }
            Action::AnswerInput => {
                self.commit(&mut n, Event::InputAnswered { all_answered: true }, true).ok()?;
                n.answered = true;
            }
            Action::ReadResult => {
                let current = s.row.attempts as usize;
                let produced = s.results.get(current).copied().flatten();
                let matches = match s.row.phase {
                    Phase::Completed => produced == Some(End::Success),
                    Phase::Failed { reason: FailureReason::ToolError } => produced == Some(End::RetryableError),
                    _ => true,
                };
                n.owner_read = Some((s.row.status(), matches));
            }
        }
        (n != *s).then_some(n)
    }

    fn always(&self) -> Vec<Property<World>> {
        let max = self.max_attempts;
        let once_per_execution: fn(&World) -> bool =
            if max == 1 { |s| s.invocations.iter().map(|n| u32::from(*n)).sum::<u32>() <= 1 } else { |_| true };
        vec![
            Property { name: "at most one invocation per attempt", holds: |s| s.invocations.iter().all(|n| *n <= 1) },
            Property { name: "a tool that may not be retried runs at most once", holds: once_per_execution },
            Property {
                name: "a terminal state never changes",
                holds: |s| s.first_terminal.as_ref().is_none_or(|p| *p == s.row.phase),
            },
            Property {
                name: "the result the owner reads is the one the current attempt's tool produced",
                holds: |s| s.owner_read.is_none_or(|(_, matches)| matches),
            },
        ]
    }

    fn sometimes(&self) -> Vec<Property<World>> {
        let mut out = vec![
            Property {
                name: "a run completes",
                holds: |s: &World| s.owner_read.is_some_and(|(st, _)| st == Status::Completed),
            },
            Property { name: "a cancel lands", holds: |s| s.row.phase == Phase::Cancelled },
            Property {
                name: "an input answer resumes a run",
                holds: |s| s.answered && s.row.status() == Status::Working,
            },
            Property {
                name: "a lost owner is detected",
                holds: |s| s.row.phase == Phase::Failed { reason: FailureReason::OwnerLost },
            },
        ];
        if self.max_attempts > 1 {
            out.push(Property {
                name: "a retry completes",
                holds: |s| s.row.phase == Phase::Completed && s.row.attempts == 2,
            });
        }
        out
    }
}

/// The next instant anything becomes due, up to the deadline.
fn next_instant(s: &World) -> Option<i64> {
    let r = &s.row;
    if r.status().is_terminal() {
        return None;
    }
    let mut due = vec![r.deadline];
    if let Phase::Pending { not_before } = r.phase {
        due.push(not_before);
    }
    if let Some(l) = r.phase.lease() {
        due.push(l.expires_at);
    }
    due.extend(r.owner_loss_detection_at);
    // Time stops at the deadline: there the sweeper ends the execution.
    due.into_iter().filter(|t| *t > s.now).map(|t| t.min(r.deadline)).min()
}
