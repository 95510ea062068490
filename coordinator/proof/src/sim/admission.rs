//! The coordinators' shared admission (the part Redis plays), which a run
//! can make lose its state. Lost, it refuses (as Redis admission does until
//! the rebuild); a coordinator's `Engine::prepare` then restores it from the
//! store through the production path (`Admission::restore`).

use baton_coordinator::admission::memory::MemoryAdmission;
use baton_coordinator::admission::{Admission, Admitted, Error, Rejection, RetainedBytes, Ticket};
use std::sync::{Arc, Mutex};

pub(super) struct Shared(Mutex<Option<Arc<MemoryAdmission>>>);

impl Shared {
    pub(super) fn new() -> Self {
        Shared(Mutex::new(Some(super::world::memory_admission())))
    }

    fn current(&self) -> Result<Arc<MemoryAdmission>, Error> {
        let held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.clone().ok_or_else(|| Error::Unavailable("admission lost its state; not yet rebuilt".into()))
    }

    pub(super) fn lose(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

#[baton_worker::async_trait]
impl Admission for Shared {
    async fn admit(&self, t: &Ticket, now_ms: i64) -> Result<Result<Admitted, Rejection>, Error> {
        self.current()?.admit(t, now_ms).await
    }

    async fn started(&self, t: &Ticket, now_ms: i64) -> Result<(), Error> {
        self.current()?.started(t, now_ms).await
    }

    async fn release(&self, t: &Ticket, now_ms: i64) -> Result<(), Error> {
        self.current()?.release(t, now_ms).await
    }

    async fn withdraw(&self, t: &Ticket, now_ms: i64) -> Result<(), Error> {
        self.current()?.withdraw(t, now_ms).await
    }

    async fn restore(&self, open: &[(Ticket, bool)], retained: &[RetainedBytes], now_ms: i64) -> Result<(), Error> {
        let fresh = super::world::memory_admission();
        fresh.restore(open, retained, now_ms).await?;
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(fresh);
        Ok(())
    }
}
