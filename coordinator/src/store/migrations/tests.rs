//! The runner and the plan on a real Postgres, with small migrations of the
//! tests' own: a lock held elsewhere stops a migration with nothing of it
//! applied, a no-transaction migration builds an index concurrently, and a
//! ledger this binary cannot account for is refused before anything runs.

use super::*;
use sqlx::migrate::{Migration, MigrationType};
use sqlx::{AnyConnection, Connection as _, Executor as _, SqlSafeStr as _};

async fn fresh_database() -> String {
    sqlx::any::install_default_drivers();
    let base =
        std::env::var("TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let db = crate::domain::id::random_id(&format!("baton_t_{created}_"), 64).to_lowercase();
    let mut admin = AnyConnection::connect(&base).await.expect("postgres reachable (set TEST_POSTGRES_URL)");
    admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).await.expect("create db");
    let (prefix, _) = base.rsplit_once('/').expect("url has a database");
    format!("{prefix}/{db}")
}

fn migration(version: i64, name: &str, sql: &'static str) -> Migration {
    let no_tx = sql.starts_with(embedded::NO_TRANSACTION);
    Migration::new(version, name.to_owned().into(), MigrationType::Simple, sql.into_sql_str(), no_tx)
}

fn quick() -> MigrateOptions {
    MigrateOptions { lock_timeout: Duration::from_millis(200), ..MigrateOptions::default() }
}

async fn versions(conn: &mut AnyConnection) -> Vec<i64> {
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version").fetch_all(conn).await.expect("ledger")
}

const FIRST: &str = "CREATE TABLE jobs (id BIGINT PRIMARY KEY, note TEXT);";

#[tokio::test]
async fn a_migration_blocked_by_a_lock_gives_up_whole_and_applies_once_the_lock_is_gone() {
    let url = fresh_database().await;
    let mut conn = AnyConnection::connect(&url).await.expect("connect");
    let known = [
        migration(1, "jobs", FIRST),
        migration(2, "jobs_more", "CREATE TABLE other (id BIGINT);\nALTER TABLE jobs ADD COLUMN more TEXT;"),
    ];
    let applied = run::apply(&mut conn, Dialect::Postgres, &known[..1], &quick()).await.expect("first");
    assert_eq!(applied, vec![MigrationName { version: 1, name: "jobs".into() }]);

    let mut blocker = AnyConnection::connect(&url).await.expect("blocker");
    let mut hold = blocker.begin().await.expect("begin");
    hold.execute("LOCK TABLE jobs IN ACCESS SHARE MODE").await.expect("lock");
    let options = quick();
    let blocked = run::apply(&mut conn, Dialect::Postgres, &known, &options);
    let err = tokio::time::timeout(Duration::from_secs(60), blocked).await.expect("gave up").expect_err("blocked");
    assert!(err.is_lock_timeout(), "{err}");
    let message = err.to_string();
    assert!(message.contains("0002 jobs_more") && message.contains("safe to run `baton migrate` again"), "{message}");
    let other: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pg_tables WHERE tablename = 'other'")
        .fetch_one(&mut conn)
        .await
        .expect("catalog");
    assert_eq!(other, 0, "the statement before the blocked one was rolled back with it");
    assert_eq!(versions(&mut conn).await, vec![1]);

    hold.rollback().await.expect("release");
    let applied = run::apply(&mut conn, Dialect::Postgres, &known, &quick()).await.expect("after the blocker");
    assert_eq!(applied, vec![MigrationName { version: 2, name: "jobs_more".into() }]);
    let timeout: String = sqlx::query_scalar("SHOW lock_timeout").fetch_one(&mut conn).await.expect("show");
    assert_eq!(timeout, "0", "the session's own setting is back once migrations are done");
}

#[tokio::test]
async fn a_no_transaction_migration_builds_an_index_concurrently_statement_by_statement() {
    let url = fresh_database().await;
    let mut conn = AnyConnection::connect(&url).await.expect("connect");
    let known = [
        migration(1, "jobs", FIRST),
        migration(
            2,
            "jobs_note_index",
            "-- no-transaction\n-- A second statement shows each one runs on its own.\n\
             DROP INDEX CONCURRENTLY IF EXISTS jobs_note;\nCREATE INDEX CONCURRENTLY jobs_note ON jobs (note);\n",
        ),
    ];
    let plan = plan::read(&mut conn, Dialect::Postgres, &known, &quick()).await.expect("plan");
    let summary: Vec<(i64, bool, Vec<&str>)> =
        plan.pending.iter().map(|p| (p.migration.version, p.transactional, p.first_lines().collect())).collect();
    assert_eq!(
        summary,
        vec![
            (1, true, vec!["CREATE TABLE jobs (id BIGINT PRIMARY KEY, note TEXT)"]),
            (
                2,
                false,
                vec![
                    "DROP INDEX CONCURRENTLY IF EXISTS jobs_note",
                    "CREATE INDEX CONCURRENTLY jobs_note ON jobs (note)"
                ]
            ),
        ]
    );
    assert_eq!(plan.timeouts, Some((Duration::from_millis(200), Duration::from_secs(300))));
    let tables: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'")
        .fetch_one(&mut conn)
        .await
        .expect("catalog");
    assert_eq!(tables, 0, "a plan writes nothing, not even the ledger");

    run::apply(&mut conn, Dialect::Postgres, &known, &quick()).await.expect("migrate");
    let valid: bool = sqlx::query_scalar("SELECT indisvalid FROM pg_index WHERE indexrelid = 'jobs_note'::regclass")
        .fetch_one(&mut conn)
        .await
        .expect("index");
    assert!(valid);
    assert_eq!(versions(&mut conn).await, vec![1, 2]);
    let plan = plan::read(&mut conn, Dialect::Postgres, &known, &quick()).await.expect("plan");
    assert!(plan.pending.is_empty() && plan.refusal.is_none() && plan.applied == 2, "{plan:?}");
}

#[tokio::test]
async fn a_ledger_with_unknown_or_changed_migrations_is_refused_before_anything_runs() {
    let url = fresh_database().await;
    let mut conn = AnyConnection::connect(&url).await.expect("connect");
    let known = [migration(1, "jobs", FIRST)];
    run::apply(&mut conn, Dialect::Postgres, &known, &quick()).await.expect("first");

    // A binary that does not carry the applied migration 1: it must not go on.
    let older = [migration(2, "later", "CREATE TABLE later (id BIGINT);")];
    let err = run::apply(&mut conn, Dialect::Postgres, &older, &quick()).await.expect_err("newer schema");
    assert!(matches!(&err, MigrationError::NewerSchema { unknown, .. } if unknown[0].version == 1), "{err}");
    assert!(err.to_string().contains("0001 jobs") && err.to_string().contains("a newer baton migrated it"), "{err}");
    let plan = plan::read(&mut conn, Dialect::Postgres, &older, &quick()).await.expect("plan");
    assert!(matches!(plan.refusal, Some(MigrationError::NewerSchema { .. })), "{plan:?}");
    assert_eq!(versions(&mut conn).await, vec![1], "nothing of the pending migration ran");

    let edited = [migration(1, "jobs", "CREATE TABLE jobs (id BIGINT PRIMARY KEY);")];
    let err = run::apply(&mut conn, Dialect::Postgres, &edited, &quick()).await.expect_err("changed");
    assert!(matches!(&err, MigrationError::Changed(m) if m.version == 1), "{err}");
}
