//! The coordinator's instruments (OpenTelemetry, from the global meter the
//! process installed; no-ops when none was). Labels are bounded: surfaces,
//! outcomes, failure reasons, admission scopes and project ids, never an
//! execution or user id.

use crate::domain::Millis;
use crate::store::ExecutionRecord;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub(crate) struct Metrics {
    started: Counter<u64>,
    finished: Counter<u64>,
    start_latency: Histogram<f64>,
    run_time: Histogram<f64>,
    admission_rejections: Counter<u64>,
    lease_lapses: Counter<u64>,
    owner_lost: Counter<u64>,
    /// Pending executions per project, as the sweeper last counted them.
    backlog: Arc<Mutex<HashMap<String, i64>>>,
}

/// Counts a failed Redis operation (`admission` or `signals`); Redis loss is
/// survivable (admission answers 503, signals cost latency), so this counter
/// is how an operator notices it.
pub(crate) fn redis_error(operation: &'static str) {
    static ERRORS: std::sync::OnceLock<Counter<u64>> = std::sync::OnceLock::new();
    ERRORS
        .get_or_init(|| {
            baton_telemetry::meter()
                .u64_counter("baton.redis.errors")
                .with_description("Failed Redis operations, by operation")
                .build()
        })
        .add(1, &[KeyValue::new("operation", operation)]);
}

/// Counts one webhook delivery attempt by outcome (`delivered`, `retrying`,
/// `failed`: given up) and times it.
pub(crate) fn webhook_attempt(outcome: &'static str, started: Millis, finished: Millis) {
    struct Webhooks {
        attempts: Counter<u64>,
        duration: Histogram<f64>,
    }
    static WEBHOOKS: std::sync::OnceLock<Webhooks> = std::sync::OnceLock::new();
    let w = WEBHOOKS.get_or_init(|| {
        let meter = baton_telemetry::meter();
        Webhooks {
            attempts: meter
                .u64_counter("baton.webhook.deliveries")
                .with_description("Webhook delivery attempts, by outcome")
                .build(),
            duration: meter
                .f64_histogram("baton.webhook.delivery.duration")
                .with_unit("s")
                .with_description("How long one delivery attempt took")
                .with_boundaries(LATENCY_BOUNDS.to_vec())
                .build(),
        }
    });
    let labels = [KeyValue::new("outcome", outcome)];
    w.attempts.add(1, &labels);
    w.duration.record(seconds(started, finished), &labels);
}

/// Seconds between two millisecond times (never negative).
fn seconds(from: Millis, to: Millis) -> f64 {
    (to.saturating_sub(from).max(0) as f64) / 1000.0
}

/// Histogram bounds for latencies from a millisecond to an hour, in seconds.
const LATENCY_BOUNDS: [f64; 16] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 300.0, 3600.0];

impl Metrics {
    /// `sessions` reports (sessions, free slots) of this replica; `pool` the
    /// database pool's (in use, idle) connections.
    pub(crate) fn new(
        sessions: impl Fn() -> (u64, u64) + Send + Sync + 'static,
        pool: impl Fn() -> (u64, u64) + Send + Sync + 'static,
    ) -> Metrics {
        let meter = baton_telemetry::meter();
        let backlog: Arc<Mutex<HashMap<String, i64>>> = Arc::default();
        let sessions = Arc::new(sessions);
        let slots = sessions.clone();
        meter
            .u64_observable_gauge("baton.worker.sessions")
            .with_description("Worker sessions connected to this coordinator")
            .with_callback(move |o| o.observe(sessions().0, &[]))
            .build();
        meter
            .u64_observable_gauge("baton.worker.free_slots")
            .with_description("Free slots the workers of this coordinator last reported")
            .with_callback(move |o| o.observe(slots().1, &[]))
            .build();
        meter
            .u64_observable_gauge("baton.db.pool.connections")
            .with_description("Database pool connections by state")
            .with_callback(move |o| {
                let (in_use, idle) = pool();
                o.observe(in_use, &[KeyValue::new("state", "in_use")]);
                o.observe(idle, &[KeyValue::new("state", "idle")]);
            })
            .build();
        let observed = backlog.clone();
        meter
            .i64_observable_gauge("baton.pending.backlog")
            .with_description("Executions waiting for a worker, per project")
            .with_callback(move |o| {
                if let Ok(b) = observed.lock() {
                    for (project, n) in b.iter() {
                        o.observe(*n, &[KeyValue::new("project_id", project.clone())]);
                    }
                }
            })
            .build();
        Metrics {
            started: meter
                .u64_counter("baton.executions.started")
                .with_description("Executions created, by surface")
                .build(),
            finished: meter
                .u64_counter("baton.executions.finished")
                .with_description("Executions that reached a terminal status, by outcome and failure reason")
                .build(),
            start_latency: meter
                .f64_histogram("baton.execution.start_latency")
                .with_unit("s")
                .with_description("From created (or due, when scheduled) to its first attempt starting")
                .with_boundaries(LATENCY_BOUNDS.to_vec())
                .build(),
            run_time: meter
                .f64_histogram("baton.execution.run")
                .with_unit("s")
                .with_description("From the first attempt starting to the terminal status")
                .with_boundaries(LATENCY_BOUNDS.to_vec())
                .build(),
            admission_rejections: meter
                .u64_counter("baton.admission.rejections")
                .with_description("Starts refused by an admission bound, by scope")
                .build(),
            lease_lapses: meter
                .u64_counter("baton.lease.lapses")
                .with_description("Worker leases that lapsed without a heartbeat")
                .build(),
            owner_lost: meter.u64_counter("baton.owner_lost").with_description("Executions failed owner_lost").build(),
            backlog,
        }
    }

    pub(crate) fn started(&self, surface: &str) {
        self.started.add(1, &[KeyValue::new("surface", surface.to_owned())]);
    }

    /// `r` just became terminal.
    pub(crate) fn finished(&self, r: &ExecutionRecord) {
        let reason = r.failure_reason().map(|f| f.as_str()).unwrap_or("none");
        let labels = [KeyValue::new("outcome", r.status().as_str()), KeyValue::new("failure_reason", reason)];
        self.finished.add(1, &labels);
        if let (Some(started), Some(finished)) = (r.started_at, r.finished_at) {
            self.run_time.record(seconds(started, finished), &[KeyValue::new("outcome", r.status().as_str())]);
        }
    }

    /// `r`'s first attempt just started.
    pub(crate) fn first_attempt(&self, r: &ExecutionRecord) {
        if let Some(started) = r.started_at {
            let due = r.scheduled_at.unwrap_or(r.created_at).max(r.created_at);
            self.start_latency.record(seconds(due, started), &[]);
        }
    }

    pub(crate) fn rejected(&self, scope: &'static str) {
        self.admission_rejections.add(1, &[KeyValue::new("scope", scope)]);
    }

    pub(crate) fn swept(&self, lease_lapses: usize, owner_lost: usize) {
        self.lease_lapses.add(lease_lapses as u64, &[]);
        self.owner_lost.add(owner_lost as u64, &[]);
    }

    /// A project whose backlog emptied reads 0 rather than vanishing.
    pub(crate) fn set_backlog(&self, counts: HashMap<String, i64>) {
        if let Ok(mut b) = self.backlog.lock() {
            for n in b.values_mut() {
                *n = 0;
            }
            b.extend(counts);
        }
    }
}
