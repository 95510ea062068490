//! `baton bench-admission`: cluster admission in isolation against a real
//! Redis: decisions per second with C concurrent callers, and the latency one
//! decision adds to a start (p50/p99). Each admitted ticket is released, so
//! the measured mix is one admit + one release per execution, as in production.

use baton_coordinator::admission::redis::{Publish, RedisAdmission};
use baton_coordinator::admission::{Admission, Bounds, Ticket};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) struct Args {
    pub target: baton_coordinator::redis_link::Target,
    pub decisions: usize,
    pub concurrency: usize,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let prefix = format!("bench_adm_{}", std::process::id());
    let bounds = Bounds {
        principal_concurrency: 1_000_000,
        project_concurrency: 1_000_000,
        organization_concurrency: 1_000_000,
        backlog: 1_000_000,
        retained_payload_bytes: 1 << 40,
    };
    let admission = Arc::new(RedisAdmission::connect(&args.target, &prefix, bounds).await?);
    // As a coordinator does before serving: until a rebuild, nothing is admitted.
    admission.rebuild_alone(&[], 0, Some(Publish { generation: 1, retained: &[] })).await?;
    let per_task = args.decisions.div_ceil(args.concurrency.max(1));
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.concurrency.max(1))
        .map(|task| {
            let admission = admission.clone();
            baton_worker::supervise::spawn_supervised("admission bench task", async move {
                let mut admit_latency = Vec::with_capacity(per_task);
                let mut errors = 0usize;
                for i in 0..per_task {
                    let ticket = Ticket {
                        execution_id: format!("te_bench_{task}_{i}"),
                        // Organizations over several shards, as a cluster spreads them.
                        org_id: format!("org_bench_{}", task % 8),
                        project_id: format!("prj_bench_{}", task % 4),
                        user_id: format!("user_{}", i % 16),
                        payload_bytes: 256,
                        expires_at_ms: i64::MAX / 4,
                        retained_until_ms: i64::MAX / 4,
                    };
                    let t0 = Instant::now();
                    match admission.admit(&ticket, 0).await {
                        Ok(Ok(_)) => admit_latency.push(t0.elapsed()),
                        _ => errors += 1,
                    }
                    if admission.release(&ticket, 0).await.is_err() {
                        errors += 1;
                    }
                }
                (admit_latency, errors)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await?;
        latencies.extend(l);
        errors += e;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let decisions = latencies.len();
    println!(
        "admission (Redis, cluster mode): {decisions} admits + {decisions} releases, concurrency {}",
        args.concurrency
    );
    println!("  decisions/s (admit+release pairs) {:>10.0}", decisions as f64 / elapsed.as_secs_f64());
    println!("  admit latency p50                 {:>10.3} ms", percentile(&latencies, 50.0).as_secs_f64() * 1e3);
    println!("  admit latency p99                 {:>10.3} ms", percentile(&latencies, 99.0).as_secs_f64() * 1e3);
    println!("  errors                            {errors:>10}");
    Ok(())
}
