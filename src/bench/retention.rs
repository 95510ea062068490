//! `baton bench retention`: what expiring a large history costs the primary.
//! Seeds `n` runs whose retention has ended into a fresh database, then runs
//! the sweeper's retention passes back to back while starts keep arriving,
//! twice: once with the runs in a day partition (expiry is a drop) and once
//! with them in the default partition (expiry deletes row by row, as every
//! Postgres deployment did before partitioning and as SQLite still does).
//! Prints, per form: the time to expire them all, the WAL written, the dead
//! tuples left behind, and the latency of the concurrent starts against a
//! baseline taken just before on the same database.

use super::history::{identity, mix};
use super::scratch_db::ScratchDatabase;
use super::stats::Samples;
use anyhow::Context as _;
use baton_coordinator::domain::{ExecutionId, Millis};
use baton_coordinator::store::{NewExecution, SeedRun, Store};
use baton_proto::clock::now_ms;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// A Postgres URL; the bench creates (and drops) databases of its own beside it.
    #[arg(long)]
    database_url: String,
    /// Expired runs to seed for the partition drop.
    #[arg(short = 'n', long, default_value_t = 1_000_000)]
    executions: u64,
    /// Expired runs to seed for the row-by-row form (its time grows linearly:
    /// a million takes over an hour on two cores).
    #[arg(long, default_value_t = 100_000)]
    row_executions: u64,
    /// Concurrent starts kept running during each measurement.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Runs a sweeper pass deletes row by row (the coordinator's batch).
    #[arg(long, default_value_t = 500)]
    batch: u32,
    /// Seconds of starts alone before each expiry, the baseline.
    #[arg(long, default_value_t = 10)]
    baseline_seconds: u64,
    /// Which forms to run.
    #[arg(long, value_enum, default_value = "both")]
    form: Forms,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Forms {
    Both,
    Drop,
    Rows,
}

const DAY: Millis = 86_400_000;
const CHUNK: u64 = 4_000;

pub(super) async fn run(args: Args) -> anyhow::Result<ExitCode> {
    println!(
        "baton bench retention: {} expired runs dropped by partition, {} deleted row by row; {} concurrent starts",
        args.executions, args.row_executions, args.concurrency
    );
    let mut lines = Vec::new();
    let forms = match args.form {
        Forms::Both => vec![true, false],
        Forms::Drop => vec![true],
        Forms::Rows => vec![false],
    };
    for partitioned in forms {
        let form = if partitioned { "partition drop" } else { "row deletion" };
        let db = ScratchDatabase::create(&args.database_url, "retention").await?;
        let outcome = measure(&args, &db.url, partitioned).await;
        db.drop_it(&args.database_url).await?;
        lines.push(format!("{form:<15} {}", outcome?));
    }
    println!(
        "\nform                    expired  expire time   WAL (retention)   dead tuples   \
         starts p50 / p99 ms (baseline p50 / p99)"
    );
    for l in lines {
        println!("{l}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn measure(args: &Args, url: &str, partitioned: bool) -> anyhow::Result<String> {
    let store = Arc::new(Store::connect(url, 12).await.context("connecting to the bench database")?);
    store.migrate().await?;
    // Measurements read the server's own counters on a connection of their own.
    let db = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(url).await?;
    let now = now_ms();
    identity(&store, now).await?;
    // A day well in the past: a partition of its own, or none (the default).
    let expired_day = now.div_euclid(DAY) - 30;
    if partitioned {
        store.ensure_partitions(expired_day * DAY, expired_day * DAY).await?;
    }
    let runs = if partitioned { args.executions } else { args.row_executions };
    seed(&store, runs, now, expired_day * DAY + DAY / 2).await?;
    store.seal_history(mix::ORG, mix::PROJECT, now).await?;
    store.seed_settle().await?;

    let baseline = starts_during(&store, &db, args.concurrency, async {
        tokio::time::sleep(Duration::from_secs(args.baseline_seconds)).await;
    })
    .await;
    let wal_before = wal_lsn(&db).await?;
    let dead_before = dead_tuples(&db).await?;
    let started = Instant::now();
    let sweeping = async {
        let mut passes = 0u64;
        loop {
            let (report, _) = store.sweep(now_ms(), 60_000, args.batch).await;
            passes += 1;
            if report.failed > 0 {
                println!("  a pass failed ({report:?}); retried");
            } else if report.deleted == 0 && report.days_dropped == 0 && report.keys_deleted == 0 {
                println!("  expired in {passes} sweeper passes");
                return;
            }
        }
    };
    let during = starts_during(&store, &db, args.concurrency, sweeping).await;
    let took = started.elapsed();
    let wal = wal_since(&db, &wal_before).await?;
    let left: i64 = sqlx::query_scalar(
        "SELECT (SELECT COUNT(*) FROM executions WHERE retention_expires_at < $1) \
         + (SELECT COUNT(*) FROM execution_keys WHERE retention_expires_at < $1)",
    )
    .bind(expired_day * DAY + DAY)
    .fetch_one(&db)
    .await?;
    anyhow::ensure!(left == 0, "{left} expired runs remain");
    // Statistics reach the collector when a backend has been idle a while.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let dead = dead_tuples(&db).await? - dead_before;
    let by_table: Vec<(String, i64)> = sqlx::query_as(
        "SELECT relname::text, n_dead_tup FROM pg_stat_user_tables WHERE n_dead_tup > 0 ORDER BY n_dead_tup DESC LIMIT 4",
    )
    .fetch_all(&db)
    .await?;
    println!("  dead tuples now, by table: {by_table:?}");
    let starts_wal = baseline.wal_per_start * during.starts as f64;
    let retention_wal = (wal as f64 - starts_wal).max(0.0);
    store.close().await;
    db.close().await;
    Ok(format!(
        "{runs:>9} runs {:>9.1} s   {:>12.1} MB   {:>11}   {:.1} / {:.1} ({:.1} / {:.1}), {} starts",
        took.as_secs_f64(),
        retention_wal / 1e6,
        dead,
        during.p50,
        during.p99,
        baseline.p50,
        baseline.p99,
        during.starts
    ))
}

/// Seeds `total` runs of the history bench's mix, all expiring at `expires`.
async fn seed(store: &Store, total: u64, now: Millis, expires: Millis) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut done = 0;
    let batch = |first: u64| {
        let mut runs: Vec<SeedRun> = mix::runs(0x5EED, first, CHUNK.min(total.saturating_sub(first)), 1, total, now);
        for r in &mut runs {
            r.new.retention_expires_at = expires;
        }
        runs
    };
    // Two statements at a time, one per core.
    for first in (0..total).step_by(2 * CHUNK as usize) {
        let (a, b) = (batch(first), batch(first + CHUNK));
        let (a, b) = tokio::join!(store.seed_runs(&a), store.seed_runs(&b));
        done += a?.executions + b?.executions;
    }
    println!("  seeded {done} expired runs in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

struct Starts {
    p50: f64,
    p99: f64,
    starts: u64,
    wal_per_start: f64,
}

/// Starts (creates) kept running by `concurrency` tasks until `until` ends.
async fn starts_during<F: std::future::Future>(
    store: &Arc<Store>,
    db: &sqlx::PgPool,
    concurrency: usize,
    until: F,
) -> Starts {
    let wal_before = wal_lsn(db).await.ok();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (store, stop) = (store.clone(), stop.clone());
            baton_worker::supervise::spawn_supervised("bench retention starter", async move {
                let mut took = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    if store.create_execution(&fresh(now_ms())).await.is_ok() {
                        took.push(t.elapsed());
                    }
                }
                took
            })
        })
        .collect();
    until.await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Samples::default();
    for t in tasks {
        for d in t.await.unwrap_or_default() {
            all.push_duration(d);
        }
    }
    let summary = all.summary();
    let starts = summary.map_or(0, |s| s.count) as u64;
    let wal = match wal_before {
        Some(lsn) => wal_since(db, &lsn).await.unwrap_or(0),
        None => 0,
    };
    Starts {
        p50: summary.map_or(f64::NAN, |s| s.p50),
        p99: summary.map_or(f64::NAN, |s| s.p99),
        starts,
        wal_per_start: if starts > 0 { wal as f64 / starts as f64 } else { 0.0 },
    }
}

/// A start as the coordinator writes one: seven days of retention ahead.
fn fresh(now: Millis) -> NewExecution {
    NewExecution {
        id: ExecutionId::generate(),
        org_id: mix::ORG.into(),
        project_id: mix::PROJECT.into(),
        gateway_id: mix::GATEWAY.into(),
        tool_name: "Demo.Echo".into(),
        toolkit_name: "Demo".into(),
        toolkit_version: "1.0.0".into(),
        user_id: mix::user(1),
        started_by: super::history::CREDENTIAL_ID.into(),
        surface: "rest".into(),
        created_at: now,
        run_at: None,
        execution_deadline: now + 3_600_000,
        retention_expires_at: now + 3_600_000 + mix::RETENTION,
        poll_interval_ms: 1_000,
        max_attempts: 1,
        idempotency_key: None,
        request_fingerprint: None,
        input_ct: vec![0; 200],
        payload_bytes: 200,
        traceparent: None,
        admission_fence: None,
    }
}

async fn wal_lsn(db: &sqlx::PgPool) -> anyhow::Result<String> {
    Ok(sqlx::query_scalar("SELECT pg_current_wal_lsn()::text").fetch_one(db).await?)
}

async fn wal_since(db: &sqlx::PgPool, lsn: &str) -> anyhow::Result<i64> {
    let bytes: f64 = sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8")
        .bind(lsn)
        .fetch_one(db)
        .await?;
    Ok(bytes as i64)
}

/// Dead tuples over every table of the database.
async fn dead_tuples(db: &sqlx::PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar("SELECT COALESCE(SUM(n_dead_tup), 0)::bigint FROM pg_stat_user_tables").fetch_one(db).await?)
}
