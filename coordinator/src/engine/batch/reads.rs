//! Coalesced owner reads. Every poll needs the caller's credential and one
//! execution row (a long poll's later re-reads only the row); under load many
//! arrive at once. Each batch reads all the credentials and all the rows in one
//! statement (two on SQLite) and answers each caller (see `coalesce`).

use super::coalesce;
use crate::domain::ExecutionId;
use crate::store::{self, Credential, ExecutionRecord, Store};
use tokio::sync::{mpsc, oneshot};

/// Enough to amortise a statement; small enough to keep one batch quick.
const MAX_BATCH: usize = 256;

/// The credential asked for (when one was) and the execution, each if it exists.
type Found = (Option<Credential>, Option<ExecutionRecord>);

struct Job {
    token_hash: Option<Vec<u8>>,
    /// None when only the credential is asked for.
    id: Option<ExecutionId>,
    reply: oneshot::Sender<store::Result<Found>>,
}

impl coalesce::Job for Job {
    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

#[derive(Clone)]
pub(crate) struct Reads {
    jobs: mpsc::Sender<Job>,
    /// Reads asked for, for tests that count them.
    #[cfg(test)]
    pub(crate) asked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Reads {
    /// Starts the reading task; it ends when the last `Reads` handle is dropped.
    pub(crate) fn start(store: Store) -> Reads {
        let jobs = coalesce::spawn(MAX_BATCH, move |batch| {
            let store = store.clone();
            async move { read_batch(&store, batch).await }
        });
        Reads {
            jobs,
            #[cfg(test)]
            asked: Default::default(),
        }
    }

    /// The credential with `token_hash` (None when unknown) and execution `id`, if it exists.
    pub(crate) async fn credential_with_execution(
        &self,
        token_hash: Vec<u8>,
        id: &ExecutionId,
    ) -> store::Result<Option<(Credential, Option<ExecutionRecord>)>> {
        let (credential, record) = self.read(Some(token_hash), Some(id)).await?;
        Ok(credential.map(|c| (c, record)))
    }

    /// The credential with `token_hash`, if known (no execution).
    pub(crate) async fn credential(&self, token_hash: Vec<u8>) -> store::Result<Option<Credential>> {
        Ok(self.read(Some(token_hash), None).await?.0)
    }

    /// Execution `id`, if it exists.
    pub(crate) async fn execution(&self, id: &ExecutionId) -> store::Result<Option<ExecutionRecord>> {
        Ok(self.read(None, Some(id)).await?.1)
    }

    async fn read(&self, token_hash: Option<Vec<u8>>, id: Option<&ExecutionId>) -> store::Result<Found> {
        #[cfg(test)]
        self.asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        coalesce::enqueue(&self.jobs, Job { token_hash, id: id.cloned(), reply })?;
        answer.await.map_err(coalesce::gone)?
    }
}

/// One job on its own, as a batch of one.
async fn read_one(store: &Store, job: &Job) -> store::Result<Found> {
    let found = store.credentials_with_executions(&[(job.token_hash.as_deref(), job.id.as_ref())]).await?;
    Ok(found.into_iter().next().unwrap_or_default())
}

async fn read_batch(store: &Store, jobs: Vec<Job>) {
    // A lone job is read the same way: that read names each row's day.
    let read = {
        let asks: Vec<(Option<&[u8]>, Option<&ExecutionId>)> =
            jobs.iter().map(|j| (j.token_hash.as_deref(), j.id.as_ref())).collect();
        store.credentials_with_executions(&asks).await
    };
    match read {
        Ok(found) => {
            for (job, found) in jobs.into_iter().zip(found) {
                let _ = job.reply.send(Ok(found));
            }
            return;
        }
        Err(e) if jobs.len() == 1 => {
            if let Some(job) = jobs.into_iter().next() {
                let _ = job.reply.send(Err(e));
            }
            return;
        }
        // Each caller gets its own answer (and its own error) one by one.
        Err(e) => tracing::warn!(error = %e, reads = jobs.len(), "coalesced read failed; reading one by one"),
    }
    for job in jobs {
        let found = read_one(store, &job).await;
        let _ = job.reply.send(found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{CredentialKind, NewCredential};

    /// Many concurrent reads (coalesced into batches) answer exactly what
    /// single reads would: known and unknown tokens, known and unknown rows.
    #[tokio::test]
    async fn coalesced_reads_answer_each_caller_as_a_single_read_would() {
        let path = std::env::temp_dir().join(format!("baton_reads_{}.db", crate::domain::ExecutionId::generate()));
        let store = Store::connect(&format!("sqlite://{}", path.display()), 1).await.expect("sqlite");
        store.migrate().await.expect("migrate");
        store.create_org("org", "Org", 1).await.expect("org");
        store.create_project("prj", "org", "Project", 1).await.expect("project");
        store.create_gateway("gw", "prj", "Gateway", 1).await.expect("gateway");
        let credential = NewCredential {
            id: "cred_1".into(),
            token_hash: vec![1; 32],
            kind: CredentialKind::EndUser,
            org_id: "org".into(),
            project_id: "prj".into(),
            gateway_id: Some("gw".into()),
            user_id: Some("u".into()),
            role: None,
            permissions: Vec::new(),
            worker_group: None,
        };
        store.create_credential(&credential, 1).await.expect("credential");
        let reads = Reads::start(store.clone());
        let calls: Vec<_> = (0..64)
            .map(|i| {
                let reads = reads.clone();
                tokio::spawn(async move {
                    let hash = vec![if i % 2 == 0 { 1 } else { 2 }; 32];
                    let alone = reads.credential(hash.clone()).await.expect("credential").map(|c| c.id);
                    assert_eq!(alone.is_some(), i % 2 == 0, "a credential read on its own");
                    let unknown = ExecutionId::generate();
                    (i, reads.credential_with_execution(hash, &unknown).await, reads.execution(&unknown).await)
                })
            })
            .collect();
        for call in calls {
            let (i, found, row) = call.await.expect("join");
            let found = found.expect("read");
            match i % 2 {
                0 => assert_eq!(found.map(|(c, e)| (c.id, e.is_none())), Some(("cred_1".to_owned(), true))),
                _ => assert!(found.is_none(), "an unknown token finds nothing"),
            }
            assert!(row.expect("row read").is_none());
        }
        store.close().await;
        let _ = std::fs::remove_file(path);
    }
}
