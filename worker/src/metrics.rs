//! Worker metrics, served in the Prometheus text format at `/metrics`:
//! `baton_worker_tool_invocations_total{tool="…"}` makes "ran exactly once"
//! observable from outside, and `baton_worker_tools_running` with its
//! high-water mark makes "never more than `capacity` at once" observable too.

use axum::Router;
use axum::routing::get;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
pub struct Metrics {
    invocations: Arc<Mutex<BTreeMap<String, u64>>>,
    running: Arc<AtomicI64>,
    running_max: Arc<AtomicI64>,
}

/// The same counts as OpenTelemetry instruments of the process's meter (its
/// `/metrics` on `telemetry.metrics_addr`, and OTLP): made on first use, after
/// the process installed its provider.
struct Otel {
    invocations: opentelemetry::metrics::Counter<u64>,
    running: opentelemetry::metrics::UpDownCounter<i64>,
}

fn otel() -> &'static Otel {
    static OTEL: std::sync::OnceLock<Otel> = std::sync::OnceLock::new();
    OTEL.get_or_init(|| {
        let meter = baton_telemetry::meter();
        Otel {
            invocations: meter
                .u64_counter("baton.worker.tool_invocations")
                .with_description("Tool invocations started by this worker")
                .build(),
            running: meter
                .i64_up_down_counter("baton.worker.tools_running")
                .with_description("Tools running on this worker now")
                .build(),
        }
    })
}

/// One tool running; counted until dropped.
pub struct Running(Arc<AtomicI64>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
        otel().running.add(-1, &[]);
    }
}

impl Metrics {
    /// Counts a tool as running while the guard lives.
    pub fn running(&self) -> Running {
        let now = self.running.fetch_add(1, Ordering::AcqRel) + 1;
        self.running_max.fetch_max(now, Ordering::AcqRel);
        otel().running.add(1, &[]);
        Running(self.running.clone())
    }

    pub fn invoked(&self, tool: &str) {
        otel().invocations.add(1, &[opentelemetry::KeyValue::new("tool", tool.to_owned())]);
        let mut m = self.invocations.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(tool.to_owned()).or_default() += 1;
    }

    pub fn invocations(&self, tool: &str) -> u64 {
        self.invocations.lock().unwrap_or_else(|p| p.into_inner()).get(tool).copied().unwrap_or(0)
    }

    pub fn render(&self) -> String {
        let m = self.invocations.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::from(
            "# HELP baton_worker_tool_invocations_total Tool invocations started by this worker.\n\
             # TYPE baton_worker_tool_invocations_total counter\n",
        );
        for (tool, n) in m.iter() {
            let tool = tool.replace('\\', "\\\\").replace('"', "\\\"");
            out.push_str(&format!("baton_worker_tool_invocations_total{{tool=\"{tool}\"}} {n}\n"));
        }
        out.push_str(&format!(
            "# HELP baton_worker_tools_running Tools running on this worker now.\n\
             # TYPE baton_worker_tools_running gauge\n\
             baton_worker_tools_running {}\n\
             # HELP baton_worker_tools_running_max The most tools this worker ever ran at once.\n\
             # TYPE baton_worker_tools_running_max gauge\n\
             baton_worker_tools_running_max {}\n",
            self.running.load(Ordering::Acquire),
            self.running_max.load(Ordering::Acquire)
        ));
        out
    }

    pub fn router(&self) -> Router {
        let m = self.clone();
        Router::new().route("/metrics", get(move || async move { m.render() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_one_counter_per_tool() {
        let m = Metrics::default();
        m.invoked("Demo.Echo");
        m.invoked("Demo.Echo");
        m.invoked("A\"b");
        let text = m.render();
        assert!(text.contains("baton_worker_tool_invocations_total{tool=\"Demo.Echo\"} 2\n"));
        assert!(text.contains("tool=\"A\\\"b\"} 1"));
        assert_eq!(m.invocations("Demo.Echo"), 2);
    }
}
