//! The backup and restore drill of docs/operating.md, as an operator runs it
//! after a disaster: `pg_dump -Fc` while executions are in flight, the whole
//! cluster lost (every process killed, its Redis state gone), the dump
//! restored into a new database and a fresh cluster started on it with a new
//! Redis key prefix.
//!
//! What it shows: every execution acknowledged before the dump is its owner's
//! to read after the restore; the ones that were running at the dump fail
//! `owner_lost` (their worker and its running list are gone) and are never
//! invoked again; the ones pending at the dump run once; completed ones keep
//! their result; the ones acknowledged after the dump are absent: the dump
//! is the recovery point. Counted from the workers' own invocation counters
//! and the restored database's attempt records. A second drill shows what a
//! backup cannot know: work that ran after it is done again, or lost.

use crate::harness::{Cluster, Rest, Settings, eventually, postgres_url, random_suffix};
use anyhow::{Context as _, Result, anyhow, bail, ensure};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tokio::process::Command;
use tokio::time::Instant;

/// Long enough for a debug build on a busy machine; a hang shows as a failure.
const DEADLINE: Duration = Duration::from_secs(60);
/// Executions of each kind.
const EACH: usize = 3;
/// The old worker's capacity: the running sleeps fill it, so the executions
/// started after them stay pending until the disaster.
const CAPACITY: usize = EACH;
const TOOLS: [&str; 3] = ["Demo.Echo", "Demo.Sleep", "Demo.Fail"];

async fn start(alice: &Rest, tool: &str, input: Value) -> Result<String> {
    let r = alice.start(tool, input, None).await?;
    ensure!(r.status == 202, "start {tool}: {} {:?}", r.status, r.json());
    r.json()["execution_id"].as_str().map(str::to_owned).ok_or_else(|| anyhow!("no execution_id"))
}

async fn status(alice: &Rest, id: &str) -> Result<Value> {
    let r = alice.get(&format!("/tool-executions/{id}")).await?;
    ensure!(r.status == 200, "GET {id}: {} {:?}", r.status, r.json());
    Ok(r.json())
}

/// Every tool's invocations as the cluster's live workers count them.
async fn counters(c: &Cluster) -> Result<BTreeMap<&'static str, u64>> {
    let mut counts = BTreeMap::new();
    for tool in TOOLS {
        counts.insert(tool, c.invocations(tool).await?);
    }
    Ok(counts)
}

async fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program).args(args).kill_on_drop(true).output().await.context(program.to_owned())?;
    if !out.status.success() {
        bail!("{program} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// A new, empty database on the same server, named as the harness names its
/// own (so leftovers of crashed runs are dropped alike); its URL.
async fn create_database() -> Result<String> {
    use sqlx::Connection as _;
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let db = format!("bt_it_{created}_{}", random_suffix());
    let base = postgres_url();
    let mut admin = sqlx::PgConnection::connect(&base).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&mut admin).await?;
    let (prefix, _) = base.rsplit_once('/').ok_or_else(|| anyhow!("postgres url needs a database"))?;
    Ok(format!("{prefix}/{db}"))
}

/// The old cluster's configuration (the same key ring and cluster secret: the
/// operator keeps those apart from the database backup) pointed at the
/// restored database and at a Redis key prefix nothing has written yet.
fn restored_config(old: &Path, dir: &Path, database_url: &str, redis_prefix: &str) -> Result<std::path::PathBuf> {
    let mut config: Value = serde_json::from_slice(&std::fs::read(old)?)?;
    config["database"]["url"] = json!(database_url);
    config["redis"]["key_prefix"] = json!(redis_prefix);
    let path = dir.join("restored.yaml");
    std::fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
    Ok(path)
}

/// `pg_dump -Fc` of the cluster's database; the dump's path.
async fn dump(c: &Cluster) -> Result<String> {
    let dump = c.dir.join(format!("baton-{}.dump", random_suffix()));
    let path = dump.to_str().ok_or_else(|| anyhow!("temp dir is not UTF-8"))?.to_owned();
    run("pg_dump", &["-Fc", "-f", &path, "-d", &c.database_url]).await?;
    Ok(path)
}

/// The dump restored into a new database, and a cluster for it (no process
/// started yet) with the old one's identity, key ring and a new Redis key
/// prefix; how long `createdb` and `pg_restore` took.
async fn restore(old: &Cluster, dump: &str) -> Result<(Cluster, Duration)> {
    let began = Instant::now();
    let restored_url = create_database().await?;
    run("pg_restore", &["--no-owner", "--exit-on-error", "-d", &restored_url, dump]).await?;
    let took = began.elapsed();
    let redis_prefix = format!("bt_it_restored_{}", random_suffix());
    let fresh = Cluster {
        dir: old.dir.clone(),
        config: restored_config(&old.config, &old.dir, &restored_url, &redis_prefix)?,
        database_url: restored_url,
        redis_prefix,
        id: old.id.clone(),
        coordinators: Vec::new(),
        gateways: Vec::new(),
        workers: Vec::new(),
        http: old.http.clone(),
        otlp_endpoint: None,
        tls: None,
        binaries: Default::default(),
    };
    Ok((fresh, took))
}

/// Attempt records per tool.
async fn attempts(c: &Cluster) -> Result<BTreeMap<String, i64>> {
    let mut db = c.db().await?;
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT e.tool_name, COUNT(*) FROM attempts a JOIN executions e ON e.id = a.execution_id GROUP BY 1",
    )
    .fetch_all(&mut db)
    .await?;
    Ok(rows.into_iter().collect())
}

async fn kill_all(c: &mut Cluster) {
    for p in c.workers.iter_mut().chain(c.gateways.iter_mut()).chain(c.coordinators.iter_mut()) {
        p.kill9();
        let _ = p.child.wait().await;
    }
}

#[tokio::test]
async fn backup_restored_into_a_fresh_cluster_keeps_every_acknowledged_execution_and_runs_none_twice() -> Result<()> {
    let short = Settings { lease_ms: 1_000, owner_loss_grace_ms: 1_000, ..Settings::default() };
    let mut old = Cluster::new(short).await?;
    old.start_coordinator().await?;
    old.start_gateway(0).await?;
    old.start_worker_with(0, &[("BATON_WORKER__CAPACITY", CAPACITY.to_string())]).await?;
    let alice = old.rest(0, &old.id.user_token);

    // Finished before the dump, with results.
    let mut completed = Vec::new();
    for i in 0..EACH {
        let text = format!("finished before the backup #{i}");
        let id = start(&alice, "Demo.Echo", json!({"text": text})).await?;
        ensure!(alice.until_terminal(&id, DEADLINE).await?["status"] == "completed", "{id} did not complete");
        completed.push((id, text));
    }
    // Running at the dump: they fill the worker.
    let mut running = Vec::new();
    for _ in 0..EACH {
        running.push(start(&alice, "Demo.Sleep", json!({"seconds": 600})).await?);
    }
    eventually(DEADLINE, "every sleep running", || async {
        for id in &running {
            if status(&alice, id).await?["status"] != "working" {
                return Ok(None);
            }
        }
        Ok((old.invocations("Demo.Sleep").await? == EACH as u64).then_some(()))
    })
    .await?;
    // Pending at the dump: no capacity left to claim them.
    let mut pending = Vec::new();
    for _ in 0..EACH {
        pending.push(start(&alice, "Demo.Fail", json!({"times": 0})).await?);
    }
    for id in &pending {
        ensure!(status(&alice, id).await?["status"] == "pending", "{id} should wait for capacity");
    }

    // The backup, taken while all of that is in flight.
    let dumped_at = unix_now();
    let dump_path = dump(&old).await?;

    // Work goes on after the dump: acknowledged, then lost with the cluster.
    let mut after_dump = Vec::new();
    for _ in 0..EACH {
        after_dump.push(start(&alice, "Demo.Fail", json!({"times": 0})).await?);
    }
    for id in &running {
        ensure!(status(&alice, id).await?["status"] == "working", "{id} still runs after the dump");
    }

    // The disaster: every process gone, and with them the worker's running
    // list and the counters of what ran.
    let before_disaster = counters(&old).await?;
    kill_all(&mut old).await;
    let expected_old = BTreeMap::from([("Demo.Echo", EACH as u64), ("Demo.Sleep", EACH as u64), ("Demo.Fail", 0)]);
    ensure!(before_disaster == expected_old, "the old cluster ran {before_disaster:?}");

    // Restore into a new database; a fresh cluster on it with a new Redis prefix.
    let (mut fresh, restore_took) = restore(&old, &dump_path).await?;
    let resolution_began = Instant::now();
    fresh.start_coordinator().await?;
    fresh.start_gateway(0).await?;
    fresh.start_worker(0).await?;
    let alice = fresh.rest(0, &fresh.id.user_token);

    // Every execution acknowledged before the dump resolves by the owner-loss rules.
    let mut outcomes = BTreeMap::new();
    for id in completed.iter().map(|(id, _)| id).chain(&running).chain(&pending) {
        outcomes.insert(id.clone(), alice.until_terminal(id, DEADLINE).await?);
    }
    let resolution_took = resolution_began.elapsed();
    for (id, text) in &completed {
        let result = alice.get(&format!("/tool-executions/{id}/result")).await?;
        ensure!(result.status == 200, "{id}: {:?}", result.json());
        ensure!(result.json()["result"]["structuredContent"]["text"] == text.as_str(), "{id} lost its result");
    }
    for id in &running {
        let v = &outcomes[id];
        ensure!(v["status"] == "failed" && v["failure_reason"] == "owner_lost", "{id} running at the dump: {v}");
    }
    for id in &pending {
        ensure!(outcomes[id]["status"] == "completed", "{id} pending at the dump: {}", outcomes[id]);
    }
    // The recovery point: what was acknowledged after the dump is not there.
    for id in &after_dump {
        let r = alice.get(&format!("/tool-executions/{id}")).await?;
        ensure!(r.status == 404, "{id} acknowledged after the dump: {} {:?}", r.status, r.json());
    }

    // Nothing ran twice: the old workers' counts and the new ones' add up to
    // the attempts the restored database records, one per execution.
    let after_restore = counters(&fresh).await?;
    let expected_new = BTreeMap::from([("Demo.Echo", 0), ("Demo.Sleep", 0), ("Demo.Fail", EACH as u64)]);
    ensure!(after_restore == expected_new, "the fresh cluster ran {after_restore:?}");
    let attempts = attempts(&fresh).await?;
    ensure!(attempts.len() == TOOLS.len(), "attempt records: {attempts:?}");
    for (tool, n) in attempts {
        let ran = before_disaster.get(tool.as_str()).copied().unwrap_or(0)
            + after_restore.get(tool.as_str()).copied().unwrap_or(0);
        ensure!(i64::try_from(ran)? == n && n == EACH as i64, "{tool}: {ran} invocations, {n} attempt records");
    }
    println!(
        "backup drill: dump at {dumped_at}; pg_restore took {:.2} s; {} executions resolved {:.2} s after the \
         fresh cluster started ({EACH} owner_lost, {EACH} run once, {EACH} kept their result); {EACH} acknowledged \
         after the dump absent",
        restore_took.as_secs_f64(),
        outcomes.len(),
        resolution_took.as_secs_f64(),
    );
    Ok(())
}

/// What no backup can know: work done after it. An execution pending in the
/// backup that ran before the disaster runs again after the restore; one
/// running in the backup that ended before the disaster reads `owner_lost`.
#[tokio::test]
async fn backup_restore_redoes_what_ran_after_the_dump_as_the_recovery_point_says() -> Result<()> {
    let short = Settings { lease_ms: 1_000, owner_loss_grace_ms: 1_000, ..Settings::default() };
    let mut old = Cluster::new(short).await?;
    old.start_coordinator().await?;
    old.start_gateway(0).await?;
    old.start_worker_with(0, &[("BATON_WORKER__CAPACITY", "1".to_owned())]).await?;
    let alice = old.rest(0, &old.id.user_token);
    let sleep = start(&alice, "Demo.Sleep", json!({"seconds": 600})).await?;
    eventually(DEADLINE, "the sleep running", || async {
        Ok((status(&alice, &sleep).await?["status"] == "working").then_some(()))
    })
    .await?;
    let queued = start(&alice, "Demo.Fail", json!({"times": 0})).await?;
    // It waits for capacity. A heartbeat the worker sent before the sleep's
    // assignment reached it may report a free slot, so this one can be sent
    // there, declined and made pending again; the dump must find it pending.
    eventually(DEADLINE, "the queued one waiting for capacity", || async {
        Ok((status(&alice, &queued).await?["status"] == "pending").then_some(()))
    })
    .await?;
    let dump_path = dump(&old).await?;

    // After the dump the sleep is cancelled, which frees the worker for the queued one.
    let cancel = alice.post(&format!("/tool-executions/{sleep}/cancel"), json!({})).await?;
    ensure!(cancel.status == 200 || cancel.status == 202, "cancel: {} {:?}", cancel.status, cancel.json());
    ensure!(alice.until_terminal(&sleep, DEADLINE).await?["status"] == "cancelled", "{sleep} was not cancelled");
    ensure!(alice.until_terminal(&queued, DEADLINE).await?["status"] == "completed", "{queued} did not run");
    let before_disaster = counters(&old).await?;
    kill_all(&mut old).await;

    let (mut fresh, _) = restore(&old, &dump_path).await?;
    fresh.start_coordinator().await?;
    fresh.start_gateway(0).await?;
    fresh.start_worker(0).await?;
    let alice = fresh.rest(0, &fresh.id.user_token);
    let v = alice.until_terminal(&sleep, DEADLINE).await?;
    ensure!(v["status"] == "failed" && v["failure_reason"] == "owner_lost", "{sleep} after the restore: {v}");
    ensure!(alice.until_terminal(&queued, DEADLINE).await?["status"] == "completed", "{queued} after the restore");
    let after_restore = counters(&fresh).await?;
    let attempts = attempts(&fresh).await?;
    // The sleep is not run again; the queued one is: two invocations, one attempt record.
    ensure!(
        before_disaster["Demo.Sleep"] == 1 && after_restore["Demo.Sleep"] == 0,
        "{before_disaster:?} {after_restore:?}"
    );
    ensure!(
        before_disaster["Demo.Fail"] == 1 && after_restore["Demo.Fail"] == 1,
        "{before_disaster:?} {after_restore:?}"
    );
    ensure!(attempts.get("Demo.Fail") == Some(&1), "attempt records: {attempts:?}");
    Ok(())
}

/// The wall-clock time, for the record of when the dump was taken.
fn unix_now() -> String {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    format!("unix {:.3} s", ms as f64 / 1000.0)
}
