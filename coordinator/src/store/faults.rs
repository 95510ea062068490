//! Injected commit faults, for the deterministic simulation (`baton-proof`):
//! a store given a [`Faults`] asks it at every commit whether to commit as
//! usual, refuse (roll back, then fail), or commit and then fail as if the
//! answer were lost on the way back (commit-unknown, the fault that makes a
//! naive retry do the work twice). A production store has none.

use super::{Error, Result, Store};
use sqlx::{Any, Transaction};
use std::sync::Arc;

/// What one commit does besides succeeding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitFault {
    /// Rolled back; the caller sees the database unavailable.
    Refused,
    /// Committed; the caller sees the database unavailable all the same.
    Unknown,
}

/// Decides the fate of each commit.
pub trait Faults: Send + Sync + std::fmt::Debug {
    fn on_commit(&self) -> Option<CommitFault>;
}

fn injected(what: &str) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::other(what.to_owned()))
}

/// A failed commit, told by whether the server answered.
fn commit_failed(e: sqlx::Error) -> Error {
    match e {
        // The server answered: the transaction was rolled back.
        sqlx::Error::Database(_) => Error::Database(e),
        // No answer (a broken connection, a timeout): it may have landed.
        other => Error::CommitUnknown(other),
    }
}

impl Store {
    /// This store, with every commit first put to `faults`.
    pub fn with_faults(mut self, faults: Arc<dyn Faults>) -> Self {
        self.faults = Some(faults);
        self
    }

    /// Commits `tx` (unless an injected fault says otherwise), telling a
    /// refusal from a lost answer ([`Error::CommitUnknown`]).
    pub(super) async fn commit(&self, tx: Transaction<'_, Any>) -> Result<()> {
        match self.faults.as_ref().and_then(|f| f.on_commit()) {
            None => tx.commit().await.map_err(commit_failed),
            Some(CommitFault::Refused) => {
                tx.rollback().await?;
                Err(Error::Unavailable(injected("injected fault: the commit was refused")))
            }
            Some(CommitFault::Unknown) => {
                tx.commit().await?;
                Err(Error::CommitUnknown(injected("injected fault: the commit's answer was lost")))
            }
        }
    }

    /// Runs `write`, one statement that commits itself (no transaction
    /// around it), telling a refusal from a lost answer as [`Store::commit`] does.
    pub(super) async fn autocommit<T>(&self, write: impl Future<Output = sqlx::Result<T>>) -> Result<T> {
        let fault = self.faults.as_ref().and_then(|f| f.on_commit());
        if fault == Some(CommitFault::Refused) {
            return Err(Error::Unavailable(injected("injected fault: the statement was refused")));
        }
        let written = write.await.map_err(commit_failed)?;
        match fault {
            Some(CommitFault::Unknown) => {
                Err(Error::CommitUnknown(injected("injected fault: the statement's answer was lost")))
            }
            _ => Ok(written),
        }
    }
}
