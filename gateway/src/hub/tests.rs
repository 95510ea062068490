//! The hub against an in-process `Waits` service that follows the protocol:
//! answers each `Watch` with a view, pushes changes, refuses a foreign token.

use super::*;
use baton_proto::coordinator::v1::waits_server::{Waits, WaitsServer};
use futures_util::StreamExt as _;
use std::pin::Pin;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

type Events = Pin<Box<dyn futures_util::Stream<Item = Result<pb::WatchEvent, Status>> + Send>>;
type Pushes = mpsc::Sender<Result<pb::WatchEvent, Status>>;

/// A fake coordinator: the execution "te_a" at a version the test moves.
#[derive(Clone, Default)]
struct Fake {
    /// The open stream's sender, to push changes from the test.
    push: Arc<Mutex<Option<Pushes>>>,
    watches: Arc<Mutex<Vec<String>>>,
    unwatches: Arc<Mutex<Vec<String>>>,
}

fn view(status: pb::ExecutionStatus) -> pb::ExecutionView {
    pb::ExecutionView { execution_id: "te_a".into(), status: status as i32, ..Default::default() }
}

fn event(kind: watch_event::Kind) -> Result<pb::WatchEvent, Status> {
    Ok(pb::WatchEvent { kind: Some(kind) })
}

#[tonic::async_trait]
impl Waits for Fake {
    type WatchExecutionsStream = Events;

    async fn watch_executions(&self, req: Request<Streaming<pb::WatchRequest>>) -> Result<Response<Events>, Status> {
        let (tx, rx) = mpsc::channel(64);
        *self.push.lock().expect("lock") = Some(tx.clone());
        let (watches, unwatches) = (self.watches.clone(), self.unwatches.clone());
        let mut incoming = req.into_inner();
        tokio::spawn(async move {
            while let Ok(Some(m)) = incoming.message().await {
                match m.kind {
                    Some(watch_request::Kind::Watch(w)) => {
                        watches.lock().expect("lock").push(w.authorization.clone());
                        let kind = if w.authorization == "Bearer good" {
                            watch_event::Kind::Watched(pb::Watched {
                                tag: w.tag,
                                version: 1,
                                execution: Some(view(pb::ExecutionStatus::Working)),
                                reader: Vec::new(),
                            })
                        } else {
                            watch_event::Kind::Refused(pb::WatchRefused {
                                tag: w.tag,
                                code: "not_found".into(),
                                message: "execution not found".into(),
                            })
                        };
                        let _ = tx.send(event(kind)).await;
                    }
                    Some(watch_request::Kind::Unwatch(u)) => unwatches.lock().expect("lock").push(u.execution_id),
                    None => {}
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx).boxed()))
    }
}

async fn hub_with_fake() -> (Hub, Fake) {
    let fake = Fake::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tonic::transport::Server::builder().add_service(WaitsServer::new(fake.clone()));
    tokio::spawn(server.serve_with_incoming(TcpListenerStream::new(listener)));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).expect("url").connect_lazy();
    (Hub::new(channel), fake)
}

/// Waits until the member's entry shows what `want` accepts.
async fn until(member: &mut Member, want: impl Fn(&Latest) -> bool) {
    while !want(&member.latest.borrow_and_update()) {
        member.latest.changed().await.expect("entry alive");
    }
}

fn seen(version: i64) -> impl Fn(&Latest) -> bool {
    move |l| matches!(l, Latest::Seen(s) if s.version == version)
}

/// Joins; the first join dials the stream and waits for it.
async fn join(hub: &Hub) -> Member {
    hub.join("te_a").await.expect("the stream is up")
}

#[tokio::test]
async fn many_waiters_share_one_entry_and_one_push_wakes_them_all() {
    let (hub, fake) = hub_with_fake().await;
    let mut members = Vec::new();
    for _ in 0..50 {
        let member = join(&hub).await;
        let seen = member.watch("Bearer good".into(), "o", "p").await.expect("watched");
        assert_eq!((seen.version, seen.view.status()), (1, pb::ExecutionStatus::Working));
        members.push(member);
    }
    assert_eq!(hub.counts(), (1, 50), "one entry for all the waiters");
    let push = fake.push.lock().expect("lock").clone().expect("stream open");
    let changed =
        pb::Watched { tag: 0, version: 2, execution: Some(view(pb::ExecutionStatus::Completed)), reader: Vec::new() };
    push.send(event(watch_event::Kind::Changed(changed))).await.expect("pushed");
    for member in &mut members {
        until(member, seen(2)).await;
        let Latest::Seen(seen) = &*member.latest.borrow() else { panic!("a view") };
        assert_eq!(seen.view.status(), pb::ExecutionStatus::Completed);
    }
    drop(members);
    assert_eq!(hub.counts(), (0, 0), "the last waiter to leave ends the entry");
    // The one Unwatch is sent as the last member leaves.
    while fake.unwatches.lock().expect("lock").is_empty() {
        tokio::task::yield_now().await;
    }
    assert_eq!(*fake.unwatches.lock().expect("lock"), ["te_a"]);
}

#[tokio::test]
async fn an_older_push_never_replaces_a_newer_view() {
    let (hub, fake) = hub_with_fake().await;
    let mut member = join(&hub).await;
    member.watch("Bearer good".into(), "o", "p").await.expect("watched");
    let push = fake.push.lock().expect("lock").clone().expect("stream open");
    for (version, status) in [(3, pb::ExecutionStatus::InputRequired), (2, pb::ExecutionStatus::Working)] {
        let changed = pb::Watched { tag: 0, version, execution: Some(view(status)), reader: Vec::new() };
        push.send(event(watch_event::Kind::Changed(changed))).await.expect("pushed");
    }
    // A refused watch afterwards proves both pushes were received before it.
    let other = join(&hub).await;
    assert!(matches!(other.watch("Bearer bad".into(), "o", "p").await, Err(WatchError::Refused(_))));
    let Latest::Seen(seen) = &*member.latest.borrow_and_update() else { panic!("a view") };
    assert_eq!((seen.version, seen.view.status()), (3, pb::ExecutionStatus::InputRequired));
}

#[tokio::test]
async fn a_refused_watch_answers_its_error_and_a_lapse_marks_the_entry_lost() {
    let (hub, fake) = hub_with_fake().await;
    let mut member = join(&hub).await;
    match member.watch("Bearer bad".into(), "o", "p").await {
        Err(WatchError::Refused(e)) => assert_eq!(e.code, ErrorCode::NotFound),
        other => panic!("refused, not {other:?}"),
    }
    member.watch("Bearer good".into(), "o", "p").await.expect("watched");
    let push = fake.push.lock().expect("lock").clone().expect("stream open");
    push.send(event(watch_event::Kind::Lapsed(pb::WatchLapsed { execution_id: "te_a".into() }))).await.expect("sent");
    until(&mut member, |l| matches!(l, Latest::Lost)).await;
    assert_eq!(fake.watches.lock().expect("lock").len(), 2);
}

#[tokio::test]
async fn a_broken_stream_loses_every_entry_and_fails_pending_watches() {
    let (hub, fake) = hub_with_fake().await;
    let mut member = join(&hub).await;
    member.watch("Bearer good".into(), "o", "p").await.expect("watched");
    // The coordinator ends the stream (a restart, say).
    fake.push.lock().expect("lock").take();
    hub.inner.lost_stream();
    assert!(matches!(*member.latest.borrow_and_update(), Latest::Lost));
    assert!(hub.join("te_a").await.is_none(), "no stream: waits use unary calls");
}
