//! SQLite shared by two processes (`baton dev` and `baton admin` on one file):
//! a store transaction holds the write lock from its start, so a second
//! writer waits for it instead of failing on a stale snapshot.

use super::contract_tests::sqlite;
use sqlx::{AnyConnection, Connection as _, Executor as _};

#[tokio::test]
async fn a_store_transaction_on_sqlite_holds_the_write_lock_from_its_start() {
    let b = sqlite().await;
    let mut other = AnyConnection::connect(&b.url).await.expect("second process");
    other.execute("PRAGMA busy_timeout = 0").await.expect("no waiting");

    let tx = b.store.begin().await.expect("begin");
    let refused = other.execute("BEGIN IMMEDIATE").await.expect_err("the lock is held before any statement");
    assert!(refused.to_string().contains("locked"), "{refused}");
    tx.rollback().await.expect("rollback");

    other.execute("BEGIN IMMEDIATE").await.expect("free once the transaction ended");
    other.execute("ROLLBACK").await.expect("rollback");
}
