//! The business tools of the simulation, and their own count of invocations:
//! each call is recorded the moment the worker runtime makes it, then waits
//! for the simulation to say how it ends (or for its cancellation).

use baton_worker::{Background, Context, Failure, Output, Tool, ToolSpec};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Retried on a retryable failure or a lost lease, up to three attempts.
pub const RETRIED: &str = "Sim.Retried";
/// Never retried: it must run at most once per execution.
pub const ONCE: &str = "Sim.Once";

/// How the simulation ends a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The result carries this nonce, so the owner's read names its call.
    Result(u64),
    Fail {
        retryable: bool,
    },
}

/// One call of a business tool, as the tool itself saw it.
#[derive(Debug)]
pub struct Call {
    pub execution_id: String,
    pub attempt: u32,
    pub tool: &'static str,
    /// Which worker incarnation ran it.
    pub worker: String,
    /// How it ended, once it did.
    pub ended: Option<Ending>,
    finish: Option<oneshot::Sender<Ending>>,
}

/// Every call of every tool in one run, in the order they began.
#[derive(Debug, Default)]
pub struct Calls(Mutex<Vec<Call>>);

impl Calls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Call>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn with<R>(&self, f: impl FnOnce(&mut Vec<Call>) -> R) -> R {
        f(&mut self.lock())
    }

    /// Calls still waiting for their ending, by index.
    pub fn waiting(&self) -> Vec<usize> {
        self.lock().iter().enumerate().filter(|(_, c)| c.finish.is_some()).map(|(i, _)| i).collect()
    }

    /// Ends call `i` (if its worker still runs it); true when the tool heard it.
    pub fn finish(&self, i: usize, ending: Ending) -> bool {
        let mut calls = self.lock();
        let Some(call) = calls.get_mut(i) else { return false };
        let Some(finish) = call.finish.take() else { return false };
        let heard = finish.send(ending).is_ok();
        if heard {
            call.ended = Some(ending);
        }
        heard
    }

    /// A crashed worker's calls never end.
    pub fn abandon(&self, worker: &str) {
        for call in self.lock().iter_mut().filter(|c| c.worker == worker) {
            call.finish = None;
        }
    }
}

pub struct SimTool {
    pub name: &'static str,
    pub max_attempts: u32,
    pub worker: String,
    pub calls: Arc<Calls>,
}

#[baton_worker::async_trait]
impl Tool for SimTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.to_owned(),
            toolkit_name: "Sim".into(),
            toolkit_version: "1".into(),
            description: "a tool of the deterministic simulation".into(),
            input_schema: json!({"type": "object"}),
            background: Background::Optional,
            task_time_input: false,
            max_attempts: self.max_attempts,
            max_ttl: None,
            required_client_capabilities: Vec::new(),
            cancel_unsupported: false,
            title: None,
            annotations: None,
            output_schema: None,
            icons: Vec::new(),
        }
    }

    async fn call(&self, _input: Value, cx: Context) -> Result<Output, Failure> {
        let (finish, ending) = oneshot::channel();
        self.calls.with(|calls| {
            calls.push(Call {
                execution_id: cx.execution_id.clone(),
                attempt: cx.attempt,
                tool: self.name,
                worker: self.worker.clone(),
                ended: None,
                finish: Some(finish),
            })
        });
        tokio::select! {
            ending = ending => match ending {
                Ok(Ending::Result(nonce)) => Ok(Output::text(format!("sim-nonce-{nonce}"))),
                Ok(Ending::Fail { retryable }) => Err(Failure::Error {
                    message: "the simulation failed this call".into(),
                    retryable,
                    detail: Value::Null,
                }),
                // The worker crashed: nothing it does is seen any more.
                Err(_) => std::future::pending().await,
            },
            () = cx.cancel.cancelled() => Err(Failure::Cancelled),
        }
    }
}

/// Nonce -> (execution, attempt) of the call that returned it.
pub fn results(calls: &Calls) -> BTreeMap<u64, (String, u32)> {
    calls.with(|calls| {
        calls
            .iter()
            .filter_map(|c| match c.ended {
                Some(Ending::Result(nonce)) => Some((nonce, (c.execution_id.clone(), c.attempt))),
                _ => None,
            })
            .collect()
    })
}
