//! Cluster-wide admission under races: two coordinators, concurrent starts, the
//! non-terminal count sampled from Postgres while they run.

use crate::harness::{Cluster, Rest, Settings, eventually};
use futures_util::future::join_all;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

struct Outcome {
    accepted: usize,
    rejected: usize,
    max_seen: i64,
}

/// Samples `sql` every few milliseconds until `stop`, keeping the maximum.
fn sampler(c: &Cluster, sql: &'static str, stop: Arc<AtomicBool>, max: Arc<AtomicI64>) -> tokio::task::JoinHandle<()> {
    let url = c.database_url.clone();
    tokio::spawn(async move {
        use sqlx::Connection as _;
        let Ok(mut db) = sqlx::PgConnection::connect(&url).await else { return };
        while !stop.load(Ordering::Relaxed) {
            if let Ok(n) = sqlx::query_scalar::<_, i64>(sql).fetch_one(&mut db).await {
                max.fetch_max(n, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
    })
}

async fn two_replicas(settings: Settings) -> Cluster {
    let mut c = Cluster::new(settings).await.expect("cluster");
    for i in 0..2 {
        c.start_coordinator().await.expect("coordinator");
        c.start_gateway(i).await.expect("gateway");
        c.start_worker(i).await.expect("worker");
    }
    c
}

/// 200 concurrent starts spread over both gateways; `clients[i % n]` starts the i-th.
async fn race(c: &Cluster, clients: &[Rest], sql: &'static str, seconds: f64) -> Outcome {
    let stop = Arc::new(AtomicBool::new(false));
    let max = Arc::new(AtomicI64::new(0));
    let sampling = sampler(c, sql, stop.clone(), max.clone());
    let starts = (0..200).map(|i| clients[i % clients.len()].start("Demo.Sleep", json!({"seconds": seconds}), None));
    let mut accepted = 0;
    let mut rejected = 0;
    for r in join_all(starts).await {
        let r = r.expect("start");
        match r.status {
            202 => accepted += 1,
            429 => {
                rejected += 1;
                let retry =
                    r.headers.get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
                assert!(retry.is_some_and(|s| s >= 1), "429 without Retry-After");
                assert_eq!(r.json()["error"]["code"], "capacity_exceeded");
            }
            other => panic!("unexpected status {other}: {:?}", r.json()),
        }
    }
    // Keep sampling while admitted work drains.
    eventually(Duration::from_secs(60), "admitted work to finish", || async {
        let open = c.scalar("SELECT COUNT(*) FROM executions WHERE status IN ('pending','working')").await?;
        Ok((open == 0).then_some(()))
    })
    .await
    .ok();
    stop.store(true, Ordering::Relaxed);
    let _ = sampling.await;
    Outcome { accepted, rejected, max_seen: max.load(Ordering::Relaxed) }
}

#[tokio::test]
async fn principal_bound_holds_across_two_coordinators() {
    let c = two_replicas(Settings { principal_concurrency: 5, ..Settings::default() }).await;
    let clients = [c.rest(0, &c.id.user_token), c.rest(1, &c.id.user_token)];
    let o = race(
        &c,
        &clients,
        "SELECT COUNT(*) FROM executions WHERE user_id = 'alice@example.com' AND status IN ('pending','working','input_required')",
        0.2,
    )
    .await;
    assert!(o.max_seen <= 5, "saw {} non-terminal executions for a principal bound of 5", o.max_seen);
    assert!(o.accepted >= 5, "accepted {}", o.accepted);
    assert_eq!(o.accepted + o.rejected, 200);
    let rows = c.scalar("SELECT COUNT(*) FROM executions").await.expect("count");
    assert_eq!(rows as usize, o.accepted, "a rejection creates nothing");
}

/// A project- or organization-wide bound of `bound` under a race by two
/// users (alice through her token, another through the admin key).
async fn shared_bound_holds(settings: Settings, bound: i64, scope: &str) {
    let c = two_replicas(settings).await;
    let clients = [c.rest(0, &c.id.user_token), c.rest(1, &c.id.admin_key)];
    let o = race(
        &c,
        &clients,
        "SELECT COUNT(*) FROM executions WHERE status IN ('pending','working','input_required')",
        0.2,
    )
    .await;
    assert!(o.max_seen <= bound, "saw {} for a {scope} bound of {bound}", o.max_seen);
    assert!(o.accepted as i64 >= bound && o.rejected > 0, "{} accepted, {} rejected", o.accepted, o.rejected);
}

#[tokio::test]
async fn project_bound_holds_for_many_users() {
    shared_bound_holds(Settings { project_concurrency: 4, ..Settings::default() }, 4, "project").await;
}

#[tokio::test]
async fn backlog_bound_counts_only_unstarted_work() {
    // Workers register the tools, then go away: everything admitted stays pending.
    let mut c = two_replicas(Settings { backlog: 3, ..Settings::default() }).await;
    for w in &mut c.workers {
        w.kill9();
        let _ = w.child.wait().await;
    }
    let clients = [c.rest(0, &c.id.user_token), c.rest(1, &c.id.user_token)];
    let starts = (0..40).map(|i| clients[i % 2].start("Demo.Echo", json!({"text": "x"}), None));
    let statuses: Vec<u16> = join_all(starts).await.into_iter().map(|r| r.expect("start").status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 202).count(), 3, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 202 || *s == 429));
    let r = clients[0].start("Demo.Echo", json!({"text": "x"}), None).await.expect("start");
    assert_eq!(r.json()["error"]["scope"], "backlog");
}

#[tokio::test]
async fn a_retry_with_the_same_key_after_capacity_frees_creates_one_execution() {
    let c = Cluster::single(Settings { principal_concurrency: 1, ..Settings::default() }).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let first = alice.start("Demo.Sleep", json!({"seconds": 1}), None).await.expect("start");
    assert_eq!(first.status, 202);
    let blocked = alice.start("Demo.Echo", json!({"text": "later"}), Some("k-retry")).await.expect("start");
    assert_eq!(blocked.status, 429);
    assert_eq!(blocked.json()["error"]["scope"], "principal");
    let id = eventually(Duration::from_secs(20), "capacity to free", || async {
        let r = alice.start("Demo.Echo", json!({"text": "later"}), Some("k-retry")).await?;
        Ok((r.status == 202).then(|| r.json()["execution_id"].as_str().unwrap_or_default().to_owned()))
    })
    .await
    .expect("admitted");
    let again = alice.start("Demo.Echo", json!({"text": "later"}), Some("k-retry")).await.expect("start");
    assert_eq!(again.json()["execution_id"], id.as_str());
    assert_eq!(c.scalar("SELECT COUNT(*) FROM executions").await.expect("count"), 2);
}

#[tokio::test]
async fn bounds_hold_again_after_redis_loses_its_keys() {
    let c = two_replicas(Settings { principal_concurrency: 5, ..Settings::default() }).await;
    let clients = [c.rest(0, &c.id.user_token), c.rest(1, &c.id.user_token)];
    let first: Vec<u16> = join_all((0..20).map(|i| clients[i % 2].start("Demo.Sleep", json!({"seconds": 8}), None)))
        .await
        .into_iter()
        .map(|r| r.expect("start").status)
        .collect();
    assert_eq!(first.iter().filter(|s| **s == 202).count(), 5);
    // The equivalent of FLUSHALL for this cluster's keys (other tests share the server).
    let client = redis::Client::open(crate::harness::redis_url()).expect("redis url");
    let mut con = client.get_multiplexed_async_connection().await.expect("redis");
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{}:*", c.redis_prefix)).query_async(&mut con).await.expect("keys");
    assert!(!keys.is_empty());
    let _: i64 = redis::cmd("DEL").arg(&keys).query_async(&mut con).await.expect("del");
    // Within the reconcile period the coordinators notice (the epoch keys are
    // gone) and rebuild, publishing an epoch in every shard.
    let epochs = format!("{}:adm:*:epoch", c.redis_prefix);
    eventually(Duration::from_secs(10), "admission rebuilt", || {
        let mut con = con.clone();
        let epochs = epochs.clone();
        async move {
            let published: Vec<String> = redis::cmd("KEYS").arg(&epochs).query_async(&mut con).await?;
            Ok((published.len() == baton_coordinator::admission::redis_keys::SHARDS as usize).then_some(()))
        }
    })
    .await
    .expect("rebuilt");
    let after: Vec<u16> = join_all((0..20).map(|i| clients[i % 2].start("Demo.Sleep", json!({"seconds": 0.1}), None)))
        .await
        .into_iter()
        .map(|r| r.expect("start").status)
        .collect();
    assert_eq!(
        after.iter().filter(|s| **s == 202).count(),
        0,
        "the five admitted before the flush still hold the bound"
    );
    eventually(Duration::from_secs(60), "admitted work to complete", || async {
        let done = c.scalar("SELECT COUNT(*) FROM executions WHERE status = 'completed'").await?;
        Ok((done == 5).then_some(()))
    })
    .await
    .expect("nothing admitted is lost");
}

#[tokio::test]
async fn bounds_hold_after_redis_restarts_from_an_older_snapshot() {
    // Redis comes back with the state of a moment ago (an RDB snapshot, the
    // last second of an append-only file, a replica promoted behind its
    // master): the epoch is there, the admissions after the snapshot are not.
    let mut redis = crate::servers::PrivateRedis::start().await.expect("private redis");
    let c = Cluster::single(Settings { principal_concurrency: 4, redis_url: Some(redis.url()), ..Settings::default() })
        .await
        .expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    let sleep = || alice.start("Demo.Sleep", json!({"seconds": 30}), None);
    for _ in 0..2 {
        assert_eq!(sleep().await.expect("start").status, 202);
    }
    redis.snapshot().await.expect("snapshot");
    for _ in 0..2 {
        assert_eq!(sleep().await.expect("start").status, 202);
    }
    assert_eq!(sleep().await.expect("start").status, 429, "the principal is full");
    redis.restart_from_snapshot().await.expect("restart");
    // Refused (503) while the coordinator rebuilds, then full again (429):
    // never admitted on the snapshot's count of two.
    let status = eventually(Duration::from_secs(20), "admission rebuilt", || async {
        let r = sleep().await?;
        Ok((r.status != 503).then_some(r.status))
    })
    .await
    .expect("rebuilt");
    assert_eq!(status, 429);
    let open = "SELECT COUNT(*) FROM executions WHERE status IN ('pending','working','input_required')";
    assert_eq!(c.scalar(open).await.expect("count"), 4);
}

#[tokio::test]
async fn organization_bound_holds_across_two_coordinators() {
    shared_bound_holds(Settings { organization_concurrency: 3, ..Settings::default() }, 3, "organization").await;
}

#[tokio::test]
async fn an_unreachable_redis_fails_closed_with_503() {
    // A Redis of this test's own, to stop it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
    let mut redis = tokio::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("redis-server");
    let url = format!("redis://127.0.0.1:{port}/");
    eventually(Duration::from_secs(10), "private redis", || {
        let url = url.clone();
        async move { Ok(redis::Client::open(url)?.get_multiplexed_async_connection().await.ok().map(|_| ())) }
    })
    .await
    .expect("redis up");
    let c = Cluster::single(Settings { redis_url: Some(url), ..Settings::default() }).await.expect("cluster");
    let alice = c.rest(0, &c.id.user_token);
    assert_eq!(alice.start("Demo.Echo", json!({"text": "x"}), None).await.expect("start").status, 202);
    let _ = redis.start_kill();
    let _ = redis.wait().await;
    let r = alice.start("Demo.Echo", json!({"text": "y"}), None).await.expect("start");
    assert_eq!(r.status, 503, "{:?}", r.json());
    assert!(r.headers.get("retry-after").is_some());
    assert_eq!(c.scalar("SELECT COUNT(*) FROM executions").await.expect("count"), 1, "nothing admitted unbounded");
}
