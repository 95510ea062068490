//! Coalesced creates. Concurrent starts share one statement and one commit
//! (Postgres: `Store::create_many`); a start whose Idempotency-Key is already
//! held, and every start on SQLite, is created on its own by
//! `Store::create_execution`, which answers replays and conflicts.

use super::coalesce;
use crate::store::{self, Created, NewExecution, Store};
use tokio::sync::{mpsc, oneshot};

/// 23 parameters a row: 64 rows stay far below Postgres' 65,535.
const MAX_BATCH: usize = 64;

struct Job {
    new: NewExecution,
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

    pub async fn create(&self, new: NewExecution) -> store::Result<Created> {
        let (reply, answer) = oneshot::channel();
        coalesce::enqueue(&self.jobs, Job { new, reply })?;
        answer.await.map_err(coalesce::gone)?
    }
}

async fn create_batch(store: &Store, jobs: Vec<Job>) {
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
