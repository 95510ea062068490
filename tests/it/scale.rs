//! Outgrowing one machine: coordinators on a Redis Cluster of the test's own
//! (three masters, each with a replica), as a managed cluster-mode Redis
//! runs. Bounds hold across coordinators, wake-ups cross the cluster, and a
//! master killed mid-run fails over without one execution admitted over a
//! bound.

use crate::harness::{Cluster, Settings};
use crate::servers::redis_cluster::PrivateRedisCluster;
use futures_util::StreamExt as _;
use futures_util::future::join_all;
use serde_json::json;
use std::time::Duration;

const OPEN: &str = "SELECT COUNT(*) FROM executions WHERE status IN ('pending','working','input_required')";

async fn on_a_redis_cluster(redis: &PrivateRedisCluster, settings: Settings) -> Cluster {
    let mut c = Cluster::new(Settings { redis_cluster_nodes: redis.seeds(), ..settings })
        .await
        .expect("cluster on redis cluster");
    for i in 0..2 {
        c.start_coordinator().await.expect("coordinator");
        c.start_gateway(i).await.expect("gateway");
        c.start_worker(i).await.expect("worker");
    }
    c
}

#[tokio::test]
async fn scale_bounds_hold_on_a_redis_cluster_across_two_coordinators() {
    let redis = PrivateRedisCluster::start(3, 1).await.expect("redis cluster");
    let c = on_a_redis_cluster(&redis, Settings { organization_concurrency: 3, ..Settings::default() }).await;
    let clients = [c.rest(0, &c.id.user_token), c.rest(1, &c.id.admin_key)];
    let starts = (0..40).map(|i| clients[i % 2].start("Demo.Sleep", json!({"seconds": 20}), None));
    let statuses: Vec<u16> = join_all(starts).await.into_iter().map(|r| r.expect("start").status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 202).count(), 3, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 202 || *s == 429), "{statuses:?}");
    let r = clients[0].start("Demo.Echo", json!({"text": "x"}), None).await.expect("start");
    assert_eq!(r.json()["error"]["scope"], "organization");
    assert_eq!(c.scalar(OPEN).await.expect("count"), 3);
}

#[tokio::test]
async fn scale_wake_ups_reach_a_subscriber_on_any_cluster_node() {
    let redis = PrivateRedisCluster::start(3, 1).await.expect("redis cluster");
    let c = on_a_redis_cluster(&redis, Settings::default()).await;
    // Every node of the cluster, replicas too, hears what a coordinator publishes.
    let mut listeners = Vec::new();
    for i in 0..6 {
        let url = redis.url(i).expect("node");
        let mut pubsub = redis::Client::open(url).expect("url").get_async_pubsub().await.expect("pubsub");
        pubsub.subscribe(format!("{}:changed", c.redis_prefix)).await.expect("subscribe");
        listeners.push(pubsub);
    }
    let alice = c.rest(0, &c.id.user_token);
    let r = alice.start("Demo.Echo", json!({"text": "hello"}), None).await.expect("start");
    assert_eq!(r.status, 202, "{:?}", r.json());
    let id = r.json()["execution_id"].as_str().expect("execution_id").to_owned();
    for (i, pubsub) in listeners.iter_mut().enumerate() {
        let mut messages = pubsub.on_message();
        let heard = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(m) = messages.next().await {
                if m.get_payload::<String>().is_ok_and(|p| p.split_whitespace().any(|w| w == id)) {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(heard, Ok(true), "node {i} never heard that {id} changed");
    }
    // And a caller on the other replica sees it complete.
    let bob = c.rest(1, &c.id.user_token);
    let view = bob.until_terminal(&id, Duration::from_secs(20)).await.expect("terminal");
    assert_eq!(view["status"], "completed", "{view}");
}

#[tokio::test]
async fn scale_a_redis_master_failover_that_loses_writes_refuses_then_rebuilds_and_the_bound_holds() {
    let mut redis = PrivateRedisCluster::start(3, 1).await.expect("redis cluster");
    let c = on_a_redis_cluster(&redis, Settings { principal_concurrency: 4, ..Settings::default() }).await;
    let clients = [c.rest(0, &c.id.user_token), c.rest(1, &c.id.user_token)];
    let sleep = |i: usize| clients[i % 2].start("Demo.Sleep", json!({"seconds": 60}), None);
    for i in 0..2 {
        assert_eq!(sleep(i).await.expect("start").status, 202);
    }
    // The master that holds this organization's admission slot, and its replica.
    let pattern = format!("{}:adm:*:org:{}", c.redis_prefix, c.id.org_id);
    let master = redis.master_holding(&pattern).await.expect("a master holds the organization");
    let replica = redis.replica_of(master).await.expect("its replica");
    redis.wait_replicated(master, replica).await.expect("replicated");
    // The replica falls behind: the next two admissions never reach it.
    redis.cut_off(master, replica).await.expect("cut the replica off");
    for i in 2..4 {
        assert_eq!(sleep(i).await.expect("start").status, 202);
    }
    assert_eq!(sleep(4).await.expect("start").status, 429, "the principal is full");
    // The master dies; the replica, two admissions behind, takes over.
    redis.kill9(master).await;
    redis.freeze(replica, false).await.expect("resume the replica");
    let killed = tokio::time::Instant::now();
    // While the replica takes over and the coordinators rebuild: refused with
    // 503 (never admitted, never another 5xx), then full again.
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        let s = sleep(seen.len()).await.expect("start").status;
        seen.push(s);
        if s != 503 {
            break s;
        }
        assert!(tokio::time::Instant::now() < deadline, "still refused a minute after the failover: {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 429, "after the failover the four still hold the bound: {seen:?}");
    eprintln!(
        "failover: admission back {:.2} s after the master died ({} starts refused with 503 meanwhile)",
        killed.elapsed().as_secs_f64(),
        seen.len() - 1
    );
    assert!(seen.iter().all(|s| *s == 503 || *s == 429), "{seen:?}");
    assert_eq!(c.scalar(OPEN).await.expect("count"), 4, "nothing admitted over the bound");
    redis.wait_healthy().await.expect("the cluster serves every slot again");
}
