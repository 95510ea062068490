//! The runtime's own bookkeeping: resending settlements, holding leases
//! while settling, refusing input that is not JSON.

use super::*;

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
