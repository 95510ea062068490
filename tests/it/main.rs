//! Black-box tests: real `baton` processes on loopback, real Postgres and Redis.
//! Build the binary first (`cargo build --workspace`); `BATON_BIN` overrides its path.

mod admission;
mod chaos;
mod config_exit;
mod dev_mode;
mod edge;
mod edge_shedding;
mod fleet;
mod harness;
mod history;
mod mcp_rmcp;
mod operator;
mod remote_mcp;
mod rest_lifecycle;
mod servers;
mod tls;
mod tracing_export;
mod worker_trust;
