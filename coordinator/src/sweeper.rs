//! The periodic sweep (deadlines, owner loss, retention) and this replica's
//! entry in the coordinator directory. Safe on every replica at once: each step
//! is a locked read-modify-write through the state machine.

use crate::engine::{Engine, now_ms};
use std::sync::Arc;
use std::time::Duration;

pub async fn run(engine: Arc<Engine>) {
    let interval = Duration::from_millis(engine.options.sweep_interval_ms.max(50));
    loop {
        let now = now_ms();
        if let Err(e) = engine.store.upsert_coordinator(&engine.options.id, &engine.options.advertise_url, now).await {
            tracing::warn!(error = %e, "coordinator directory update failed");
        }
        match engine.store.sweep(now, engine.options.owner_loss_grace_ms, 500).await {
            Ok((report, applied)) => {
                for a in &applied {
                    engine.after_commit(&a.record, &a.effects).await;
                }
                if report != Default::default() {
                    tracing::info!(?report, "sweep");
                }
            }
            Err(e) => tracing::warn!(error = %e, "sweep failed"),
        }
        tokio::select! {
            _ = engine.shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}
