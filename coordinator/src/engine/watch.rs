//! Single use of a gateway's watch token (websocket delivery), for every
//! gateway replica at once. The token is sealed by the gateway and carries the
//! caller's credential; the gateway sends that credential with this call, so
//! who used a token is proven here, not claimed.

use super::{Engine, Error, Result, now_ms};
use crate::domain::Millis;

/// The longest a token id is remembered: a gateway's connect deadline is
/// seconds to minutes away, so a mark meant to outlive this is refused rather
/// than kept.
const LONGEST_MARK_MS: Millis = 60 * 60 * 1000;

impl Engine {
    /// Records the first use of watch token `token_id`, openable until
    /// `expires_at`: `true` the first time, `false` on every later use.
    pub async fn use_watch_token(
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
