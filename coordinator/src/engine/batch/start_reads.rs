//! Coalesced start reads. Every start authenticates its caller together with
//! the tool it names and the project's retention (`Store::credential_with_tool`);
//! concurrent starts share one statement (see `coalesce`), so a busy
//! coordinator pays one round trip for a batch of starts, not one each.
//!
//! What a read found is reused for [`FRESH_MS`], so a caller's next starts
//! read nothing (only when it found a tool that can be started). A credential row never changes but for its revocation, and
//! that is checked again by the statement that creates the execution
//! (`store/create.rs`), which refuses a revoked one; the tool's definition and
//! the retention may be as stale as [`FRESH_MS`], as the gateway's plans are.

use super::coalesce;
use crate::store::{self, Store, WithTool};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{mpsc, oneshot};

/// Three parameters an ask: far below Postgres' 65,535.
const MAX_BATCH: usize = 256;

/// How long a start read is reused, in the process clock's milliseconds (the
/// simulation sets that clock, so its runs replay the same).
const FRESH_MS: i64 = 1_000;

/// Reads kept at once; past it the stale ones go, then all.
const MAX_KEPT: usize = 4_096;

/// An ask: the token's hash, the project and the tool.
type Ask = (Vec<u8>, String, String);

struct Job {
    token_hash: Vec<u8>,
    project_id: String,
    tool_name: String,
    reply: oneshot::Sender<store::Result<Option<WithTool>>>,
}

impl coalesce::Job for Job {
    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

#[derive(Clone)]
pub(in crate::engine) struct StartReads {
    jobs: mpsc::Sender<Job>,
    kept: Arc<Mutex<HashMap<Ask, (i64, WithTool)>>>,
    /// Reads sent to the store, for tests that count them.
    #[cfg(test)]
    pub(in crate::engine) asked: Arc<std::sync::atomic::AtomicUsize>,
}

impl StartReads {
    /// Starts the reading task; it ends when the last handle is dropped.
    pub(in crate::engine) fn start(store: Store) -> StartReads {
        let jobs = coalesce::spawn(MAX_BATCH, move |batch| {
            let store = store.clone();
            async move { read_batch(&store, batch).await }
        });
        StartReads {
            jobs,
            kept: Arc::default(),
            #[cfg(test)]
            asked: Arc::default(),
        }
    }

    /// The credential with `token_hash`, tool `tool_name` of `project_id` (if
    /// registered) and the retention of the credential's project; `None`
    /// when no credential has that hash.
    pub(in crate::engine) async fn credential_with_tool(
        &self,
        token_hash: Vec<u8>,
        project_id: &str,
        tool_name: &str,
    ) -> store::Result<Option<WithTool>> {
        let ask = (token_hash, project_id.to_owned(), tool_name.to_owned());
        let now = baton_proto::clock::now_ms();
        if let Some((at, found)) = self.kept().get(&ask)
            && now - at < FRESH_MS
        {
            return Ok(Some(found.clone()));
        }
        #[cfg(test)]
        self.asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        let job = Job { token_hash: ask.0.clone(), project_id: ask.1.clone(), tool_name: ask.2.clone(), reply };
        coalesce::enqueue(&self.jobs, job)?;
        let found = answer.await.map_err(coalesce::gone)??;
        // Only a tool that can be started is kept: a tool registered or enabled
        // a moment later must not read as unknown or disabled from memory.
        if let Some(found @ (_, Some(tool), _)) = &found
            && !tool.disabled
        {
            let mut kept = self.kept();
            if kept.len() >= MAX_KEPT {
                kept.retain(|_, (at, _)| now - *at < FRESH_MS);
                if kept.len() >= MAX_KEPT {
                    kept.clear();
                }
            }
            kept.insert(ask, (now, found.clone()));
        }
        Ok(found)
    }

    /// Forgets every read of credential `credential_id`: a create found it revoked.
    pub(in crate::engine) fn forget(&self, credential_id: &str) {
        self.kept().retain(|_, (_, (credential, _, _))| credential.id != credential_id);
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<Ask, (i64, WithTool)>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn read_batch(store: &Store, jobs: Vec<Job>) {
    if jobs.len() > 1 {
        let asks: Vec<(&[u8], &str, &str)> =
            jobs.iter().map(|j| (j.token_hash.as_slice(), j.project_id.as_str(), j.tool_name.as_str())).collect();
        match store.credentials_with_tools(&asks).await {
            Ok(found) => {
                for (job, found) in jobs.into_iter().zip(found) {
                    let _ = job.reply.send(Ok(found));
                }
                return;
            }
            // Each caller gets its own answer (and its own error) one by one.
            Err(e) => tracing::warn!(error = %e, reads = jobs.len(), "coalesced start read failed; reading one by one"),
        }
    }
    for job in jobs {
        let found = store.credential_with_tool(&job.token_hash, &job.project_id, &job.tool_name).await;
        let _ = job.reply.send(found);
    }
}
