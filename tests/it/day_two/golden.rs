//! Golden bytes in a real cluster: messages as the 0.1 line's SDK encoded them
//! (`proto/tests/golden/0.1`, decoded field by field by `baton-proto`'s own
//! test) are handled by today's coordinator over a live session. Only the
//! credential is swapped in: a committed file cannot hold a live token.

use crate::harness::{Cluster, Settings};
use baton_proto::worker::v1::{
    self as wpb, coordinator_message::Msg, worker_message, worker_session_client::WorkerSessionClient,
};
use prost::Message;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

fn golden<M: Message + Default>(name: &str) -> M {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto/tests/golden/0.1").join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    M::decode(bytes.as_slice()).unwrap_or_else(|e| panic!("{name} no longer decodes: {e}"))
}

async fn next(incoming: &mut tonic::Streaming<wpb::CoordinatorMessage>) -> Msg {
    let m = tokio::time::timeout(Duration::from_secs(10), incoming.message()).await;
    match m {
        Ok(Ok(Some(wpb::CoordinatorMessage { msg: Some(m) }))) => m,
        other => panic!("the coordinator answers: {other:?}"),
    }
}

#[tokio::test]
async fn golden_messages_a_0_1_worker_encoded_are_handled_by_todays_coordinator() {
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    c.start_coordinator().await.expect("coordinator");
    let golden_register: wpb::WorkerMessage = golden("register.bin");
    let Some(worker_message::Msg::Register(mut register)) = golden_register.msg else { panic!("a registration") };
    register.worker_token = c.id.worker_token.clone();
    let (tx, rx) = mpsc::channel(8);
    let send = |m: wpb::WorkerMessage| {
        let tx = tx.clone();
        async move { tx.send(m).await.expect("session open") }
    };
    send(wpb::WorkerMessage { msg: Some(worker_message::Msg::Register(register)) }).await;
    let mut client = WorkerSessionClient::connect(c.coordinator_url(0)).await.expect("dial");
    let mut incoming =
        client.session(ReceiverStream::new(rx)).await.expect("the 0.1 registration is accepted").into_inner();

    let Msg::Registered(registered) = next(&mut incoming).await else { panic!("registered first") };
    let stopped: Vec<_> = registered.stop.iter().map(|a| (a.execution_id.as_str(), a.attempt)).collect();
    assert_eq!(stopped, [("te_0123456789ABCDEFGHIJabcdefg", 2)], "the running attempt it does not hold is stopped");
    let tools = c.scalar("SELECT count(*) FROM tools WHERE name = 'Demo.Echo'").await.expect("db");
    assert_eq!(tools, 1, "the golden registration's tool is registered");

    // A message kind from a newer peer is passed over; the session goes on.
    send(golden("worker_message_of_a_future_kind.bin")).await;
    send(golden("heartbeat.bin")).await;
    send(golden("settlement.bin")).await;
    // The heartbeat names attempts it does not hold: each gets a stop. The
    // settlement of an execution this cluster never had settles nothing and
    // is acknowledged, so the worker stops resending it.
    let acked = loop {
        match next(&mut incoming).await {
            Msg::Stop(stop) => assert_eq!(stop.reason(), wpb::StopReason::OwnerLost, "{stop:?}"),
            Msg::SettlementAck(ack) => break ack,
            other => panic!("a stop or the settlement's answer, not {other:?}"),
        }
    };
    assert_eq!((acked.execution_id.as_str(), acked.attempt), ("te_0123456789ABCDEFGHIJabcdefg", 2));
    let executions = c.scalar("SELECT count(*) FROM executions").await.expect("db");
    assert_eq!(executions, 0, "nothing the golden messages named came to exist");
}
