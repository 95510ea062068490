//! Chaos, scale-out form: the chaos suite's load and checks (see `mod.rs`) on
//! three gateways, three coordinators and three workers, over a Redis
//! Cluster of the test's own (three masters, each with a replica) and a
//! private Postgres primary with a streaming read replica the coordinators
//! read history from. Beside the load, history readers list and count the
//! load's project through every gateway (the reads the replica serves). One
//! fault at a time: kill -9 of the Redis master that serves the load's
//! admission shard (the cluster fails over; admission answers 503 in that
//! master's shards until a coordinator has rebuilt them; the probe tenant is
//! placed on the same master, so its recovery is the shards' recovery), then
//! the read replica stopped (`pg_ctl stop -m fast`), then started again.
//! Checked as the chaos suite checks: nothing acknowledged lost, nothing run
//! more often than its attempts allow, no admission scope over its bound, no
//! 5xx but 503.
//!
//! Too heavy for CI's two cores, so it is ignored by default. Build, then run:
//!
//! ```text
//! cargo build --workspace --all-targets
//! BATON_CHAOS_FULL=1 cargo test -p baton-tests --test it chaos_scale_out -- --ignored --nocapture
//! ```
//!
//! `BATON_CHAOS_FULL=1` gives it the full form's size (1,000 clients, sleeps
//! of 1-20 s); without it, the short form's (150 clients, sleeps of 1-3 s),
//! quick enough to run by hand. The figures are printed and written as the
//! chaos suite's are (`figures.md`, `$BATON_CHAOS_FIGURES`).

use super::*;
use crate::harness::eventually;
use crate::servers::redis_cluster::PrivateRedisCluster;
use crate::telemetry::{metrics_addr, sample, scrape};
use baton_coordinator::admission::redis_keys::{SHARDS, shard_of};

/// The load workers' base names, one per coordinator; none is killed.
const WORKERS: [&str; 3] = ["wk_load_a", "wk_load_b", "wk_load_c"];
const HISTORY_READERS: usize = 3;
/// How long the history may take to answer again, or to be read from the replica again.
const REPLICA_TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "too heavy for CI (3 gateways, 3 coordinators, 3 workers, a 6-node Redis Cluster, a Postgres replica): \
            run with BATON_CHAOS_FULL=1 cargo test -p baton-tests --test it chaos_scale_out -- --ignored --nocapture"]
async fn chaos_scale_out_loses_nothing_and_runs_nothing_twice() {
    let form = form();
    let name = if form.name == "full" { "scale-out full" } else { "scale-out short" };
    run_scale_out(Form { name, ..form }).await.expect("chaos scale-out run");
}

/// A key in shard `n` of admission: the hash tag alone places it.
fn shard_key(prefix: &str, n: u32) -> String {
    format!("{prefix}:adm:{{s{n}}}:epoch")
}

/// History reads served by `target` ("replica" or "primary"), summed over the coordinators.
async fn history_reads(http: &reqwest::Client, metrics: &[String], target: &str) -> f64 {
    let label = format!("target=\"{target}\"");
    let mut total = 0.0;
    for addr in metrics {
        if let Ok(text) = scrape(http, addr).await {
            total += sample(&text, "baton_history_reads_total", &[&label]).unwrap_or(0.0);
        }
    }
    total
}

fn history_url(s: &Shared, gw: usize, path: &str) -> String {
    format!("http://{}/v1/orgs/{}/projects/{}/tool_executions{path}", s.gateways[gw], s.org, s.project)
}

/// One history reader: a page of the list or the count, through each gateway in
/// turn, until the load stops. Counted with the load's answers.
async fn history_reader(s: Arc<Shared>, token: String, i: usize) {
    let mut rng = Rng::new();
    let mut n = i;
    while !s.stop.load(Ordering::Relaxed) {
        n += 1;
        let gw = n % s.gateways.len();
        let path = if n.is_multiple_of(2) { "?limit=20" } else { "/count" };
        match s.http.get(history_url(&s, gw, path)).bearer_auth(&token).send().await {
            Err(e) => s.count(format!("REST history: {}", error_kind(&e))),
            Ok(resp) => {
                let status = resp.status().as_u16();
                s.count(format!("REST history: {status}"));
                match status {
                    200 | 503 => {}
                    500..=599 => s.server_error(format!("REST history {path} via gateway {gw}: {status}")),
                    _ => s.unexpected(format!("REST history {path} via gateway {gw}: {status}")),
                }
            }
        }
        tokio::time::sleep(rng.jitter(Duration::from_millis(300))).await;
    }
}

/// Until a history page is answered 200 through every gateway.
async fn history_answers(s: &Shared, token: &str) -> Result<()> {
    for gw in 0..s.gateways.len() {
        eventually(REPLICA_TIMEOUT, "the history to answer", || async move {
            let sent = s.http.get(history_url(s, gw, "?limit=20")).bearer_auth(token).send().await;
            Ok(sent.is_ok_and(|r| r.status().as_u16() == 200).then_some(()))
        })
        .await?;
    }
    Ok(())
}

/// Seconds since `t0`, or why the condition was not reached.
fn after(t0: Instant, reached: Result<()>) -> String {
    match reached {
        Ok(()) => format!("{:.2} s", t0.elapsed().as_secs_f64()),
        Err(e) => format!("not reached: {e}"),
    }
}

async fn run_scale_out(form: Form) -> Result<()> {
    let started = Instant::now();
    crate::harness::install_crypto_provider();
    let home = std::env::temp_dir().join(format!("baton-chaos-{}", random_suffix()));
    std::fs::create_dir_all(&home)?;
    let pg = PrivatePostgres::start(&home).await.context("private postgres")?;
    let replica = pg.start_replica(&home).await.context("streaming replica")?;
    let mut redis = PrivateRedisCluster::start(3, 1).await.context("private redis cluster")?;
    let base = Settings {
        redis_cluster_nodes: redis.seeds(),
        postgres_url: Some(pg.url()),
        read_replica_url: Some(replica.url()),
        ..Settings::default()
    };
    let mut c = Cluster::new(settings(&form, base)).await?;
    patch_private(&c)?;
    let with_metrics = [("BATON_TELEMETRY__METRICS_ADDR", "127.0.0.1:0".to_owned())];
    for i in 0..3 {
        c.start_coordinator_with(&with_metrics).await?;
        c.start_gateway(i).await?;
    }
    for (i, name) in WORKERS.into_iter().enumerate() {
        c.start_worker_with(i, &load_worker(&form, name)).await?;
    }
    let mut metrics = Vec::new();
    for p in &c.coordinators {
        let log = &p.log;
        metrics.push(
            eventually(Duration::from_secs(20), "coordinator metrics", || async move { Ok(metrics_addr(log).ok()) })
                .await?,
        );
    }
    let http = load_http()?;

    // The master of the load's admission shard, and a probe organization in a shard on it.
    let prefix = c.redis_prefix.clone();
    let master = redis.master_of_key(&shard_key(&prefix, shard_of(&c.id.org_id))).await?;
    let probe_org = {
        let (redis, c, prefix) = (&redis, &c, &prefix);
        eventually(Duration::from_secs(60), "a probe organization on the load's master", move || async move {
            let org = text(&c.admin(&["create-org", "--name", "probe"]).await?, "id")?;
            let on = redis.master_of_key(&shard_key(prefix, shard_of(&org))).await?;
            Ok((on == master).then_some(org))
        })
        .await?
    };
    let mut shards_on_master = 0;
    for n in 0..SHARDS {
        shards_on_master += usize::from(redis.master_of_key(&shard_key(&prefix, n)).await? == master);
    }
    let (probe_target, probe_worker_token) = probe_tenant_in(&c, &http, probe_org).await?;
    c.start_worker_with(0, &probe_worker(probe_worker_token)).await?;
    println!("chaos ({} form): cluster in {}, postgres log {}", form.name, c.dir.display(), pg.log.display());

    let mut r = Run::start(&form, &c, &http, probe_target, WORKERS.len(), Vec::new()).await?;
    for k in 0..HISTORY_READERS {
        r.clients.push(tokio::spawn(history_reader(r.s.clone(), c.id.member_key.clone(), k)));
    }
    let mut figures = vec![(
        "redis master killed".to_owned(),
        format!(
            "node {master} of 6, serving {shards_on_master} of {SHARDS} admission shards (the load's and the probes' \
             among them)"
        ),
    )];
    let faults = [
        "kill -9 the redis master of the load's admission shard",
        "stop the read replica (pg_ctl stop -m fast)",
        "start the read replica again",
    ];
    for (k, fault) in faults.into_iter().enumerate() {
        let t0 = r.begin(fault);
        let tag = format!("fault{k}");
        let probes = match k {
            0 => {
                redis.kill9(master).await;
                let probes = r.probes(t0, &tag);
                let healthy = redis.wait_healthy().await;
                figures.push(("the redis cluster serves every slot again, after the kill".into(), after(t0, healthy)));
                probes
            }
            1 => {
                replica.stop().await?;
                let probes = r.probes(t0, &tag);
                let answers = history_answers(&r.s, &c.id.member_key).await;
                let what = "history answered through every gateway, after the replica stopped";
                figures.push((what.into(), after(t0, answers)));
                probes
            }
            _ => {
                let before = history_reads(&http, &metrics, "replica").await;
                replica.start_again().await?;
                let probes = r.probes(t0, &tag);
                let back = eventually(REPLICA_TIMEOUT, "history read from the replica", || async {
                    Ok((history_reads(&http, &metrics, "replica").await > before).then_some(()))
                })
                .await;
                figures.push(("history read from the replica again, after its start".into(), after(t0, back)));
                probes
            }
        };
        r.end(fault, probes).await;
    }
    let (replica_reads, primary_reads) =
        (history_reads(&http, &metrics, "replica").await, history_reads(&http, &metrics, "primary").await);
    figures.push((
        "history reads, by the server that answered (coordinators' metrics)".into(),
        format!("replica {replica_reads}, primary {primary_reads}"),
    ));
    let mut extra = String::from("\n| scale-out figure | value |\n| --- | --- |\n");
    for (what, value) in &figures {
        let _ = writeln!(extra, "| {what} | {value} |");
    }
    r.finish(&form, &c, started, &BTreeMap::new(), &extra).await
}
