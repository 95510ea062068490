//! What a run is made of: one store (SQLite, copied from a template migrated
//! once per process), two coordinators' engines over it, sharing one
//! admission (Redis's part) and reaching each other through [`Peers`], and the
//! worker runtimes. Everything runs on the test's one thread.

use baton_coordinator::admission::memory::MemoryAdmission;
use baton_coordinator::admission::{Admission, Bounds};
use baton_coordinator::crypto::KeyRing;
use baton_coordinator::domain::StopReason;
use baton_coordinator::engine::messages::{AttemptRef, InputAnswer};
use baton_coordinator::engine::{Bus, Engine, Parts, PeerLink};
use baton_coordinator::options::Options;
use baton_coordinator::store::Store;
use futures_util::future::BoxFuture;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use tokio_util::sync::CancellationToken;

/// What every run starts from: a migrated database with one organization,
/// project, gateway, owner and worker credential.
pub(super) struct Template {
    pub db: PathBuf,
    pub org_id: String,
    pub project_id: String,
    pub gateway_id: String,
    pub owner_token: String,
    pub worker_token: String,
    pub ring: Arc<KeyRing>,
}

/// Owners may hold this many unfinished executions (the bound the runs press on).
pub(super) const PRINCIPAL_BOUND: u64 = 3;

static TEMPLATE: OnceLock<Result<Template, String>> = OnceLock::new();

/// The template, made on first use (on a thread of its own: its ids need not
/// replay, and it must not touch the caller's simulated clock).
pub(super) fn template() -> Result<&'static Template, String> {
    TEMPLATE
        .get_or_init(|| {
            std::thread::spawn(|| {
                let rt =
                    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
                rt.block_on(make_template())
            })
            .join()
            .map_err(|_| "making the template panicked".to_owned())?
        })
        .as_ref()
        .map_err(Clone::clone)
}

async fn make_template() -> Result<Template, String> {
    let dir = std::env::temp_dir().join(format!("baton-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let db = dir.join("template.db");
    let _ = std::fs::remove_file(&db);
    let store = open(&db).await?;
    store.migrate().await.map_err(|e| e.to_string())?;
    let e = |e: baton_coordinator::admin::Error| e.to_string();
    let org_id = baton_coordinator::admin::create_org(&store, "sim").await.map_err(e)?;
    let project_id = baton_coordinator::admin::create_project(&store, &org_id, "sim").await.map_err(e)?;
    let gateway_id = baton_coordinator::admin::create_gateway(&store, &project_id, "sim").await.map_err(e)?;
    let owner_token =
        baton_coordinator::admin::issue_end_user_token(&store, &gateway_id, "owner").await.map_err(e)?.token;
    let worker_token = baton_coordinator::admin::issue_worker_token(&store, &project_id, None).await.map_err(e)?.token;
    store.close().await;
    let ring = KeyRing::from_base64([("k", KeyRing::generate_key_base64().as_str())]).map_err(|e| e.to_string())?;
    Ok(Template { db, org_id, project_id, gateway_id, owner_token, worker_token, ring: Arc::new(ring) })
}

pub(super) async fn open(db: &Path) -> Result<Store, String> {
    Store::connect(&format!("sqlite://{}", db.display()), 1).await.map_err(|e| e.to_string())
}

/// A fresh copy of the template's database for one run (runs of the same
/// seed may go on at once, in tests on other threads).
pub(super) fn copy_template(t: &Template, seed: u64) -> Result<PathBuf, String> {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let db = t.db.with_file_name(format!("seed-{seed}-run-{run}.db"));
    std::fs::copy(&t.db, &db).map_err(|e| e.to_string())?;
    Ok(db)
}

pub(super) fn bounds() -> Bounds {
    Bounds {
        principal_concurrency: PRINCIPAL_BOUND,
        project_concurrency: 100,
        organization_concurrency: 100,
        backlog: 100,
        retained_payload_bytes: 1 << 30,
    }
}

/// Lease and grace short enough for a run to see them lapse.
pub(super) const LEASE_MS: i64 = 10_000;
pub(super) const OWNER_LOSS_GRACE_MS: i64 = 5_000;
pub(super) const TTL_MS: i64 = 120_000;

fn options(t: &Template, id: &str) -> Options {
    Options {
        advertise_url: format!("sim://{id}"),
        lease_ms: LEASE_MS,
        owner_loss_grace_ms: OWNER_LOSS_GRACE_MS,
        ..Options::in_process(id, t.ring.clone(), bounds())
    }
}

/// The coordinators' `Peer` service, in process: a stop or an answer for a
/// session on another coordinator reaches it only while that one is up.
#[derive(Default)]
pub(super) struct Peers(Mutex<Vec<(String, Weak<Engine>)>>);

impl Peers {
    pub(super) fn up(&self, engine: &Arc<Engine>) {
        let url = engine.options().advertise_url.clone();
        let mut up = self.0.lock().unwrap_or_else(|p| p.into_inner());
        up.retain(|(u, _)| *u != url);
        up.push((url, Arc::downgrade(engine)));
    }

    pub(super) fn down(&self, url: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).retain(|(u, _)| u != url);
    }

    fn engine(&self, url: &str) -> Option<Arc<Engine>> {
        let up = self.0.lock().unwrap_or_else(|p| p.into_inner());
        up.iter().find(|(u, _)| u == url).and_then(|(_, e)| e.upgrade())
    }
}

/// Peers reach each other through `Arc<Peers>`, shared by every engine of a run.
pub(super) struct PeerHandle(pub Arc<Peers>);

impl PeerLink for PeerHandle {
    fn deliver_stop<'a>(
        &'a self,
        url: &'a str,
        worker_id: &'a str,
        attempt: AttemptRef,
        reason: StopReason,
    ) -> BoxFuture<'a, bool> {
        let engine = self.0.engine(url);
        Box::pin(async move {
            match engine.and_then(|e| e.session(worker_id)) {
                Some(s) => s.stop(&attempt.execution_id, attempt.attempt, reason),
                None => false,
            }
        })
    }

    fn deliver_answer<'a>(&'a self, url: &'a str, worker_id: &'a str, answer: InputAnswer) -> BoxFuture<'a, bool> {
        let engine = self.0.engine(url);
        Box::pin(async move {
            match engine {
                Some(e) => e.deliver_input(worker_id, answer).await,
                None => false,
            }
        })
    }
}

/// A coordinator's engine: `id` names the replica, the same across restarts.
pub(super) fn engine(
    t: &Template,
    store: &Store,
    admission: Arc<dyn Admission>,
    peers: &Arc<Peers>,
    id: &str,
) -> Arc<Engine> {
    let engine = Engine::new(Parts {
        store: store.clone(),
        admission,
        cluster_admission: None,
        bus: Bus::Local,
        peers: Arc::new(PeerHandle(peers.clone())),
        options: options(t, id),
        shutdown: CancellationToken::new(),
    });
    peers.up(&engine);
    engine
}

pub(super) fn memory_admission() -> Arc<MemoryAdmission> {
    Arc::new(MemoryAdmission::new(bounds()))
}
