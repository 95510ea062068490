//! Whether any credential was revoked since a moment: lets a foreground call,
//! authenticated when it arrived, be answered with the settlement this
//! replica just committed instead of reading its execution again (decision
//! 0053). Postgres says so: a revocation commits with a `NOTIFY` on
//! `store::REVOCATION_CHANNEL`, which every coordinator `LISTEN`s to. Nothing here is ever
//! trusted past what it saw: until the listener is connected, and after any
//! break in it (a notification may have been missed), every mark vouches for
//! nothing and the caller reads, as before. SQLite has no listener, so there
//! nothing is vouched for.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long a broken listener waits before connecting again.
const RECONNECT: Duration = Duration::from_millis(500);

/// How long a listener that could not hear the database waits to try again.
const FAILED_AGAIN: Duration = Duration::from_secs(10);

/// How long the listener waits for its own probe.
const PROBE_PATIENCE: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
pub(crate) struct Revocations {
    /// Moves on every revocation heard and every (re)connection.
    generation: AtomicU64,
    listening: AtomicBool,
}

impl Revocations {
    /// A mark to take before a caller's credential is read; `None` while
    /// revocations may go unheard.
    pub(crate) fn mark(&self) -> Option<u64> {
        let generation = self.generation.load(Ordering::SeqCst);
        self.listening.load(Ordering::SeqCst).then_some(generation)
    }

    /// Whether no credential can have been revoked since `mark` was taken.
    pub(crate) fn none_since(&self, mark: Option<u64>) -> bool {
        mark.is_some_and(|m| self.listening.load(Ordering::SeqCst) && self.generation.load(Ordering::SeqCst) == m)
    }

    pub(crate) fn heard(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Listening from now on: marks taken before are void.
    pub(crate) fn connected(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.listening.store(true, Ordering::SeqCst);
    }

    /// Not listening: nothing is vouched for until connected again.
    fn broken(&self) {
        self.listening.store(false, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

/// Listens on Postgres `database_url` until `shutdown`; does nothing for any
/// other database.
pub(crate) async fn listen(
    database_url: String,
    revocations: std::sync::Arc<Revocations>,
    shutdown: CancellationToken,
) {
    if !database_url.starts_with("postgres") {
        return;
    }
    while !shutdown.is_cancelled() {
        // After a working listener breaks, connect again soon; after one that
        // could not hear the database, wait longer (and warn less often).
        let mut pause = FAILED_AGAIN;
        match sqlx::postgres::PgListener::connect(&database_url).await {
            Ok(mut listener) => {
                let channel = crate::store::REVOCATION_CHANNEL;
                if let Err(e) = hears_itself(&mut listener, channel, channel).await {
                    tracing::warn!(error = %e, "revocation listener does not hear the database; foreground calls read");
                } else {
                    revocations.connected();
                    pause = RECONNECT;
                    loop {
                        tokio::select! {
                            heard = listener.try_recv() => match heard {
                                Ok(Some(_)) => revocations.heard(),
                                // The connection broke: what was sent meanwhile is lost.
                                Ok(None) | Err(_) => break,
                            },
                            _ = shutdown.cancelled() => break,
                        }
                    }
                }
                revocations.broken();
            }
            Err(e) => tracing::warn!(error = %e, "revocation listener could not connect"),
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.cancelled() => {}
        }
    }
}

/// Listens on `channel`, then proves that notifications reach this
/// connection: it announces a probe (on `probe_on`, which is `channel` but in
/// a test) and waits for it. Behind a proxy that pools transactions (where
/// `LISTEN` holds no session) the probe never comes back, and nothing is ever
/// vouched for.
async fn hears_itself(listener: &mut sqlx::postgres::PgListener, channel: &str, probe_on: &str) -> Result<(), String> {
    listener.listen(channel).await.map_err(|e| e.to_string())?;
    sqlx::query("SELECT pg_notify($1, 'probe')")
        .bind(probe_on)
        .execute(&mut *listener)
        .await
        .map_err(|e| e.to_string())?;
    match tokio::time::timeout(PROBE_PATIENCE, listener.try_recv()).await {
        Ok(Ok(Some(_))) => Ok(()),
        Ok(Ok(None)) => Err("the connection closed".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("its own probe did not arrive within {PROBE_PATIENCE:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_vouches_only_while_listening_and_until_the_next_revocation() {
        let r = Revocations::default();
        assert_eq!(r.mark(), None, "not listening yet: nothing is vouched for");
        assert!(!r.none_since(r.mark()));
        r.connected();
        let mark = r.mark();
        assert!(r.none_since(mark));
        r.heard();
        assert!(!r.none_since(mark), "a revocation voids every earlier mark");
        let mark = r.mark();
        r.broken();
        r.connected();
        assert!(!r.none_since(mark), "a break may have lost a revocation");
    }

    /// Polls `ready` until it holds (a listener's connection is not observable
    /// otherwise), for at most ten seconds.
    async fn eventually(what: &str, ready: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !ready() {
            assert!(tokio::time::Instant::now() < deadline, "{what} within 10 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn a_revocation_committed_on_postgres_voids_every_mark_taken_before_it() {
        let backend = crate::store::contract_tests::postgres().await;
        let store = &backend.store;
        let org = crate::admin::create_org(store, "o").await.expect("org");
        let project = crate::admin::create_project(store, &org, "p").await.expect("project");
        let gateway = crate::admin::create_gateway(store, &project, "g").await.expect("gateway");
        let issued = crate::admin::issue_end_user_token(store, &gateway, "ada").await.expect("token");

        let revocations = std::sync::Arc::new(Revocations::default());
        let shutdown = CancellationToken::new();
        let listening = tokio::spawn(listen(backend.url.clone(), revocations.clone(), shutdown.clone()));
        eventually("the listener connects", || revocations.mark().is_some()).await;
        let mark = revocations.mark();
        crate::admin::issue_end_user_token(store, &gateway, "bob").await.expect("another token");
        assert!(!store.revoke_credential("cr_unknown", 1).await.expect("revoke nothing"));
        assert!(revocations.none_since(mark), "issuing a token, or revoking none, revokes nothing");
        assert!(store.revoke_credential(&issued.id, 1).await.expect("revoke"));
        eventually("the revocation is heard", || !revocations.none_since(mark)).await;
        shutdown.cancel();
        listening.await.expect("the listener ends at shutdown");
    }

    /// What a proxy that pools transactions looks like from here: the probe
    /// never reaches the listening session, and the listener refuses to vouch.
    #[tokio::test]
    async fn a_listener_that_does_not_hear_its_own_probe_is_not_trusted() {
        let backend = crate::store::contract_tests::postgres().await;
        let mut listener = sqlx::postgres::PgListener::connect(&backend.url).await.expect("connect");
        let channel = crate::store::REVOCATION_CHANNEL;
        assert!(hears_itself(&mut listener, channel, channel).await.is_ok(), "a direct session hears itself");
        let mut deaf = sqlx::postgres::PgListener::connect(&backend.url).await.expect("connect");
        let unheard = hears_itself(&mut deaf, "baton_test_elsewhere", "baton_test_nowhere").await;
        assert!(unheard.is_err_and(|e| e.contains("did not arrive")));
    }
}
