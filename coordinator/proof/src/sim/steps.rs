//! The steps a run is made of, each awaited to its end: what the owner,
//! the coordinators, the workers, the network and time do.

use super::net::{Link, describe_down, describe_up};
use super::tools::{self, Ending, SimTool};
use super::world;
use super::{Owned, Sim};
use baton_coordinator::domain::Surface;
use baton_coordinator::engine::lifecycle::StartRequest;
use baton_coordinator::engine::{Error as EngineError, Scope};
use baton_coordinator::grpc::worker::{accept, from_worker};
use baton_worker::{Options as WorkerOptions, Tool, Worker};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
enum Action {
    Start,
    Read,
    Cancel,
    Dispatch,
    Sweep,
    Advance,
    Connect,
    Deliver,
    Return,
    PullOnly,
    Beat,
    Break,
    Finish,
    CrashWorker,
    RestartWorker,
    CrashCoordinator,
    RestartCoordinator,
    LoseAdmission,
    RebuildAdmission,
}

impl Sim {
    pub(super) async fn act(&mut self) {
        let links = self.workers.iter().filter(|w| w.link.is_some()).count() as u32;
        let unlinked = self.workers.iter().filter(|w| w.worker.is_some() && w.link.is_none()).count() as u32;
        let waiting = self.calls.waiting().len() as u32;
        let up = self.coordinators.iter().filter(|c| c.is_some()).count() as u32;
        let down = self.coordinators.len() as u32 - up;
        let dead = self.workers.iter().filter(|w| w.worker.is_none()).count() as u32;
        let can_start = u32::from(self.owned.len() < self.config.executions || self.retry_pending().is_some());
        let started = u32::from(self.owned.iter().any(|o| o.id.is_some()));
        let choices = [
            (Action::Start, 6 * can_start * up.min(1)),
            (Action::Read, 6 * started * up.min(1)),
            (Action::Cancel, 2 * started * up.min(1)),
            (Action::Dispatch, 8 * up.min(1)),
            (Action::Sweep, 3 * up.min(1)),
            (Action::Advance, 4),
            (Action::Connect, 6 * unlinked * up.min(1)),
            (Action::Deliver, 12 * links),
            (Action::Return, 12 * links),
            (Action::PullOnly, links),
            (Action::Beat, 3 * links),
            (Action::Break, links),
            (Action::Finish, 8 * waiting.min(1)),
            (Action::CrashWorker, 1),
            (Action::RestartWorker, 4 * dead),
            (Action::CrashCoordinator, up.min(1)),
            (Action::RestartCoordinator, 4 * down),
            (Action::LoseAdmission, u32::from(!self.admission_lost)),
            (Action::RebuildAdmission, 4 * u32::from(self.admission_lost) * up.min(1)),
        ];
        let Some(action) = self.rng.weighted(&choices) else { return };
        match action {
            Action::Start => self.start().await,
            Action::Read => self.read().await,
            Action::Cancel => self.cancel().await,
            Action::Dispatch => self.dispatch().await,
            Action::Sweep => self.sweep().await,
            Action::Advance => {
                let by = [200, 1_000, 3_000, 6_000, 12_000][self.rng.below(5)];
                self.advance(by);
            }
            Action::Connect => self.connect_some().await,
            Action::Deliver => self.deliver_some(false).await,
            Action::PullOnly => self.deliver_some(true).await,
            Action::Return => self.return_some().await,
            Action::Beat => self.beat_some().await,
            Action::Break => self.break_some().await,
            Action::Finish => self.finish_some(),
            Action::CrashWorker => self.crash_worker().await,
            Action::RestartWorker => {
                if let Some(w) = self.workers.iter().position(|w| w.worker.is_none()) {
                    self.worker_up(w);
                }
            }
            Action::CrashCoordinator => self.crash_coordinator(),
            Action::RestartCoordinator => {
                if let Some(c) = self.coordinators.iter().position(Option::is_none) {
                    self.coordinator_up(c);
                }
            }
            Action::LoseAdmission => self.lose_admission(),
            Action::RebuildAdmission => self.rebuild_admission().await,
        }
    }

    fn live_coordinator(&mut self) -> Option<usize> {
        let up: Vec<usize> = (0..self.coordinators.len()).filter(|c| self.coordinators[*c].is_some()).collect();
        (!up.is_empty()).then(|| up[self.rng.below(up.len())])
    }

    pub(super) fn coordinator_up(&mut self, c: usize) {
        let id = format!("co{c}");
        let admission = self.admission_handle();
        let engine = world::engine(self.template, &self.store, admission, &self.peers, &id);
        self.coordinators[c] = Some(engine);
        self.note(format!("coordinator {id} up"));
    }

    fn crash_coordinator(&mut self) {
        let Some(c) = self.live_coordinator() else { return };
        let Some(engine) = self.coordinators[c].take() else { return };
        self.peers.down(&engine.options().advertise_url);
        for slot in &mut self.workers {
            if slot.link.as_ref().is_some_and(|l| l.coordinator == c) {
                if let Some(link) = slot.link.take() {
                    link.crashed();
                }
                if let Some(worker) = &slot.worker {
                    worker.detach();
                }
            }
        }
        self.tally.coordinator_crashes += 1;
        self.note(format!("coordinator co{c} crashed"));
    }

    pub(super) fn worker_up(&mut self, w: usize) {
        let slot = &mut self.workers[w];
        slot.incarnation += 1;
        let id = format!("{}.{}", slot.name, slot.incarnation);
        let tools: Vec<Arc<dyn Tool>> = [(tools::RETRIED, 3), (tools::ONCE, 1)]
            .into_iter()
            .map(|(name, max_attempts)| {
                Arc::new(SimTool { name, max_attempts, worker: id.clone(), calls: self.calls.clone() }) as Arc<dyn Tool>
            })
            .collect();
        let options = WorkerOptions {
            coordinator_url: "sim://".into(),
            coordinator_urls: Vec::new(),
            token: self.template.worker_token.clone(),
            worker_id: id.clone(),
            capacity: 2,
            remote_servers: Vec::new(),
            tls: None,
        };
        slot.worker = Some(Worker::incarnation(options, tools));
        self.note(format!("worker {id} up"));
    }

    async fn crash_worker(&mut self) {
        let alive: Vec<usize> = (0..self.workers.len()).filter(|w| self.workers[*w].worker.is_some()).collect();
        if alive.is_empty() {
            return;
        }
        let w = alive[self.rng.below(alive.len())];
        let (name, link) = {
            let slot = &mut self.workers[w];
            slot.worker = None;
            (format!("{}.{}", slot.name, slot.incarnation), slot.link.take())
        };
        self.calls.abandon(&name);
        if let Some(link) = link {
            self.end_session(link).await;
        }
        self.tally.worker_crashes += 1;
        self.note(format!("worker {name} crashed"));
    }

    /// The coordinator sees the stream end: what never left its outbox is
    /// reported, and the session is let go (the adapter's reading loop end).
    async fn end_session(&mut self, link: Link) {
        let c = link.coordinator;
        let session = link.broken().await;
        if let Some(engine) = self.coordinators[c].clone() {
            engine.disconnect(&session).await;
        }
    }

    pub(super) async fn connect_some(&mut self) {
        let candidates: Vec<usize> = (0..self.workers.len())
            .filter(|w| self.workers[*w].worker.is_some() && self.workers[*w].link.is_none())
            .collect();
        if candidates.is_empty() {
            return;
        }
        let w = candidates[self.rng.below(candidates.len())];
        let Some(c) = self.live_coordinator() else { return };
        let (Some(worker), Some(engine)) = (self.workers[w].worker.clone(), self.coordinators[c].clone()) else {
            return;
        };
        let registration = worker.registration();
        let (running, settling) = (registration.running.len(), registration.settling.len());
        let who = registration.worker_id.clone();
        match accept(&engine, registration).await {
            Ok((session, outgoing)) => {
                self.workers[w].link = Some(Link::new(c, session, outgoing));
                self.note(format!("{who} registered at co{c} (running {running}, settling {settling})"));
            }
            Err(status) => self.note(format!("{who} refused at co{c}: {:?}", status.code())),
        }
    }

    /// A link, chosen among those that exist.
    fn some_link(&mut self) -> Option<usize> {
        let linked: Vec<usize> = (0..self.workers.len()).filter(|w| self.workers[*w].link.is_some()).collect();
        (!linked.is_empty()).then(|| linked[self.rng.below(linked.len())])
    }

    /// Delivers the next message on the wire to the worker (first moving one
    /// out of the coordinator's outbox if the wire is empty); `pull_only`
    /// just puts one on the wire.
    async fn deliver_some(&mut self, pull_only: bool) {
        let Some(w) = self.some_link() else { return };
        let (Some(worker), Some(link)) = (self.workers[w].worker.clone(), self.workers[w].link.as_mut()) else {
            return;
        };
        if pull_only || link.down.is_empty() {
            link.pull_down();
        }
        if link.ended_by_coordinator {
            if let Some(link) = self.workers[w].link.take() {
                worker.detach();
                self.end_session(link).await;
            }
            self.note(format!("{} session ended by its coordinator", worker_name(&self.workers[w])));
            return;
        }
        if pull_only {
            return;
        }
        let Some(m) = link.down.pop_front() else { return };
        let tx = link.up_tx.clone();
        let line = describe_down(&m);
        worker.receive(m, &tx).await;
        let line = format!("{} <- {}", worker_name(&self.workers[w]), self.relabel(&line));
        self.note(line);
    }

    /// Delivers a worker message on the wire to its coordinator: usually the
    /// next one, sometimes a later one (reordered), sometimes twice (duplicated).
    async fn return_some(&mut self) {
        let Some(w) = self.some_link() else { return };
        let reorder = self.rng.chance(10);
        let duplicate = self.rng.chance(8);
        let pick = self.rng.next_u64();
        let Some(link) = self.workers[w].link.as_mut() else { return };
        link.pull_up();
        if link.up.is_empty() {
            return;
        }
        let at = if reorder { (pick % link.up.len() as u64) as usize } else { 0 };
        let m = if duplicate { link.up.get(at).cloned() } else { link.up.remove(at) };
        let Some(m) = m else { return };
        let (c, session) = (link.coordinator, link.session.clone());
        let Some(engine) = self.coordinators[c].clone() else { return };
        if reorder && at > 0 {
            self.tally.reorders += 1;
        }
        if duplicate {
            self.tally.duplicates += 1;
        }
        let line = self.relabel(&describe_up(&m));
        if let Some(message) = from_worker(m) {
            engine.handle(&session, vec![message]).await;
        }
        self.note(format!(
            "co{c} <- {} {line}{}",
            worker_name(&self.workers[w]),
            if duplicate { " (dup)" } else { "" }
        ));
    }

    /// A heartbeat tick of a linked worker: sometimes with every
    /// unacknowledged settlement resent.
    async fn beat_some(&mut self) {
        let Some(w) = self.some_link() else { return };
        let resend = self.rng.chance(50);
        let (Some(worker), Some(link)) = (self.workers[w].worker.clone(), self.workers[w].link.as_ref()) else {
            return;
        };
        let after = if resend { Duration::ZERO } else { Duration::MAX };
        for m in worker.beat(after, tokio::time::Instant::now()) {
            let _ = link.up_tx.send(m).await;
        }
        self.note(format!("{} beats{}", worker_name(&self.workers[w]), if resend { " and resends" } else { "" }));
    }

    async fn break_some(&mut self) {
        let Some(w) = self.some_link() else { return };
        let Some(link) = self.workers[w].link.take() else { return };
        if let Some(worker) = &self.workers[w].worker {
            worker.detach();
        }
        let c = link.coordinator;
        self.end_session(link).await;
        self.tally.breaks += 1;
        self.note(format!("{} session with co{c} broke", worker_name(&self.workers[w])));
    }

    fn finish_some(&mut self) {
        let waiting = self.calls.waiting();
        if waiting.is_empty() {
            return;
        }
        let i = waiting[self.rng.below(waiting.len())];
        let ending = match self.rng.below(10) {
            0..=6 => Ending::Result(self.rng.next_u64() % 1_000_000),
            7 | 8 => Ending::Fail { retryable: true },
            _ => Ending::Fail { retryable: false },
        };
        let heard = self.calls.finish(i, ending);
        let (id, attempt) = self.calls.with(|c| (c[i].execution_id.clone(), c[i].attempt));
        let line =
            format!("call {i} ({}#{attempt}) ends {ending:?}{}", self.label(&id), if heard { "" } else { " unheard" });
        self.note(line);
    }

    pub(super) fn advance(&mut self, by: i64) {
        self.now += by;
        baton_proto::clock::simulated::advance_to(self.now);
        self.note(format!("time +{by}ms"));
    }

    pub(super) async fn dispatch(&mut self) {
        let Some(c) = self.live_coordinator() else { return };
        let Some(engine) = self.coordinators[c].clone() else { return };
        let round = engine.dispatch_round().await;
        self.note(format!("co{c} dispatch: {round:?}"));
    }

    pub(super) async fn sweep(&mut self) {
        let Some(c) = self.live_coordinator() else { return };
        let Some(engine) = self.coordinators[c].clone() else { return };
        let report = engine.sweep_once(self.now).await;
        self.note(format!("co{c} sweep: {report:?}"));
    }

    /// An owner's start that is neither refused by admission nor known to
    /// have gone in: retried with its idempotency key.
    pub(super) fn retry_pending(&self) -> Option<usize> {
        self.owned.iter().position(|o| o.id.is_none() && !o.rejected)
    }

    pub(super) async fn start(&mut self) {
        let i = match self.retry_pending() {
            Some(i) => i,
            None => {
                let tool = if self.rng.chance(40) { tools::ONCE } else { tools::RETRIED };
                let key = format!("k{}", self.owned.len());
                self.owned.push(Owned { key, tool, id: None, rejected: false });
                self.owned.len() - 1
            }
        };
        let Some(c) = self.live_coordinator() else { return };
        let Some(engine) = self.coordinators[c].clone() else { return };
        let t = self.template;
        let req = StartRequest {
            org_id: t.org_id.clone(),
            project_id: t.project_id.clone(),
            gateway_id: t.gateway_id.clone(),
            tool_name: self.owned[i].tool.to_owned(),
            input_json: "{}".into(),
            ttl_ms: Some(world::TTL_MS),
            idempotency_key: Some(self.owned[i].key.clone()),
            request_fingerprint: format!("f{i}"),
            surface: Surface::Rest,
            ..Default::default()
        };
        let line = match engine.start(Some(&self.bearer()), req).await {
            Ok(created) => {
                self.owned[i].id = Some(created.record.id.to_string());
                format!("e{i} started at co{c}{}", if created.replayed { " (replayed)" } else { "" })
            }
            Err(EngineError::Capacity(r)) => {
                self.owned[i].rejected = true;
                self.tally.rejected_by_admission += 1;
                format!("e{i} refused by admission ({:?})", r.scope)
            }
            Err(e) => format!("e{i} start failed at co{c}: {}", error_kind(&e)),
        };
        self.note(line);
    }

    pub(super) fn bearer(&self) -> String {
        format!("Bearer {}", self.template.owner_token)
    }

    pub(super) fn scope(&self) -> Scope<'static> {
        Scope { org_id: &self.template.org_id, project_id: &self.template.project_id }
    }

    async fn cancel(&mut self) {
        let Some(i) = self.some_started() else { return };
        let Some(c) = self.live_coordinator() else { return };
        let (Some(engine), Some(id)) = (self.coordinators[c].clone(), self.owned[i].id.clone()) else { return };
        let line = match engine.cancel(Some(&self.bearer()), self.scope(), &id).await {
            Ok((outcome, record)) => format!("e{i} cancel at co{c}: {outcome:?}, {:?}", record.status()),
            Err(e) => format!("e{i} cancel failed at co{c}: {}", error_kind(&e)),
        };
        self.note(line);
    }

    pub(super) fn some_started(&mut self) -> Option<usize> {
        let started: Vec<usize> = (0..self.owned.len()).filter(|i| self.owned[*i].id.is_some()).collect();
        (!started.is_empty()).then(|| started[self.rng.below(started.len())])
    }

    /// Replaces execution ids in `line` by their owner's labels.
    fn relabel(&self, line: &str) -> String {
        let mut line = line.to_owned();
        for (i, o) in self.owned.iter().enumerate() {
            if let Some(id) = &o.id {
                line = line.replace(id.as_str(), &format!("e{i}"));
            }
        }
        line
    }
}

fn worker_name(slot: &super::WorkerSlot) -> String {
    format!("{}.{}", slot.name, slot.incarnation)
}

fn error_kind(e: &EngineError) -> String {
    match e {
        EngineError::Store(s) if s.is_unavailable() => "unavailable".into(),
        EngineError::Admission(_) => "admission unavailable".into(),
        other => format!("{other}"),
    }
}
