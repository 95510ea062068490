//! A private Redis Cluster: `redis-server` nodes in cluster mode on free
//! ports, joined by `redis-cli --cluster create`, each master with its
//! replicas, and a short node timeout so a killed master fails over in a
//! few seconds.

use crate::harness::eventually;
use anyhow::{Context as _, Result, anyhow, bail};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

pub(crate) struct PrivateRedisCluster {
    dir: PathBuf,
    nodes: Vec<Node>,
}

struct Node {
    port: u16,
    child: Option<Child>,
}

impl Drop for PrivateRedisCluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port free now whose cluster bus port (+10000) is free too.
fn cluster_port(taken: &[u16]) -> Result<u16> {
    for _ in 0..200 {
        let port = 20_000 + (rand_u16() % 20_000);
        if taken.contains(&port) {
            continue;
        }
        let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
        if free(port) && free(port + 10_000) {
            return Ok(port);
        }
    }
    bail!("no free port pair for a redis cluster node")
}

fn rand_u16() -> u16 {
    let mut b = [0u8; 2];
    let _ = getrandom::fill(&mut b);
    u16::from_le_bytes(b)
}

async fn query(port: u16, cmd: &redis::Cmd) -> Result<redis::Value> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut con = client.get_multiplexed_async_connection().await?;
    Ok(cmd.query_async(&mut con).await?)
}

async fn text(port: u16, cmd: &redis::Cmd) -> Result<String> {
    match query(port, cmd).await? {
        redis::Value::BulkString(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        redis::Value::VerbatimString { text, .. } => Ok(text),
        other => Err(anyhow!("unexpected answer {other:?}")),
    }
}

impl PrivateRedisCluster {
    /// `masters` masters with `replicas` replicas each, serving every slot.
    pub(crate) async fn start(masters: usize, replicas: usize) -> Result<PrivateRedisCluster> {
        let dir = std::env::temp_dir().join(format!("baton-redis-cluster-{}-{}", std::process::id(), rand_u16()));
        std::fs::create_dir_all(&dir)?;
        let mut c = PrivateRedisCluster { dir, nodes: Vec::new() };
        let mut ports = Vec::new();
        for _ in 0..masters * (1 + replicas) {
            let port = cluster_port(&ports)?;
            ports.push(port);
            c.nodes.push(Node { port, child: Some(c.spawn(port)?) });
        }
        for &port in &ports {
            eventually(Duration::from_secs(10), "cluster node up", || async move {
                Ok(query(port, &redis::cmd("PING")).await.ok().map(|_| ()))
            })
            .await?;
        }
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        create.args(ports.iter().map(|p| format!("127.0.0.1:{p}")));
        create.args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
        let out = create.stdin(Stdio::null()).output().await.context("redis-cli --cluster create")?;
        if !out.status.success() {
            bail!("redis-cli --cluster create: {}", String::from_utf8_lossy(&out.stdout));
        }
        c.wait_healthy().await?;
        Ok(c)
    }

    fn spawn(&self, port: u16) -> Result<Child> {
        let dir = self.dir.join(port.to_string());
        std::fs::create_dir_all(&dir)?;
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"])
            .args(["--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0"])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("redis-server")
    }

    /// Every node's URL: any of them seeds a client.
    pub(crate) fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(|n| format!("redis://127.0.0.1:{}/", n.port)).collect()
    }

    fn live(&self) -> impl Iterator<Item = (usize, u16)> + '_ {
        self.nodes.iter().enumerate().filter(|(_, n)| n.child.is_some()).map(|(i, n)| (i, n.port))
    }

    /// Until every live node sees every slot served and each replica has
    /// its master's data (so it can take over).
    pub(crate) async fn wait_healthy(&self) -> Result<()> {
        let ports: Vec<u16> = self.live().map(|(_, p)| p).collect();
        eventually(Duration::from_secs(30), "redis cluster healthy", || {
            let ports = ports.clone();
            async move {
                for port in ports {
                    let info = text(port, redis::cmd("CLUSTER").arg("INFO")).await?;
                    if !info.contains("cluster_state:ok") {
                        return Ok(None);
                    }
                    let replication = text(port, redis::cmd("INFO").arg("replication")).await?;
                    if replication.contains("role:slave") && !replication.contains("master_link_status:up") {
                        return Ok(None);
                    }
                }
                Ok(Some(()))
            }
        })
        .await
    }

    /// The node (by index) that is a master now and holds a key matching `pattern`.
    pub(crate) async fn master_holding(&self, pattern: &str) -> Result<usize> {
        for (i, port) in self.live() {
            let role = text(port, redis::cmd("INFO").arg("replication")).await?;
            if !role.contains("role:master") {
                continue;
            }
            let keys: Vec<String> =
                redis::FromRedisValue::from_redis_value(query(port, redis::cmd("KEYS").arg(pattern)).await?)?;
            if !keys.is_empty() {
                return Ok(i);
            }
        }
        bail!("no master holds {pattern}")
    }

    /// The node (by index) that is the live master serving `key`'s slot now.
    pub(crate) async fn master_of_key(&self, key: &str) -> Result<usize> {
        let (_, any) = self.live().next().ok_or_else(|| anyhow!("no live node"))?;
        let slot: i64 =
            redis::FromRedisValue::from_redis_value(query(any, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key)).await?)?;
        for (i, port) in self.live() {
            let nodes = text(port, redis::cmd("CLUSTER").arg("NODES")).await?;
            // <id> <addr> myself,master <master> <ping> <pong> <epoch> connected 0-5460 …
            let Some(me) = nodes.lines().find(|l| l.split_whitespace().nth(2).is_some_and(|f| f.contains("myself")))
            else {
                continue;
            };
            let fields: Vec<&str> = me.split_whitespace().collect();
            if !fields.get(2).is_some_and(|f| f.contains("master")) {
                continue;
            }
            let serves = fields.iter().skip(8).filter(|r| !r.starts_with('[')).any(|r| {
                let (lo, hi) = r.split_once('-').unwrap_or((r, r));
                matches!((lo.parse::<i64>(), hi.parse::<i64>()), (Ok(lo), Ok(hi)) if lo <= slot && slot <= hi)
            });
            if serves {
                return Ok(i);
            }
        }
        bail!("no live master serves slot {slot} ({key})")
    }

    /// The replica of master `i` (by index).
    pub(crate) async fn replica_of(&self, i: usize) -> Result<usize> {
        let port = self.nodes.get(i).map(|n| n.port).ok_or_else(|| anyhow!("no node {i}"))?;
        let info = text(port, redis::cmd("INFO").arg("replication")).await?;
        // slave0:ip=127.0.0.1,port=20001,state=online,offset=…,lag=…
        let replica_port: u16 = info
            .lines()
            .find_map(|l| l.strip_prefix("slave0:")?.split(',').find_map(|kv| kv.strip_prefix("port=")?.parse().ok()))
            .ok_or_else(|| anyhow!("node {i} has no replica"))?;
        self.nodes.iter().position(|n| n.port == replica_port).ok_or_else(|| anyhow!("replica is not ours"))
    }

    /// Until replica `r` has everything its master `m` wrote so far.
    pub(crate) async fn wait_replicated(&self, m: usize, r: usize) -> Result<()> {
        let (mp, rp) = (self.nodes[m].port, self.nodes[r].port);
        let offset = |info: String, key: &str| {
            info.lines().find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok()).unwrap_or(0)
        };
        eventually(Duration::from_secs(10), "replica caught up", || async move {
            let master = offset(text(mp, redis::cmd("INFO").arg("replication")).await?, "master_repl_offset:");
            let replica = offset(text(rp, redis::cmd("INFO").arg("replication")).await?, "slave_repl_offset:");
            Ok((replica >= master).then_some(()))
        })
        .await
    }

    /// Replica `r` stops hearing master `m`: it is stopped (SIGSTOP) and the
    /// master drops its link, so what `m` writes from now on never reaches
    /// it. `freeze(r, false)` lets it run again.
    pub(crate) async fn cut_off(&self, m: usize, r: usize) -> Result<()> {
        self.freeze(r, true).await?;
        let _: redis::Value =
            query(self.nodes[m].port, redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica")).await?;
        Ok(())
    }

    /// SIGSTOP (`stop`) or SIGCONT node `i`.
    pub(crate) async fn freeze(&self, i: usize, stop: bool) -> Result<()> {
        let pid = self.nodes[i].child.as_ref().and_then(Child::id).ok_or_else(|| anyhow!("node {i} is not running"))?;
        let signal = if stop { "-STOP" } else { "-CONT" };
        let status = Command::new("kill").arg(signal).arg(pid.to_string()).status().await?;
        if !status.success() {
            bail!("kill {signal} {pid} failed");
        }
        Ok(())
    }

    /// SIGKILL node `i`; its replica takes over after the node timeout.
    pub(crate) async fn kill9(&mut self, i: usize) {
        if let Some(mut child) = self.nodes.get_mut(i).and_then(|n| n.child.take()) {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// The URL of node `i`.
    pub(crate) fn url(&self, i: usize) -> Option<String> {
        self.nodes.get(i).map(|n| format!("redis://127.0.0.1:{}/", n.port))
    }
}
