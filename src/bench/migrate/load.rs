//! The load: the coordinator's hot statements on the history tables at a
//! fixed rate, through a pool built as the coordinator's, each request's
//! latency and error kept.

use super::super::history::mix;
use super::{GATEWAY_DEADLINE, LOAD_APP, with_app};
use baton_coordinator::domain::ExecutionId;
use baton_proto::clock::now_ms;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One load request's fate.
pub(super) struct Outcome {
    pub at: Instant,
    pub took: Duration,
    pub error: Option<String>,
}

impl Outcome {
    pub(super) fn failed(&self) -> bool {
        self.error.is_some() || self.took > GATEWAY_DEADLINE
    }
}

pub(super) struct Load {
    stop: Arc<AtomicBool>,
    ticker: tokio::task::JoinHandle<()>,
    outcomes: Arc<Mutex<Vec<Outcome>>>,
}

/// A run the load can read or move on: its id and partition key.
type RunKey = (String, i64);

impl Load {
    pub(super) async fn start(url: &str, rate: u64, pool_size: u32) -> anyhow::Result<Load> {
        // As the coordinator's pool (`Store::connect`): at most `pool_size`
        // connections, five seconds to get one.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(pool_size)
            .acquire_timeout(Duration::from_secs(5))
            .connect(&with_app(url, LOAD_APP))
            .await?;
        let seeded: Vec<RunKey> = sqlx::query_as(
            "SELECT id, retention_expires_at FROM executions TABLESAMPLE SYSTEM (1) WHERE project_id = $1 LIMIT 5000",
        )
        .bind(mix::PROJECT)
        .fetch_all(&pool)
        .await?;
        anyhow::ensure!(!seeded.is_empty(), "no seeded run to read");
        let seeded = Arc::new(seeded);
        let started: Arc<Mutex<Vec<RunKey>>> = Arc::default();
        let outcomes: Arc<Mutex<Vec<Outcome>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let period = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
        let ticker = {
            let (stop, outcomes) = (stop.clone(), outcomes.clone());
            baton_worker::supervise::spawn_supervised("bench migrate load", async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                let mut n: u64 = 0;
                let mut inflight = tokio::task::JoinSet::new();
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    n += 1;
                    let (pool, seeded, started, outcomes) =
                        (pool.clone(), seeded.clone(), started.clone(), outcomes.clone());
                    inflight.spawn(async move {
                        let at = Instant::now();
                        let result = request(n, &pool, &seeded, &started).await;
                        let outcome = Outcome { at, took: at.elapsed(), error: result.err().map(|e| kind(&e)) };
                        outcomes.lock().unwrap_or_else(|p| p.into_inner()).push(outcome);
                    });
                    while inflight.try_join_next().is_some() {}
                }
                while inflight.join_next().await.is_some() {}
                pool.close().await;
            })
        };
        Ok(Load { stop, ticker, outcomes })
    }

    pub(super) async fn stop(self) -> Vec<Outcome> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.ticker.await;
        std::mem::take(&mut *self.outcomes.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

fn kind(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::PoolTimedOut => "pool timed out (5 s)".into(),
        sqlx::Error::Database(d) => format!("database {}: {}", d.code().unwrap_or_default(), d.message()),
        other => other.to_string(),
    }
}

/// The n-th request: a start, a transition of a run this load started, a
/// read of a seeded run with its events and attempts, or a history page.
async fn request(n: u64, pool: &sqlx::PgPool, seeded: &[RunKey], started: &Mutex<Vec<RunKey>>) -> sqlx::Result<()> {
    let now = now_ms();
    match n % 4 {
        0 => {
            let id = ExecutionId::generate().to_string();
            let expires = now + 3_600_000 + mix::RETENTION;
            sqlx::query(
                "INSERT INTO executions (id, org_id, project_id, gateway_id, tool_name, toolkit_name, toolkit_version, \
                 user_id, started_by, surface, execution_type, status, attempts, max_attempts, cancel_requested, \
                 created_at, updated_at, execution_deadline, retention_expires_at, poll_interval_ms, payload_bytes, \
                 version) VALUES ($1, $2, $3, $4, 'Demo.Echo', 'Demo', '1.0.0', $5, 'cred_bench', 'rest', \
                 'immediate', 'pending', 0, 1, 0, $6, $6, $7, $8, 1000, 0, 1)",
            )
            .bind(&id)
            .bind(mix::ORG)
            .bind(mix::PROJECT)
            .bind(mix::GATEWAY)
            .bind(mix::user(n % 100))
            .bind(now)
            .bind(now + 3_600_000)
            .bind(expires)
            .execute(pool)
            .await?;
            started.lock().unwrap_or_else(|p| p.into_inner()).push((id, expires));
        }
        1 => {
            let run = started.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let Some((id, expires)) = run else { return Ok(()) };
            sqlx::query(
                "UPDATE executions SET status = 'working', worker_id = 'w_bench', attempts = attempts + 1, \
                 started_at = $3, updated_at = $3, version = version + 1 \
                 WHERE id = $1 AND retention_expires_at = $2",
            )
            .bind(id)
            .bind(expires)
            .bind(now)
            .execute(pool)
            .await?;
        }
        2 => {
            let (id, expires) = &seeded[(n / 4) as usize % seeded.len()];
            // Named columns, as the coordinator reads: `SELECT *` from a
            // prepared statement fails once a migration adds a column
            // ("cached plan must not change result type").
            sqlx::query(
                "SELECT id, status, failure_reason, attempts, created_at, updated_at, output_ct, version \
                 FROM executions WHERE id = $1 AND retention_expires_at = $2",
            )
            .bind(id)
            .bind(expires)
            .fetch_optional(pool)
            .await?;
            sqlx::query("SELECT seq, at, kind, status FROM execution_events WHERE execution_id = $1 ORDER BY seq")
                .bind(id)
                .fetch_all(pool)
                .await?;
            sqlx::query("SELECT attempt, worker_id, success FROM attempts WHERE execution_id = $1 ORDER BY attempt")
                .bind(id)
                .fetch_all(pool)
                .await?;
        }
        _ => {
            sqlx::query(
                "SELECT id, status FROM executions WHERE project_id = $1 ORDER BY created_at DESC, id DESC LIMIT 100",
            )
            .bind(mix::PROJECT)
            .fetch_all(pool)
            .await?;
        }
    }
    Ok(())
}
