//! Unit-testing tools without a coordinator: a [`TestContext`] builds the
//! [`Context`] a tool receives, records every progress report, and cancels on
//! demand.
//!
//! ```
//! use baton_worker::testing::TestContext;
//!
//! let test = TestContext::new().attempt(2);
//! let cx = test.context();
//! cx.progress(1.0, Some(4.0), "a quarter");
//! test.cancel();
//! assert!(cx.is_cancelled());
//! assert_eq!(test.progress()[0].message, "a quarter");
//! assert_eq!(cx.attempt, 2);
//! ```

use crate::sdk::{Context, Progress};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// A context for tests, and what the tool did with it.
#[derive(Clone)]
pub struct TestContext {
    execution_id: String,
    attempt: u32,
    deadline: SystemTime,
    cancel: CancellationToken,
    progress: Arc<Mutex<Vec<Progress>>>,
}

impl Default for TestContext {
    fn default() -> Self {
        Self::new()
    }
}

impl TestContext {
    /// Attempt 1 of execution `te_test`, an hour before its deadline.
    pub fn new() -> Self {
        TestContext {
            execution_id: "te_test".into(),
            attempt: 1,
            deadline: baton_proto::clock::now() + Duration::from_secs(3_600),
            cancel: CancellationToken::new(),
            progress: Arc::default(),
        }
    }

    pub fn execution_id(mut self, id: impl Into<String>) -> Self {
        self.execution_id = id.into();
        self
    }

    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    pub fn deadline(mut self, deadline: SystemTime) -> Self {
        self.deadline = deadline;
        self
    }

    /// The context to hand to the tool; every context made here shares the
    /// record and the cancellation.
    pub fn context(&self) -> Context {
        let record = self.progress.clone();
        Context {
            execution_id: self.execution_id.clone(),
            attempt: self.attempt,
            cancel: self.cancel.clone(),
            deadline: self.deadline,
            progress: Arc::new(move |p| record.lock().unwrap_or_else(|e| e.into_inner()).push(p)),
        }
    }

    /// Cancels the execution, as a caller's cancel or the deadline would.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Every progress report so far, in order.
    pub fn progress(&self) -> Vec<Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
