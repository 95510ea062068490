//! Waiting at scale (issue #21): parked waits share one coordinator stream
//! per gateway. Many waiters on one execution are all answered when it
//! settles; a waiter whose credential is revoked while parked gets 401 at
//! wake-up, while another on the same execution gets the change; a foreign
//! caller can neither wait on nor subscribe to another's execution (the
//! uniform not-found, on the gateway and on the coordinator's stream); a
//! wait is woken by a settlement on another coordinator replica.

use crate::harness::{Cluster, Rest, Settings, eventually};
use baton_proto::coordinator::v1::{self as pb, waits_client::WaitsClient, watch_event, watch_request};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;

/// Generous bound for anything the system should do on its own; never a pass criterion.
const PATIENCE: Duration = Duration::from_secs(60);
/// Longer than any test waits for a change: a wait that times out answers
/// the execution still working, which fails the test's status check.
const WAIT_MS: u64 = 40_000;

async fn cluster(coordinators: usize, worker_on: usize, max_waits_per_principal: usize) -> Cluster {
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    for _ in 0..coordinators {
        c.start_coordinator().await.expect("coordinator");
    }
    let env = [("BATON_GATEWAY__MAX_WAITS_PER_PRINCIPAL", max_waits_per_principal.to_string())];
    c.start_gateway_with(0, &env).await.expect("gateway");
    c.start_worker(worker_on).await.expect("worker");
    c
}

/// A Demo.Sleep long enough never to finish within a test, once it is working.
async fn sleeping(rest: &Rest) -> String {
    let started = rest.start("Demo.Sleep", json!({"seconds": 600}), None).await.expect("start");
    assert_eq!(started.status, 202, "{}", started.json());
    let id = started.json()["execution_id"].as_str().expect("execution_id").to_owned();
    eventually(PATIENCE, "working", || async {
        Ok((rest.get(&format!("/tool-executions/{id}")).await?.json()["status"] == "working").then_some(()))
    })
    .await
    .expect("working");
    id
}

/// One long poll, in the background: its status and body.
fn long_poll(rest: &Rest, id: &str) -> tokio::task::JoinHandle<(u16, Value)> {
    let (rest, path) = (rest.clone_for_task(), format!("/tool-executions/{id}?wait_ms={WAIT_MS}"));
    tokio::spawn(async move {
        loop {
            let r = rest.get(&path).await.expect("long poll");
            // A probe may hold a place for a moment: come back, as a good client does.
            if r.status != 429 {
                return (r.status, r.json());
            }
            tokio::task::yield_now().await;
        }
    })
}

/// Returns once `rest`'s caller holds every wait place it has: a probe is
/// refused `too_many_waits` only while all of them are parked.
async fn all_parked(rest: &Rest, id: &str) {
    eventually(PATIENCE, "every wait parked", || async {
        let probe = rest.get(&format!("/tool-executions/{id}?wait_ms=1")).await?;
        Ok((probe.status == 429 && probe.json()["error"]["code"] == "too_many_waits").then_some(()))
    })
    .await
    .expect("parked");
}

trait CloneForTask {
    fn clone_for_task(&self) -> Rest;
}

impl CloneForTask for Rest {
    fn clone_for_task(&self) -> Rest {
        Rest {
            http: self.http.clone(),
            base: self.base.clone(),
            token: self.token.clone(),
            gateway_id: self.gateway_id.clone(),
        }
    }
}

async fn cancel(rest: &Rest, id: &str) {
    let r = rest.post(&format!("/tool-executions/{id}/cancel"), json!({})).await.expect("cancel");
    assert!(r.status < 300, "cancel: {} {}", r.status, r.json());
}

#[tokio::test]
async fn many_waiters_on_one_execution_are_all_answered_when_it_settles() {
    const WAITERS: usize = 40;
    let c = cluster(1, 0, WAITERS).await;
    let alice = c.rest(0, &c.id.user_token);
    let id = sleeping(&alice).await;
    let polls: Vec<_> = (0..WAITERS).map(|_| long_poll(&alice, &id)).collect();
    all_parked(&alice, &id).await;
    cancel(&alice, &id).await;
    for poll in polls {
        let (status, body) = poll.await.expect("joined");
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], "cancelled", "woken by the settlement, not timed out: {body}");
    }
}

#[tokio::test]
async fn a_waiter_revoked_while_parked_gets_401_and_its_neighbour_the_change() {
    let c = cluster(1, 0, 1).await;
    // Two credentials of one user: both may read the execution.
    let issued = c
        .admin(&["create-end-user-token", "--gateway", &c.id.gateway_id, "--user", "alice@example.com"])
        .await
        .expect("token");
    let carol = c.rest(0, issued["token"].as_str().expect("token"));
    let alice = c.rest(0, &c.id.user_token);
    let id = sleeping(&carol).await;
    let revoked = long_poll(&carol, &id);
    let kept = long_poll(&alice, &id);
    all_parked(&carol, &id).await;
    all_parked(&alice, &id).await;
    c.admin(&["revoke", "--id", issued["id"].as_str().expect("id")]).await.expect("revoke");
    cancel(&alice, &id).await;
    let (status, body) = revoked.await.expect("joined");
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("unauthenticated")), "{body}");
    let (status, body) = kept.await.expect("joined");
    assert_eq!((status, body["status"].as_str()), (200, Some("cancelled")), "{body}");
}

#[tokio::test]
async fn a_foreign_caller_can_neither_wait_on_nor_subscribe_to_anothers_execution() {
    let c = cluster(1, 0, 10).await;
    let alice = c.rest(0, &c.id.user_token);
    let id = sleeping(&alice).await;
    // Through the gateway: the same bytes as an execution that does not exist.
    let bob = c.rest(0, &c.id.other_user_token);
    let foreign = bob.get(&format!("/tool-executions/{id}?wait_ms=1000")).await.expect("foreign");
    let unknown = bob.get("/tool-executions/te_0000000000000000000000000000?wait_ms=1000").await.expect("unknown");
    assert_eq!((foreign.status, &foreign.bytes), (404, &unknown.bytes));

    // On the coordinator's stream itself.
    let mut client = WaitsClient::connect(c.coordinator_url(0)).await.expect("coordinator");
    let (send, outgoing) = mpsc::unbounded_channel();
    let requests = futures_util::stream::unfold(outgoing, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut events = client.watch_executions(requests).await.expect("stream").into_inner();
    let watch = |tag: u64, token: &str, execution_id: &str| pb::WatchRequest {
        kind: Some(watch_request::Kind::Watch(pb::Watch {
            tag,
            authorization: format!("Bearer {token}"),
            org_id: c.id.org_id.clone(),
            project_id: c.id.project_id.clone(),
            execution_id: execution_id.to_owned(),
        })),
    };
    let mut answers = Vec::new();
    for (tag, token, execution) in [
        (1, c.id.other_user_token.as_str(), id.as_str()),
        (2, c.id.other_user_token.as_str(), "te_0000000000000000000000000000"),
        (3, "not-a-token", id.as_str()),
        (4, c.id.user_token.as_str(), id.as_str()),
    ] {
        send.send(watch(tag, token, execution)).expect("sent");
        let event = tokio::time::timeout(PATIENCE, events.message()).await.expect("answered").expect("ok");
        answers.push(event.and_then(|e| e.kind).expect("an event"));
    }
    let refusal = |kind: &watch_event::Kind| match kind {
        watch_event::Kind::Refused(r) => Some((r.code.clone(), r.message.clone())),
        _ => None,
    };
    assert_eq!(refusal(&answers[0]).map(|r| r.0), Some("not_found".to_owned()));
    assert_eq!(refusal(&answers[0]), refusal(&answers[1]), "foreign reads as unknown");
    assert_eq!(refusal(&answers[2]).map(|r| r.0), Some("unauthenticated".to_owned()));
    match &answers[3] {
        watch_event::Kind::Watched(w) => {
            assert_eq!(w.execution.as_ref().map(|v| v.execution_id.as_str()), Some(id.as_str()));
            assert!(w.version > 0);
        }
        other => panic!("the owner's watch is answered: {other:?}"),
    }
}

#[tokio::test]
async fn a_wait_is_woken_by_a_settlement_on_another_replica() {
    // The gateway's stream goes to coordinator 0; the worker settles on 1.
    let c = cluster(2, 1, 1).await;
    let alice = c.rest(0, &c.id.user_token);
    let id = sleeping(&alice).await;
    let poll = long_poll(&alice, &id);
    all_parked(&alice, &id).await;
    cancel(&alice, &id).await;
    let (status, body) = poll.await.expect("joined");
    assert_eq!((status, body["status"].as_str()), (200, Some("cancelled")), "{body}");
}
