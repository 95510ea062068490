//! The store's injected faults: each commit is applied, refused, or applied
//! with its answer lost (commit-unknown), as the seed decides.

use super::rng::Rng;
use baton_coordinator::store::{CommitFault, Faults};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Debug)]
pub(super) struct StoreFaults {
    rng: Mutex<Rng>,
    /// In a hundred commits: refused, and applied with the answer lost.
    refused_percent: u32,
    unknown_percent: u32,
    /// Off while the run heals at its end.
    pub on: AtomicBool,
    pub refused: AtomicU64,
    pub unknown: AtomicU64,
}

impl StoreFaults {
    pub(super) fn new(seed: u64, refused_percent: u32, unknown_percent: u32) -> Self {
        StoreFaults {
            rng: Mutex::new(Rng::new(seed ^ 0xFA17)),
            refused_percent,
            unknown_percent,
            on: AtomicBool::new(true),
            refused: AtomicU64::new(0),
            unknown: AtomicU64::new(0),
        }
    }
}

impl Faults for StoreFaults {
    fn on_commit(&self) -> Option<CommitFault> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let roll = rng.below(100) as u32;
        if roll < self.refused_percent {
            self.refused.fetch_add(1, Ordering::Relaxed);
            Some(CommitFault::Refused)
        } else if roll < self.refused_percent + self.unknown_percent {
            self.unknown.fetch_add(1, Ordering::Relaxed);
            Some(CommitFault::Unknown)
        } else {
            None
        }
    }
}
