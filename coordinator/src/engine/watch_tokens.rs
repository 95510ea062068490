//! Single use of a gateway's watch token (websocket delivery), for every
//! gateway replica at once. The token is sealed by the gateway and carries the
//! caller's credential; the gateway sends that credential with this call, so
//! who used a token is proven here, not claimed. And the changes a
//! reconnecting watcher missed, read from the execution's event log.

use super::{Engine, Error, Result, Scope};
use crate::domain::Millis;
use crate::store::EventRecord;
use baton_proto::clock::now_ms;

/// The most changes one resume replays; an execution has tens.
const MAX_REPLAYED: usize = 1_000;

/// What a watcher missed after a cursor.
#[derive(Clone, Debug)]
pub(crate) struct Missed {
    /// In order, oldest first.
    pub(crate) changes: Vec<EventRecord>,
    /// The log holds nothing after the cursor although the execution changed
    /// since: those changes are no longer kept.
    pub(crate) gone: bool,
}

/// The longest a token id is remembered: a gateway's connect deadline is
/// seconds to minutes away, so a mark meant to outlive this is refused rather
/// than kept.
const LONGEST_MARK_MS: Millis = 60 * 60 * 1000;

impl Engine {
    /// Records the first use of watch token `token_id`, openable until
    /// `expires_at`: `true` the first time, `false` on every later use.
    pub(crate) async fn use_watch_token(
        &self,
        authorization: Option<&str>,
        token_id: &str,
        expires_at: Millis,
    ) -> Result<bool> {
        let p = self.authenticate(authorization).await?;
        if token_id.is_empty() || token_id.len() > 64 {
            return Err(Error::Invalid("token_id must be 1 to 64 characters".into()));
        }
        let now = now_ms();
        if expires_at > now.saturating_add(LONGEST_MARK_MS) {
            return Err(Error::Invalid("expires_at is too far ahead".into()));
        }
        Ok(self.store.use_watch_token(token_id, p.credential_id(), now, expires_at).await?)
    }
}

impl Engine {
    /// The changes of execution `id` after cursor `after`, for its owner only
    /// (anyone else gets the uniform not-found).
    pub(crate) async fn changes_after(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
        after: i64,
    ) -> Result<Missed> {
        let (_, record) = self.read_owned(authorization, scope, id).await?;
        if after < 0 {
            return Err(Error::Invalid("`after` must be a cursor this API returned".into()));
        }
        let changes: Vec<EventRecord> = self
            .store
            .list_events(&record.id)
            .await?
            .into_iter()
            .filter(|e| e.seq > after)
            .take(MAX_REPLAYED)
            .collect();
        let gone = changes.is_empty() && record.changed_version > after;
        Ok(Missed { changes, gone })
    }
}
