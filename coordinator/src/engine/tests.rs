//! The engine's use cases on SQLite with memory admission and a local bus: no
//! gRPC, no network. A worker session is an outbox the test reads.

use super::lifecycle::{CancelOutcome, StartRequest};
use super::messages::{AttemptRef, Command, MessageKind, Registration, Reported, Settlement};
use super::{Bus, Engine, FromWorker, Parts, PeerLink, Scope, Session, outbox};
use crate::admission::Bounds;
use crate::admission::memory::MemoryAdmission;
use crate::crypto::KeyRing;
use crate::domain::{Status, StopReason};
use crate::options::Options;
use crate::store::{Store, ToolRecord};
use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// One replica alone: every peer delivery fails.
struct NoPeers;

impl PeerLink for NoPeers {
    fn deliver_stop<'a>(&'a self, _: &'a str, _: &'a str, _: AttemptRef, _: StopReason) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }

    fn deliver_answer<'a>(&'a self, _: &'a str, _: &'a str, _: super::messages::InputAnswer) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }
}

pub(super) struct World {
    pub(super) engine: Arc<Engine>,
    pub(super) org_id: String,
    pub(super) project_id: String,
    pub(super) gateway_id: String,
    pub(super) user: String,
    pub(super) worker_token: String,
    _dir: std::path::PathBuf,
}

impl World {
    pub(super) async fn new() -> World {
        let dir = std::env::temp_dir().join(format!("baton-engine-{}", crate::domain::id::random_id("t", 64)));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let store = Store::connect(&format!("sqlite://{}", dir.join("e.db").display()), 1).await.expect("sqlite");
        store.migrate().await.expect("migrate");
        let org_id = crate::admin::create_org(&store, "o").await.expect("org");
        let project_id = crate::admin::create_project(&store, &org_id, "p").await.expect("project");
        let gateway_id = crate::admin::create_gateway(&store, &project_id, "g").await.expect("gateway");
        let user = crate::admin::issue_end_user_token(&store, &gateway_id, "ada").await.expect("user").token;
        let worker_token = crate::admin::issue_worker_token(&store, &project_id, None).await.expect("worker").token;
        let ring = KeyRing::from_base64([("k", KeyRing::generate_key_base64().as_str())]).expect("ring");
        let bounds = Bounds {
            principal_concurrency: 100,
            project_concurrency: 100,
            organization_concurrency: 100,
            backlog: 100,
            retained_payload_bytes: 1 << 20,
        };
        let options = Options::in_process("co_test", Arc::new(ring), bounds);
        let engine = Engine::new(Parts {
            store,
            admission: Arc::new(MemoryAdmission::new(bounds)),
            cluster_admission: None,
            bus: Bus::Local,
            peers: Arc::new(NoPeers),
            options,
            shutdown: CancellationToken::new(),
        });
        World { engine, org_id, project_id, gateway_id, user, worker_token, _dir: dir }
    }

    pub(super) fn bearer(&self) -> Option<String> {
        Some(format!("Bearer {}", self.user))
    }

    pub(super) fn scope(&self) -> Scope<'_> {
        Scope { org_id: &self.org_id, project_id: &self.project_id }
    }

    fn start_request(&self, tool: &str) -> StartRequest {
        StartRequest {
            org_id: self.org_id.clone(),
            project_id: self.project_id.clone(),
            gateway_id: self.gateway_id.clone(),
            tool_name: tool.into(),
            input_json: r#"{"text":"hi"}"#.into(),
            request_fingerprint: "f".into(),
            surface: crate::domain::Surface::Rest,
            ..Default::default()
        }
    }

    async fn start(&self, tool: &str) -> String {
        let req = self.start_request(tool);
        let created = self.engine.start(self.bearer().as_deref(), req).await.expect("start");
        assert!(!created.replayed);
        created.record.id.to_string()
    }

    async fn status(&self, id: &str) -> Status {
        let (_, r) = self.engine.read_owned(self.bearer().as_deref(), self.scope(), id).await.expect("read");
        r.status()
    }

    /// A worker session serving `Test.Echo`, and the commands it is sent.
    pub(super) async fn worker(
        &self,
        worker_id: &str,
        running: Vec<AttemptRef>,
    ) -> (Arc<Session>, mpsc::Receiver<Command>) {
        let tool = test_tool("Test.Echo", "optional");
        let registration = Registration {
            worker_id: worker_id.into(),
            worker_token: self.worker_token.clone(),
            tools: vec![tool],
            capacity: 4,
            running,
            settling: Vec::new(),
        };
        let (tx, mut rx) = outbox(4);
        let session = self.engine.register(registration, tx).await.expect("register");
        assert!(matches!(rx.recv().await, Some(Command::Registered { .. })));
        (session, rx)
    }
}

/// The next assignment on `rx`, after a dispatch round.
pub(super) async fn assigned(engine: &Engine, rx: &mut mpsc::Receiver<Command>) -> AttemptRef {
    assert_eq!(engine.dispatch_round().await, super::workers::Round::Assigned, "something was claimed");
    loop {
        match rx.recv().await.expect("session open") {
            Command::Assign(a) => return a.attempt,
            _ => continue,
        }
    }
}

/// A tool of toolkit `Test` taking any object, run once, with `background` policy.
fn test_tool(name: &str, background: &str) -> ToolRecord {
    ToolRecord {
        toolkit_version: "1".into(),
        background: crate::domain::Background::parse(background),
        ..crate::store::contract_tests::tool_record(name)
    }
}

pub(super) fn settlement(attempt: &AttemptRef, outcome: Reported) -> FromWorker {
    FromWorker::Settlement(Settlement { attempt: attempt.clone(), outcome: Some(outcome) })
}

/// What `grpc` makes of a background policy the wire did not know (a newer
/// SDK's): the empty name, which registration refuses as a bad request.
#[tokio::test]
async fn a_tool_with_a_background_policy_from_a_newer_sdk_is_refused() {
    let w = World::new().await;
    let tool = test_tool("Test.Future", "");
    let registration = Registration {
        worker_id: "w-future".into(),
        worker_token: w.worker_token.clone(),
        tools: vec![tool],
        capacity: 1,
        running: Vec::new(),
        settling: Vec::new(),
    };
    let (tx, _rx) = outbox(1);
    let refused = w.engine.register(registration, tx).await.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(refused.contains("background must be forbidden, optional or required"), "{refused}");
}

#[tokio::test]
async fn start_dispatch_settle_and_read_the_result() {
    let w = World::new().await;
    let (session, mut rx) = w.worker("w1", Vec::new()).await;
    let id = w.start("Test.Echo").await;
    assert_eq!(w.status(&id).await, Status::Pending);
    let attempt = assigned(&w.engine, &mut rx).await;
    assert_eq!((attempt.execution_id.as_str(), attempt.attempt), (id.as_str(), 1));
    assert_eq!(w.status(&id).await, Status::Working);
    let waiting = {
        let engine = w.engine.clone();
        let (bearer, org, project, id) = (w.bearer(), w.org_id.clone(), w.project_id.clone(), id.clone());
        tokio::spawn(async move {
            let scope = Scope { org_id: &org, project_id: &project };
            engine.wait(bearer.as_deref(), scope, &id, 30_000, Some(Status::Working)).await.map(|r| r.status())
        })
    };
    w.engine.handle(&session, vec![settlement(&attempt, Reported::Result(r#"{"content":[]}"#.into()))]).await;
    assert!(matches!(rx.recv().await, Some(Command::SettlementAck(a)) if a == attempt));
    let woke = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("the wait answered");
    assert_eq!(woke.expect("task").expect("wait"), Status::Completed);
    let result = w.engine.result(w.bearer().as_deref(), w.scope(), &id).await.expect("result").result;
    assert_eq!(result.as_deref(), Some(r#"{"content":[]}"#));
}

/// The dispatcher's periodic round (the net for lost wake-ups) claims only
/// when a session here has room and a pending execution is due; otherwise an
/// idle tick is one read.
#[tokio::test]
async fn a_tick_claims_only_when_a_session_has_room_and_work_is_due() {
    let w = World::new().await;
    assert!(!w.engine.worth_a_round().await, "no session to claim for");
    let (_session, mut rx) = w.worker("w1", Vec::new()).await;
    assert!(!w.engine.worth_a_round().await, "nothing pending");
    let id = w.start("Test.Echo").await;
    assert_eq!(w.status(&id).await, Status::Pending);
    assert!(w.engine.worth_a_round().await, "a pending execution is due");
    assigned(&w.engine, &mut rx).await;
    assert!(!w.engine.worth_a_round().await, "claimed: nothing is left");
}

#[tokio::test]
async fn cancel_stops_the_holder_and_its_report_ends_the_execution_cancelled() {
    let w = World::new().await;
    let (session, mut rx) = w.worker("w1", Vec::new()).await;
    let id = w.start("Test.Echo").await;
    let attempt = assigned(&w.engine, &mut rx).await;
    let (outcome, _) = w.engine.cancel(w.bearer().as_deref(), w.scope(), &id).await.expect("cancel");
    assert_eq!(outcome, CancelOutcome::Accepted);
    assert!(matches!(rx.recv().await, Some(Command::Stop { reason: StopReason::Cancelled, .. })));
    let (again, _) = w.engine.cancel(w.bearer().as_deref(), w.scope(), &id).await.expect("cancel again");
    assert_eq!(again, CancelOutcome::StopAlreadyRequested);
    w.engine.handle(&session, vec![settlement(&attempt, Reported::Cancelled)]).await;
    assert_eq!(w.status(&id).await, Status::Cancelled);
}

#[tokio::test]
async fn a_settlement_from_a_worker_that_does_not_hold_the_lease_is_refused() {
    let w = World::new().await;
    let (_holder, mut rx) = w.worker("w1", Vec::new()).await;
    let id = w.start("Test.Echo").await;
    let attempt = assigned(&w.engine, &mut rx).await;
    let (other, mut other_rx) = w.worker("w2", Vec::new()).await;
    w.engine.handle(&other, vec![settlement(&attempt, Reported::Result("{}".into()))]).await;
    let refused = other_rx.recv().await;
    assert!(matches!(refused, Some(Command::Refused { kind: MessageKind::Settlement, .. })), "{refused:?}");
    assert_eq!(w.status(&id).await, Status::Working);
}

#[tokio::test]
async fn a_worker_that_registers_again_without_an_attempt_gives_it_back() {
    let w = World::new().await;
    let (_first, mut rx) = w.worker("w1", Vec::new()).await;
    let id = w.start("Test.Echo").await;
    assigned(&w.engine, &mut rx).await;
    // The same worker comes back reporting nothing: the assignment never reached it.
    let (_second, mut rx) = w.worker("w1", Vec::new()).await;
    assert_eq!(w.status(&id).await, Status::Pending);
    let again = assigned(&w.engine, &mut rx).await;
    assert_eq!(again.attempt, 1, "an undelivered attempt does not count");
    // Coming back with the attempt keeps it.
    let (_third, _rx) = w.worker("w1", vec![again.clone()]).await;
    assert_eq!(w.status(&id).await, Status::Working);
}

#[tokio::test]
async fn a_resumed_watch_reads_only_the_changes_after_its_cursor() {
    let w = World::new().await;
    let (session, mut rx) = w.worker("w1", Vec::new()).await;
    let id = w.start("Test.Echo").await;
    let attempt = assigned(&w.engine, &mut rx).await;
    w.engine.handle(&session, vec![settlement(&attempt, Reported::Result(r#"{"content":[]}"#.into()))]).await;
    assert!(matches!(rx.recv().await, Some(Command::SettlementAck(a)) if a == attempt));
    let all = w.engine.changes_after(w.bearer().as_deref(), w.scope(), &id, 0).await.expect("changes");
    let seqs: Vec<i64> = all.changes.iter().map(|c| c.seq).collect();
    assert!(seqs.len() >= 3 && seqs.windows(2).all(|s| s[0] < s[1]), "created, claimed, settled in order: {seqs:?}");
    assert_eq!(all.changes.last().and_then(|c| c.status), Some(Status::Completed));
    assert!(!all.gone);
    let later = w.engine.changes_after(w.bearer().as_deref(), w.scope(), &id, seqs[0]).await.expect("changes");
    assert_eq!(later.changes.iter().map(|c| c.seq).collect::<Vec<_>>(), seqs[1..], "only what came after");
    let last = *seqs.last().expect("a change");
    let none = w.engine.changes_after(w.bearer().as_deref(), w.scope(), &id, last).await.expect("changes");
    assert!(none.changes.is_empty() && !none.gone, "nothing missed after the last change");
    let foreign = w.engine.changes_after(Some("Bearer nobody"), w.scope(), &id, 0).await;
    assert!(foreign.is_err(), "only the owner reads them");
}

/// A coordinator that keeps admission in memory restarts holding nothing: it
/// starts from the executions still open, or it would admit a whole bound on
/// top of them.
#[tokio::test]
async fn a_restarted_coordinator_counts_the_open_executions_against_its_bounds() {
    let w = World::new().await;
    let _worker = w.worker("w-open", Vec::new()).await;
    for _ in 0..2 {
        w.start("Test.Echo").await;
    }
    let bounds = Bounds { principal_concurrency: 3, ..w.engine.options().bounds };
    let options = Options { bounds, ..w.engine.options().clone() };
    let restarted = Engine::new(Parts {
        store: w.engine.store.clone(),
        admission: Arc::new(MemoryAdmission::new(bounds)),
        cluster_admission: None,
        bus: Bus::Local,
        peers: Arc::new(NoPeers),
        options,
        shutdown: CancellationToken::new(),
    });
    restarted.prepare().await.expect("admission restored");
    let req = || w.start_request("Test.Echo");
    restarted.start(w.bearer().as_deref(), req()).await.expect("the third fits the bound of three");
    let fourth = restarted.start(w.bearer().as_deref(), req()).await;
    assert!(matches!(fourth, Err(super::Error::Capacity(_))), "two open before the restart count: {fourth:?}");
}

/// A foreground wait is not woken into a read by a change this replica
/// committed that cannot end it (the claim, while it waits for the result):
/// it reads only when it has to answer, here when its time is up.
#[tokio::test]
async fn a_claim_committed_here_costs_a_foreground_wait_no_read() {
    let w = World::new().await;
    let (_session, mut rx) = w.worker("w1", Vec::new()).await;
    let (created, watched) =
        w.engine.start_watched(w.bearer().as_deref(), w.start_request("Test.Echo")).await.expect("start");
    assert_eq!(created.record.status(), Status::Pending);
    assigned(&w.engine, &mut rx).await;
    let asked = || w.engine.reads.asked.load(std::sync::atomic::Ordering::Relaxed);
    let before = asked();
    let until = tokio::time::Instant::now() + Duration::from_millis(200);
    let settled = w.engine.settle_wait(w.bearer().as_deref(), w.scope(), watched, until, false).await.expect("wait");
    assert_eq!(settled.record.status(), Status::Working, "what it answers is read when its time is up");
    assert_eq!(asked() - before, 1, "no read for the claim's wake-up");
}

/// A foreground call is answered with the settlement this replica committed,
/// unread, while no credential has been revoked since the call arrived; once
/// one has, it reads again, so a caller revoked meanwhile gets 401.
#[tokio::test]
async fn a_foreground_call_takes_the_settlement_committed_here_unread_until_a_revocation() {
    let w = World::new().await;
    w.engine.revocations.connected(); // as the Postgres listener does
    let (session, mut rx) = w.worker("w1", Vec::new()).await;
    let asked = || w.engine.reads.asked.load(std::sync::atomic::Ordering::Relaxed);
    for revoked in [false, true] {
        let second = crate::admin::issue_end_user_token(&w.engine.store, &w.gateway_id, "ada").await.expect("token");
        let bearer = Some(format!("Bearer {}", second.token));
        let (_, watched) =
            w.engine.start_watched(bearer.as_deref(), w.start_request("Test.Echo")).await.expect("start");
        let attempt = assigned(&w.engine, &mut rx).await;
        let before = asked();
        let settle = async {
            if revoked {
                assert!(w.engine.store.revoke_credential(&second.id, 1).await.expect("revoke"));
                w.engine.revocations.heard();
            }
            w.engine.handle(&session, vec![settlement(&attempt, Reported::Result(r#"{"content":[]}"#.into()))]).await;
        };
        let until = tokio::time::Instant::now() + Duration::from_secs(10);
        let (answer, ()) =
            tokio::join!(w.engine.settle_wait(bearer.as_deref(), w.scope(), watched, until, false), settle);
        if revoked {
            assert!(
                matches!(answer, Err(super::Error::Auth(crate::authz::Error::Unauthenticated))),
                "a revocation since the call arrived means a read, and the revoked caller gets 401"
            );
            assert_eq!(asked() - before, 1);
        } else {
            let settled = answer.expect("answered");
            assert_eq!(settled.record.status(), Status::Completed);
            assert_eq!(settled.result_json.as_deref(), Some(r#"{"content":[]}"#));
            assert_eq!(asked() - before, 0, "the settlement committed here is the answer, unread");
        }
    }
}

/// A caller's next start within a second reads nothing: what its first start
/// read is reused. The credential is still checked, by the create's own
/// statement, so one revoked meanwhile gets 401 and nothing is created.
#[tokio::test]
async fn a_start_from_memory_is_refused_by_its_create_once_the_credential_is_revoked() {
    let w = World::new().await;
    let (_session, _rx) = w.worker("w1", Vec::new()).await;
    let issued = crate::admin::issue_end_user_token(&w.engine.store, &w.gateway_id, "ada").await.expect("token");
    let bearer = Some(format!("Bearer {}", issued.token));
    let asked = || w.engine.start_reads.asked.load(std::sync::atomic::Ordering::Relaxed);
    w.engine.start(bearer.as_deref(), w.start_request("Test.Echo")).await.expect("first start");
    let before = asked();
    w.engine.start(bearer.as_deref(), w.start_request("Test.Echo")).await.expect("second start");
    assert_eq!(asked(), before, "the second start read nothing");

    assert!(w.engine.store.revoke_credential(&issued.id, 1).await.expect("revoke"));
    let refused = w.engine.start(bearer.as_deref(), w.start_request("Test.Echo")).await;
    assert!(matches!(refused, Err(super::Error::Auth(crate::authz::Error::Unauthenticated))), "{:?}", refused.err());
    assert_eq!(asked(), before, "refused by the create, not by a read");
    let (listed, _) = w.engine.list(w.bearer().as_deref(), w.scope(), None, 50, "").await.expect("list");
    assert_eq!(listed.len(), 2, "the refused start created nothing");
    // The one after it reads afresh, and is refused there.
    let again = w.engine.start(bearer.as_deref(), w.start_request("Test.Echo")).await;
    assert!(matches!(again, Err(super::Error::Auth(crate::authz::Error::Unauthenticated))));
    assert_eq!(asked(), before + 1, "a refused credential is forgotten");
}

/// A tool disabled since a caller's last start read is refused by the next
/// start's create, though that start read nothing.
#[tokio::test]
async fn a_start_from_memory_is_refused_by_its_create_once_the_tool_is_disabled() {
    let w = World::new().await;
    let (_session, _rx) = w.worker("w1", Vec::new()).await;
    let asked = || w.engine.start_reads.asked.load(std::sync::atomic::Ordering::Relaxed);
    w.engine.start(w.bearer().as_deref(), w.start_request("Test.Echo")).await.expect("first start");
    let before = asked();
    assert!(w.engine.store.set_tool_disabled(&w.project_id, "Test.Echo", Some(1)).await.expect("disable"));
    let refused = w.engine.start(w.bearer().as_deref(), w.start_request("Test.Echo")).await;
    assert!(matches!(refused, Err(super::Error::PolicyRefused(_))), "{:?}", refused.err());
    assert_eq!(asked(), before, "refused by the create, not by a read");
    let (listed, _) = w.engine.list(w.bearer().as_deref(), w.scope(), None, 50, "").await.expect("list");
    assert_eq!(listed.len(), 1, "the refused start created nothing");
}

/// Only a tool that can be started is kept in memory: a start refused for an
/// unknown tool does not make the tool unknown to the next start once a
/// worker registered it (found by the simulation's seed 42).
#[tokio::test]
async fn a_tool_registered_just_after_a_start_found_it_unknown_starts_at_once() {
    let w = World::new().await;
    let refused = w.engine.start(w.bearer().as_deref(), w.start_request("Test.Echo")).await;
    assert!(matches!(refused, Err(super::Error::UnknownTool(_))), "{:?}", refused.err());
    let (_session, _rx) = w.worker("w1", Vec::new()).await;
    w.engine.start(w.bearer().as_deref(), w.start_request("Test.Echo")).await.expect("started once registered");
}
