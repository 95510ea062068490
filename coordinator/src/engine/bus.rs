//! Cross-replica signals over Redis pub/sub: "execution changed" (wakes long
//! polls) and "work pending" (wakes dispatchers). Without Redis (`baton dev`)
//! signals stay in-process. Signals are hints; losing one costs latency (the
//! dispatcher ticks, waiters time out), never correctness.

use crate::notify::Changes;
use futures_util::StreamExt;
use redis::aio::ConnectionManager;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[derive(Clone)]
pub enum Bus {
    Local,
    Redis(Box<RedisBus>),
}

#[derive(Clone)]
pub struct RedisBus {
    publisher: ConnectionManager,
    client: redis::Client,
    prefix: String,
    /// Names this replica: signals it published itself were already delivered
    /// locally and are skipped when they come back.
    origin: String,
}

impl Bus {
    pub async fn redis(url: &str, prefix: &str, origin: &str) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let publisher = ConnectionManager::new(client.clone()).await?;
        Ok(Bus::Redis(Box::new(RedisBus { publisher, client, prefix: prefix.to_owned(), origin: origin.to_owned() })))
    }

    fn channels(prefix: &str) -> (String, String) {
        (format!("{prefix}:changed"), format!("{prefix}:wake"))
    }

    async fn publish(&self, suffix: &str, payload: &str) {
        if let Bus::Redis(bus) = self {
            let RedisBus { publisher, prefix, origin, .. } = bus.as_ref();
            let payload = format!("{origin} {payload}");
            let mut con = publisher.clone();
            let sent: Result<i64, _> =
                redis::cmd("PUBLISH").arg(format!("{prefix}:{suffix}")).arg(payload).query_async(&mut con).await;
            if let Err(e) = sent {
                tracing::debug!(error = %e, "signal not published");
            }
        }
    }

    pub async fn publish_changed(&self, execution_id: &str) {
        self.publish("changed", execution_id).await;
    }

    pub async fn publish_wake(&self) {
        self.publish("wake", "").await;
    }

    /// Listens for other replicas' signals until shutdown, reconnecting with backoff.
    pub async fn listen(self, changes: Changes, wake: Arc<Notify>, shutdown: CancellationToken) {
        let Bus::Redis(bus) = self else { return };
        let RedisBus { client, prefix, origin, .. } = *bus;
        let (changed, wake_channel) = Self::channels(&prefix);
        let mut backoff = Duration::from_millis(100);
        while !shutdown.is_cancelled() {
            let subscribed = async {
                let mut pubsub = client.get_async_pubsub().await?;
                pubsub.subscribe(&[&changed, &wake_channel]).await?;
                Ok::<_, redis::RedisError>(pubsub)
            }
            .await;
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
                                    changes.changed_locally(body);
                                } else {
                                    wake.notify_one();
                                }
                            }
                        }
                    }
                    tracing::warn!("redis signal subscription lost; reconnecting");
                }
                Err(e) => tracing::warn!(error = %e, "redis signal subscription failed"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }
}
