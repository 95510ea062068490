//! `baton migrate`: applies the pending migrations, each statement under the
//! configured lock and statement timeouts, and tries again, with a doubling
//! wait, a migration that gave up on a lock (it left nothing behind);
//! `--plan` prints what would run instead of running it (decision 0046).
//!
//! Exit codes: 0 applied (or nothing to do, or a plan that could be applied);
//! 75 (EX_TEMPFAIL) a lock still held after every retry: run again later;
//! 1 anything else, including a plan that `baton migrate` would refuse.

use crate::config::Migrations;
use baton_coordinator::store::{MigrationPlan, Store};
use std::process::ExitCode;
use std::time::Duration;

const EX_TEMPFAIL: u8 = 75;

pub(crate) async fn run(settings: &Migrations, url: &str, plan: bool) -> anyhow::Result<ExitCode> {
    let store = Store::connect(url, 2).await?;
    let code = if plan { show_plan(&store, settings).await? } else { apply(&store, settings).await };
    store.close().await;
    Ok(code)
}

async fn apply(store: &Store, settings: &Migrations) -> ExitCode {
    let options = settings.options();
    let mut backoff = Duration::from_millis(settings.retry_backoff_ms);
    let mut retries_left = settings.lock_retries;
    loop {
        match store.apply_migrations(&options).await {
            Ok(applied) if applied.is_empty() => {
                println!("the schema is up to date: no migration pending");
                return ExitCode::SUCCESS;
            }
            Ok(applied) => {
                for migration in &applied {
                    println!("applied {migration}");
                }
                println!("migrations applied");
                return ExitCode::SUCCESS;
            }
            Err(e) if e.is_lock_timeout() && retries_left > 0 => {
                eprintln!("baton migrate: {e}");
                eprintln!("baton migrate: trying again in {} ms ({retries_left} retries left)", backoff.as_millis());
                retries_left -= 1;
                tokio::time::sleep(backoff).await;
                backoff = backoff.saturating_mul(2);
            }
            Err(e) => {
                eprintln!("baton migrate: {e}");
                let code = if e.is_lock_timeout() { EX_TEMPFAIL } else { 1 };
                return ExitCode::from(code);
            }
        }
    }
}

async fn show_plan(store: &Store, settings: &Migrations) -> anyhow::Result<ExitCode> {
    let plan = store.migration_plan(&settings.options()).await?;
    print!("{}", render(&plan));
    Ok(if plan.refusal.is_some() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The plan as text: a summary line, then each pending migration and the
/// first line of each of its statements.
fn render(plan: &MigrationPlan) -> String {
    let mut out = String::new();
    match &plan.refusal {
        Some(refusal) => out.push_str(&format!("baton migrate would refuse: {refusal}\n")),
        None if plan.pending.is_empty() => {
            out.push_str(&format!("the schema is up to date: {} migrations applied, none pending\n", plan.applied));
            return out;
        }
        None => {}
    }
    out.push_str(&format!("{} migrations applied, {} pending\n", plan.applied, plan.pending.len()));
    if plan.pending.is_empty() {
        return out;
    }
    match plan.timeouts {
        Some((lock, statement)) => out.push_str(&format!(
            "each statement runs under lock_timeout {} ms and statement_timeout {} ms\n",
            lock.as_millis(),
            statement.as_millis()
        )),
        None => out.push_str("no lock or statement timeouts on SQLite\n"),
    }
    for pending in &plan.pending {
        let how = if pending.transactional { "in one transaction" } else { "without a transaction" };
        let count = pending.statements.len();
        let noun = if count == 1 { "statement" } else { "statements" };
        out.push_str(&format!("\n{} ({how}, {count} {noun})\n", pending.migration));
        for line in pending.first_lines() {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_coordinator::store::{MigrationError, MigrationName, PendingMigration};

    fn name(version: i64, name: &str) -> MigrationName {
        MigrationName { version, name: name.into() }
    }

    #[test]
    fn a_plan_names_each_migration_how_it_runs_and_its_statements() {
        let plan = MigrationPlan {
            applied: 20,
            pending: vec![PendingMigration {
                migration: name(21, "note_index"),
                transactional: false,
                statements: vec!["-- no-transaction\nCREATE INDEX CONCURRENTLY i\n  ON t (note)".into()],
            }],
            timeouts: Some((Duration::from_secs(5), Duration::from_secs(300))),
            refusal: None,
        };
        assert_eq!(
            render(&plan),
            "20 migrations applied, 1 pending\n\
             each statement runs under lock_timeout 5000 ms and statement_timeout 300000 ms\n\n\
             0021 note_index (without a transaction, 1 statement)\n    CREATE INDEX CONCURRENTLY i\n"
        );
        let newer = MigrationPlan {
            applied: 20,
            pending: Vec::new(),
            timeouts: None,
            refusal: Some(MigrationError::NewerSchema { unknown: vec![name(21, "later")], newest_known: 20 }),
        };
        let text = render(&newer);
        assert!(text.starts_with("baton migrate would refuse: the database has migration(s) 0021 later"), "{text}");
        assert!(text.ends_with("\n20 migrations applied, 0 pending\n") && !text.contains("up to date"), "{text}");
    }
}
