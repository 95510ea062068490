//! The shape both coalescers share: one task takes whatever jobs are queued
//! (up to a maximum), runs them as one batch, and loops. Nothing waits for a
//! batch to fill: a lone job goes at once, and jobs that arrive while a batch
//! is in flight form the next one (group commit, in the application).

use std::future::Future;
use tokio::sync::mpsc;

/// Spawns the batching task; it ends when every sender is dropped.
pub fn spawn<J, F, Fut>(max: usize, mut run: F) -> mpsc::UnboundedSender<J>
where
    J: Send + 'static,
    F: FnMut(Vec<J>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (jobs, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut batch = Vec::with_capacity(max);
        while rx.recv_many(&mut batch, max).await > 0 {
            run(std::mem::take(&mut batch)).await;
        }
    });
    jobs
}

/// The error a caller sees when the batching task is gone (shutdown).
pub fn gone<T>(_: T) -> crate::store::Error {
    crate::store::Error::Unavailable(sqlx::Error::PoolClosed)
}
