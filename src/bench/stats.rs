//! What the benchmark records: latency samples with nearest-rank percentiles,
//! the time window that throughput is measured over, and failures counted by
//! kind. Pure bookkeeping; no I/O and no clock reads besides the instants it is
//! handed.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Recorded samples (milliseconds); percentiles come from the samples
/// themselves, not from buckets.
#[derive(Clone, Debug, Default)]
pub(crate) struct Samples {
    values: Vec<f64>,
}

/// p50, p90, p99 and max of a non-empty sample set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Summary {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub count: usize,
}

impl Samples {
    pub(crate) fn push(&mut self, ms: f64) {
        if ms.is_finite() {
            self.values.push(ms);
        }
    }

    pub(crate) fn push_duration(&mut self, d: Duration) {
        self.push(d.as_secs_f64() * 1000.0);
    }

    pub(crate) fn summary(&self) -> Option<Summary> {
        let sorted = self.sorted();
        Some(Summary {
            p50: nearest_rank(&sorted, 50.0)?,
            p90: nearest_rank(&sorted, 90.0)?,
            p99: nearest_rank(&sorted, 99.0)?,
            max: *sorted.last()?,
            count: sorted.len(),
        })
    }

    fn sorted(&self) -> Vec<f64> {
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
        v
    }
}

/// Nearest-rank percentile of sorted samples: the smallest sample with at
/// least `p` percent of the samples at or below it.
fn nearest_rank(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// The span from the first start to the last finish of successful work.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Window {
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Window {
    pub(super) fn record(&mut self, start: Instant, end: Instant) {
        self.first = Some(self.first.map_or(start, |f| f.min(start)));
        self.last = Some(self.last.map_or(end, |l| l.max(end)));
    }

    pub(super) fn span(&self) -> Option<Duration> {
        Some(self.last?.saturating_duration_since(self.first?))
    }

    /// `count` per second over the window.
    pub(super) fn rate(&self, count: usize) -> Option<f64> {
        let secs = self.span()?.as_secs_f64();
        (secs > 0.0).then(|| count as f64 / secs)
    }
}

/// Why one unit of work did not succeed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// An HTTP status other than the expected one, with the error code if the
    /// body carried one.
    Http { status: u16, code: Option<String> },
    /// A JSON-RPC error object.
    Rpc { status: u16, code: i64 },
    /// The request never got an answer.
    Transport(&'static str),
    /// An answer that does not have the documented shape.
    Shape(&'static str),
    /// The execution ended otherwise than completed.
    Ended(String),
    /// The benchmark's own time or count bound ran out.
    GaveUp,
}

impl Failure {
    pub(crate) fn transport(e: &reqwest::Error) -> Failure {
        let kind = if e.is_timeout() {
            "timeout"
        } else if e.is_connect() {
            "connect"
        } else if e.is_body() || e.is_decode() {
            "body"
        } else {
            "other"
        };
        Failure::Transport(kind)
    }

    pub(crate) fn kind(&self) -> String {
        match self {
            Failure::Http { status, code: Some(c) } => format!("http {status} {c}"),
            Failure::Http { status, code: None } => format!("http {status}"),
            Failure::Rpc { status, code } => format!("http {status} json-rpc {code}"),
            Failure::Transport(k) => format!("transport {k}"),
            Failure::Shape(what) => format!("unexpected answer: {what}"),
            Failure::Ended(status) => format!("execution {status}"),
            Failure::GaveUp => "gave up (time or poll bound)".to_owned(),
        }
    }
}

/// Failures counted by kind.
#[derive(Clone, Debug, Default)]
pub(crate) struct Errors(BTreeMap<String, u64>);

impl Errors {
    pub(crate) fn add(&mut self, f: &Failure) {
        *self.0.entry(f.kind()).or_default() += 1;
    }

    pub(crate) fn total(&self) -> u64 {
        self.0.values().sum()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(k, n)| (k.as_str(), *n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(values: impl IntoIterator<Item = f64>) -> Samples {
        let mut s = Samples::default();
        for v in values {
            s.push(v);
        }
        s
    }

    #[test]
    fn empty_samples_have_no_percentiles() {
        assert_eq!(Samples::default().summary(), None);
        assert_eq!(nearest_rank(&[], 50.0), None);
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let s = samples([7.0]);
        let sum = s.summary().expect("one sample");
        assert_eq!((sum.p50, sum.p90, sum.p99, sum.max, sum.count), (7.0, 7.0, 7.0, 7.0, 1));
    }

    #[test]
    fn nearest_rank_on_one_to_a_hundred_in_any_order() {
        let s = samples((1..=100).rev().map(f64::from));
        let sum = s.summary().expect("samples");
        assert_eq!((sum.p50, sum.p90, sum.p99, sum.max), (50.0, 90.0, 99.0, 100.0));
        let sorted = s.sorted();
        assert_eq!(nearest_rank(&sorted, 0.0), Some(1.0));
        assert_eq!(nearest_rank(&sorted, 100.0), Some(100.0));
        assert_eq!(nearest_rank(&sorted, 99.5), Some(100.0));
    }

    #[test]
    fn small_sets_round_up_and_non_finite_values_are_dropped() {
        let s = samples([3.0, 1.0, 2.0, f64::NAN, f64::INFINITY]);
        let sum = s.summary().expect("samples");
        assert_eq!((sum.count, sum.p50, sum.p90, sum.max), (3, 2.0, 3.0, 3.0));
    }

    #[test]
    fn errors_are_counted_by_kind() {
        let mut e = Errors::default();
        e.add(&Failure::Http { status: 429, code: Some("capacity_exceeded".into()) });
        e.add(&Failure::Http { status: 429, code: Some("capacity_exceeded".into()) });
        e.add(&Failure::Transport("timeout"));
        assert_eq!(e.total(), 3);
        let kinds: Vec<_> = e.iter().collect();
        assert_eq!(kinds, vec![("http 429 capacity_exceeded", 2), ("transport timeout", 1)]);
    }

    #[test]
    fn window_rate_spans_first_start_to_last_end() {
        let t0 = Instant::now();
        let mut w = Window::default();
        assert_eq!(w.rate(10), None);
        w.record(t0 + Duration::from_millis(500), t0 + Duration::from_millis(1500));
        w.record(t0, t0 + Duration::from_millis(1000));
        assert_eq!(w.span(), Some(Duration::from_millis(1500)));
        let rate = w.rate(3).expect("rate");
        assert!((rate - 2.0).abs() < 1e-9, "{rate}");
    }
}
