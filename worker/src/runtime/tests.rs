//! The runtime's own bookkeeping: resending settlements, holding leases
//! while settling, refusing input that is not JSON.

use super::*;
use baton_proto::worker::v1::settlement;

fn worker() -> Arc<Worker> {
    worker_with(Vec::new())
}

fn worker_with(tools: Vec<Arc<dyn Tool>>) -> Arc<Worker> {
    let options = Options {
        coordinator_url: "http://127.0.0.1:1".into(),
        coordinator_urls: Vec::new(),
        token: "t".into(),
        worker_id: "wk".into(),
        capacity: 1,
        remote_servers: Vec::new(),
        tls: None,
    };
    Worker::new(options, tools)
}

#[tokio::test]
async fn an_assignment_whose_input_is_not_json_never_reaches_the_tool() {
    let greet: Arc<dyn Tool> = Arc::new(crate::conformance::Greet);
    let name = greet.spec().name;
    let worker = worker_with(vec![greet]);
    let a = wpb::Assignment {
        execution_id: "te_z".into(),
        attempt: 1,
        tool_name: name.clone(),
        input_json: "{not json".into(),
        deadline_ms: baton_proto::clock::now_ms() + 60_000,
        ..Default::default()
    };
    match worker.invoke(&a, CancellationToken::new()).await {
        settlement::Outcome::Error(e) => assert!(e.protocol_error && !e.retryable, "{e:?}"),
        other => panic!("settled {other:?}"),
    }
    assert_eq!(worker.metrics.invocations(&name), 0);
}

#[tokio::test]
async fn an_unacknowledged_settlement_is_sent_again_after_a_heartbeat_interval() {
    let worker = worker();
    let key = ("te_x".to_owned(), 1);
    let settlement = wpb::Settlement { execution_id: key.0.clone(), attempt: 1, outcome: None };
    let t0 = tokio::time::Instant::now();
    let period = Duration::from_secs(2);
    worker.with_state(|s| s.attempts.settled(key.clone(), settlement.clone(), t0));
    assert!(worker.overdue_settlements(period, t0 + Duration::from_secs(1)).is_empty(), "just sent");
    assert_eq!(worker.overdue_settlements(period, t0 + Duration::from_secs(3)), vec![settlement]);
    assert!(
        worker.overdue_settlements(period, t0 + Duration::from_secs(4)).is_empty(),
        "marked as sent again at the resend"
    );
    worker.with_state(|s| s.attempts.acknowledged(&key));
    assert!(worker.overdue_settlements(period, t0 + Duration::from_secs(9)).is_empty(), "acknowledged ones are done");
}

#[tokio::test]
async fn heartbeats_hold_the_leases_of_settlements_until_acknowledged() {
    let worker = worker();
    let key = ("te_y".to_owned(), 2);
    let settlement = wpb::Settlement { execution_id: key.0.clone(), attempt: 2, outcome: None };
    worker.with_state(|s| s.attempts.settled(key.clone(), settlement, tokio::time::Instant::now()));
    let settling = |m: WorkerMessage| match m.msg {
        Some(worker_message::Msg::Heartbeat(hb)) => Some((hb.running.len(), hb.settling, hb.free_slots)),
        _ => None,
    };
    let held = wpb::RunningAttempt { execution_id: key.0.clone(), attempt: 2 };
    assert_eq!(settling(worker.heartbeat()), Some((0, vec![held], 1)), "settling takes no slot");
    worker.with_state(|s| s.attempts.acknowledged(&key));
    assert_eq!(settling(worker.heartbeat()), Some((0, vec![], 1)));
}

/// A coordinator that refuses every worker's version, counting the sessions
/// it was asked for and keeping the version the last registration stated.
#[derive(Clone, Default)]
struct RefusesEveryVersion {
    sessions: Arc<std::sync::atomic::AtomicUsize>,
    stated: Arc<Mutex<Option<String>>>,
}

#[tonic::async_trait]
impl wpb::worker_session_server::WorkerSession for RefusesEveryVersion {
    type SessionStream = tokio_stream::Empty<Result<wpb::CoordinatorMessage, tonic::Status>>;

    async fn session(
        &self,
        req: tonic::Request<tonic::Streaming<WorkerMessage>>,
    ) -> Result<tonic::Response<Self::SessionStream>, tonic::Status> {
        self.sessions.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Ok(Some(WorkerMessage { msg: Some(worker_message::Msg::Register(r)) })) =
            req.into_inner().message().await
        {
            *self.stated.lock().unwrap_or_else(|p| p.into_inner()) = Some(r.sdk_version);
        }
        let refusal = "worker SDK 0.1.0 is older than this coordinator (0.9.0) supports (0.7.0 and later): upgrade baton-worker to 0.7 or later";
        Err(baton_proto::error::WireError::new(baton_proto::error::ErrorCode::VersionUnsupported, refusal)
            .into_status())
    }
}

async fn serve(coordinator: RefusesEveryVersion) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(wpb::worker_session_server::WorkerSessionServer::new(coordinator))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    format!("http://{addr}")
}

#[tokio::test]
async fn a_version_every_coordinator_refuses_ends_the_worker_after_one_try_each() {
    let coordinator = RefusesEveryVersion::default();
    let (a, b) = (serve(coordinator.clone()).await, serve(coordinator.clone()).await);
    let mut w = worker();
    if let Some(w) = Arc::get_mut(&mut w) {
        w.options.coordinator_url = a;
        w.options.coordinator_urls = vec![b];
    }
    let ended = tokio::time::timeout(Duration::from_secs(20), w.run(CancellationToken::new(), Duration::ZERO))
        .await
        .expect("the worker gives up instead of retrying");
    match ended {
        Err(Error::Incompatible(why)) => assert!(why.contains("upgrade baton-worker to 0.7"), "{why}"),
        other => panic!("ended with {other:?}"),
    }
    assert_eq!(coordinator.sessions.load(std::sync::atomic::Ordering::SeqCst), 2, "each coordinator asked once");
    let stated = coordinator.stated.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(stated.as_deref(), Some(baton_proto::version::own(env!("CARGO_PKG_VERSION")).to_string().as_str()));
}

/// prost reads an enum value this release does not know as `Unspecified`: a
/// stop for a reason a newer coordinator added is still a stop.
#[tokio::test]
async fn a_stop_for_a_reason_from_a_newer_coordinator_still_stops_the_tool() {
    let worker = worker();
    let (cancel, key) = (CancellationToken::new(), ("te_s".to_owned(), 1));
    let started = worker.with_state(|s| s.attempts.start(key.clone(), cancel.clone(), None, 1));
    assert!(matches!(started, Start::Started));
    let stop = wpb::Stop { execution_id: key.0.clone(), attempt: 1, reason: 77 };
    assert_eq!(stop.reason(), StopReason::Unspecified);
    worker.stop(&key, stop.reason());
    assert!(cancel.is_cancelled());
}
