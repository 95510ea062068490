//! The mixed-version run: a cluster of an earlier release is upgraded role by
//! role, in the order docs/upgrading.md gives (coordinators, then gateways,
//! then workers), and rolled back in the reverse order, while clients keep
//! starting executions through it. Nothing acknowledged may be lost and no
//! tool may run twice.
//!
//! It needs an earlier release's binary in `BATON_OLD_BIN`, which
//! `scripts/mixed-versions.sh` builds from git history; so it is ignored in
//! the ordinary suite and run by that script.

use crate::harness::{Cluster, Rest, Settings, baton_bin, eventually, worker_counts};
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CLIENTS: usize = 4;
/// Executions acknowledged between two steps of the upgrade, so each step
/// happens with work in flight and the next one starts after work went on.
const BETWEEN_STEPS: usize = 25;

/// What the clients were told: execution id → tool.
type Acknowledged = Arc<Mutex<BTreeMap<String, String>>>;

#[derive(Default)]
struct Load {
    acknowledged: Acknowledged,
    /// Requests answered with a connection error or 503, then sent again
    /// with the same Idempotency-Key.
    retried: Arc<Mutex<u64>>,
    /// Whether the gateway runs the old release: its mapping of a stream a
    /// stopping coordinator reset is a 500 (this release answers 503), so a
    /// 500 is counted and sent again while it serves, and fails the run
    /// otherwise.
    old_gateway: AtomicBool,
    old_gateway_500s: Arc<Mutex<u64>>,
}

impl Load {
    fn count(&self) -> usize {
        self.acknowledged.lock().map(|a| a.len()).unwrap_or(0)
    }
}

/// One client: starts executions one after another until `stop`, each with
/// its own Idempotency-Key, sent again until it is acknowledged.
async fn client(rest: Rest, n: usize, load: Arc<Load>, stop: Arc<AtomicBool>) -> Result<()> {
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let (tool, input) =
            if i % 2 == 0 { ("Demo.Echo", json!({"text": "mv"})) } else { ("Demo.Sleep", json!({"seconds": 1})) };
        let key = format!("mixed-{n}-{i}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            match rest.start(tool, input.clone(), Some(&key)).await {
                Ok(r) if r.status == 202 || r.status == 200 => {
                    let id = r.json()["execution_id"].as_str().context("an execution id")?.to_owned();
                    load.acknowledged.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.insert(id, tool.to_owned());
                    break;
                }
                Ok(r) if r.status == 500 && load.old_gateway.load(Ordering::Relaxed) => {
                    *load.old_gateway_500s.lock().map_err(|_| anyhow::anyhow!("poisoned"))? += 1;
                }
                Ok(r) if r.status != 503 => bail!("start answered {}: {}", r.status, String::from_utf8_lossy(&r.bytes)),
                _ if tokio::time::Instant::now() > deadline => bail!("start {key} not acknowledged within 60 s"),
                _ => {
                    *load.retried.lock().map_err(|_| anyhow::anyhow!("poisoned"))? += 1;
                    // A process of the cluster is being replaced: back off a little.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        i += 1;
    }
    Ok(())
}

async fn terminate(pid: Option<u32>) -> Result<()> {
    let pid = pid.context("process already gone")?;
    let status = tokio::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().await?;
    anyhow::ensure!(status.success(), "kill -TERM {pid}");
    Ok(())
}

/// Waits until `more` further executions were acknowledged.
async fn progress(load: &Load, more: usize, what: &str) -> Result<usize> {
    let target = load.count() + more;
    eventually(Duration::from_secs(90), what, || async { Ok((load.count() >= target).then_some(load.count())) }).await
}

async fn open_executions(c: &Cluster) -> Result<i64> {
    c.scalar("SELECT count(*) FROM executions WHERE status NOT IN ('completed', 'failed', 'cancelled')").await
}

#[tokio::test]
#[ignore = "needs BATON_OLD_BIN, an earlier release's baton: run scripts/mixed-versions.sh"]
async fn mixed_versions_upgrade_and_rollback_role_by_role_lose_nothing_and_run_nothing_twice() -> Result<()> {
    let old = PathBuf::from(std::env::var("BATON_OLD_BIN").context("BATON_OLD_BIN")?);
    let new = baton_bin();
    // Migrations only add (docs/upgrading.md), so the schema is migrated
    // first, by the new release, and the old roles run on it.
    let mut c = Cluster::new(Settings::default()).await?;
    for role in ["coordinator", "gateway", "worker"] {
        c.binaries.insert(role, old.clone());
    }
    c.start_coordinator().await?;
    c.start_gateway(0).await?;
    c.start_worker(0).await?;

    let load = Arc::new(Load { old_gateway: AtomicBool::new(true), ..Load::default() });
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for n in 0..CLIENTS {
        clients.push(tokio::spawn(client(c.rest(0, &c.id.user_token), n, load.clone(), stop.clone())));
    }
    progress(&load, BETWEEN_STEPS, "work on the old release").await?;

    // The upgrade in the documented order, a coordinator restart on the new
    // release alone, then the rollback in the reverse order (workers and
    // gateways back first, coordinators last).
    let steps = [
        ("coordinator", &new),
        ("gateway", &new),
        ("worker", &new),
        ("coordinator", &new),
        ("gateway", &old),
        ("worker", &old),
        ("coordinator", &old),
    ];
    let mut in_flight = Vec::new();
    for (role, binary) in steps {
        in_flight.push((role, open_executions(&c).await?));
        c.binaries.insert(role, binary.clone());
        if role == "gateway" {
            load.old_gateway.store(*binary == old, Ordering::Relaxed);
        }
        match role {
            // Replaced in place, as a pod behind its Service address.
            "coordinator" => {
                terminate(c.coordinators[0].child.id()).await?;
                c.restart_coordinator(0).await?;
            }
            "gateway" => {
                terminate(c.gateways[0].child.id()).await?;
                let _ = tokio::time::timeout(Duration::from_secs(15), c.gateways[0].child.wait()).await;
                c.restart_gateway(0, 0).await?;
            }
            // A worker of the other release joins and takes work beside
            // the ones before it; none leaves before the end, so every
            // invocation is still counted then.
            _ => {
                let joined = c.start_worker(0).await?;
                eventually(Duration::from_secs(60), "the joined worker runs tools", || async {
                    let n: u64 = worker_counts(&c.http, &c.workers[joined].addr).await?.values().sum();
                    Ok((n > 0).then_some(()))
                })
                .await?;
            }
        }
        progress(&load, BETWEEN_STEPS, &format!("work after the {role} step")).await?;
    }

    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await??;
    }
    let acknowledged = load.acknowledged.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    let rest = c.rest(0, &c.id.user_token);
    let mut per_tool: BTreeMap<String, u64> = BTreeMap::new();
    for (id, tool) in &acknowledged {
        let view = rest.until_terminal(id, Duration::from_secs(60)).await?;
        assert_eq!(view["status"], "completed", "{id} ({tool}): {view}");
        *per_tool.entry(tool.clone()).or_default() += 1;
    }
    // Every tool ran exactly once per acknowledged execution.
    let mut invoked: BTreeMap<String, u64> = BTreeMap::new();
    for w in 0..c.workers.len() {
        for (tool, n) in worker_counts(&c.http, &c.workers[w].addr).await? {
            *invoked.entry(tool).or_default() += n;
        }
    }
    assert_eq!(invoked, per_tool, "tool invocations against acknowledged executions");
    let stored = c.scalar("SELECT count(*) FROM executions").await?;
    assert_eq!(stored, acknowledged.len() as i64, "every stored execution was acknowledged once");
    let retried_attempts = c.scalar("SELECT count(*) FROM executions WHERE attempts <> 1").await?;
    assert_eq!(retried_attempts, 0, "no execution needed a second attempt");
    let retried = *load.retried.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    let old_500s = *load.old_gateway_500s.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    println!(
        "mixed-version run: old {} -> new {}; {} executions acknowledged ({:?}), in flight at each step {:?}, \
         {} starts sent again after a 503 or a refused connection, {} after a 500 of the old gateway; \
         0 lost, 0 run twice",
        old.display(),
        new.display(),
        acknowledged.len(),
        per_tool,
        in_flight,
        retried,
        old_500s
    );
    Ok(())
}
