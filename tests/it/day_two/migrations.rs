//! `baton migrate` against a real Postgres: `--plan` says what would run (or
//! that nothing would, or that the database is newer than the binary), and
//! a migration blocked by a long transaction gives up with an error naming
//! it instead of queueing the service behind its lock, then goes through
//! once the transaction ends.

use crate::harness::{baton_bin, postgres_url, random_suffix};
use anyhow::{Context as _, Result, anyhow};
use baton_coordinator::store::{MigrateOptions, Store};
use sqlx::{Connection as _, Executor as _};
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Command;

/// Long enough for a debug build on a busy machine; a hang shows as a failure.
const DEADLINE: Duration = Duration::from_secs(120);

/// A database of its own (named as the harness names its, so leftovers are
/// cleaned up alike) and a configuration file pointing at it.
struct Scratch {
    url: String,
    config: PathBuf,
}

impl Scratch {
    async fn new() -> Result<Scratch> {
        let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
        let suffix = random_suffix();
        let db = format!("bt_it_{created}_{suffix}");
        let base = postgres_url();
        let mut admin = sqlx::PgConnection::connect(&base).await.context("postgres reachable")?;
        admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).await?;
        let (prefix, _) = base.rsplit_once('/').ok_or_else(|| anyhow!("postgres url needs a database"))?;
        let url = format!("{prefix}/{db}");
        let dir = std::env::temp_dir().join(format!("baton-it-{suffix}"));
        std::fs::create_dir_all(&dir)?;
        let config = dir.join("baton.yaml");
        std::fs::write(&config, serde_json::to_vec(&serde_json::json!({"database": {"url": url}}))?)?;
        Ok(Scratch { url, config })
    }

    fn migrate(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(baton_bin());
        command.arg("migrate").arg("--config").arg(&self.config).args(args).kill_on_drop(true);
        command.envs(env.iter().map(|(k, v)| (format!("BATON_DATABASE__MIGRATIONS__{k}"), *v)));
        command
    }

    async fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Result<Output> {
        let output = tokio::time::timeout(DEADLINE, self.migrate(args, env).output())
            .await
            .map_err(|_| anyhow!("baton migrate {args:?} did not finish"))??;
        Ok(output)
    }

    async fn plan(&self) -> Result<String> {
        let out = self.run(&["--plan"], &[]).await?;
        anyhow::ensure!(out.status.success(), "--plan failed: {}", String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8(out.stdout)?)
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// This binary's Postgres migrations, as `--plan` names them (`0001 init`).
fn known_migrations() -> Result<Vec<String>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../migrations/postgres");
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".sql").map(|s| s.replacen('_', " ", 1)))
        .collect();
    names.sort();
    Ok(names)
}

#[tokio::test]
async fn migration_plan_lists_every_migration_on_a_fresh_database_and_says_up_to_date_once_applied() -> Result<()> {
    let db = Scratch::new().await?;
    let known = known_migrations()?;
    let plan = db.plan().await?;
    assert!(plan.starts_with(&format!("0 migrations applied, {} pending\n", known.len())), "{plan}");
    assert!(plan.contains("each statement runs under lock_timeout 5000 ms and statement_timeout 300000 ms"), "{plan}");
    for name in &known {
        assert!(plan.contains(&format!("\n{name} (in one transaction, ")), "{name} missing from:\n{plan}");
    }
    assert!(plan.contains("    CREATE TABLE organizations ("), "statements by their first line:\n{plan}");
    let ledger: Option<String> =
        sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations')::text").fetch_one(&mut connect(&db).await?).await?;
    assert_eq!(ledger, None, "a plan writes nothing");

    let out = db.run(&[], &[]).await?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&format!("applied {}\n", known[known.len() - 1])), "{}", text(&out.stdout));
    let plan = db.plan().await?;
    assert_eq!(plan, format!("the schema is up to date: {} migrations applied, none pending\n", known.len()));
    let out = db.run(&[], &[]).await?;
    assert!(out.status.success() && text(&out.stdout).contains("up to date"), "{}", text(&out.stdout));
    Ok(())
}

async fn connect(db: &Scratch) -> Result<sqlx::PgConnection> {
    Ok(sqlx::PgConnection::connect(&db.url).await?)
}

#[tokio::test]
async fn a_migration_blocked_by_a_long_transaction_gives_up_naming_itself_and_goes_through_once_it_ends() -> Result<()>
{
    let db = Scratch::new().await?;
    // The schema as of 0019: 0020 (org_keys) alters history_seals.
    let store = Store::connect(&db.url, 2).await?;
    store.apply_migrations(&MigrateOptions { up_to: Some(19), ..MigrateOptions::default() }).await?;
    store.close().await;
    let mut blocker = connect(&db).await?;
    let mut long_transaction = blocker.begin().await?;
    // Even a reader's lock keeps ALTER TABLE waiting, and the requests behind it.
    long_transaction.execute("LOCK TABLE history_seals IN ACCESS SHARE MODE").await?;

    let out = db.run(&[], &[("LOCK_TIMEOUT_MS", "200"), ("LOCK_RETRIES", "0")]).await?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "a temporary failure: {stderr}");
    assert!(stderr.contains("migration 0020 org_keys waited longer than lock_timeout (200 ms)"), "{stderr}");
    assert!(stderr.contains("Nothing of it was applied") && stderr.contains("safe to run `baton migrate` again"));
    let plan = db.plan().await?;
    assert!(plan.starts_with("19 migrations applied, ") && plan.contains("\n0020 org_keys ("), "{plan}");

    // With retries, it goes through once the long transaction ends.
    let env = [("LOCK_TIMEOUT_MS", "200"), ("LOCK_RETRIES", "30"), ("RETRY_BACKOFF_MS", "100")];
    let mut child = db.migrate(&[], &env).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let mut errors = BufReader::new(child.stderr.take().ok_or_else(|| anyhow!("no stderr"))?).lines();
    let retrying = async {
        while let Some(line) = errors.next_line().await? {
            if line.contains("trying again in") {
                return Ok(());
            }
        }
        Err(anyhow!("baton migrate ended before retrying"))
    };
    tokio::time::timeout(DEADLINE, retrying).await.context("a lock timeout and a retry")??;
    long_transaction.rollback().await?;
    let out = tokio::time::timeout(DEADLINE, child.wait_with_output()).await.context("migrate after the blocker")??;
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("applied 0020 org_keys\n"), "{}", text(&out.stdout));
    assert!(db.plan().await?.starts_with("the schema is up to date"));
    Ok(())
}

#[tokio::test]
async fn a_migration_this_binary_does_not_know_is_named_by_the_plan_and_refused_by_migrate() -> Result<()> {
    let db = Scratch::new().await?;
    let out = db.run(&[], &[]).await?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    // What a newer baton leaves behind.
    connect(&db)
        .await?
        .execute(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (9999, 'from_the_future', TRUE, '\\x00', 0)",
        )
        .await?;
    let hint = "the database has migration(s) 9999 from_the_future that this baton";
    let plan = db.run(&["--plan"], &[]).await?;
    assert_eq!(plan.status.code(), Some(1), "a plan that would be refused is a failure");
    assert!(text(&plan.stdout).starts_with(&format!("baton migrate would refuse: {hint}")), "{}", text(&plan.stdout));
    assert!(text(&plan.stdout).contains("a newer baton migrated it"), "{}", text(&plan.stdout));
    let out = db.run(&[], &[]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains(hint), "{}", text(&out.stderr));
    Ok(())
}
