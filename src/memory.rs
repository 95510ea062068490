//! Giving freed heap memory back to the system after bursts.
//!
//! glibc's allocator returns memory to the system only from the top of each
//! heap. A burst of connections (10,000 waits opened at once, say) leaves
//! their transient buffers freed between the long-lived allocations of the
//! waits that stay parked, and those holes stay resident: measured on a
//! gateway holding 10,000 websocket watches, 335 MB of RSS of which 150 MB was
//! free heap, and on its coordinator 76 MB of which 40 MB. `malloc_trim(0)`
//! releases the whole pages inside such holes.
//!
//! A thread of its own compares every few seconds the resident size with the
//! bytes the allocator has handed out; when the difference has grown by
//! `SLACK_GROWTH` since the last trim (a burst ended, or many waits were
//! answered), it trims. A steady process never trims. A trim holds each
//! arena's lock in turn (25–100 ms measured on a heap of several hundred MB),
//! so a request allocating in that arena meanwhile waits: only just after a
//! burst. Elsewhere than on glibc this does nothing: other allocators return
//! memory by their own rules.

use std::time::Duration;

/// How often the resident size is compared with the heap's live bytes.
const CHECK_EVERY: Duration = Duration::from_secs(5);

/// Free heap kept resident beyond what the last trim left, before trimming again.
const SLACK_GROWTH: u64 = 8 << 20;

/// Starts the trimming thread (once per process).
pub(crate) fn give_back_after_bursts() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let spawned = std::thread::Builder::new().name("baton-malloc-trim".into()).spawn(glibc::run);
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "could not start the heap trimming thread; freed memory stays resident");
        }
    }
}

/// The resident set size of this process, from `/proc/self/status`.
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some(status_kib(&status, "VmRSS")? * 1024)
}

/// A `… kB` field of a `/proc/<pid>/status` text (`VmRSS`, `VmHWM`).
pub(crate) fn status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.strip_prefix(field).is_some_and(|rest| rest.starts_with(':')))?;
    line[field.len() + 1..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// Decides when to trim: `slack` is resident bytes beyond the allocator's
/// live bytes (plus the process's code, stacks and other mappings, which
/// stay about constant).
#[derive(Debug, Default)]
struct Policy {
    /// The slack the last trim could not release.
    floor: Option<u64>,
}

impl Policy {
    fn should_trim(&self, slack: u64) -> bool {
        slack >= self.floor.unwrap_or(0) + SLACK_GROWTH
    }

    fn trimmed(&mut self, slack_after: u64) {
        self.floor = Some(slack_after);
    }

    /// Live allocations that filled freed holes lower the slack: the next
    /// burst is measured from there.
    fn observe(&mut self, slack: u64) {
        self.floor = self.floor.map(|f| f.min(slack));
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod glibc {
    use super::{CHECK_EVERY, Policy, resident_bytes};
    use std::time::Instant;

    /// glibc's `struct mallinfo2` (glibc 2.33 and later).
    #[repr(C)]
    struct MallInfo2 {
        arena: usize,
        ordblks: usize,
        smblks: usize,
        hblks: usize,
        hblkhd: usize,
        usmblks: usize,
        fsmblks: usize,
        uordblks: usize,
        fordblks: usize,
        keepcost: usize,
    }

    unsafe extern "C" {
        fn mallinfo2() -> MallInfo2;
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }

    /// Bytes the allocator has handed out and not had back: in its heaps
    /// (`uordblks`) and in blocks mapped on their own (`hblkhd`).
    fn live_bytes() -> u64 {
        // SAFETY: mallinfo2 takes no arguments, locks each arena while it
        // sums it and returns a plain struct by value.
        let info = unsafe { mallinfo2() };
        (info.uordblks as u64).saturating_add(info.hblkhd as u64)
    }

    fn slack() -> Option<u64> {
        let resident = resident_bytes()?;
        Some(resident.saturating_sub(live_bytes()))
    }

    pub(super) fn run() {
        let mut policy = Policy::default();
        loop {
            #[allow(clippy::disallowed_methods, reason = "a thread of its own, not a runtime worker")]
            std::thread::sleep(CHECK_EVERY);
            let Some(before) = slack() else { return };
            policy.observe(before);
            if !policy.should_trim(before) {
                continue;
            }
            let started = Instant::now();
            // SAFETY: malloc_trim takes the arenas' locks itself and only
            // releases pages that hold no allocation.
            unsafe { malloc_trim(0) };
            let after = slack().unwrap_or(before);
            policy.trimmed(after);
            tracing::debug!(
                released_mib = before.saturating_sub(after) >> 20,
                kept_slack_mib = after >> 20,
                took_ms = started.elapsed().as_millis() as u64,
                "gave freed heap memory back"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_waits_for_the_slack_to_grow_past_what_the_last_one_left() {
        let mut policy = Policy::default();
        assert!(!policy.should_trim(SLACK_GROWTH - 1), "a small process never trims");
        assert!(policy.should_trim(SLACK_GROWTH));
        // The trim could not release 20 MiB (partly used pages): no trim
        // again until 32 MiB more are free.
        policy.trimmed(20 << 20);
        assert!(!policy.should_trim((20 << 20) + SLACK_GROWTH - 1));
        assert!(policy.should_trim((20 << 20) + SLACK_GROWTH));
        // Live memory filled some holes: the next burst counts from there.
        policy.observe(4 << 20);
        assert!(policy.should_trim((4 << 20) + SLACK_GROWTH));
    }

    #[test]
    fn this_process_has_a_resident_size() {
        if cfg!(target_os = "linux") {
            let rss = resident_bytes().expect("VmRSS in /proc/self/status");
            assert!(rss > 1 << 20, "a test process is larger than 1 MiB: {rss}");
        }
    }
}
