//! The foreground call: start an execution and wait for it to settle in one
//! request, so an MCP `tools/call` costs the gateway one coordinator call
//! instead of a start, waits and a result read. The watch is placed on the
//! execution's id before the execution exists, so no change between the
//! create and the wait can be missed, and the wait's reads authenticate the
//! caller again, as every long poll does. Its answer may instead be the
//! settlement this replica just committed, unread, while no credential has
//! been revoked since the call arrived (`revocations`, decision 0053).

use super::lifecycle::StartRequest;
use super::{Engine, Result, Scope};
use crate::crypto::Field;
use crate::domain::{ExecutionId, Status};
use crate::notify::Watch;
use crate::store::{Created, ExecutionRecord};
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::futures::OwnedNotified;
use tokio::time::Instant;

/// Every wait re-reads this often, the safety net for a lost signal (long
/// polls here, and each execution a watch stream follows).
pub(super) const SAFETY_REREAD: Duration = Duration::from_secs(5);

/// An execution with a wake-up armed on it.
pub(crate) struct Watched {
    watch: Watch,
    notified: Pin<Box<OwnedNotified>>,
    /// The execution as last read; read again before trusting it when a
    /// change may have gone unseen.
    record: ExecutionRecord,
    /// The watch's mark taken before `record` was read.
    mark: u64,
    stale: bool,
    /// A change this replica described happened since `record` was read:
    /// not one that ends the wait, but `record` is not the latest either.
    behind: bool,
    /// For a foreground call: the revocation mark taken before its caller was
    /// authenticated. While no credential has been revoked since, the call
    /// may be answered with the settlement committed here, unread.
    arrived: Option<u64>,
}

/// A wake-up armed on an execution not read yet.
pub(super) struct Armed {
    watch: Watch,
    notified: Pin<Box<OwnedNotified>>,
    mark: u64,
}

impl Armed {
    /// `record`, read after the wake-up was armed.
    pub(super) fn with(self, record: ExecutionRecord) -> Watched {
        Watched {
            watch: self.watch,
            notified: self.notified,
            record,
            mark: self.mark,
            stale: false,
            behind: false,
            arrived: None,
        }
    }
}

/// What a settled (or given-up) wait found: the execution, and its tool
/// result once it completed.
pub(crate) struct Settled {
    pub(crate) record: ExecutionRecord,
    pub(crate) result_json: Option<String>,
}

impl Watched {
    pub(crate) fn org_id(&self) -> &str {
        &self.record.org_id
    }

    pub(crate) fn project_id(&self) -> &str {
        &self.record.project_id
    }
}

fn armed(watch: &Watch) -> Pin<Box<OwnedNotified>> {
    let mut notified = Box::pin(watch.notify.clone().notified_owned());
    notified.as_mut().enable();
    notified
}

impl Engine {
    /// A wake-up armed on execution `id`, before it is read.
    pub(super) fn watched(&self, id: &str) -> Armed {
        let watch = self.changes.watch(id);
        let notified = armed(&watch);
        let mark = watch.mark();
        Armed { watch, notified, mark }
    }

    /// Starts an execution as [`Engine::start`] does, watched from before it
    /// exists.
    pub(crate) async fn start_watched(
        &self,
        authorization: Option<&str>,
        req: StartRequest,
    ) -> Result<(Created, Watched)> {
        let minted = ExecutionId::generate();
        let armed = self.watched(minted.as_str());
        let arrived = self.revocations.mark();
        let created = self.start_as(authorization, req, minted.clone()).await?;
        let watched = if created.record.id == minted {
            armed.with(created.record.clone())
        } else {
            // A replay answers with an execution created earlier: watch that
            // one, and read it once the wake-up is armed.
            Watched { stale: true, ..self.watched(created.record.id.as_str()).with(created.record.clone()) }
        };
        Ok((created, Watched { arrived, ..watched }))
    }

    /// Waits until the execution is terminal, asks for input (with
    /// `stop_on_input`), or `until`, then opens its result.
    pub(crate) async fn settle_wait(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        w: Watched,
        until: Instant,
        stop_on_input: bool,
    ) -> Result<Settled> {
        let done = |s: Status| s.is_terminal() || (stop_on_input && s == Status::InputRequired);
        let record = self.wait_until(authorization, scope, w, until, done).await?;
        let result_json = match (&record.output_ct, record.status()) {
            (Some(ct), Status::Completed) => {
                Some(String::from_utf8(self.ring.open(record.id.as_str(), Field::Output, ct)?).unwrap_or_default())
            }
            _ => None,
        };
        Ok(Settled { record, result_json })
    }

    /// The one wait loop: until the status is one `done` accepts or `until`
    /// passes, woken by a change or the safety re-read. Every read after the
    /// first authenticates the caller again, so a credential revoked meanwhile
    /// gets 401, never the execution; what the wait answers is such a read,
    /// or, for a foreground call, the settlement committed here while no
    /// credential has been revoked since the call arrived. A wake-up by a
    /// change this replica committed and described as not ending the wait (a
    /// claim, while it waits for the result) reads nothing.
    pub(super) async fn wait_until(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        mut w: Watched,
        until: Instant,
        done: impl Fn(Status) -> bool,
    ) -> Result<ExecutionRecord> {
        loop {
            if w.stale {
                w.mark = w.watch.mark();
                w.record = self.read_owned(authorization, scope, w.record.id.as_str()).await?.1;
                (w.stale, w.behind) = (false, false);
            }
            if done(w.record.status()) {
                return Ok(w.record);
            }
            if Instant::now() >= until {
                if w.behind {
                    w.stale = true;
                    continue;
                }
                return Ok(w.record);
            }
            let nap = until.min(Instant::now() + SAFETY_REREAD);
            let by_change = tokio::select! {
                _ = w.notified.as_mut() => true,
                _ = tokio::time::sleep_until(nap) => false,
            };
            w.notified = armed(&w.watch);
            match w.watch.described_since(w.mark).filter(|_| by_change) {
                Some(c) if !done(c.status) => w.behind |= c.version > w.record.changed_version,
                Some(_) if self.revocations.none_since(w.arrived) => match w.watch.settled_since(w.mark) {
                    // Settled here, and its caller's credential still stands.
                    Some(settled) => return Ok(ExecutionRecord::clone(&settled)),
                    None => w.stale = true,
                },
                _ => w.stale = true,
            }
        }
    }
}
