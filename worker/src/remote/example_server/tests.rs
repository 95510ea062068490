//! The worker's remote driver against the example server, in both dialects:
//! input relayed, resume without a second call, unsupported interactions,
//! cancellation. The coordinator is a fake that acknowledges and answers.

use crate::remote::config::{Protocol, RemoteServer};
use crate::remote::driver::Driver;
use crate::remote::link::{Relay, Uplink};
use crate::remote::{RemoteTool, discover};
use baton_proto::worker::v1::{self as wpb, settlement::Outcome, worker_message::Msg};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Acknowledges everything; answers each published request (when `answer`).
struct FakeCoordinator {
    tx: mpsc::UnboundedSender<Relay>,
    sent: Mutex<Vec<Msg>>,
    answer: bool,
}

#[tonic::async_trait]
impl Uplink for FakeCoordinator {
    async fn send(&self, m: Msg) -> bool {
        match &m {
            Msg::RemoteTaskStarted(_) => {
                let _ = self.tx.send(Relay::Ack(wpb::MessageKind::RemoteTask));
            }
            Msg::InputRequested(r) => {
                let _ = self.tx.send(Relay::Ack(wpb::MessageKind::InputRequested));
                for spec in r.requests.iter().filter(|_| self.answer) {
                    let _ = self.tx.send(Relay::Input(answer_for(r, spec)));
                }
            }
            _ => {}
        }
        self.sent.lock().expect("lock").push(m);
        true
    }
}

fn answer_for(r: &wpb::InputRequested, spec: &wpb::InputRequestSpec) -> wpb::InputResponse {
    let schema: Value = serde_json::from_str(&spec.requested_schema_json).expect("schema");
    let mut content = json!({});
    for (k, p) in schema["properties"].as_object().expect("properties") {
        content[k] = if p["type"] == "boolean" { json!(true) } else { json!("Ada") };
    }
    wpb::InputResponse {
        execution_id: r.execution_id.clone(),
        attempt: r.attempt,
        remote_key: spec.remote_key.clone(),
        action: wpb::InputAction::Accept as i32,
        content_json: content.to_string(),
    }
}

async fn server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    tokio::spawn(super::serve(listener, CancellationToken::new()));
    url
}

async fn tool(url: &str, protocol: Protocol, name: &str) -> RemoteTool {
    let mut s = RemoteServer::new(url);
    s.protocol = protocol;
    let tools = discover(&s).await.expect("discovered");
    tools.into_iter().find(|t| t.spec.name == name).expect("tool listed")
}

fn assignment(tool: &str, input: Value) -> wpb::Assignment {
    let deadline = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock") + Duration::from_secs(30);
    wpb::Assignment {
        execution_id: "te_test".into(),
        attempt: 1,
        tool_name: tool.into(),
        input_json: input.to_string(),
        deadline_ms: deadline.as_millis() as i64,
        ..Default::default()
    }
}

async fn drive(t: &RemoteTool, a: &wpb::Assignment, answer: bool) -> (Option<Outcome>, Vec<Msg>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let up = FakeCoordinator { tx, sent: Mutex::new(Vec::new()), answer };
    let outcome =
        tokio::time::timeout(Duration::from_secs(20), Driver::new(t, a, &up, &mut rx, CancellationToken::new()).run())
            .await
            .expect("driver finished");
    (outcome, up.sent.into_inner().expect("lock"))
}

fn text(o: &Option<Outcome>) -> String {
    let Some(Outcome::ResultJson(j)) = o else { panic!("not a result: {o:?}") };
    let v: Value = serde_json::from_str(j).expect("json");
    v["content"][0]["text"].as_str().expect("text").to_owned()
}

#[tokio::test]
async fn input_is_relayed_in_both_dialects() {
    let url = server().await;
    for protocol in [Protocol::V2025, Protocol::V2026] {
        let t = tool(&url, protocol, "confirm_delete").await;
        assert!(t.as_task && t.spec.task_time_input, "{protocol:?}");
        let (o, sent) = drive(&t, &assignment("confirm_delete", json!({"filename": "a.txt"})), true).await;
        assert_eq!(text(&o), "Deleted a.txt.", "{protocol:?}");
        assert!(sent.iter().any(|m| matches!(m, Msg::InputDelivered(_))), "{protocol:?}: {sent:?}");
        let t = tool(&url, protocol, "multi_input").await;
        let (o, sent) = drive(&t, &assignment("multi_input", json!({})), true).await;
        assert_eq!(text(&o), "Hello, Ada! Confirmed: true.", "{protocol:?}");
        let asked: usize = sent
            .iter()
            .filter_map(|m| if let Msg::InputRequested(r) = m { Some(r.requests.len()) } else { None })
            .sum();
        assert_eq!(asked, 2, "{protocol:?}: each request published once");
    }
}

#[tokio::test]
async fn a_resumed_attempt_polls_the_recorded_task_and_relays_pending_answers() {
    let url = server().await;
    for protocol in [Protocol::V2025, Protocol::V2026] {
        let t = tool(&url, protocol, "confirm_delete").await;
        let a = assignment("confirm_delete", json!({"filename": "b.txt"}));
        // First owner: records the task and publishes the request, then goes away.
        let (tx, mut rx) = mpsc::unbounded_channel();
        let up = FakeCoordinator { tx, sent: Mutex::new(Vec::new()), answer: false };
        let abandon = CancellationToken::new();
        let stop = abandon.clone();
        let first = tokio::spawn({
            let (t, a) = (t.clone(), a.clone());
            async move { Driver::new(&t, &a, &up, &mut rx, abandon).run().await.is_none().then_some(up) }
        });
        tokio::time::sleep(Duration::from_millis(800)).await;
        stop.cancel();
        let up = first.await.expect("joined").expect("abandoned, no settlement");
        let sent = up.sent.into_inner().expect("lock");
        let recorded = sent
            .iter()
            .find_map(|m| if let Msg::RemoteTaskStarted(r) = m { Some(r.remote_task_id.clone()) } else { None })
            .expect("recorded");
        let asked = sent
            .iter()
            .find_map(|m| if let Msg::InputRequested(r) = m { Some(r.clone()) } else { None })
            .expect("published");
        // The owner answered meanwhile; the next owner resumes with the answer.
        let mut resumed = a.clone();
        resumed.resume_remote_task_id = recorded;
        resumed.pending_input = vec![answer_for(&asked, &asked.requests[0])];
        let (o, sent) = drive(&t, &resumed, false).await;
        assert_eq!(text(&o), "Deleted b.txt.", "{protocol:?}");
        assert!(!sent.iter().any(|m| matches!(m, Msg::RemoteTaskStarted(_))), "{protocol:?}: no second call");
    }
}

#[tokio::test]
async fn a_stop_cancels_the_remote_task() {
    let url = server().await;
    for protocol in [Protocol::V2025, Protocol::V2026] {
        let t = tool(&url, protocol, "review_then_approve").await;
        let a = assignment("review_then_approve", json!({"seconds": 30}));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let up = FakeCoordinator { tx: tx.clone(), sent: Mutex::new(Vec::new()), answer: true };
        let run = Driver::new(&t, &a, &up, &mut rx, CancellationToken::new()).run();
        let stop = async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let _ = tx.send(Relay::Stop(wpb::StopReason::Cancelled));
            std::future::pending::<()>().await
        };
        let o = tokio::select! { o = run => o, _ = stop => unreachable!() };
        assert_eq!(o, Some(Outcome::Cancelled(true)), "{protocol:?}");
    }
}

#[tokio::test]
async fn a_tool_without_a_task_is_a_plain_call() {
    let url = server().await;
    for protocol in [Protocol::V2025, Protocol::V2026] {
        let t = tool(&url, protocol, "shout").await;
        assert_eq!(t.as_task, protocol == Protocol::V2026, "{protocol:?}: 2026-07-28 lets the server decide");
        let (o, sent) = drive(&t, &assignment("shout", json!({"text": "hi"})), true).await;
        assert_eq!(text(&o), "HI", "{protocol:?}");
        assert!(sent.is_empty(), "{protocol:?}: nothing to record: {sent:?}");
    }
}
