//! Readings around each scenario: Postgres `pg_stat_database.xact_commit` of the
//! deployment's database, the WAL position (`pg_current_wal_lsn`) and WAL
//! fsyncs (`pg_stat_wal`), and per-process CPU time and resident memory from
//! /proc. Only reads; a reading that fails is reported as missing, never fatal
//! once the benchmark runs.

use super::report::{Table, num};
use sqlx::Connection as _;
use std::time::Duration;
use tokio::time::Instant;

/// Linux reports /proc CPU times in USER_HZ, which is 100 on every
/// mainstream architecture.
const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Clone, Copy, Debug)]
struct Db {
    commits: i64,
    wal_bytes: i64,
    wal_syncs: Option<i64>,
}

pub(super) struct Before {
    db: Option<Db>,
    cpu: Vec<Option<u64>>,
    at: Instant,
}

pub(super) struct Probe {
    db: Option<sqlx::PgConnection>,
    pids: Vec<(String, u32)>,
    settle: Duration,
    settled: bool,
}

impl Probe {
    pub(super) async fn new(
        database_url: Option<&str>,
        pids: Vec<(String, u32)>,
        settle: Duration,
    ) -> anyhow::Result<Probe> {
        let db = match database_url {
            Some(url) => Some(sqlx::PgConnection::connect(url).await?),
            None => None,
        };
        Ok(Probe { db, pids, settle, settled: false })
    }

    pub(super) fn pid(&self, name: &str) -> Option<u32> {
        self.pids.iter().find(|(n, _)| n == name).map(|(_, p)| *p)
    }

    pub(super) async fn synchronous_commit(&mut self) -> Option<String> {
        let db = self.db.as_mut()?;
        sqlx::query_scalar::<_, String>("SHOW synchronous_commit").fetch_one(db).await.ok()
    }

    async fn read_db(&mut self) -> Option<Db> {
        let db = self.db.as_mut()?;
        let row = sqlx::query_as::<_, (i64, i64)>(
            "SELECT xact_commit, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint \
             FROM pg_stat_database WHERE datname = current_database()",
        )
        .fetch_one(&mut *db)
        .await;
        let (commits, wal_bytes) = match row {
            Ok(r) => r,
            Err(e) => {
                eprintln!("baton bench: reading pg_stat_database failed: {e}");
                return None;
            }
        };
        let wal_syncs = sqlx::query_scalar::<_, i64>("SELECT wal_sync FROM pg_stat_wal").fetch_one(db).await.ok();
        Some(Db { commits, wal_bytes, wal_syncs })
    }

    /// Statistics reach `pg_stat_database` only when a backend flushes them,
    /// which an idle backend does up to 10 s later: wait that out.
    async fn settle(&self) {
        if self.db.is_some() {
            tokio::time::sleep(self.settle).await;
        }
    }

    pub(super) async fn before(&mut self) -> Before {
        if !self.settled {
            self.settle().await;
            self.settled = true;
        }
        let db = self.read_db().await;
        Before { db, cpu: self.pids.iter().map(|(_, p)| cpu_ticks(*p)).collect(), at: Instant::now() }
    }

    /// Adds the per-execution figures since `before` to `table`.
    pub(super) async fn after(&mut self, before: Before, executions: usize, table: &mut Table) {
        let wall = before.at.elapsed().as_secs_f64();
        let cpu: Vec<Option<u64>> = self.pids.iter().map(|(_, p)| cpu_ticks(*p)).collect();
        let per_exec = |delta: i64| {
            if executions == 0 { "n/a".to_owned() } else { num(delta as f64 / executions as f64) }
        };
        if self.db.is_some() {
            self.settle().await;
            match (before.db, self.read_db().await) {
                (Some(a), Some(b)) => {
                    table.value("postgres commits / execution (xact_commit)", per_exec(b.commits - a.commits));
                    table.value("WAL bytes / execution (whole cluster)", per_exec(b.wal_bytes - a.wal_bytes));
                    if let (Some(x), Some(y)) = (a.wal_syncs, b.wal_syncs) {
                        table.value("WAL fsyncs / execution (whole cluster)", per_exec(y - x));
                    }
                }
                _ => table.value("postgres figures", "unavailable"),
            }
        }
        for (((name, pid), a), b) in self.pids.iter().zip(&before.cpu).zip(&cpu) {
            let label = format!("cpu s / 1,000 executions: {name}");
            match (a, b) {
                (Some(a), Some(b)) if executions > 0 => {
                    let secs = b.saturating_sub(*a) as f64 / TICKS_PER_SECOND;
                    let cores = if wall > 0.0 { secs / wall } else { 0.0 };
                    table.value(
                        label,
                        format!("{}  ({} cores busy)", num(secs * 1000.0 / executions as f64), num(cores)),
                    );
                }
                _ => table.value(label, format!("n/a (pid {pid})")),
            }
        }
    }
}

/// The CPU time of a process and everything it started, in ticks: its own
/// and its reaped children's (utime, stime, cutime, cstime), plus its live
/// descendants'. So a Postgres postmaster's pid counts every backend, the
/// ones that exited too.
pub(super) fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let own = parse_stat(&stat)?;
    let mut processes = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let is_pid = entry.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        if !is_pid {
            continue;
        }
        // A process may exit between the listing and the read: skip it.
        if let Some(s) = std::fs::read_to_string(entry.path().join("stat")).ok().as_deref().and_then(parse_stat) {
            processes.push((entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()), s));
        }
    }
    let mut total = own.ticks;
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for (child, stat) in &processes {
            if let Some(child) = child.filter(|_| stat.ppid == parent) {
                total += stat.ticks;
                frontier.push(child);
            }
        }
    }
    Some(total)
}

struct Stat {
    ppid: u32,
    /// utime + stime + cutime + cstime.
    ticks: u64,
}

fn parse_stat(stat: &str) -> Option<Stat> {
    // The command name may contain spaces and parentheses; fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is fields[0]; ppid is field 4, utime 14, stime 15, cutime 16, cstime 17.
    let ppid = fields.get(1)?.parse().ok()?;
    let mut ticks = 0u64;
    for i in 11..=14 {
        ticks += fields.get(i)?.parse::<u64>().ok()?;
    }
    Some(Stat { ppid, ticks })
}

/// Resident memory of a process (`VmRSS`) and its high-water mark
/// (`VmHWM`), in KiB, from one read of its status.
pub(super) fn rss_and_peak_kib(pid: u32) -> (Option<u64>, Option<u64>) {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return (None, None) };
    (crate::memory::status_kib(&status, "VmRSS"), crate::memory::status_kib(&status, "VmHWM"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_read_after_the_command_name() {
        let stat = "12357 (a (b) c) R 12355 12355 1539 0 -1 4194304 124 0 0 0 250 31 7 2 20 0 1 0 270763";
        let parsed = parse_stat(stat).expect("parsed");
        assert_eq!((parsed.ppid, parsed.ticks), (12355, 290));
        assert!(parse_stat("garbage").is_none());
    }

    #[tokio::test]
    async fn a_process_tree_counts_its_descendants() {
        // The outer shell only waits; its child spins, then idles a moment.
        let script = "sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 3' & wait";
        let mut outer = std::process::Command::new("sh").args(["-c", script]).spawn().expect("spawn");
        let pid = outer.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let (mut own, mut tree) = (0, 0);
        while tree < 10 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
            own = parse_stat(&stat).expect("own").ticks;
            tree = cpu_ticks(pid).expect("tree");
        }
        let _ = outer.kill();
        let _ = outer.wait();
        assert!(tree >= 10 && own < tree, "the child's CPU counts: tree {tree}, the shell's own {own}");
    }

    #[test]
    fn rss_is_read_from_the_status_file() {
        let status = "Name:\tx\nVmHWM:\t    2048 kB\nVmRSS:\t    1964 kB\nThreads:\t1\n";
        assert_eq!(crate::memory::status_kib(status, "VmRSS"), Some(1964));
        assert_eq!(crate::memory::status_kib(status, "VmHWM"), Some(2048));
        assert_eq!(crate::memory::status_kib("Name:\tx\n", "VmRSS"), None);
    }

    #[test]
    fn this_process_can_be_measured() {
        let me = std::process::id();
        assert!(cpu_ticks(me).is_some());
        assert!(rss_and_peak_kib(me).0.is_some_and(|kib| kib > 0));
    }
}
