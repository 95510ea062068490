//! `baton bench migrate`: what applying the migration set costs a large,
//! busy database (issue #35, online migrations). Creates a database of its
//! own, migrates it up to `--from` (the schema before the first migration
//! that reworks the history's populated tables), seeds the history bench's
//! mix of runs in the form that schema held (`Store::seed_runs` writes the
//! columns the tables have), then applies every later migration, one at a
//! time and timed, exactly as `baton migrate` does (`Store::apply_migrations`
//! with the configured timeouts; the retry on a lock timeout is reported
//! rather than taken), while a load runs and a sampler reads `pg_locks`.
//!
//! The load is the coordinator's hot statements on the history tables, sent
//! at a fixed rate through a pool built as the coordinator builds its own
//! (32 connections, 5 s to acquire one): a start (insert of a run), a
//! transition (update of a run it started), a read of one run with its
//! events and attempts, and a page of the history. They are written in the
//! columns every schema version from 0001 on has, so the same statements run
//! before, during and after the migrations; a full cluster cannot serve an
//! older schema (this binary's queries name the newest columns and tables).
//! A request fails when the store answers an error (a pool exhausted by
//! blocked statements answers one after 5 s) or when it takes longer than
//! the gateway's 15 s deadline for a coordinator call.
//!
//! The sampler reads every `--sample-ms` the locks the migrating connection
//! holds that block the load's writes (Share and stronger) on tables that
//! existed before the migration began, and the load's statements waiting
//! for a lock; durations are from first to last sight (so up to one sample
//! interval short).

mod load;
mod locks;

use super::history::mix;
use super::scratch_db::ScratchDatabase;
use super::stats::Samples;
use anyhow::Context as _;
use baton_coordinator::domain::Millis;
use baton_coordinator::store::{MigrateOptions, Seeded, Store};
use baton_proto::clock::now_ms;
use load::{Load, Outcome};
use locks::{Locks, Sampler, longest};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// A Postgres URL; the bench creates (and drops) a database of its own beside it.
    #[arg(long)]
    database_url: String,
    /// Runs to seed (with their events and attempts) before migrating.
    #[arg(short = 'n', long, default_value_t = 1_000_000)]
    executions: u64,
    /// The last migration applied before seeding; every later one is applied under load.
    /// 7: the schema before 0008, the first migration that rebuilds indexes of `executions`.
    #[arg(long, default_value_t = 7)]
    from: i64,
    /// Load requests per second, sent whether or not earlier ones have answered.
    #[arg(long, default_value_t = 100)]
    rate: u64,
    /// Connections of the load's pool (the coordinator's default `database.max_connections`).
    #[arg(long, default_value_t = 32)]
    pool: u32,
    /// Seconds of load alone before the migrations, the baseline.
    #[arg(long, default_value_t = 10)]
    baseline_seconds: u64,
    /// How often the sampler reads pg_locks, in milliseconds.
    #[arg(long, default_value_t = 50)]
    sample_ms: u64,
    /// The migrations' lock_timeout, in milliseconds (`baton migrate`'s default).
    #[arg(long, default_value_t = 5_000)]
    lock_timeout_ms: u64,
    /// The migrations' statement_timeout, in milliseconds (`baton migrate`'s default).
    #[arg(long, default_value_t = 300_000)]
    statement_timeout_ms: u64,
    /// Keep the database afterwards (its name is printed).
    #[arg(long)]
    keep: bool,
    /// Stop once seeded, keeping the database at `--from` (to time a
    /// migration's statements one by one in psql).
    #[arg(long)]
    seed_only: bool,
}

/// The gateway's deadline for a coordinator call: a request blocked longer
/// fails at the gateway (503) even if the statement completes later.
const GATEWAY_DEADLINE: Duration = Duration::from_secs(15);
const CHUNK: u64 = 4_000;
const LOAD_APP: &str = "baton-bench-load";
const MIGRATE_APP: &str = "baton-bench-migrate";

pub(super) async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let db = ScratchDatabase::create(&args.database_url, "migrate").await?;
    println!("baton bench migrate: database {}", db.name);
    let outcome = measure(&args, &db.url).await;
    if args.keep || args.seed_only {
        println!("kept database {}", db.name);
    } else {
        let name = db.name.clone();
        db.drop_it(&args.database_url).await?;
        println!("dropped database {name}");
    }
    outcome?;
    Ok(ExitCode::SUCCESS)
}

fn with_app(url: &str, app: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}application_name={app}")
}

async fn measure(args: &Args, url: &str) -> anyhow::Result<()> {
    let store = Store::connect(&with_app(url, MIGRATE_APP), 4).await.context("connecting to the bench database")?;
    let options = |up_to| MigrateOptions {
        lock_timeout: Duration::from_millis(args.lock_timeout_ms),
        statement_timeout: Duration::from_millis(args.statement_timeout_ms),
        up_to: Some(up_to),
    };
    store.apply_migrations(&options(args.from)).await?;
    let plan = store.migration_plan(&MigrateOptions { up_to: None, ..options(0) }).await?;
    println!(
        "migrated to {:04}; {} migration(s) to apply under load: {}",
        args.from,
        plan.pending.len(),
        plan.pending.iter().map(|p| p.migration.to_string()).collect::<Vec<_>>().join(", ")
    );

    let now = now_ms();
    identity(url, now).await?;
    let started = Instant::now();
    let seeded = seed(&store, args.executions.max(1), now).await?;
    let seed_secs = started.elapsed().as_secs_f64();
    let settling = Instant::now();
    store.seed_settle().await?;
    println!(
        "seeded {} runs, {} events, {} attempts at schema {:04} in {seed_secs:.1} s (vacuum and analyze {:.1} s)",
        seeded.executions,
        seeded.events,
        seeded.attempts,
        args.from,
        settling.elapsed().as_secs_f64()
    );
    let admin = sqlx::postgres::PgPoolOptions::new().max_connections(2).connect(url).await?;
    let sizes: Vec<(String, i64)> = sqlx::query_as(
        "SELECT relname::text, pg_total_relation_size(oid) FROM pg_class \
         WHERE relname IN ('executions', 'execution_events', 'attempts') ORDER BY relname",
    )
    .fetch_all(&admin)
    .await?;
    for (table, bytes) in &sizes {
        println!("  {table}: {:.0} MB with its indexes", *bytes as f64 / 1e6);
    }

    if args.seed_only {
        admin.close().await;
        store.close().await;
        return Ok(());
    }

    let load = Load::start(url, args.rate, args.pool).await?;
    let sampler = Sampler::start(url, args.sample_ms).await?;
    tokio::time::sleep(Duration::from_secs(args.baseline_seconds)).await;

    let mut windows = Vec::new();
    let mut failed_migration = None;
    for pending in &plan.pending {
        let version = pending.migration.version;
        sampler.current.store(version, Ordering::Relaxed);
        let began = Instant::now();
        let outcome = store.apply_migrations(&options(version)).await;
        let ended = Instant::now();
        windows.push((pending.migration.to_string(), began, ended));
        println!(
            "  {} {} in {:.2} s",
            pending.migration,
            if outcome.is_ok() { "applied" } else { "FAILED" },
            (ended - began).as_secs_f64()
        );
        if let Err(e) = outcome {
            println!("    {e}");
            failed_migration = Some(pending.migration.to_string());
            break;
        }
    }
    sampler.current.store(0, Ordering::Relaxed);
    let (first, last) = match (windows.first(), windows.last()) {
        (Some(f), Some(l)) => (f.1, l.2),
        _ => (Instant::now(), Instant::now()),
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let locks = sampler.stop().await;
    let outcomes = load.stop().await;
    admin.close().await;
    store.close().await;

    report(args, &windows, (first, last), &outcomes, &locks, failed_migration.as_deref());
    Ok(())
}

/// The organization and project the seeded runs belong to, written in the
/// columns 0001 gave those tables.
async fn identity(url: &str, now: Millis) -> anyhow::Result<()> {
    let db = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(url).await?;
    sqlx::query("INSERT INTO organizations (id, name, created_at) VALUES ($1, 'bench', $2)")
        .bind(mix::ORG)
        .bind(now)
        .execute(&db)
        .await?;
    sqlx::query("INSERT INTO projects (id, org_id, name, retention_ms, created_at) VALUES ($1, $2, 'bench', NULL, $3)")
        .bind(mix::PROJECT)
        .bind(mix::ORG)
        .bind(now)
        .execute(&db)
        .await?;
    db.close().await;
    Ok(())
}

/// Seeds `total` runs of the history bench's mix, two statements at a time.
async fn seed(store: &Store, total: u64, now: Millis) -> anyhow::Result<Seeded> {
    let mut done = Seeded::default();
    let batch = |first: u64| mix::runs(0x5EED, first, CHUNK.min(total.saturating_sub(first)), 1, total, now);
    let mut reported = 0;
    for first in (0..total).step_by(2 * CHUNK as usize) {
        let (a, b) = (batch(first), batch(first + CHUNK));
        let (a, b) = tokio::join!(store.seed_runs(&a), store.seed_runs(&b));
        done += a?;
        done += b?;
        if done.executions >= reported + 100_000 {
            reported = done.executions;
            println!("  seeded {reported} runs");
        }
    }
    Ok(done)
}

fn summarize(outcomes: &[&Outcome]) -> String {
    let mut took = Samples::default();
    for o in outcomes {
        took.push_duration(o.took);
    }
    let failed = outcomes.iter().filter(|o| o.failed()).count();
    match took.summary() {
        Some(s) => {
            format!("{} requests, {failed} failed, p50 {:.1} / p99 {:.1} / max {:.1} ms", s.count, s.p50, s.p99, s.max)
        }
        None => "no requests".into(),
    }
}

fn report(
    args: &Args,
    windows: &[(String, Instant, Instant)],
    (first, last): (Instant, Instant),
    outcomes: &[Outcome],
    locks: &Locks,
    failed_migration: Option<&str>,
) {
    let during: Vec<&Outcome> = outcomes.iter().filter(|o| o.at >= first && o.at < last).collect();
    let before: Vec<&Outcome> = outcomes.iter().filter(|o| o.at < first).collect();
    let secs = (last - first).as_secs_f64();
    println!("\nload: {} requests/s offered, pool of {} connections", args.rate, args.pool);
    println!("  before the migrations ({} s): {}", args.baseline_seconds, summarize(&before));
    println!(
        "  during the migrations ({secs:.1} s): {}; {:.1} answered/s",
        summarize(&during),
        during.iter().filter(|o| !o.failed()).count() as f64 / secs.max(0.001)
    );
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    for o in outcomes.iter().filter(|o| o.failed()) {
        let k =
            o.error.clone().unwrap_or_else(|| format!("slower than the gateway's {} s", GATEWAY_DEADLINE.as_secs()));
        *kinds.entry(k).or_default() += 1;
    }
    for (k, n) in &kinds {
        println!("    failed: {n} × {k}");
    }

    println!("\nper migration (load requests started while it ran):");
    for (name, began, ended) in windows {
        let mine: Vec<&Outcome> = outcomes.iter().filter(|o| o.at >= *began && o.at < *ended).collect();
        let version: i64 = name.get(..4).and_then(|v| v.parse().ok()).unwrap_or_default();
        let exclusive = longest(locks, |s| s.migration == version && s.mode == "AccessExclusiveLock");
        let other = longest(locks, |s| s.migration == version && s.mode != "AccessExclusiveLock");
        let mut held: Vec<String> = [exclusive, other]
            .into_iter()
            .flatten()
            .map(|(s, on)| format!("{} {:.2} s on {on}", s.mode, s.held().as_secs_f64()))
            .collect();
        if held.is_empty() {
            held.push("no write-blocking lock seen on an existing table".into());
        }
        println!("  {name:<28} {:>7.2} s", (*ended - *began).as_secs_f64());
        println!("      held {}", held.join("; "));
        println!("      load: {}", summarize(&mine));
    }

    let sample = locks.sample_time.summary();
    println!(
        "\nlocks ({} samples every {} ms; a sample took p50 {:.1} / max {:.1} ms):",
        locks.samples,
        args.sample_ms,
        sample.map_or(f64::NAN, |s| s.p50),
        sample.map_or(f64::NAN, |s| s.max)
    );
    match longest(locks, |s| s.mode == "AccessExclusiveLock") {
        Some((s, on)) => println!(
            "  longest AccessExclusiveLock held: {:.2} s on {on}, by migration {:04}",
            s.held().as_secs_f64(),
            s.migration
        ),
        None => println!("  no AccessExclusiveLock seen"),
    }
    let load_wait = locks.load_waits.values().max_by(|a, b| a.0.total_cmp(&b.0));
    match load_wait {
        Some((ms, what)) => println!(
            "  longest lock wait of a load statement: {:.2} s ({what}); {} statements seen waiting",
            ms / 1000.0,
            locks.load_waits.len()
        ),
        None => println!("  no load statement seen waiting for a lock"),
    }
    let migration_wait = locks.migration_waits.values().max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((ms, what)) = migration_wait {
        println!("  longest lock wait of the migration: {:.2} s ({what})", ms / 1000.0);
    }
    if let Some(name) = failed_migration {
        println!("\nmigration {name} failed; the ones after it were not applied");
    }
}
