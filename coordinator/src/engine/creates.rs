//! Coalesced creates. Concurrent starts share one statement and one commit
//! (Postgres: `Store::create_many`, and `Store::create_claimed` for starts
//! that already hold a worker's free slot); a start whose Idempotency-Key is
//! already held, and every start on SQLite, is created on its own by
//! `Store::create_execution`, which answers replays and conflicts (pending,
//! for the dispatcher).

use super::coalesce;
use crate::domain::Millis;
use crate::store::{self, ClaimedNew, Created, NewExecution, Store};
use tokio::sync::{mpsc, oneshot};

/// 23 parameters a row: 64 rows stay far below Postgres' 65,535.
const MAX_BATCH: usize = 64;

/// The worker a start holds a free slot of, and its lease.
pub struct Claim {
    pub worker_id: String,
    pub lease_until: Millis,
}

struct Job {
    new: NewExecution,
    claim: Option<Claim>,
    reply: oneshot::Sender<store::Result<Created>>,
}

impl coalesce::Job for Job {
    fn abandoned(&self) -> bool {
        // Its caller gave up: nothing was promised, so nothing is created.
        self.reply.is_closed()
    }
}

#[derive(Clone)]
pub struct Creates {
    jobs: mpsc::Sender<Job>,
}

impl Creates {
    /// Starts the creating task; it ends when the last `Creates` handle is dropped.
    pub fn start(store: Store) -> Creates {
        let jobs = coalesce::spawn(MAX_BATCH, move |batch| {
            let store = store.clone();
            async move { create_batch(&store, batch).await }
        });
        Creates { jobs }
    }

    /// Creates `new`, leased at once per `claim` when it can be (the answer's
    /// record says whether it was).
    pub async fn create(&self, new: NewExecution, claim: Option<Claim>) -> store::Result<Created> {
        let (reply, answer) = oneshot::channel();
        coalesce::enqueue(&self.jobs, Job { new, claim, reply })?;
        answer.await.map_err(coalesce::gone)?
    }
}

async fn create_batch(store: &Store, jobs: Vec<Job>) {
    let (claimed, jobs): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| j.claim.is_some());
    let mut jobs = jobs;
    jobs.extend(create_claimed(store, claimed).await);
    let mut alone = Vec::new();
    let mut contended = Vec::new();
    if jobs.len() > 1 {
        let news: Vec<&NewExecution> = jobs.iter().map(|j| &j.new).collect();
        match store.create_many(&news).await {
            Ok(created) => {
                for (job, created) in jobs.into_iter().zip(created) {
                    match created {
                        Some(c) => {
                            let _ = job.reply.send(Ok(c));
                        }
                        // The key is taken: decide between its holder and a conflict.
                        None => contended.push(job),
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, creates = jobs.len(), "coalesced create failed; creating one by one");
                alone = jobs;
            }
        }
    } else {
        alone = jobs;
    }
    for job in alone {
        let created = store.create_execution(&job.new).await;
        let _ = job.reply.send(created);
    }
    for job in contended {
        let created = store.create_contended(&job.new).await;
        let _ = job.reply.send(created);
    }
}

/// Creates the claimed starts in one statement; answers the jobs it could not
/// create claimed (a taken key, a failed statement, SQLite), to be created
/// the ordinary way.
async fn create_claimed(store: &Store, jobs: Vec<Job>) -> Vec<Job> {
    let batch: Vec<ClaimedNew<'_>> = jobs
        .iter()
        .filter_map(|j| {
            j.claim.as_ref().map(|c| ClaimedNew { new: &j.new, worker_id: &c.worker_id, lease_until: c.lease_until })
        })
        .collect();
    let created = match store.create_claimed(&batch).await {
        Ok(created) => created,
        Err(e) => {
            tracing::warn!(error = %e, creates = jobs.len(), "claimed create failed; creating pending instead");
            vec![None; jobs.len()]
        }
    };
    drop(batch);
    let mut rest = Vec::new();
    for (job, record) in jobs.into_iter().zip(created) {
        match record {
            Some(record) => {
                let _ = job.reply.send(Ok(Created { record, replayed: false }));
            }
            None => rest.push(Job { claim: None, ..job }),
        }
    }
    rest
}
