//! The short forms run in CI; `BATON_PROOF_FULL=1` explores the larger worlds.

use crate::admission::AdmissionModel;
use crate::checker::{Model, Report, check, check_only};
use crate::lifecycle::{Lifecycle, Mutant};
use std::fmt::Debug;

fn full() -> bool {
    std::env::var("BATON_PROOF_FULL").is_ok_and(|v| v == "1")
}

/// The world explored: one of each fault for a tool that may not be retried
/// (two in the full form); for a retried tool the short form leaves out
/// worker crashes (its space is ten times larger).
fn world(max_attempts: u32, mutant: Mutant) -> Lifecycle {
    let (crashes, disconnects) = match (full(), max_attempts) {
        (true, 1) => (2, 2),
        (false, 1) | (true, _) => (1, 1),
        (false, _) => (0, 1),
    };
    Lifecycle { max_attempts, crashes, disconnects, duplicates: 1, hostile: 1, mutant }
}

fn cap() -> usize {
    std::env::var("BATON_PROOF_CAP").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000_000)
}

fn explored<S: Debug, A: Debug>(what: &str, r: &Report<S, A>, started: std::time::Instant) {
    println!(
        "{what}: {} states, depth {}, complete {}, {:.1} s",
        r.states,
        r.depth,
        r.complete,
        started.elapsed().as_secs_f64()
    );
}

/// The real protocol: every `always` holds in every reachable state, and every
/// `sometimes` somewhere.
fn holds<M: Model>(what: &str, m: &M, min_states: usize) -> usize {
    let started = std::time::Instant::now();
    let r = check(m, cap());
    explored(what, &r, started);
    if let Some(v) = &r.violation {
        panic!("{what}: {}", v.render());
    }
    assert!(r.complete, "{what}: not every state explored within {}", cap());
    assert!(r.never.is_empty(), "{what}: never seen: {:?}", r.never);
    assert!(r.states >= min_states, "{what}: only {} states", r.states);
    r.states
}

/// A mutant: the checker finds a counterexample to `property`.
fn breaks<M: Model>(what: &str, m: &M, property: &str) {
    assert!(m.always().iter().any(|p| p.name == property), "no property {property}");
    let started = std::time::Instant::now();
    let r = check_only(m, cap(), Some(property));
    explored(what, &r, started);
    let v = r.violation.unwrap_or_else(|| panic!("{what}: no counterexample in {} states", r.states));
    println!("{}", v.render());
    assert_eq!(v.property, property, "{what}: {}", v.render());
}

#[test]
fn the_protocol_holds_for_a_tool_that_may_not_be_retried() {
    holds("lifecycle, max_attempts 1", &world(1, Mutant::None), 10_000);
}

#[test]
fn the_protocol_holds_for_a_retried_tool() {
    holds("lifecycle, max_attempts 2", &world(2, Mutant::None), 100_000);
}

#[test]
fn admission_holds_its_bound_across_redis_losses() {
    let clients = if full() { 4 } else { 3 };
    holds("admission", &AdmissionModel { clients, losses: 2, no_fence: false }, 100);
}

#[test]
fn without_the_workers_running_list_an_attempt_runs_twice() {
    breaks(
        "mutant: worker forgets its runs",
        &world(2, Mutant::WorkerForgetsItsRuns),
        "at most one invocation per attempt",
    );
}

#[test]
fn without_the_lease_holder_check_a_tool_that_may_not_be_retried_runs_twice() {
    breaks(
        "mutant: no lease-holder check",
        &world(1, Mutant::NoLeaseHolderCheck),
        "a tool that may not be retried runs at most once",
    );
}

#[test]
fn without_the_terminal_guard_a_terminal_state_changes() {
    breaks("mutant: terminal may change", &world(1, Mutant::TerminalMayChange), "a terminal state never changes");
}

#[test]
fn without_the_stale_attempt_check_the_owner_reads_another_attempts_result() {
    breaks(
        "mutant: no stale-attempt check",
        &world(2, Mutant::NoStaleAttemptCheck),
        "the result the owner reads is the one the current attempt's tool produced",
    );
}

#[test]
fn without_the_fence_a_rebuild_lets_the_bound_pass() {
    breaks(
        "mutant: no admission fence",
        &AdmissionModel { clients: 3, losses: 2, no_fence: true },
        "admitted work never exceeds a bound",
    );
}
