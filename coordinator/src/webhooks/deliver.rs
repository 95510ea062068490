//! Delivery: every replica runs one [`Deliverer`]. It claims due signals with
//! a lease (a claim is a short transaction; the HTTP call happens outside it),
//! makes one attempt each, and records the outcome. A replica killed while it
//! holds a lease leaves the row to be claimed again once the lease ends: the
//! receiver may see that signal twice, never not at all. Retries back off
//! exponentially with jitter and stop at the retry horizon; every attempt of a
//! signal carries the same `webhook-id` and body, and a fresh timestamp and
//! signature. Nothing here touches an execution.

use super::{Options, sign, target};
use crate::crypto::{Field, KeyRing};
use crate::domain::Millis;
use crate::store::{AttemptOutcome, ClaimedDelivery, Store};
use baton_proto::clock::now_ms;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long settled deliveries stay readable to admins.
const KEEP_SETTLED_MS: Millis = 7 * 24 * 3_600_000;
const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// After a claim that found nothing, the least time before a wake-up claims again.
const QUIET_GAP: Duration = Duration::from_millis(50);

pub(crate) struct Deliverer {
    store: Store,
    ring: Arc<KeyRing>,
    options: Options,
    /// This replica's id: the lease owner.
    owner: String,
    client: reqwest::Client,
    policy: target::Policy,
}

/// The wait before attempt `attempts + 1`, given `attempts` made: about
/// `initial · 2^(attempts-1)`, at most `max`, drawn from its upper half.
pub(crate) fn backoff(options: &Options, attempts: i64) -> Millis {
    let exponent = u32::try_from(attempts.saturating_sub(1).clamp(0, 40)).unwrap_or(40);
    let base = options.retry_initial_ms.max(1).saturating_mul(1_i64 << exponent).min(options.retry_max_delay_ms.max(1));
    let mut bytes = [0u8; 8];
    crate::domain::id::fill_random(&mut bytes);
    let half = (base / 2).max(1);
    base - half + i64::try_from(u64::from_le_bytes(bytes) % half as u64).unwrap_or(0)
}

/// What an attempt's failure is called in the delivery state (never a URL,
/// which may carry a token in its query).
fn failure(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "connection failed or target address refused".into()
    } else {
        "request failed".into()
    }
}

impl Deliverer {
    pub(crate) fn new(
        store: Store,
        ring: Arc<KeyRing>,
        options: Options,
        owner: String,
    ) -> Result<Self, reqwest::Error> {
        // reqwest needs a process-wide rustls provider; the binary installs
        // ring at start, and this covers library users (an error only means
        // one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let policy = target::Policy::from_options(&options);
        let timeout = Duration::from_millis(options.request_timeout_ms.max(1));
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(target::GuardedResolver { policy }))
            .user_agent("Baton-Webhooks/1")
            .build()?;
        Ok(Deliverer { store, ring, options, owner, client, policy })
    }

    /// Delivers until `shutdown`; `wake` is notified when this replica wrote signals.
    pub(crate) async fn run(self: Arc<Self>, wake: Arc<Notify>, shutdown: CancellationToken) {
        let concurrency = self.options.concurrency.max(1);
        let poll = Duration::from_millis(self.options.poll_interval_ms.max(10));
        // Attempts run as tasks of their own: they must make progress (and give
        // their database connection back) while this loop waits for a claim.
        // Dropped at shutdown, they are aborted; their leases end by themselves.
        let mut inflight = tokio::task::JoinSet::new();
        let mut pruned = tokio::time::Instant::now();
        // Whether the last claim found nothing, and when it ran.
        let mut quiet = false;
        let mut claimed_at = tokio::time::Instant::now();
        loop {
            let room = concurrency - inflight.len();
            let mut full = false;
            if room > 0 {
                let now = now_ms();
                // A lease outlives any attempt: the request timeout, twice, and a margin.
                let lease = i64::try_from(self.options.request_timeout_ms).unwrap_or(i64::MAX / 4) * 2 + 5_000;
                let limit = u32::try_from(room).unwrap_or(u32::MAX);
                match self.store.claim_webhook_deliveries(&self.owner, now, now.saturating_add(lease), limit).await {
                    Ok(claimed) => {
                        full = claimed.len() == room;
                        quiet = claimed.is_empty();
                        claimed_at = tokio::time::Instant::now();
                        for d in claimed {
                            let this = self.clone();
                            inflight.spawn(async move { this.attempt(d).await });
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "claiming webhook deliveries failed"),
                }
            }
            if pruned.elapsed() >= PRUNE_EVERY {
                pruned = tokio::time::Instant::now();
                if let Err(e) = self.store.prune_webhook_deliveries(now_ms() - KEEP_SETTLED_MS).await {
                    tracing::warn!(error = %e, "pruning webhook deliveries failed");
                }
            }
            if full && inflight.len() < concurrency {
                continue;
            }
            tokio::select! {
                // Attempts still running lose their lease later and are made again.
                _ = shutdown.cancelled() => return,
                Some(_) = inflight.join_next(), if !inflight.is_empty() => {}
                // A commit that queued a delivery wakes this loop (on this
                // replica; others find it by their poll). After a claim that
                // found nothing (another replica took them), claims are spaced
                // out so that a burst does not cost a claim per transition.
                _ = async {
                    wake.notified().await;
                    if quiet {
                        tokio::time::sleep_until(claimed_at + QUIET_GAP).await;
                    }
                } => {}
                _ = tokio::time::sleep(poll) => {}
            }
        }
    }

    /// The keys that sign now: the current secret, and the previous one while a rotation overlaps.
    fn keys(&self, d: &ClaimedDelivery, now: Millis) -> Option<Vec<Vec<u8>>> {
        let open = |ct: &[u8]| -> Option<Vec<u8>> {
            let secret = self.ring.open(&d.endpoint_id, Field::WebhookSecret, ct).ok()?;
            sign::key_of(std::str::from_utf8(&secret).ok()?).ok()
        };
        let mut keys = vec![open(&d.secret_ct)?];
        if let (Some(ct), Some(until)) = (&d.previous_secret_ct, d.previous_until)
            && until > now
            && let Some(k) = open(ct)
        {
            keys.push(k);
        }
        Some(keys)
    }

    /// One attempt, recorded.
    async fn attempt(&self, d: ClaimedDelivery) {
        let started = now_ms();
        let (status_code, error) = self.send(&d, started).await;
        let at = now_ms();
        let outcome = if error.is_none() {
            AttemptOutcome { at, status_code, error: None, status: "delivered", next_attempt_at: at }
        } else {
            let next = at.saturating_add(backoff(&self.options, d.attempts + 1));
            let give_up = next > d.created_at.saturating_add(self.options.retry_horizon_ms);
            let status = if give_up { "failed" } else { "pending" };
            AttemptOutcome { at, status_code, error, status, next_attempt_at: next }
        };
        tracing::debug!(
            message_id = %d.message_id, webhook_id = %d.endpoint_id, status = outcome.status,
            code = ?outcome.status_code, "webhook attempt"
        );
        if outcome.status == "failed" {
            tracing::warn!(message_id = %d.message_id, webhook_id = %d.endpoint_id, "webhook signal given up after the retry horizon");
        }
        // `pending` here means this attempt failed and another is due.
        let counted = if outcome.status == "pending" { "retrying" } else { outcome.status };
        crate::engine::metrics::webhook_attempt(counted, started, at);
        if let Err(e) = self.store.finish_webhook_attempt(&d.id, &self.owner, &outcome).await {
            // The lease ends by itself; the signal is attempted again then.
            tracing::warn!(error = %e, message_id = %d.message_id, "recording a webhook attempt failed");
        }
    }

    /// Sends the signal once: the answer's status, and an error unless it was 2xx.
    async fn send(&self, d: &ClaimedDelivery, now: Millis) -> (Option<i64>, Option<String>) {
        let Ok(url) = target::parse(&d.url) else { return (None, Some("stored url is invalid".into())) };
        if !target::literal_allowed(&url, self.policy) {
            return (None, Some("target address refused".into()));
        }
        let Some(keys) = self.keys(d, now) else {
            tracing::error!(webhook_id = %d.endpoint_id, "webhook secret cannot be opened with the payload key ring");
            return (None, Some("secret unavailable".into()));
        };
        let timestamp = now / 1_000;
        let signature = sign::header(&keys, &d.message_id, timestamp, d.body.as_bytes());
        let sent = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", &d.message_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(d.body.clone())
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => (Some(i64::from(r.status().as_u16())), None),
            Ok(r) => (Some(i64::from(r.status().as_u16())), Some(format!("answered {}", r.status().as_u16()))),
            Err(e) => (None, Some(failure(&e))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let o = Options { retry_initial_ms: 1_000, retry_max_delay_ms: 10_000, ..Options::default() };
        for _ in 0..100 {
            let first = backoff(&o, 1);
            assert!((500..=1_000).contains(&first), "{first}");
            let third = backoff(&o, 3);
            assert!((2_000..=4_000).contains(&third), "{third}");
            let late = backoff(&o, 30);
            assert!((5_000..=10_000).contains(&late), "{late}");
        }
    }
}
