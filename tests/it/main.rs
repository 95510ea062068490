//! Black-box tests: real `baton` processes on loopback, real Postgres and Redis.
//! Build the binary first (`cargo build --workspace`); `BATON_BIN` overrides its path.

mod admission;
mod bench_history;
mod bench_waiters;
mod chaos;
mod config_exit;
mod dashboard;
mod day_two;
mod dev_mode;
mod edge;
mod edge_shedding;
mod fidelity;
mod fleet;
mod hardening;
mod harness;
mod history;
mod history_admin;
mod mcp_composition;
mod mcp_foreground;
mod mcp_native_cancel;
mod mcp_rmcp;
mod operator;
mod operator_outcomes;
mod ops_cli;
mod remote_mcp;
mod rest_lifecycle;
mod scale;
mod servers;
mod telemetry;
mod tls;
mod tracing_export;
mod webhooks;
// Not `watch`: `chaos::watch` is the chaos suite's own module; the filter `watch` still selects these.
#[path = "watch.rs"]
mod execution_watch;
mod worker_trust;
mod writing_tools;
// Waiting at scale (issue #21).
mod waiters;
