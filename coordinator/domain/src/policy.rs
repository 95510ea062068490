//! Time policies: deadlines, retention and retry backoff. Pure arithmetic over
//! milliseconds so the rules are testable without a clock.

use super::Millis;

pub(crate) const DEFAULT_MAX_TTL_MS: i64 = 24 * 60 * 60 * 1000;
pub(crate) const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// The limits that bound one execution's lifetime.
#[derive(Clone, Copy, Debug)]
pub struct Lifetime {
    /// The configured maximum lifetime of any execution.
    pub max_ttl_ms: i64,
    /// How long a record stays readable after its deadline.
    pub retention_ms: i64,
}

impl Default for Lifetime {
    fn default() -> Self {
        Lifetime { max_ttl_ms: DEFAULT_MAX_TTL_MS, retention_ms: DEFAULT_RETENTION_MS }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    pub execution_deadline: Millis,
    pub retention_expires_at: Millis,
}

impl Lifetime {
    /// deadline = created + min(requested ttl, tool limit, configured maximum);
    /// retention = deadline + retention window. Non-positive limits mean "none".
    pub fn deadlines(
        &self,
        created_at: Millis,
        requested_ttl_ms: Option<i64>,
        tool_max_ttl_ms: Option<i64>,
    ) -> Deadlines {
        let ttl = [requested_ttl_ms, tool_max_ttl_ms]
            .into_iter()
            .flatten()
            .filter(|t| *t > 0)
            .fold(self.max_ttl_ms, i64::min);
        let execution_deadline = created_at.saturating_add(ttl);
        Deadlines { execution_deadline, retention_expires_at: execution_deadline.saturating_add(self.retention_ms) }
    }
}

/// Backoff before retry number `attempts_so_far` (1-based): 200 ms doubling, at most 30 s.
pub fn retry_backoff_ms(attempts_so_far: u32) -> i64 {
    let exp = attempts_so_far.saturating_sub(1).min(16);
    (200i64 << exp).min(30_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_takes_the_smallest_limit() {
        let l = Lifetime { max_ttl_ms: 1_000, retention_ms: 10 };
        let cases = [
            (None, None, 1_000),
            (Some(500), None, 500),
            (Some(5_000), None, 1_000),
            (Some(500), Some(200), 200),
            (None, Some(0), 1_000),
            (Some(-3), None, 1_000),
        ];
        for (requested, tool, ttl) in cases {
            let d = l.deadlines(100, requested, tool);
            assert_eq!(d.execution_deadline, 100 + ttl, "{requested:?} {tool:?}");
            assert_eq!(d.retention_expires_at, 100 + ttl + 10);
        }
    }

    #[test]
    fn defaults_are_a_day_and_a_week() {
        let d = Lifetime::default().deadlines(0, None, None);
        assert_eq!(d.execution_deadline, 86_400_000);
        assert_eq!(d.retention_expires_at, 86_400_000 + 7 * 86_400_000);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(retry_backoff_ms(1), 200);
        assert_eq!(retry_backoff_ms(2), 400);
        assert_eq!(retry_backoff_ms(40), 30_000);
    }
}
