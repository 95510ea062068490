//! Cross-replica signals over Redis pub/sub: "execution changed" (wakes long
//! polls) and "work pending" (wakes dispatchers). On a Redis Cluster classic
//! pub/sub is forwarded to every node, so a subscriber on any node hears all. Without Redis (`baton dev`)
//! signals stay in-process. Signals are hints; losing one costs latency (the
//! dispatcher ticks, waiters time out), never correctness. Publishing never
//! waits for Redis: signals are queued and sent in batches (one message per
//! channel per batch, execution ids space-separated), so a busy replica sends
//! a few messages per round trip instead of one per transition.

use super::batch::coalesce;
use crate::notify::Changes;
use crate::redis_link::{Link, Target};
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

/// Ids per "changed" message at most (about 8 KiB).
const MAX_BATCH: usize = 256;

#[derive(Clone)]
pub enum Bus {
    Local,
    Redis(Box<RedisBus>),
}

#[derive(Clone)]
pub struct RedisBus {
    outbox: mpsc::Sender<Signal>,
    target: Target,
    prefix: String,
    /// Names this replica: signals it published itself were already delivered
    /// locally and are skipped when they come back.
    origin: String,
}

impl coalesce::Job for Signal {
    fn abandoned(&self) -> bool {
        false
    }
}

enum Signal {
    Changed(String),
    Wake,
}

impl Bus {
    pub(crate) async fn redis(target: &Target, prefix: &str, origin: &str) -> Result<Self, redis::RedisError> {
        let publisher = Link::connect(target).await?;
        let (changed, wake) = Self::channels(prefix);
        let from = origin.to_owned();
        let outbox = coalesce::spawn(MAX_BATCH, move |batch| {
            publish(publisher.clone(), (changed.clone(), wake.clone()), from.clone(), batch)
        });
        Ok(Bus::Redis(Box::new(RedisBus {
            outbox,
            target: target.clone(),
            prefix: prefix.to_owned(),
            origin: origin.to_owned(),
        })))
    }

    fn channels(prefix: &str) -> (String, String) {
        (format!("{prefix}:changed"), format!("{prefix}:wake"))
    }

    fn send(&self, signal: Signal) {
        if let Bus::Redis(bus) = self {
            // Closed only at shutdown, when signals no longer matter.
            // A hint: dropped when the queue is full, as when Redis loses it.
            let _ = bus.outbox.try_send(signal);
        }
    }

    pub(crate) fn publish_changed(&self, execution_id: &str) {
        self.send(Signal::Changed(execution_id.to_owned()));
    }

    pub(crate) fn publish_wake(&self) {
        self.send(Signal::Wake);
    }

    /// Listens for other replicas' signals until shutdown, reconnecting with backoff.
    pub(crate) async fn listen(self, changes: Changes, wake: Arc<Notify>, shutdown: CancellationToken) {
        let Bus::Redis(bus) = self else { return };
        let RedisBus { target, prefix, origin, .. } = *bus;
        let (changed, wake_channel) = Self::channels(&prefix);
        let mut backoff = Duration::from_millis(100);
        while !shutdown.is_cancelled() {
            let subscribed = crate::redis_link::subscribe(&target, &[&changed, &wake_channel]).await;
            match subscribed {
                Ok(mut pubsub) => {
                    backoff = Duration::from_millis(100);
                    // A reconnect may have missed signals: wake everything once.
                    wake.notify_one();
                    let mut messages = pubsub.on_message();
                    loop {
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            msg = messages.next() => {
                                let Some(msg) = msg else { break };
                                let payload = msg.get_payload::<String>().unwrap_or_default();
                                let (from, body) = payload.split_once(' ').unwrap_or(("", ""));
                                if from == origin {
                                    continue;
                                }
                                if msg.get_channel_name() == changed {
                                    body.split_whitespace().for_each(|id| changes.changed_locally(id, None));
                                } else {
                                    wake.notify_one();
                                }
                            }
                        }
                    }
                    tracing::warn!("redis signal subscription lost; reconnecting");
                }
                Err(e) => {
                    super::metrics::redis_error("signals");
                    tracing::warn!(error = %e, "redis signal subscription failed")
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }
}

/// Sends one batch of queued signals: at most one message per channel.
async fn publish(mut con: Link, (changed, wake): (String, String), origin: String, batch: Vec<Signal>) {
    let mut ids = Vec::new();
    let mut woken = false;
    for signal in batch {
        match signal {
            Signal::Changed(id) => ids.push(id),
            Signal::Wake => woken = true,
        }
    }
    let mut pipe = redis::pipe();
    if !ids.is_empty() {
        pipe.cmd("PUBLISH").arg(changed).arg(format!("{origin} {}", ids.join(" "))).ignore();
    }
    if woken {
        pipe.cmd("PUBLISH").arg(wake).arg(format!("{origin} ")).ignore();
    }
    if let Err(e) = pipe.query_async::<()>(&mut con).await {
        super::metrics::redis_error("signals");
        tracing::debug!(error = %e, "signals not published");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;

    /// Signals published in one burst (so sent as batched messages) reach
    /// another replica's waiters one execution at a time; a replica ignores
    /// its own.
    #[tokio::test]
    async fn a_burst_of_signals_wakes_each_waiter_on_another_replica() {
        let url = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
        let prefix = format!("bt_bus_{}", crate::domain::ExecutionId::generate());
        let target = Target::Node(url);
        let a = Bus::redis(&target, &prefix, "a").await.expect("redis reachable (TEST_REDIS_URL)");
        let b = Bus::redis(&target, &prefix, "b").await.expect("redis");
        let (changes, wake, shutdown) = (Changes::default(), Arc::new(Notify::new()), CancellationToken::new());
        let mut subscribed = pin!(wake.notified());
        subscribed.as_mut().enable();
        tokio::spawn(b.clone().listen(changes.clone(), wake.clone(), shutdown.clone()));
        // The listener wakes the dispatcher once it is subscribed.
        subscribed.await;
        let watches: Vec<_> = (0..50).map(|i| changes.watch(&format!("te_{i}"))).collect();
        let mut woken: Vec<_> = watches.iter().map(|w| Box::pin(w.notify.notified())).collect();
        for n in &mut woken {
            n.as_mut().enable();
        }
        for i in 0..50 {
            a.publish_changed(&format!("te_{i}"));
        }
        // A bound so a lost signal fails the test instead of hanging it.
        tokio::time::timeout(Duration::from_secs(30), futures_util::future::join_all(woken))
            .await
            .expect("every waiter woken");
        shutdown.cancel();
    }
}
