//! Deterministic simulation of the real engine and worker runtime: two
//! coordinators' engines over one store, two workers' runtimes, and an
//! owner, all on one thread, with every choice drawn from a seed.
//!
//! What runs is production code: `Engine` (start, read, cancel, dispatch,
//! sweep, worker sessions through the gRPC adapter's own `accept`,
//! `from_worker` and `Outgoing`), the store on SQLite, the admission, and the
//! worker runtime's `Worker` (`receive`, `beat`, its attempt bookkeeping and
//! settlement resends). Only the carriers are the simulation's: the network
//! ([`net`]), the clock and id source (`baton_proto::clock::simulated`,
//! `baton_domain::id::simulated`), the business tools ([`tools`]) and the
//! store's commit faults ([`faults`]).
//!
//! Why this scheduler, not madsim or turmoil: the engine talks to its
//! workers through channels and to its peers through a trait, so no network
//! stack needs replacing; and a run is a sequence of steps, each awaited to
//! its end, with one database connection, so the only concurrency left is
//! what a step starts in memory, which [`Sim::settle`] runs out before the
//! next. Races between parties are what they are in production: messages in
//! flight while others act.
//!
//! A run is replayed by its seed: the trace's hash is the same each time.

mod admission;
mod check;
mod faults;
mod heal;
mod net;
mod rng;
mod steps;
#[cfg(test)]
mod tests;
pub mod tools;
mod world;

use baton_coordinator::engine::Engine;
use baton_coordinator::store::Store;
use baton_worker::Worker;
use faults::StoreFaults;
use net::Link;
use rng::Rng;
use std::sync::Arc;
use tools::Calls;
use world::{Peers, Template};

/// How large a run is.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Steps with faults, before the run heals.
    pub steps: usize,
    /// Executions the owner starts (at most).
    pub executions: usize,
    /// Commits refused, and applied with the answer lost, in a hundred.
    pub refused_percent: u32,
    pub unknown_percent: u32,
}

impl Config {
    pub const SHORT: Config = Config { steps: 250, executions: 6, refused_percent: 4, unknown_percent: 6 };
}

/// What a run did, for the tally across seeds (the `sometimes` side).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Executions that completed on a second or later attempt.
    pub retried_completed: u64,
    pub owner_lost: u64,
    pub rejected_by_admission: u64,
    pub commits_unknown: u64,
    pub commits_refused: u64,
    pub coordinator_crashes: u64,
    pub worker_crashes: u64,
    pub breaks: u64,
    pub duplicates: u64,
    pub reorders: u64,
    pub admission_losses: u64,
    pub tool_calls: u64,
}

/// A finished run.
#[derive(Debug)]
pub struct Outcome {
    pub seed: u64,
    /// FNV-1a over the trace's lines: the same seed gives the same hash.
    pub hash: u64,
    pub steps: usize,
    pub tally: Tally,
}

/// A property broken, with the trace that led there.
#[derive(Debug)]
pub struct Violation {
    pub seed: u64,
    pub what: String,
    pub trace: Vec<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "seed {}: {}", self.seed, self.what)?;
        let from = self.trace.len().saturating_sub(80);
        for line in &self.trace[from..] {
            writeln!(f, "  {line}")?;
        }
        write!(
            f,
            "replay: BATON_SIM_SEED={} cargo test -p baton-proof --lib sim::tests::replay -- --nocapture",
            self.seed
        )
    }
}

/// One execution as its owner knows it.
#[derive(Debug)]
struct Owned {
    key: String,
    tool: &'static str,
    id: Option<String>,
    /// Refused by admission: the owner gave up on it.
    rejected: bool,
}

struct WorkerSlot {
    name: String,
    incarnation: u32,
    worker: Option<Arc<Worker>>,
    link: Option<Link>,
}

struct Sim {
    seed: u64,
    config: Config,
    rng: Rng,
    now: i64,
    template: &'static Template,
    /// The store as the coordinators use it (with faults), and as the checks read it.
    store: Store,
    plain: Store,
    faults: Arc<StoreFaults>,
    admission: Arc<admission::Shared>,
    /// Admission lost its state and is not yet rebuilt: it refuses.
    admission_lost: bool,
    /// An owner's read found a result that is not its current attempt's.
    owner_misread: Option<String>,
    peers: Arc<Peers>,
    coordinators: Vec<Option<Arc<Engine>>>,
    workers: Vec<WorkerSlot>,
    owned: Vec<Owned>,
    calls: Arc<Calls>,
    /// The first terminal reading of each execution: (status, result).
    terminal: std::collections::BTreeMap<String, (String, Option<Vec<u8>>)>,
    tally: Tally,
    trace: Vec<String>,
    step: usize,
}

/// Runs `seed` on a fresh single-threaded runtime.
pub fn run(seed: u64, config: Config) -> Result<Outcome, Violation> {
    let fail = |what: String| Violation { seed, what, trace: Vec::new() };
    let template = world::template().map_err(fail)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| fail(e.to_string()))?;
    baton_proto::clock::simulated::start(START_MS);
    baton_coordinator::domain::id::simulated::seed(seed);
    let outcome = rt.block_on(run_on(seed, config, template));
    baton_proto::clock::simulated::stop();
    baton_coordinator::domain::id::simulated::stop();
    outcome
}

/// The simulated clock starts here: 2026-12-01T00:00:00Z.
const START_MS: i64 = 1_796_083_200_000;

async fn run_on(seed: u64, config: Config, template: &'static Template) -> Result<Outcome, Violation> {
    let fail = |what: String| Violation { seed, what, trace: Vec::new() };
    let db = world::copy_template(template, seed).map_err(fail)?;
    let plain = world::open(&db).await.map_err(fail)?;
    let faults = Arc::new(StoreFaults::new(seed, config.refused_percent, config.unknown_percent));
    let store = plain.clone().with_faults(faults.clone());
    let mut sim = Sim {
        seed,
        config,
        rng: Rng::new(seed),
        now: START_MS,
        template,
        store,
        plain,
        faults,
        admission: Arc::new(admission::Shared::new()),
        admission_lost: false,
        owner_misread: None,
        peers: Arc::default(),
        coordinators: vec![None, None],
        workers: (0..2)
            .map(|i| WorkerSlot { name: format!("w{i}"), incarnation: 0, worker: None, link: None })
            .collect(),
        owned: Vec::new(),
        calls: Arc::default(),
        terminal: Default::default(),
        tally: Tally::default(),
        trace: Vec::new(),
        step: 0,
    };
    let result = sim.play().await;
    sim.plain.close().await;
    let _ = std::fs::remove_file(&db);
    result
}

impl Sim {
    async fn play(&mut self) -> Result<Outcome, Violation> {
        for c in 0..self.coordinators.len() {
            self.coordinator_up(c);
        }
        for w in 0..self.workers.len() {
            self.worker_up(w);
        }
        while self.step < self.config.steps {
            self.step += 1;
            self.act().await;
            self.settle().await;
            self.check().await?;
        }
        self.heal().await?;
        self.tally.commits_unknown = self.faults.unknown.load(std::sync::atomic::Ordering::Relaxed);
        self.tally.commits_refused = self.faults.refused.load(std::sync::atomic::Ordering::Relaxed);
        self.tally.tool_calls = self.calls.with(|c| c.len() as u64);
        Ok(Outcome { seed: self.seed, hash: self.hash(), steps: self.step, tally: self.tally.clone() })
    }

    fn note(&mut self, line: String) {
        self.trace.push(format!("{:>4} t+{:>6}ms {line}", self.step, self.now - START_MS));
    }

    fn hash(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for line in &self.trace {
            for b in line.bytes().chain(std::iter::once(b'\n')) {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }

    fn violation(&self, what: String) -> Violation {
        Violation { seed: self.seed, what, trace: self.trace.clone() }
    }

    /// Runs what the last step started in memory (a tool call beginning, a
    /// settlement queued) before the next step begins.
    async fn settle(&mut self) {
        for _ in 0..32 {
            tokio::task::yield_now().await;
        }
        for slot in &mut self.workers {
            if let Some(link) = slot.link.as_mut() {
                link.pull_up();
            }
        }
    }

    fn admission_handle(&self) -> Arc<dyn baton_coordinator::admission::Admission> {
        self.admission.clone()
    }

    fn lose_admission(&mut self) {
        self.admission.lose();
        self.admission_lost = true;
        self.tally.admission_losses += 1;
        self.note("admission lost its state".into());
    }

    /// A coordinator restores admission from the store, as it does at start.
    async fn rebuild_admission(&mut self) {
        let Some(c) = (0..self.coordinators.len()).find(|c| self.coordinators[*c].is_some()) else { return };
        let Some(engine) = self.coordinators[c].clone() else { return };
        let line = match engine.prepare().await {
            Ok(()) => {
                self.admission_lost = false;
                format!("co{c} restored admission")
            }
            Err(e) => format!("co{c} could not restore admission: {e}"),
        };
        self.note(line);
    }

    /// A short name for an execution id: its owner's index.
    fn label(&self, id: &str) -> String {
        match self.owned.iter().position(|o| o.id.as_deref() == Some(id)) {
            Some(i) => format!("e{i}"),
            None => format!("?{}", &id[..id.len().min(8)]),
        }
    }
}
