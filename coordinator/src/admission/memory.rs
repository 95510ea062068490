//! In-process admission for a single process (`baton dev`): the documents say
//! local limits apply per process rather than across a cluster.

use super::{
    Admission, Admitted, Bounds, Error, Rejection, RetainedBytes, Scope, Ticket, retention_bucket,
    retry_after_from_hold,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

/// One project's retained payload bytes, per retention hour.
#[derive(Default)]
struct Retained {
    total: u64,
    by_bucket: BTreeMap<i64, u64>,
}

impl Retained {
    /// Forgets the hours that ended by `now_ms`.
    fn expire(&mut self, now_ms: i64) {
        let kept = self.by_bucket.split_off(&(now_ms + 1));
        let gone: u64 = self.by_bucket.values().sum();
        self.total = self.total.saturating_sub(gone);
        self.by_bucket = kept;
    }

    /// Adds `delta` bytes (negative: gives them back) to the hour of `retained_until_ms`.
    fn add(&mut self, retained_until_ms: i64, delta: i64) {
        let held = self.by_bucket.entry(retention_bucket(retained_until_ms)).or_default();
        *held = held.saturating_add_signed(delta);
        self.total = self.total.saturating_add_signed(delta);
    }
}

#[derive(Default)]
struct Held {
    /// execution id -> (ticket, admitted at, started)
    live: HashMap<String, (Ticket, i64, bool)>,
    principal: HashMap<(String, String), u64>,
    project: HashMap<String, u64>,
    org: HashMap<String, u64>,
    backlog: HashMap<String, u64>,
    bytes: HashMap<String, Retained>,
    /// Exponentially weighted average hold time per scope kind.
    avg_hold_ms: HashMap<Scope, f64>,
    /// Live tickets by deadline: one whose execution's deadline passed is let
    /// go, so a place kept for a create whose commit answer was lost (and
    /// that never existed) is not kept for good.
    by_deadline: BTreeSet<(i64, String)>,
}

impl Held {
    fn hold(&mut self, t: &Ticket, now_ms: i64, started: bool) {
        self.by_deadline.insert((t.expires_at_ms, t.execution_id.clone()));
        self.live.insert(t.execution_id.clone(), (t.clone(), now_ms, started));
    }

    /// Lets go of every ticket whose deadline is past, as a release would.
    fn expire(&mut self, now_ms: i64) {
        while let Some((deadline, id)) = self.by_deadline.first().cloned() {
            if deadline > now_ms {
                break;
            }
            self.leave(&id, now_ms, None);
        }
    }

    /// Leaves every concurrency scope; the bytes held since admission become
    /// `keep` (None: the bytes it was admitted with).
    fn leave(&mut self, execution_id: &str, now_ms: i64, keep: Option<i64>) {
        let Some((ticket, at, started)) = self.live.remove(execution_id) else { return };
        self.by_deadline.remove(&(ticket.expires_at_ms, ticket.execution_id.clone()));
        if let Some(v) = self.principal.get_mut(&(ticket.project_id.clone(), ticket.user_id.clone())) {
            *v = v.saturating_sub(1);
        }
        self.principal.retain(|_, v| *v > 0);
        dec(&mut self.project, &ticket.project_id, 1);
        dec(&mut self.org, &ticket.org_id, 1);
        let payload = signed(ticket.payload_bytes);
        self.bytes
            .entry(ticket.project_id.clone())
            .or_default()
            .add(ticket.retained_until_ms, keep.unwrap_or(payload) - payload);
        if !started {
            dec(&mut self.backlog, &ticket.project_id, 1);
        }
        let held = (now_ms - at) as f64;
        observe(self, &[Scope::Principal, Scope::Project, Scope::Organization, Scope::RetainedPayloadBytes], held);
    }
}

pub struct MemoryAdmission {
    bounds: Bounds,
    held: Mutex<Held>,
}

impl MemoryAdmission {
    pub fn new(bounds: Bounds) -> Self {
        MemoryAdmission { bounds, held: Mutex::new(Held::default()) }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Held>, Error> {
        self.held.lock().map_err(|_| Error::Unavailable("admission state poisoned".into()))
    }
}

fn dec(map: &mut HashMap<String, u64>, key: &str, by: u64) {
    if let Some(v) = map.get_mut(key) {
        *v = v.saturating_sub(by);
        if *v == 0 {
            map.remove(key);
        }
    }
}

fn observe(h: &mut Held, scopes: &[Scope], held_ms: f64) {
    for s in scopes {
        let avg = h.avg_hold_ms.entry(*s).or_insert(held_ms);
        *avg = *avg * 0.8 + held_ms * 0.2;
    }
}

#[tonic::async_trait]
impl Admission for MemoryAdmission {
    async fn admit(&self, t: &Ticket, now_ms: i64) -> Result<Result<Admitted, Rejection>, Error> {
        let mut h = self.lock()?;
        if h.live.contains_key(&t.execution_id) {
            return Ok(Ok(Admitted { fence: None }));
        }
        h.expire(now_ms);
        let principal_key = (t.project_id.clone(), t.user_id.clone());
        let retained = h.bytes.entry(t.project_id.clone()).or_default();
        retained.expire(now_ms);
        let retained = retained.total;
        let b = &self.bounds;
        let checks = [
            (Scope::Principal, h.principal.get(&principal_key).copied().unwrap_or(0) + 1, b.principal_concurrency),
            (Scope::Project, h.project.get(&t.project_id).copied().unwrap_or(0) + 1, b.project_concurrency),
            (Scope::Organization, h.org.get(&t.org_id).copied().unwrap_or(0) + 1, b.organization_concurrency),
            (Scope::Backlog, h.backlog.get(&t.project_id).copied().unwrap_or(0) + 1, b.backlog),
            (Scope::RetainedPayloadBytes, retained.saturating_add(t.payload_bytes), b.retained_payload_bytes),
        ];
        if let Some((scope, _, _)) = checks.iter().find(|(_, wanted, bound)| wanted > bound) {
            let retry_after_ms = retry_after_from_hold(h.avg_hold_ms.get(scope).copied());
            return Ok(Err(Rejection { scope: *scope, retry_after_ms }));
        }
        *h.principal.entry(principal_key).or_default() += 1;
        *h.project.entry(t.project_id.clone()).or_default() += 1;
        *h.org.entry(t.org_id.clone()).or_default() += 1;
        *h.backlog.entry(t.project_id.clone()).or_default() += 1;
        h.bytes.entry(t.project_id.clone()).or_default().add(t.retained_until_ms, signed(t.payload_bytes));
        h.hold(t, now_ms, false);
        Ok(Ok(Admitted { fence: None }))
    }

    async fn started(&self, t: &Ticket, now_ms: i64) -> Result<(), Error> {
        let mut h = self.lock()?;
        let Some((ticket, at, started)) = h.live.get_mut(&t.execution_id) else { return Ok(()) };
        if *started {
            return Ok(());
        }
        *started = true;
        let (project, held) = (ticket.project_id.clone(), (now_ms - *at) as f64);
        dec(&mut h.backlog, &project, 1);
        observe(&mut h, &[Scope::Backlog], held);
        Ok(())
    }

    async fn release(&self, t: &Ticket, now_ms: i64) -> Result<(), Error> {
        self.lock()?.leave(&t.execution_id, now_ms, Some(signed(t.payload_bytes)));
        Ok(())
    }

    async fn withdraw(&self, t: &Ticket, now_ms: i64) -> Result<(), Error> {
        self.lock()?.leave(&t.execution_id, now_ms, Some(0));
        Ok(())
    }

    async fn restore(&self, open: &[(Ticket, bool)], retained: &[RetainedBytes], now_ms: i64) -> Result<(), Error> {
        let mut h = self.lock()?;
        let averages = std::mem::take(&mut h.avg_hold_ms);
        *h = Held { avg_hold_ms: averages, ..Held::default() };
        for r in retained {
            let bytes = h.bytes.entry(r.project_id.clone()).or_default();
            *bytes.by_bucket.entry(r.bucket).or_default() += r.bytes;
            bytes.total = bytes.total.saturating_add(r.bytes);
        }
        for (t, started) in open {
            *h.principal.entry((t.project_id.clone(), t.user_id.clone())).or_default() += 1;
            *h.project.entry(t.project_id.clone()).or_default() += 1;
            *h.org.entry(t.org_id.clone()).or_default() += 1;
            if !started {
                *h.backlog.entry(t.project_id.clone()).or_default() += 1;
            }
            // Its bytes are already in `retained`, which counts every retained record.
            h.hold(t, now_ms, *started);
        }
        Ok(())
    }
}

fn signed(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}
