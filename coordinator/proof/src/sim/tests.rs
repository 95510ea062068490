//! The simulation's seeds: 100 in CI, `BATON_PROOF_FULL=1` for 1,000 (or
//! `BATON_SIM_SEEDS=N`); `BATON_SIM_SEED=S` replays one with its trace.

use super::{Config, Outcome, Tally, run};

fn seeds() -> u64 {
    if let Some(n) = std::env::var("BATON_SIM_SEEDS").ok().and_then(|v| v.parse().ok()) {
        return n;
    }
    if std::env::var("BATON_PROOF_FULL").is_ok_and(|v| v == "1") { 1_000 } else { 100 }
}

/// Seeds that once failed, kept so the bug they found stays found (each
/// fails again with its fix taken out):
/// - 1: a create whose commit answer was lost gave its admission place back,
///   though the execution existed; the owner's retry found it by its key, and
///   the bound was exceeded by one.
/// - 3: admission restored after a loss without the open executions'
///   owners counted.
const REGRESSIONS: &[u64] = &[1, 3];

fn add(total: &mut Tally, t: &Tally) {
    total.completed += t.completed;
    total.failed += t.failed;
    total.cancelled += t.cancelled;
    total.retried_completed += t.retried_completed;
    total.owner_lost += t.owner_lost;
    total.rejected_by_admission += t.rejected_by_admission;
    total.commits_unknown += t.commits_unknown;
    total.commits_refused += t.commits_refused;
    total.coordinator_crashes += t.coordinator_crashes;
    total.worker_crashes += t.worker_crashes;
    total.breaks += t.breaks;
    total.duplicates += t.duplicates;
    total.reorders += t.reorders;
    total.admission_losses += t.admission_losses;
    total.tool_calls += t.tool_calls;
}

#[test]
fn every_seed_keeps_every_promise() {
    let started = std::time::Instant::now();
    let n = seeds();
    let mut total = Tally::default();
    let mut steps = 0;
    for seed in REGRESSIONS.iter().copied().chain((0..n).filter(|s| !REGRESSIONS.contains(s))) {
        match run(seed, Config::SHORT) {
            Ok(Outcome { tally, steps: s, .. }) => {
                add(&mut total, &tally);
                steps += s;
            }
            Err(violation) => panic!("{violation}"),
        }
    }
    println!(
        "simulation: {} seeds, {steps} steps, 0 violations, {:.1} s\n{total:#?}",
        n + REGRESSIONS.iter().filter(|s| **s >= n).count() as u64,
        started.elapsed().as_secs_f64()
    );
    // A simulation that never gets anywhere proves nothing: each of these
    // happened somewhere (the `sometimes` side).
    let seen = [
        ("a run completes", total.completed),
        ("a run completes on a later attempt", total.retried_completed),
        ("a cancel lands", total.cancelled),
        ("a run fails", total.failed),
        ("an owner is lost", total.owner_lost),
        ("admission refuses a start", total.rejected_by_admission),
        ("a commit's answer is lost", total.commits_unknown),
        ("a commit is refused", total.commits_refused),
        ("a coordinator crashes", total.coordinator_crashes),
        ("a worker crashes", total.worker_crashes),
        ("a session breaks", total.breaks),
        ("a worker message is duplicated", total.duplicates),
        ("a worker message is reordered", total.reorders),
        ("admission loses its state", total.admission_losses),
    ];
    let never: Vec<&str> = seen.iter().filter(|(_, n)| *n == 0).map(|(what, _)| *what).collect();
    assert!(never.is_empty(), "never seen in {n} seeds: {never:?}");
}

#[test]
fn a_seed_replays_to_the_same_trace() {
    for seed in [1, 2, 3] {
        let first = run(seed, Config::SHORT).map(|o| o.hash);
        let second = run(seed, Config::SHORT).map(|o| o.hash);
        match (first, second) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "seed {seed} gave two traces"),
            (Err(v), _) | (_, Err(v)) => panic!("{v}"),
        }
    }
}

/// `BATON_SIM_SEED=S cargo test -p baton-proof --lib sim::tests::replay -- --nocapture`
#[test]
fn replay() {
    let Some(seed) = std::env::var("BATON_SIM_SEED").ok().and_then(|v| v.parse().ok()) else { return };
    match run(seed, Config::SHORT) {
        Ok(o) => println!("seed {seed}: {} steps, hash {:016x}\n{:#?}", o.steps, o.hash, o.tally),
        Err(v) => panic!("{v}"),
    }
}
