//! Worker metrics, served in the Prometheus text format at `/metrics`:
//! `baton_worker_tool_invocations_total{tool="…"}` makes "ran exactly once"
//! observable from outside.

use axum::Router;
use axum::routing::get;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
pub struct Metrics {
    invocations: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl Metrics {
    pub fn invoked(&self, tool: &str) {
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
