//! `baton bench history` end to end on a small history: it creates its own
//! database, seeds it through the store, measures every case and prints the
//! table with the plans' index use, and drops the database it created. Only
//! that it works is checked here; the figures are for people to read.

use crate::harness::{baton_bin, postgres_url};
use tokio::process::Command;

#[tokio::test]
async fn bench_history_seeds_measures_and_drops_its_database() {
    let out = Command::new(baton_bin())
        .args(["bench", "history", "--database-url", &postgres_url()])
        .args(["--executions", "2000", "--samples", "2", "--case-seconds", "1", "--drop"])
        .output()
        .await
        .expect("run baton bench history");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}\n{stdout}\n{stderr}", out.status.code());
    assert!(stdout.contains("seeded 2000 executions"), "{stdout}");
    for case in ["count   none", "page    tool_name", "page    failure_reason=owner_lost", "detail  "] {
        assert!(stdout.contains(case), "no `{case}` row:\n{stdout}");
    }
    // Every page row names the scan its plan used.
    assert!(stdout.lines().filter(|l| l.starts_with("page")).all(|l| l.contains("Scan")), "{stdout}");
    let name = stdout
        .lines()
        .find_map(|l| l.strip_prefix("dropped database "))
        .unwrap_or_else(|| panic!("no database dropped:\n{stdout}"));
    assert!(name.starts_with("baton_bench_history_"), "{name}");
}
