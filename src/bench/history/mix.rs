//! What the seeded history looks like: a realistic mix of tools (popular and
//! rare, in toolkits), users (a few busy agents and a long tail), surfaces,
//! outcomes with their failure reasons and retries, scheduled runs, payload
//! sizes, and creation times spread over the retention window. Each run is a
//! script of the events a real one goes through (claimed, settled, …), which
//! the store plays through the state machine. Deterministic for a given seed.

use baton_coordinator::domain::policy::retry_backoff_ms;
use baton_coordinator::domain::{Event, ExecutionId, Millis, Outcome};
use baton_coordinator::store::{EventData, NewExecution, SeedRun, Step};

pub(crate) const ORG: &str = "org_bench_history";
pub(crate) const PROJECT: &str = "prj_bench_history";
pub(crate) const GATEWAY: &str = "gw_bench_history";

const MINUTE: Millis = 60_000;
const HOUR: Millis = 60 * MINUTE;
const DAY: Millis = 24 * HOUR;
/// The project's retention window (the default, seven days).
pub(crate) const RETENTION: Millis = 7 * DAY;
const LEASE: Millis = 30_000;
const USERS: u64 = 20_000;

/// Toolkits and their tools; earlier ones are called more often.
pub(crate) const TOOLKITS: [(&str, &[&str]); 8] = [
    ("Github", &["CreateIssue", "ListPullRequests", "GetFile", "CommentOnIssue", "SearchCode", "MergePullRequest"]),
    ("Slack", &["SendMessage", "ListChannels", "GetThread", "AddReaction"]),
    ("Gmail", &["SendEmail", "ListEmails", "GetEmail", "WriteDraft", "Search"]),
    ("Search", &["Web", "News", "Images"]),
    ("Notion", &["CreatePage", "QueryDatabase", "UpdateBlock", "Search"]),
    ("Jira", &["CreateTicket", "TransitionTicket", "ListTickets", "AddComment"]),
    ("Calendar", &["ListEvents", "CreateEvent", "FindFreeSlots"]),
    ("Demo", &["Echo", "Sleep", "Fail"]),
];

const TOOL_ERRORS: [&str; 5] = [
    "upstream API returned 502",
    "rate limited by upstream",
    "resource not found",
    "permission denied by upstream",
    "invalid argument: query too long",
];

/// splitmix64: small, fast, good enough to shape a data set.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Roughly Zipf over `0..n`: index k with weight about 1/(k+1).
    pub(crate) fn zipf(&mut self, n: u64) -> u64 {
        // Inverse of the continuous 1/x law over [1, n+1).
        let x = ((n as f64 + 1.0).ln() * self.unit()).exp();
        (x as u64).saturating_sub(1).min(n - 1)
    }

    /// Log-uniform in [lo, hi) milliseconds: many short, a few long.
    fn span(&mut self, lo: Millis, hi: Millis) -> Millis {
        let (l, h) = ((lo.max(1)) as f64, hi as f64);
        (l * (h / l).powf(self.unit())) as Millis
    }

    fn bytes(&mut self, lo: usize, hi: usize) -> Vec<u8> {
        let n = lo + self.below((hi - lo) as u64) as usize;
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// Every (toolkit, tool) in popularity order.
pub(crate) fn tools() -> Vec<(&'static str, &'static str)> {
    // Interleave toolkits so popularity is spread, not one toolkit first.
    let mut out = Vec::new();
    let deepest = TOOLKITS.iter().map(|(_, t)| t.len()).max().unwrap_or(0);
    for i in 0..deepest {
        for (kit, names) in TOOLKITS {
            if let Some(name) = names.get(i) {
                out.push((kit, *name));
            }
        }
    }
    out
}

pub(crate) fn user(k: u64) -> String {
    format!("user_{k:05}")
}

/// How one run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Completed { retried: bool },
    ToolError { attempts: u32 },
    DeadlineExceeded,
    OwnerLost,
    Unsupported,
    Refused,
    CancelledPending,
    CancelledWorking,
}

fn fate(rng: &mut Rng) -> Fate {
    match rng.below(1000) {
        0..=779 => Fate::Completed { retried: false },
        780..=849 => Fate::Completed { retried: true },
        850..=884 => Fate::ToolError { attempts: 1 },
        885..=904 => Fate::ToolError { attempts: 3 },
        905..=919 => Fate::DeadlineExceeded,
        920..=929 => Fate::OwnerLost,
        930..=932 => Fate::Unsupported,
        933..=939 => Fate::Refused,
        940..=969 => Fate::CancelledPending,
        _ => Fate::CancelledWorking,
    }
}

/// `count` runs, every `stride`-th from `first`, of a history of `total`
/// runs created in the retention window before `now`, oldest first. Runs too
/// young to have finished are left pending or working, as they would be.
pub(crate) fn runs(seed: u64, first: u64, count: u64, stride: u64, total: u64, now: Millis) -> Vec<SeedRun> {
    let tools = tools();
    let mut out = Vec::with_capacity(count as usize);
    for i in (0..count).map(|k| first + k * stride) {
        let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(i));
        // Spread evenly over the window, with jitter so times are not a grid.
        let window = RETENTION - HOUR;
        let step = window / total.max(1) as i64;
        let created = now - window + step * i as i64 + rng.below(step.max(1) as u64) as i64;
        out.push(one(&mut rng, &tools, created, now));
    }
    out
}

fn one(rng: &mut Rng, tools: &[(&'static str, &'static str)], created: Millis, now: Millis) -> SeedRun {
    let (kit, name) = tools[rng.zipf(tools.len() as u64) as usize];
    let user_k = rng.zipf(USERS);
    let rest = rng.below(10) < 4;
    let fate = fate(rng);
    // As the API demands, a scheduled run is due before its deadline.
    let scheduled = fate != Fate::DeadlineExceeded && rng.below(100) < 3;
    let run_at = scheduled.then(|| created + rng.span(MINUTE, 6 * HOUR));
    let ttl = match (fate, scheduled) {
        (Fate::DeadlineExceeded, _) => 10 * MINUTE,
        (_, true) => DAY,
        _ => HOUR,
    };
    let input_ct = rng.bytes(80, 600);
    let new = NewExecution {
        id: ExecutionId::generate(),
        org_id: ORG.into(),
        project_id: PROJECT.into(),
        gateway_id: GATEWAY.into(),
        tool_name: format!("{kit}.{name}"),
        toolkit_name: kit.into(),
        toolkit_version: format!("1.{}.0", rng.below(4)),
        user_id: user(user_k),
        started_by: if rest { format!("cred_key_{}", user_k % 7) } else { format!("cred_user_{user_k}") },
        surface: if rest { "rest" } else { "mcp" }.into(),
        created_at: created,
        run_at,
        execution_deadline: created + ttl,
        retention_expires_at: created + ttl + RETENTION,
        poll_interval_ms: 1000,
        max_attempts: 3,
        idempotency_key: (rest && rng.below(10) < 3).then(|| format!("key-{:016x}", rng.next())),
        request_fingerprint: Some(format!(
            "{:016x}{:016x}{:016x}{:016x}",
            rng.next(),
            rng.next(),
            rng.next(),
            rng.next()
        )),
        payload_bytes: input_ct.len() as i64,
        input_ct,
        traceparent: (rng.below(2) == 0)
            .then(|| format!("00-{:016x}{:016x}-{:016x}-01", rng.next(), rng.next(), rng.next())),
        admission_fence: None,
    };
    let events = script(rng, fate, new.run_at.unwrap_or(created), new.execution_deadline, now);
    SeedRun { new, events }
}

/// The events of a run that became due at `due`, cut off at `now`.
fn script(rng: &mut Rng, fate: Fate, due: Millis, deadline: Millis, now: Millis) -> Vec<Step> {
    let worker = format!("wk_{:02}", rng.below(12));
    let mut at = due + rng.span(5, 400);
    let mut events = Vec::new();
    let claim = |at: Millis, events: &mut Vec<Step>| {
        events.push((at, Event::Claim { worker_id: worker.clone(), lease_until: at + LEASE }, EventData::default()))
    };
    let settle = |at: Millis, attempt: u32, outcome: Outcome, data: EventData| {
        (at, Event::Settle { worker_id: worker.clone(), attempt, outcome }, data)
    };
    let error = |rng: &mut Rng| EventData {
        error_message: Some(TOOL_ERRORS[rng.below(TOOL_ERRORS.len() as u64) as usize].into()),
        error_detail_ct: Some(rng.bytes(40, 300)),
        payload_bytes: 200,
        ..Default::default()
    };
    match fate {
        Fate::Refused => events.push((at, Event::Refuse, EventData::default())),
        Fate::CancelledPending => events.push((at, Event::RequestCancel, EventData::default())),
        Fate::DeadlineExceeded => {
            claim(at, &mut events);
            events.push((deadline + rng.span(5, 1_000), Event::DeadlinePassed, EventData::default()));
        }
        Fate::OwnerLost => {
            claim(at, &mut events);
            let lapsed = at + LEASE + rng.span(5, 1_000);
            events.push((lapsed, Event::LeaseLapsed { detect_at: lapsed + LEASE }, EventData::default()));
            events.push((lapsed + LEASE + rng.span(5, 1_000), Event::OwnerLossDue, EventData::default()));
        }
        Fate::Unsupported => {
            claim(at, &mut events);
            events.push(settle(at + rng.span(50, 5_000), 1, Outcome::UnsupportedInteraction, EventData::default()));
        }
        Fate::CancelledWorking => {
            claim(at, &mut events);
            at += rng.span(100, 20_000);
            events.push((at, Event::RequestCancel, EventData::default()));
            events.push(settle(at + rng.span(5, 500), 1, Outcome::Cancelled, EventData::default()));
        }
        Fate::ToolError { attempts } => {
            for attempt in 1..=attempts {
                claim(at, &mut events);
                at += rng.span(30, 10_000);
                let retryable = attempt < attempts;
                events.push(settle(at, attempt, Outcome::ToolError { retryable }, error(rng)));
                // The retry backoff, then a claim.
                at += retry_backoff_ms(attempt) + rng.span(5, 400);
            }
        }
        Fate::Completed { retried } => {
            let mut attempt = 1;
            if retried {
                claim(at, &mut events);
                at += rng.span(30, 10_000);
                events.push(settle(at, 1, Outcome::ToolError { retryable: true }, error(rng)));
                at += retry_backoff_ms(1) + rng.span(5, 400);
                attempt = 2;
            }
            claim(at, &mut events);
            let output = rng.bytes(100, 2_000);
            let data = EventData { payload_bytes: output.len() as i64, output_ct: Some(output), ..Default::default() };
            events.push(settle(at + rng.span(30, 30_000), attempt, Outcome::Success, data));
        }
    }
    // What has not happened yet by `now` stays in the future: a young run is
    // still pending or working.
    let happened = events.iter().position(|(t, _, _)| *t > now).unwrap_or(events.len());
    events.truncate(happened);
    events
}
