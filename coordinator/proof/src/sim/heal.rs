//! The end of a run: faults stop and everything heals, and then every
//! execution must end (the deadline bounds how long that may take).

use super::Sim;
use super::tools::Ending;
use baton_coordinator::grpc::worker::from_worker;
use baton_proto::worker::v1::WorkerMessage;
use std::time::Duration;

impl Sim {
    /// Everything heals: faults stop, every party comes back, messages flow
    /// and tools finish, until every execution ended (the deadline bounds it).
    pub(super) async fn heal(&mut self) -> Result<(), super::Violation> {
        self.faults.on.store(false, std::sync::atomic::Ordering::Relaxed);
        self.note("healing".into());
        if self.admission_lost {
            self.rebuild_admission().await;
        }
        for round in 0..400 {
            for c in 0..self.coordinators.len() {
                if self.coordinators[c].is_none() {
                    self.coordinator_up(c);
                }
            }
            for w in 0..self.workers.len() {
                if self.workers[w].worker.is_none() {
                    self.worker_up(w);
                }
                if self.workers[w].link.is_none() {
                    self.connect_some().await;
                }
            }
            self.step += 1;
            if self.retry_pending().is_some() {
                self.start().await;
            }
            for w in 0..self.workers.len() {
                for _ in 0..64 {
                    let Some(link) = self.workers[w].link.as_mut() else { break };
                    link.pull_up();
                    if link.down.is_empty() && !link.pull_down() && link.up.is_empty() {
                        break;
                    }
                    self.deliver_all(w).await;
                    self.settle().await;
                }
            }
            for i in self.calls.waiting() {
                self.calls.finish(i, Ending::Result(1_000_000 + i as u64));
            }
            self.settle().await;
            for w in 0..self.workers.len() {
                if let (Some(worker), Some(link)) = (self.workers[w].worker.clone(), self.workers[w].link.as_ref()) {
                    for m in worker
                        .beat(if round % 5 == 4 { Duration::ZERO } else { Duration::MAX }, tokio::time::Instant::now())
                    {
                        let _ = link.up_tx.send(m).await;
                    }
                }
            }
            self.settle().await;
            self.dispatch().await;
            self.sweep().await;
            self.settle().await;
            self.check().await?;
            if self.all_ended().await {
                return self.check_end().await;
            }
            if round % 4 == 3 {
                self.advance(2_000);
            }
        }
        Err(self.violation("some execution never ended after the run healed".into()))
    }

    /// Both directions of worker `w`'s link, in order, until the wire is empty.
    async fn deliver_all(&mut self, w: usize) {
        let Some(worker) = self.workers[w].worker.clone() else { return };
        let Some(link) = self.workers[w].link.as_mut() else { return };
        let c = link.coordinator;
        let session = link.session.clone();
        let tx = link.up_tx.clone();
        let down: Vec<_> = link.down.drain(..).collect();
        let up: Vec<WorkerMessage> = link.up.drain(..).collect();
        for m in down {
            worker.receive(m, &tx).await;
        }
        if let Some(engine) = self.coordinators[c].clone() {
            for m in up {
                if let Some(message) = from_worker(m) {
                    engine.handle(&session, vec![message]).await;
                }
            }
        }
    }
}
