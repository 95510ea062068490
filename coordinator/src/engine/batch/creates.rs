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
#[derive(Clone)]
pub(crate) struct Claim {
    pub(crate) worker_id: String,
    pub(crate) lease_until: Millis,
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
pub(crate) struct Creates {
    jobs: mpsc::Sender<Job>,
}

impl Creates {
    /// Starts the creating task; it ends when the last `Creates` handle is dropped.
    pub(crate) fn start(store: Store) -> Creates {
        let jobs = coalesce::spawn(MAX_BATCH, move |batch| {
            let store = store.clone();
            async move { create_batch(&store, batch).await }
        });
        Creates { jobs }
    }

    /// Creates `new`, leased at once per `claim` when it can be (the answer's
    /// record says whether it was).
    pub(crate) async fn create(&self, new: NewExecution, claim: Option<Claim>) -> store::Result<Created> {
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
            Err(e) if e.may_have_committed() => return answer_unknown(jobs, &e),
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
        Err(e) if e.may_have_committed() => {
            drop(batch);
            answer_unknown(jobs, &e);
            return Vec::new();
        }
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

/// A batch whose commit answer was lost: every start in it may exist, so none
/// is created again (the owner's retry finds its own by its key).
fn answer_unknown(jobs: Vec<Job>, e: &store::Error) {
    tracing::warn!(error = %e, creates = jobs.len(), "coalesced create's commit answer lost");
    for job in jobs {
        let _ = job.reply.send(Err(store::Error::CommitUnknown(sqlx::Error::Protocol(e.to_string()))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::contract_tests::{new_execution, postgres};
    use crate::store::{CommitFault, Faults};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Loses the answer of the first commit; every later one goes through.
    #[derive(Debug, Default)]
    struct FirstAnswerLost(AtomicBool);

    impl Faults for FirstAnswerLost {
        fn on_commit(&self) -> Option<CommitFault> {
            (!self.0.swap(true, Ordering::SeqCst)).then_some(CommitFault::Unknown)
        }
    }

    /// Found by the deterministic simulation's line of thought: creating the
    /// batch again one by one would meet its own rows, answer a definite
    /// failure, and so free admission places that executions hold.
    #[tokio::test]
    async fn a_batch_whose_commit_answer_was_lost_is_answered_unknown_and_not_created_again() {
        let backend = postgres().await;
        // Pending starts, and starts created leased to a worker: each kind is one statement.
        for leased in [false, true] {
            batch_with_its_answer_lost(&backend.store, leased).await;
        }
    }

    async fn batch_with_its_answer_lost(plain: &Store, leased: bool) {
        let store = plain.clone().with_faults(Arc::new(FirstAnswerLost::default()));
        let now = baton_proto::clock::now_ms();
        let news = [new_execution("prj_1", "ada", None, "f1", now), new_execution("prj_1", "bob", None, "f2", now)];
        let claim = leased.then(|| Claim { worker_id: "w1".into(), lease_until: now + 30_000 });
        let mut answers = Vec::new();
        let jobs = news
            .iter()
            .map(|new| {
                let (reply, answer) = oneshot::channel();
                answers.push(answer);
                Job { new: new.clone(), claim: claim.clone(), reply }
            })
            .collect();
        create_batch(&store, jobs).await;
        for answer in answers {
            let outcome = answer.await.expect("every job is answered");
            assert!(
                outcome.as_ref().is_err_and(store::Error::may_have_committed),
                "the batch's answer was lost, so each start may exist: {outcome:?}"
            );
        }
        for new in &news {
            let record = plain.get_execution(&new.id).await.expect("read");
            assert!(record.is_some(), "the lost answer's commit landed");
        }
    }
}
