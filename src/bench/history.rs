//! `baton bench history`: the execution history at scale. Seeds one project
//! of a fresh Postgres database with a realistic history (`mix`) through the
//! store, then times the history reads exactly as the coordinator runs them
//! (`cases`) and prints p50/p99 per case with the index each plan used.
//!
//! Unlike the other scenarios this one talks to the database, not to a
//! deployment: the history's cost is its queries, and a million runs through
//! the API would take hours. It creates its own database (named with the
//! time) unless `--reuse` names one, and drops only a database it created,
//! only when asked (`--drop`).

mod cases;
pub(super) mod mix;

use super::scratch_db::ScratchDatabase;

use anyhow::Context as _;
use baton_coordinator::domain::{ExecutionId, Millis};
use baton_coordinator::store::{CredentialKind, HistoryFilter, HistoryRead, NewCredential, Seeded, Store};
use baton_proto::clock::now_ms;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// A Postgres URL. Its database is only used to create the bench's own
    /// (unless `--reuse`, which seeds and measures that database itself).
    #[arg(long)]
    database_url: String,
    /// Runs to seed into the one project.
    #[arg(short = 'n', long, default_value_t = 1_000_000)]
    executions: u64,
    /// Timed reads per case (fewer when a case's time budget runs out).
    #[arg(long, default_value_t = 200)]
    samples: usize,
    /// Upper bound on the time spent sampling one case, in seconds.
    #[arg(long, default_value_t = 10)]
    case_seconds: u64,
    /// Measure the database named by --database-url, seeding it only if its
    /// bench project is empty (to re-measure after a schema change).
    #[arg(long)]
    reuse: bool,
    /// Drop the database this run created when done.
    #[arg(long)]
    drop: bool,
    /// Print each case's full EXPLAIN (ANALYZE, BUFFERS) output.
    #[arg(long)]
    plans: bool,
}

/// Runs per seeding statement; two statements run at once (one per core).
const CHUNK: u64 = 4_000;
const CREDENTIAL_HASH: [u8; 32] = *b"baton-bench-history-admin-key-32";

pub(super) async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let created = if args.reuse { None } else { Some(ScratchDatabase::create(&args.database_url, "history").await?) };
    let url = created.as_ref().map_or_else(|| args.database_url.clone(), |db| db.url.clone());
    let outcome = measure(&args, &url, created.as_ref().map(|db| db.name.as_str())).await;
    if let (Some(db), true) = (created, args.drop) {
        let name = db.name.clone();
        db.drop_it(&args.database_url).await?;
        println!("dropped database {name}");
    }
    outcome?;
    Ok(ExitCode::SUCCESS)
}

async fn measure(args: &Args, url: &str, created: Option<&str>) -> anyhow::Result<()> {
    let store = Store::connect(url, 4).await.context("connecting to the bench database")?;
    store.migrate().await.context("migrating the bench database")?;
    let now = now_ms();
    let all = HistoryFilter { project_id: mix::PROJECT.into(), ..Default::default() };
    match created {
        Some(name) => println!("baton bench history: database {name}"),
        None => println!("baton bench history: database from --database-url (reused)"),
    }
    let existing =
        if store.project_org(mix::PROJECT).await?.is_some() { store.history_count(&all, now).await? } else { 0 };
    let detail_ids = if existing > 0 {
        println!("reusing {existing} executions of project {}", mix::PROJECT);
        sample_ids(&store, &all, now, existing).await?
    } else {
        identity(&store, now).await?;
        seed(&store, args.executions.max(1), now).await?
    };
    // What the coordinator's sweeper does every minute: sum the finished runs
    // so counts read the sums (the first seal of a project reads all its runs).
    let sealing = Instant::now();
    store.seal_history(mix::ORG, mix::PROJECT, now_ms()).await.context("sealing history counts")?;
    println!("sealed the history's counts in {:.1} s", sealing.elapsed().as_secs_f64());
    let now = now_ms();
    let total = store.history_count(&all, now).await?;
    println!(
        "measuring: {total} executions in one project, page size {}, up to {} samples per case\n",
        cases::LIMIT,
        args.samples
    );

    let budget = Duration::from_secs(args.case_seconds.max(1));
    let mut table = Report::default();
    for case in cases::cases(now) {
        let t = cases::time(args.samples, budget, |_| cases::count(&store, &case.filter, now)).await?;
        let plan = cases::explain(&store, &case.filter, now, HistoryRead::Count).await;
        let m = Measured { read: "count", case: &case.name, offset: None, timings: &t, plan: &plan, target_ms: 200.0 };
        table.row(m, args.plans);
        for offset in cases::OFFSETS {
            let t = cases::time(args.samples, budget, |_| cases::page(&store, &case.filter, now, offset)).await?;
            let read = HistoryRead::Page { limit: cases::LIMIT, offset };
            let plan = cases::explain(&store, &case.filter, now, read).await;
            let target = if offset <= 10_000 { 50.0 } else { f64::INFINITY };
            let m = Measured {
                read: "page",
                case: &case.name,
                offset: Some(offset),
                timings: &t,
                plan: &plan,
                target_ms: target,
            };
            table.row(m, args.plans);
        }
    }
    if !detail_ids.is_empty() {
        let t = cases::time(args.samples.max(1), budget, |i| {
            let id = detail_ids[i % detail_ids.len()].clone();
            let store = &store;
            async move { cases::detail(store, &CREDENTIAL_HASH, &id).await }
        })
        .await?;
        // Three unique-key reads (EXPLAIN shows credentials_token_hash_key,
        // executions_pkey, execution_events_pkey, attempts_pkey); not re-run here.
        let plan = "unique keys: credentials token hash + executions, execution_events, attempts pkeys";
        let case = "a run by id (spread)";
        table.row(Measured { read: "detail", case, offset: None, timings: &t, plan, target_ms: 10.0 }, false);
    }
    println!("{}", table.render());
    println!(
        "targets: page p99 <= 50 ms at offset <= 10,000; count p99 <= 200 ms; detail p99 <= 10 ms. \
         The list route answers with a count and a page, so its latency is the two added."
    );
    store.close().await;
    Ok(())
}

/// The bench project, and an admin key whose credential the detail reads join.
/// The bench's credential: the starter of the runs its starts create.
pub(super) const CREDENTIAL_ID: &str = "cred_bench_history_admin";

pub(super) async fn identity(store: &Store, now: Millis) -> anyhow::Result<()> {
    store.create_org(mix::ORG, "bench history", now).await?;
    store.create_project(mix::PROJECT, mix::ORG, "bench history", now).await?;
    store.create_gateway(mix::GATEWAY, mix::PROJECT, "bench history", now).await?;
    let credential = NewCredential {
        id: CREDENTIAL_ID.into(),
        token_hash: CREDENTIAL_HASH.to_vec(),
        kind: CredentialKind::ApiKey,
        org_id: mix::ORG.into(),
        project_id: mix::PROJECT.into(),
        gateway_id: None,
        user_id: None,
        role: Some("admin".into()),
        permissions: Vec::new(),
        worker_group: None,
    };
    store.create_credential(&credential, now).await?;
    Ok(())
}

/// Seeds `total` runs, two statements at a time; returns ids spread over the
/// history for the detail reads.
async fn seed(store: &Store, total: u64, now: Millis) -> anyhow::Result<Vec<ExecutionId>> {
    let started = Instant::now();
    let mut seeded = Seeded::default();
    let mut ids = Vec::new();
    let every = (total / 1_000).max(1);
    let mut last_report = Instant::now();
    // Two writers at a time, taking alternate runs of the same stretch of
    // time: rows reach each index at its right edge, in creation order, as
    // they do in a live deployment (not at two places, which would split
    // index pages where live traffic never does).
    for start in (0..total).step_by(2 * CHUNK as usize) {
        let n = (2 * CHUNK).min(total - start);
        let mut batches = Vec::new();
        for (first, count) in [(start, n.div_ceil(2)), (start + 1, n / 2)] {
            if count == 0 {
                continue;
            }
            let runs = mix::runs(0x5EED, first, count, 2, total, now);
            for (k, run) in runs.iter().enumerate() {
                if (first + 2 * k as u64).is_multiple_of(every) {
                    ids.push(run.new.id.clone());
                }
            }
            batches.push(runs);
        }
        let written = match batches.as_slice() {
            [a, b] => {
                let (a, b) = tokio::join!(store.seed_runs(a), store.seed_runs(b));
                vec![a, b]
            }
            [a] => vec![store.seed_runs(a).await],
            _ => Vec::new(),
        };
        for w in written {
            seeded += w?;
        }
        if last_report.elapsed() > Duration::from_secs(15) {
            println!("  seeded {} of {total} ({:.0} s)", seeded.executions, started.elapsed().as_secs_f64());
            last_report = Instant::now();
        }
    }
    let written = started.elapsed();
    store.seed_settle().await?;
    println!(
        "seeded {} executions, {} events, {} attempts in {:.1} s (+ {:.1} s VACUUM ANALYZE)",
        seeded.executions,
        seeded.events,
        seeded.attempts,
        written.as_secs_f64(),
        (started.elapsed() - written).as_secs_f64()
    );
    Ok(ids)
}

/// Ids spread over a reused history: one page at each of a thousand offsets
/// would be slow, so take the first row of pages spaced through it.
async fn sample_ids(store: &Store, all: &HistoryFilter, now: Millis, total: u64) -> anyhow::Result<Vec<ExecutionId>> {
    let mut ids = Vec::new();
    let step = (total / 50).max(1);
    let mut offset = 0;
    while offset < total && ids.len() < 50 {
        let page = store.history_page(all, now, 20, u32::try_from(offset).unwrap_or(u32::MAX)).await?;
        ids.extend(page.into_iter().map(|r| r.id));
        offset += step;
    }
    Ok(ids)
}

/// One measured case, as a row of the report.
struct Measured<'a> {
    read: &'a str,
    case: &'a str,
    offset: Option<u32>,
    timings: &'a cases::Timings,
    plan: &'a str,
    /// The p99 target; infinite when none applies.
    target_ms: f64,
}

#[derive(Default)]
struct Report {
    rows: Vec<[String; 8]>,
    plans: String,
}

impl Report {
    fn row(&mut self, m: Measured<'_>, full_plan: bool) {
        let Measured { read, case, offset, timings: t, plan, target_ms } = m;
        let p99 = t.quantile(0.99);
        let verdict = if !target_ms.is_finite() {
            ""
        } else if p99 <= target_ms {
            "ok"
        } else {
            "MISS"
        };
        self.rows.push([
            read.into(),
            case.into(),
            offset.map_or_else(|| "-".into(), |o| o.to_string()),
            format!("{:.1}", t.quantile(0.5)),
            format!("{p99:.1}"),
            t.ms.len().to_string(),
            t.result.to_string(),
            format!("{verdict:4} {}", cases::plan_summary(plan)),
        ]);
        if full_plan {
            let _ = writeln!(self.plans, "--- {read} {case} offset {offset:?}\n{plan}\n");
        }
    }

    fn render(&self) -> String {
        let head = ["read", "case", "offset", "p50 ms", "p99 ms", "n", "result", "target / plan"];
        let mut widths: Vec<usize> = head.iter().map(|h| h.len()).collect();
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r.iter()) {
                *w = (*w).max(c.chars().count());
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<&str>, out: &mut String| {
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                let numeric = (2..=6).contains(&i);
                if i + 1 == cells.len() {
                    out.push_str(c);
                } else if numeric {
                    let _ = write!(out, "{c:>w$}  ");
                } else {
                    let _ = write!(out, "{c:<w$}  ");
                }
            }
            out.push('\n');
        };
        line(head.to_vec(), &mut out);
        for r in &self.rows {
            line(r.iter().map(String::as_str).collect(), &mut out);
        }
        if !self.plans.is_empty() {
            out.push('\n');
            out.push_str(&self.plans);
        }
        out
    }
}
