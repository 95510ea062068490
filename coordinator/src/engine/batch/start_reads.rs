//! Coalesced start reads. Every start authenticates its caller together with
//! the tool it names and the project's retention (`Store::credential_with_tool`);
//! concurrent starts share one statement (see `coalesce`), so a busy
//! coordinator pays one round trip for a batch of starts, not one each.

use super::coalesce;
use crate::store::{self, Store, WithTool};
use tokio::sync::{mpsc, oneshot};

/// Three parameters an ask: far below Postgres' 65,535.
const MAX_BATCH: usize = 256;

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
}

impl StartReads {
    /// Starts the reading task; it ends when the last handle is dropped.
    pub(in crate::engine) fn start(store: Store) -> StartReads {
        let jobs = coalesce::spawn(MAX_BATCH, move |batch| {
            let store = store.clone();
            async move { read_batch(&store, batch).await }
        });
        StartReads { jobs }
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
        let (reply, answer) = oneshot::channel();
        let job = Job { token_hash, project_id: project_id.to_owned(), tool_name: tool_name.to_owned(), reply };
        coalesce::enqueue(&self.jobs, job)?;
        answer.await.map_err(coalesce::gone)?
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
