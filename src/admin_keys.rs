//! `baton admin payload-keys …`: retiring a payload key, with the
//! deployment's configuration (its database and its key ring). Progress goes
//! to stderr, the outcome to stdout as one JSON object; neither ever holds a
//! key or a payload.

use crate::config::Config;
use baton_coordinator::payload_keys::{self, Progress};
use baton_coordinator::store::{KeyCounts, Store};
use clap::Subcommand;
use serde_json::json;
use std::process::ExitCode;

#[derive(Subcommand)]
pub(crate) enum Action {
    /// Counts the retained payload values per key id; changes nothing.
    Status,
    /// Re-seals every retained value not sealed by the ring's first key under
    /// it, then forgets the key ids no value names any more, so the next
    /// coordinator may start without them. Resumable: run it again after a stop.
    Rewrap {
        /// Rows per batch; each batch is its own transaction.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        batch: u32,
    },
}

fn counts(c: &KeyCounts) -> serde_json::Value {
    // A value too short to name a key is counted under the empty id.
    c.iter().map(|(id, n)| (if id.is_empty() { "(malformed)".to_owned() } else { id.clone() }, json!(n))).collect()
}

fn remaining(p: &Progress<'_>) -> String {
    let left: Vec<String> = p.remaining.iter().map(|(id, n)| format!("{id}={n}")).collect();
    let done: i64 = p.resealed.values().sum();
    format!(
        "{}: {done} values re-sealed; remaining {}",
        p.table,
        if left.is_empty() { "none".into() } else { left.join(" ") }
    )
}

pub(crate) async fn run(config: &Config, database_url: &str, action: Action) -> anyhow::Result<ExitCode> {
    let ring = match config.key_ring() {
        Ok(ring) => ring,
        Err(e) => {
            eprintln!("baton: {e}");
            return Ok(ExitCode::from(crate::EX_CONFIG));
        }
    };
    let store = Store::connect(database_url, 2).await?;
    let out = match action {
        Action::Status => {
            let s = payload_keys::status(&store, &ring, baton_proto::clock::now_ms()).await?;
            json!({
                "sealing_key_id": s.sealing_key_id,
                "retained": counts(&s.retained),
                "missing_from_ring": s.missing_from_ring,
            })
        }
        Action::Rewrap { batch } => {
            let r = payload_keys::rewrap(&store, &ring, batch, |p| eprintln!("baton: {}", remaining(p))).await?;
            json!({
                "sealing_key_id": r.sealing_key_id,
                "resealed": counts(&r.resealed),
                "unopened": counts(&r.unopened),
                "replaced_meanwhile": r.replaced_meanwhile,
                "retained": counts(&r.retained),
                "retired": r.retired,
                "still_sealing": r.still_sealing,
            })
        }
    };
    store.close().await;
    println!("{out}");
    Ok(ExitCode::SUCCESS)
}
