//! Watch streams on SQLite: one entry per execution however many `Watch`es,
//! a foreign credential refused as not found, a change pushed once, and
//! nothing left registered when the stream ends.

use super::Error;
use super::lifecycle::StartRequest;
use super::subscriptions::{WatchIn, WatchOut};
use super::tests::World;
use crate::authz;
use crate::domain::Status;
use sha2::Digest;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

fn watch(tag: u64, token: &str, w: &World, id: &str) -> WatchIn {
    WatchIn::Watch {
        tag,
        authorization: format!("Bearer {token}"),
        org_id: w.org_id.clone(),
        project_id: w.project_id.clone(),
        execution_id: id.to_owned(),
    }
}

/// Starts a `Test.Echo` as the world's user; its id.
async fn started(w: &World) -> String {
    let start = StartRequest {
        org_id: w.org_id.clone(),
        project_id: w.project_id.clone(),
        gateway_id: w.gateway_id.clone(),
        tool_name: "Test.Echo".into(),
        input_json: "{}".into(),
        request_fingerprint: "f".into(),
        surface: crate::domain::Surface::Rest,
        ..Default::default()
    };
    w.engine.start(w.bearer().as_deref(), start).await.expect("start").record.id.to_string()
}

#[tokio::test]
async fn a_stream_follows_each_execution_once_and_pushes_a_change_once() {
    let w = World::new().await;
    let (_session, _commands) = w.worker("wk_subs", Vec::new()).await;
    let id = started(&w).await;
    let bob = crate::admin::issue_end_user_token(&w.engine.store, &w.gateway_id, "bob").await.expect("bob").token;
    let user = w.bearer().expect("bearer").trim_start_matches("Bearer ").to_owned();

    let (send, incoming) = mpsc::unbounded_channel();
    let (out, mut answers) = mpsc::channel(64);
    let served = tokio::spawn(w.engine.clone().serve_watch_stream(UnboundedReceiverStream::new(incoming), out));

    send.send(watch(1, &bob, &w, &id)).expect("sent");
    match answers.recv().await.expect("answer") {
        WatchOut::Refused { tag: 1, error: Error::Auth(authz::Error::NotFound) } => {}
        other => panic!("a foreign watch reads as not found: {other:?}"),
    }
    for tag in 2..=21 {
        send.send(watch(tag, &user, &w, &id)).expect("sent");
    }
    for _ in 2..=21 {
        match answers.recv().await.expect("answer") {
            WatchOut::Watched { record, .. } => assert_eq!(record.id.as_str(), id),
            other => panic!("the owner's watch is answered: {other:?}"),
        }
    }
    assert_eq!(w.engine.changes.listener_count(), 1, "one entry for the execution, not one per watch");

    w.engine.cancel(w.bearer().as_deref(), w.scope(), &id).await.expect("cancel");
    match answers.recv().await.expect("push") {
        WatchOut::Changed { record, reader } => {
            assert_eq!(record.status(), Status::Cancelled);
            let bearer = w.bearer().expect("bearer");
            assert_eq!(
                reader,
                sha2::Sha256::digest(bearer.as_bytes()).to_vec(),
                "names the credential it was read with"
            );
        }
        other => panic!("the change is pushed: {other:?}"),
    }

    drop(send);
    served.await.expect("served");
    assert_eq!(w.engine.changes.listener_count(), 0, "an ended stream follows nothing");
    assert!(answers.recv().await.is_none(), "one push per change, then the end");
}

#[tokio::test]
async fn a_stream_keeps_taking_requests_while_its_answers_wait_to_be_sent() {
    let w = World::new().await;
    let (_session, _commands) = w.worker("wk_subs_queue", Vec::new()).await;
    let id = started(&w).await;
    let user = w.bearer().expect("bearer").trim_start_matches("Bearer ").to_owned();

    // Room for one request and one answer; nobody reads the answers yet.
    let (send, incoming) = mpsc::channel(1);
    let (out, mut answers) = mpsc::channel(1);
    let served =
        tokio::spawn(w.engine.clone().serve_watch_stream(tokio_stream::wrappers::ReceiverStream::new(incoming), out));
    const WATCHES: u64 = 50;
    let sending = async {
        for tag in 1..=WATCHES {
            send.send(watch(tag, &user, &w, &id)).await.expect("sent");
        }
    };
    // A stream that stopped reading while its answers queue would never take
    // them all (its peer's HTTP/2 frames would pile up unread); the bound only
    // turns such a hang into a failure.
    tokio::time::timeout(std::time::Duration::from_secs(60), sending).await.expect("every request taken");
    let mut tags = Vec::new();
    while tags.len() < WATCHES as usize {
        match answers.recv().await.expect("answer") {
            WatchOut::Watched { tag, record } => {
                assert_eq!(record.id.as_str(), id);
                tags.push(tag);
            }
            other => panic!("the owner's watch is answered: {other:?}"),
        }
    }
    tags.sort_unstable();
    assert_eq!(tags, (1..=WATCHES).collect::<Vec<_>>(), "every watch answered once");
    drop(send);
    served.await.expect("served");
}
