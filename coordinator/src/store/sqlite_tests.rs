//! SQLite shared by two processes (`baton dev` and `baton admin` on one file):
//! a store transaction holds the write lock from its start, so a second
//! writer waits for it instead of failing on a stale snapshot.

use super::*;
use sqlx::{AnyConnection, Connection as _, Executor as _};

async fn sqlite_file() -> (Store, String) {
    let path = std::env::temp_dir().join(format!("{}.db", crate::domain::id::random_id("baton_t_", 64)));
    let url = format!("sqlite://{}", path.display());
    let store = Store::connect(&url, 1).await.expect("sqlite");
    store.migrate().await.expect("migrate");
    (store, url)
}

#[tokio::test]
async fn a_store_transaction_on_sqlite_holds_the_write_lock_from_its_start() {
    let (store, url) = sqlite_file().await;
    let mut other = AnyConnection::connect(&url).await.expect("second process");
    other.execute("PRAGMA busy_timeout = 0").await.expect("no waiting");

    let tx = store.begin().await.expect("begin");
    let refused = other.execute("BEGIN IMMEDIATE").await.expect_err("the lock is held before any statement");
    assert!(refused.to_string().contains("locked"), "{refused}");
    tx.rollback().await.expect("rollback");

    other.execute("BEGIN IMMEDIATE").await.expect("free once the transaction ended");
    other.execute("ROLLBACK").await.expect("rollback");
}
