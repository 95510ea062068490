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

/// The history list's ids, through the project's history route.
async fn history_ids(rest: &crate::harness::Rest) -> Vec<String> {
    let r = rest.get("/tool_executions?limit=1000").await.expect("history");
    assert_eq!(r.status, 200, "{:?}", r.json());
    r.json()["items"].as_array().into_iter().flatten().filter_map(|i| i["id"].as_str().map(str::to_owned)).collect()
}

#[tokio::test]
async fn scale_history_reads_a_fresh_replica_and_falls_back_to_the_primary() {
    use crate::servers::PrivatePostgres;
    use crate::telemetry::{metrics_addr, sample, scrape};
    let dir = std::env::temp_dir().join(format!("baton-scale-replica-{}", crate::harness::random_suffix()));
    std::fs::create_dir_all(&dir).expect("dir");
    let primary = PrivatePostgres::start(&dir).await.expect("primary");
    let replica = primary.start_replica(&dir).await.expect("streaming replica");
    let settings = Settings {
        postgres_url: Some(primary.url()),
        read_replica_url: Some(replica.url()),
        read_replica_max_lag_ms: 8_000,
        ..Settings::default()
    };
    let mut c = Cluster::new(settings).await.expect("cluster");
    c.start_coordinator_with(&[("BATON_TELEMETRY__METRICS_ADDR", "127.0.0.1:0".to_owned())])
        .await
        .expect("coordinator");
    c.start_gateway(0).await.expect("gateway");
    c.start_worker(0).await.expect("worker");
    let metrics = metrics_addr(&c.coordinators[0].log).expect("coordinator metrics");
    let reads =
        |text: &str, target: &str| sample(text, "baton_history_reads_total", &[&format!("target=\"{target}\"")]);
    let alice = c.rest(0, &c.id.user_token);
    let admin = c.rest(0, &c.id.admin_key);
    let start = || async {
        let r = alice.start("Demo.Echo", json!({"text": "x"}), None).await.expect("start");
        assert_eq!(r.status, 202, "{:?}", r.json());
        let id = r.json()["execution_id"].as_str().expect("id").to_owned();
        alice.until_terminal(&id, Duration::from_secs(20)).await.expect("terminal");
        id
    };
    // Caught up: the history is read from the replica.
    let first = start().await;
    let seen = crate::harness::eventually(Duration::from_secs(20), "the replica has the run", || async {
        Ok(history_ids(&admin).await.contains(&first).then_some(()))
    })
    .await;
    assert!(seen.is_ok(), "{first} never reached the history");
    let text = scrape(&c.http, &metrics).await.expect("scrape");
    assert!(reads(&text, "replica").is_some_and(|n| n >= 1.0), "no read served by the replica:\n{text}");

    // Replay stops: within the bound the history is the replica's (without the
    // new run), while the owner's own lifecycle reads see it at once.
    let mut admin_db = sqlx_connect(&replica.url()).await;
    let _ = sqlx::query("SELECT pg_wal_replay_pause()").execute(&mut admin_db).await.expect("pause replay");
    let second = start().await;
    assert!(!history_ids(&admin).await.contains(&second), "read from the primary while the replica was fresh");
    // A run's page never shows a timeline behind its status: it is read again from the primary.
    let detail = admin.get(&format!("/tool_executions/{second}")).await.expect("detail").json();
    let timeline = detail["timeline"].as_array().cloned().unwrap_or_default();
    assert_eq!(timeline.last().map(|e| e["status"].clone()), Some(json!("completed")), "{detail}");
    // Past the bound: the primary answers, and the metric says so.
    let back = crate::harness::eventually(Duration::from_secs(30), "history from the primary", || async {
        Ok(history_ids(&admin).await.contains(&second).then_some(()))
    })
    .await;
    assert!(back.is_ok(), "the history never fell back to the primary");
    let text = scrape(&c.http, &metrics).await.expect("scrape");
    assert!(reads(&text, "primary").is_some_and(|n| n >= 1.0), "no read served by the primary:\n{text}");
    let lag = sample(&text, "baton_read_replica_lag_seconds", &[]).expect("lag gauge");
    assert!(lag > 8.0, "lag {lag}");

    // The replica goes away: history keeps answering from the primary.
    let _ = sqlx::query("SELECT pg_wal_replay_resume()").execute(&mut admin_db).await.expect("resume replay");
    drop(admin_db);
    replica.stop().await.expect("stop replica");
    let third = start().await;
    assert!(history_ids(&admin).await.contains(&third));
    let count = admin.get("/tool_executions/count").await.expect("count");
    assert_eq!(count.json()["count"], 3, "{:?}", count.json());

    // Back and caught up: the replica serves the history again.
    replica.start_again().await.expect("restart replica");
    let before = reads(&scrape(&c.http, &metrics).await.expect("scrape"), "replica").unwrap_or(0.0);
    let again = crate::harness::eventually(Duration::from_secs(30), "the replica in use again", || async {
        let ids = history_ids(&admin).await;
        assert!(ids.contains(&third), "a read lost the newest run");
        let now = reads(&scrape(&c.http, &metrics).await?, "replica").unwrap_or(0.0);
        Ok((now > before).then_some(()))
    })
    .await;
    assert!(again.is_ok(), "the replica was never read again after its restart");
}

async fn sqlx_connect(url: &str) -> sqlx::PgConnection {
    use sqlx::Connection as _;
    sqlx::PgConnection::connect(url).await.expect("connect")
}
