//! Single-use watch tokens: the one piece of shared state behind websocket
//! delivery. The gateway's sealed token is valid on every replica; whether it
//! was already used is recorded here, so a second connection is refused on
//! whichever replica it reaches.

use super::{Result, Store};
use crate::domain::Millis;

impl Store {
    /// Marks `token_id` used by `credential_id`: `true` the first time, `false`
    /// when it was used before. Also drops the marks of tokens whose connect
    /// deadline has passed (they are refused for that reason alone), so the
    /// table holds only tokens still openable.
    pub(crate) async fn use_watch_token(
        &self,
        token_id: &str,
        credential_id: &str,
        now: Millis,
        expires_at: Millis,
    ) -> Result<bool> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM watch_tokens_used WHERE expires_at < $1").bind(now).execute(&mut *tx).await?;
        let inserted = sqlx::query(
            "INSERT INTO watch_tokens_used (token_id, credential_id, used_at, expires_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (token_id) DO NOTHING",
        )
        .bind(token_id)
        .bind(credential_id)
        .bind(now)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        self.commit(tx).await?;
        Ok(inserted.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::contract_tests::backends;

    #[tokio::test]
    async fn a_watch_token_is_used_once_and_forgotten_after_its_deadline() {
        for b in backends().await {
            let s = &b.store;
            assert!(s.use_watch_token("t1", "cred_1", 10, 100).await.expect("use"), "{}", b.name);
            assert!(!s.use_watch_token("t1", "cred_1", 11, 100).await.expect("reuse"), "{}", b.name);
            assert!(!s.use_watch_token("t1", "cred_2", 12, 100).await.expect("another caller"), "{}", b.name);
            assert!(s.use_watch_token("t2", "cred_1", 13, 100).await.expect("another token"), "{}", b.name);
            // Past t1's deadline its mark is dropped (the gateway refuses the
            // token by then anyway); a live token's mark survives the pruning.
            assert!(s.use_watch_token("t3", "cred_1", 101, 500).await.expect("later"), "{}", b.name);
            assert!(!s.use_watch_token("t3", "cred_1", 102, 500).await.expect("still used"), "{}", b.name);
            assert!(s.use_watch_token("t1", "cred_1", 103, 100).await.expect("forgotten"), "{}", b.name);
        }
    }
}
