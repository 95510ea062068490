//! The shape every coalescer shares (the store's, the signals', admission's):
//! one task takes whatever jobs are queued (up to a maximum), runs them as one
//! batch, and loops. Nothing waits for a batch to fill: a lone job goes at
//! once, and jobs that arrive while a batch is in flight form the next one
//! (group commit, in the application).

use std::future::Future;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

/// Jobs that may wait for a batch. Beyond this the coordinator is overloaded
/// and says so (503 with Retry-After) rather than queueing without bound.
pub(in crate::engine) const MAX_QUEUED: usize = 4_096;

/// A queued job knows whether its caller still waits for it.
pub(crate) trait Job: Send + 'static {
    /// The caller gave up (its request was cancelled or timed out): nothing to do.
    fn abandoned(&self) -> bool;
}

/// Spawns the batching task; it ends when every sender is dropped.
pub(crate) fn spawn<J, F, Fut>(max: usize, mut run: F) -> mpsc::Sender<J>
where
    J: Job,
    F: FnMut(Vec<J>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (jobs, mut rx) = mpsc::channel(MAX_QUEUED);
    tokio::spawn(async move {
        let mut batch = Vec::with_capacity(max);
        while rx.recv_many(&mut batch, max).await > 0 {
            batch.retain(|j: &J| !j.abandoned());
            if !batch.is_empty() {
                run(std::mem::take(&mut batch)).await;
            }
        }
    });
    jobs
}

/// Queues `job` without waiting: a full queue is an honest "busy".
pub(in crate::engine) fn enqueue<J>(jobs: &mpsc::Sender<J>, job: J) -> crate::store::Result<()> {
    match jobs.try_send(job) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(_)) => Err(crate::store::Error::Busy),
        Err(TrySendError::Closed(_)) => Err(gone(())),
    }
}

/// The error a caller sees when the batching task is gone (shutdown).
pub(in crate::engine) fn gone<T>(_: T) -> crate::store::Error {
    crate::store::Error::Unavailable(sqlx::Error::PoolClosed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_answers_busy_and_a_closed_one_unavailable() {
        let (tx, rx) = mpsc::channel::<u8>(1);
        assert!(enqueue(&tx, 1).is_ok());
        assert!(matches!(enqueue(&tx, 2), Err(crate::store::Error::Busy)));
        drop(rx);
        assert!(matches!(enqueue(&tx, 3), Err(crate::store::Error::Unavailable(_))));
    }

    struct Abandonable(tokio::sync::oneshot::Sender<()>);

    impl Job for Abandonable {
        fn abandoned(&self) -> bool {
            self.0.is_closed()
        }
    }

    #[tokio::test]
    async fn jobs_whose_callers_gave_up_are_not_run() {
        let (ran_tx, mut ran) = mpsc::unbounded_channel();
        let jobs = spawn(8, move |batch: Vec<Abandonable>| {
            let ran_tx = ran_tx.clone();
            async move {
                for job in batch {
                    let _ = ran_tx.send(());
                    let _ = job.0.send(());
                }
            }
        });
        let (gave_up, answer) = tokio::sync::oneshot::channel();
        drop(answer);
        let (waits, kept) = tokio::sync::oneshot::channel();
        enqueue(&jobs, Abandonable(gave_up)).expect("queued");
        enqueue(&jobs, Abandonable(waits)).expect("queued");
        kept.await.expect("the waiting caller is answered");
        assert_eq!(ran.recv().await, Some(()));
        assert!(ran.try_recv().is_err(), "only the job whose caller waits ran");
    }
}
