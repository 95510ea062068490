//! Waiting on an execution, `Coordinator`'s side of the wait hub
//! (`crate::hub`): the read before a wait, the long poll parked on the hub,
//! the credential re-check at wake-up, and the unary fallback.

use super::{Bearer, Coordinator, Scope, WAIT_GRACE};
use crate::hub::{Latest, Seen, WatchError};
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::{ErrorCode, WireError};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tokio::time::{Duration, Instant};

impl Coordinator {
    /// The execution as its caller may read it, read through this process's
    /// wait hub, for a caller about to wait on it: the coordinator answers a
    /// burst of such reads together on the hub's stream, where a unary call
    /// each would queue (and be shed) one by one. A unary read while the
    /// hub's stream is down.
    pub(crate) async fn read_before_wait(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
    ) -> Result<pb::ExecutionView, WireError> {
        let Some(member) = self.hub.join(id).await else { return Box::pin(self.execution(bearer, scope, id)).await };
        let authorization = format!("Bearer {}", bearer.0);
        match Box::pin(member.watch(authorization, &scope.org_id, &scope.project_id)).await {
            Ok(seen) => Ok(seen.view.clone()),
            Err(WatchError::Refused(e)) => Err(e),
            Err(WatchError::Down) => Box::pin(self.execution(bearer, scope, id)).await,
        }
    }

    /// Long-polls until the status differs from `known_status` (unspecified:
    /// from the status when the call arrives) or `wait` passes.
    pub(crate) fn wait<'a>(
        &'a self,
        bearer: &'a Bearer,
        scope: &'a Scope,
        id: &'a str,
        wait: Duration,
        known_status: pb::ExecutionStatus,
    ) -> impl Future<Output = Result<pb::ExecutionView, WireError>> + 'a {
        // Not an `async fn` of its own: a parked wait's future is paid per waiter.
        self.wait_until(bearer, scope, id, wait, Until::StatusChange(known_status))
    }

    /// Long-polls until `until` holds (or the execution is terminal, after
    /// which nothing changes) or `wait` passes.
    ///
    /// Parked on this process's wait hub: the waiter's own authenticated read
    /// (answered at once when the condition already holds), then a receiver on
    /// the execution's entry, woken by the coordinator's push; the caller's
    /// credential is checked again before a change is answered (already done
    /// when the push was read with this very credential; otherwise `WhoAmI`,
    /// shared by the waiters one change woke), and a time-out answers a fresh
    /// read. While the hub's stream is down the wait is unary calls, as
    /// before the hub, so nothing hangs on it.
    pub(crate) async fn wait_until(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
        wait: Duration,
        mut until: Until,
    ) -> Result<pb::ExecutionView, WireError> {
        let deadline = Instant::now() + wait;
        loop {
            match self.park(bearer, scope, id, deadline, &mut until).await {
                Parked::Answered(answer) => return *answer,
                Parked::Again if Instant::now() < deadline => continue,
                // Rare paths, boxed: their call futures would otherwise sit
                // inside every parked wait's future.
                Parked::Again => return Box::pin(self.execution(bearer, scope, id)).await,
                Parked::Down => return Box::pin(self.wait_unary_until(bearer, scope, id, deadline, until)).await,
            }
        }
    }

    /// One stay on the hub: joined, watched with the caller's credential,
    /// parked until a later view meets `until` (a status change is resolved
    /// against the first read when the caller named no status) or `deadline`.
    async fn park(&self, bearer: &Bearer, scope: &Scope, id: &str, deadline: Instant, until: &mut Until) -> Parked {
        let Some(mut member) = self.hub.join(id).await else { return Parked::Down };
        let authorization = format!("Bearer {}", bearer.0);
        let read = match Box::pin(member.watch(authorization, &scope.org_id, &scope.project_id)).await {
            Ok(seen) => seen,
            Err(WatchError::Refused(e)) => return Parked::Answered(Box::new(Err(e))),
            Err(WatchError::Down) => return Parked::Down,
        };
        let until: &Until = until.resolve(&read.view);
        if until.met(&read.view) || Instant::now() >= deadline {
            return Parked::Answered(Box::new(Ok(read.view.clone())));
        }
        // Parked from here on: only the read's version is kept, not its view
        // (every waiter's own read is a view of its own, half a KiB each).
        let read_version = read.version;
        drop(read);
        loop {
            let news = match &*member.latest.borrow_and_update() {
                Latest::Lost => return Parked::Again,
                Latest::Seen(seen) if seen.version > read_version && until.met(&seen.view) => Some(Arc::clone(seen)),
                _ => None,
            };
            if let Some(seen) = news {
                return Parked::Answered(Box::new(Box::pin(self.answer_change(bearer, scope, id, &seen)).await));
            }
            tokio::select! {
                changed = member.latest.changed() => if changed.is_err() { return Parked::Again },
                () = tokio::time::sleep_until(deadline) => {
                    // A time-out answers the row as it is now (progress included).
                    return Parked::Answered(Box::new(Box::pin(self.execution(bearer, scope, id)).await));
                }
            }
        }
    }

    /// `seen`, once the caller's credential is known to be good still: 401
    /// when it was revoked while parked; a fresh read of its own when the
    /// check could not be made.
    async fn answer_change(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
        seen: &Seen,
    ) -> Result<pb::ExecutionView, WireError> {
        // Read with this very credential after the change: authenticated already.
        if !seen.reader.is_empty() && seen.reader == Sha256::digest(format!("Bearer {}", bearer.0)).as_slice() {
            return Ok(seen.view.clone());
        }
        let checked =
            self.hub.checks().verify(&bearer.0, seen.at, || async { self.who_am_i(bearer, None).await.map(drop) });
        match checked.await {
            Ok(()) => Ok(seen.view.clone()),
            Err(e) if e.code == ErrorCode::Unauthenticated => Err(e),
            Err(_) => self.execution(bearer, scope, id).await,
        }
    }

    /// The wait as unary `WaitExecution` calls (each answers a status change,
    /// or ends within the coordinator's own bound) until `until` holds or
    /// `deadline` passes.
    async fn wait_unary_until(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
        deadline: Instant,
        mut until: Until,
    ) -> Result<pb::ExecutionView, WireError> {
        let mut known = match until {
            Until::StatusChange(status) => status,
            _ => pb::ExecutionStatus::Unspecified,
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let view = self.wait_unary(bearer, scope, id, left, known).await?;
            if until.resolve(&view).met(&view) || Instant::now() >= deadline {
                return Ok(view);
            }
            known = view.status();
        }
    }

    /// One unary `WaitExecution` call, held for its whole length.
    async fn wait_unary(
        &self,
        bearer: &Bearer,
        scope: &Scope,
        id: &str,
        wait: Duration,
        known_status: pb::ExecutionStatus,
    ) -> Result<pb::ExecutionView, WireError> {
        let request = pb::WaitExecutionRequest {
            org_id: scope.org_id.clone(),
            project_id: scope.project_id.clone(),
            execution_id: id.to_owned(),
            wait_ms: i64::try_from(wait.as_millis()).unwrap_or(i64::MAX),
            known_status: known_status as i32,
        };
        let timeout = wait.saturating_add(WAIT_GRACE);
        self.call(bearer, request, Some(timeout), |mut c, r| async move { c.wait_execution(r).await }).await
    }
}

/// What a wait waits for. Every condition also holds for a terminal
/// execution, which will not change again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Until {
    /// The status differs from this one (unspecified: from the first read's).
    StatusChange(pb::ExecutionStatus),
    /// Any change after this cursor (`ExecutionView.cursor`).
    ChangedAfter(i64),
    /// The status is one of these.
    Reaches(StatusSet),
}

impl Until {
    /// Names the status a change is measured from, once a view is read.
    fn resolve(&mut self, first: &pb::ExecutionView) -> &Until {
        if *self == Until::StatusChange(pb::ExecutionStatus::Unspecified) {
            *self = Until::StatusChange(first.status());
        }
        self
    }

    pub(crate) fn met(&self, view: &pb::ExecutionView) -> bool {
        view.status().is_terminal()
            || match *self {
                Until::StatusChange(status) => view.status() != status,
                Until::ChangedAfter(cursor) => view.cursor > cursor,
                Until::Reaches(set) => set.contains(view.status()),
            }
    }
}

/// A set of execution statuses, a bit each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StatusSet(u32);

impl StatusSet {
    pub(crate) fn with(self, status: pb::ExecutionStatus) -> StatusSet {
        StatusSet(self.0 | 1 << (status as u32 & 31))
    }

    pub(crate) fn contains(self, status: pb::ExecutionStatus) -> bool {
        self.0 & 1 << (status as u32 & 31) != 0
    }
}

/// How one stay on the wait hub ended.
enum Parked {
    /// Boxed: the view is large and this is built once per wait.
    Answered(Box<Result<pb::ExecutionView, WireError>>),
    /// The entry was lost (stream broke, pushes lapsed): join and watch again.
    Again,
    /// No stream: wait with a unary call.
    Down,
}

#[cfg(test)]
mod sizes {
    use super::*;

    /// A parked wait's future lives as long as the wait: its size is paid
    /// per waiter, so the rare paths (the credential re-check, the read at a
    /// time-out, the unary fallback) are boxed out of it.
    #[tokio::test]
    async fn a_parked_wait_is_a_small_future() {
        let coordinator = Coordinator::connect_lazy("http://127.0.0.1:9", None).expect("url");
        let (bearer, scope) =
            (Bearer("t".into()), Scope { org_id: "o".into(), project_id: "p".into(), gateway_id: None });
        let wait = coordinator.wait(&bearer, &scope, "te_x", Duration::from_secs(1), pb::ExecutionStatus::Unspecified);
        let size = std::mem::size_of_val(&wait);
        println!("Coordinator::wait future: {size} bytes");
        assert!(size <= 2048, "a parked wait's future is {size} bytes");
    }
}
