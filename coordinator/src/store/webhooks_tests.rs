//! The signal outbox against both backends: rows are written with the
//! transition that enters a signalled state, once per enabled endpoint of the
//! project, and each is claimed by one deliverer at a time until its lease ends.

use super::contract_tests::{backends, new_execution, settle, tools};
use super::*;
use crate::domain::{Event, Outcome, Status};

pub(super) fn endpoint(id: &str, project_id: &str, enabled: bool) -> EndpointRecord {
    EndpointRecord {
        id: id.into(),
        org_id: "org_1".into(),
        project_id: project_id.into(),
        url: "http://127.0.0.1:9/h".into(),
        event_type: crate::webhooks::EVENT_TYPE.into(),
        secret_ct: vec![1],
        previous_secret_ct: None,
        previous_until: None,
        enabled,
        created_at: 1,
        updated_at: 1,
    }
}

#[tokio::test]
async fn signals_are_written_with_their_transition_and_leased_to_one_deliverer() {
    for b in backends().await {
        let s = &b.store;
        s.create_org("org_1", "o", 1).await.expect("org");
        for p in ["p1", "p2"] {
            s.create_project(p, "org_1", p, 1).await.expect("project");
        }
        assert!(s.create_webhook(&endpoint("wh_a", "p1", true), 10).await.expect("endpoint"));
        assert!(s.create_webhook(&endpoint("wh_b", "p1", true), 10).await.expect("endpoint"));
        assert!(s.create_webhook(&endpoint("wh_off", "p2", false), 10).await.expect("endpoint"));
        let signalled = new_execution("p1", "u1", None, "f", 1_000);
        let quiet = new_execution("p2", "u1", None, "f", 1_000);
        s.create_execution(&signalled).await.expect("create");
        s.create_execution(&quiet).await.expect("create");
        assert_eq!(s.claim("p1", &tools(), "w", 10, 2_000, 60_000).await.expect("claim").len(), 1);
        assert_eq!(s.claim("p2", &tools(), "w", 10, 2_000, 60_000).await.expect("claim").len(), 1);
        // Pending and working are never signalled.
        assert!(s.webhook_deliveries("wh_a", 10).await.expect("read").is_empty(), "{}", b.name);
        settle(s, &signalled.id, 1, Outcome::Success, 3_000).await;
        settle(s, &quiet.id, 1, Outcome::Success, 3_000).await;
        let (a, b2) =
            (s.webhook_deliveries("wh_a", 10).await.expect("a"), s.webhook_deliveries("wh_b", 10).await.expect("b"));
        assert_eq!((a.len(), b2.len()), (1, 1), "{}: one row per enabled endpoint", b.name);
        assert_eq!(a[0].message_id, b2[0].message_id, "one message, one webhook-id");
        assert_eq!(
            (a[0].state.as_str(), a[0].status.as_str(), a[0].next_attempt_at),
            ("completed", "pending", Some(3_000))
        );
        assert!(s.webhook_deliveries("wh_off", 10).await.expect("off").is_empty(), "{}: disabled", b.name);

        // One deliverer at a time; a dead one's lease ends and another takes the row.
        let first = s.claim_webhook_deliveries("co_a", 4_000, 14_000, 10).await.expect("claim");
        assert_eq!(first.len(), 2, "{}", b.name);
        let body: serde_json::Value = serde_json::from_str(&first[0].body).expect("json");
        let keys: Vec<&str> = body.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
        assert_eq!(keys.len(), 5, "{body}");
        assert!(s.claim_webhook_deliveries("co_b", 5_000, 15_000, 10).await.expect("claim").is_empty());
        let again = s.claim_webhook_deliveries("co_b", 14_000, 24_000, 10).await.expect("claim");
        assert_eq!(again.len(), 2, "{}: taken again after the lease", b.name);
        let done = AttemptOutcome {
            at: 15_000,
            status_code: Some(204),
            error: None,
            status: "delivered",
            next_attempt_at: 15_000,
        };
        assert!(
            !s.finish_webhook_attempt(&again[0].id, "co_a", &done).await.expect("stale"),
            "the old holder is ignored"
        );
        assert!(s.finish_webhook_attempt(&again[0].id, "co_b", &done).await.expect("finish"));
        let retry = AttemptOutcome {
            at: 15_000,
            status_code: Some(500),
            error: Some("answered 500".into()),
            status: "pending",
            next_attempt_at: 16_000,
        };
        assert!(s.finish_webhook_attempt(&again[1].id, "co_b", &retry).await.expect("finish"));
        assert!(s.claim_webhook_deliveries("co_c", 15_500, 25_000, 10).await.expect("claim").is_empty());
        let retried = s.claim_webhook_deliveries("co_c", 16_000, 26_000, 10).await.expect("claim");
        assert_eq!((retried.len(), retried[0].attempts), (1, 1), "{}", b.name);
        // A deleted endpoint takes its owed signals with it.
        assert!(s.delete_webhook("wh_a").await.expect("delete"));
        assert!(s.webhook_deliveries("wh_a", 10).await.expect("read").is_empty());
    }
}

/// A worker's batch of settlements is written together (on Postgres as one
/// statement): each execution's row, its event, its attempt's outcome and
/// its signal, for every execution of the batch and only for those applied.
#[tokio::test]
async fn a_batch_of_settlements_writes_each_row_event_attempt_and_signal() {
    for b in backends().await {
        b.store.create_org("org_1", "o", 1).await.expect("org");
        b.store.create_project("p1", "org_1", "p1", 1).await.expect("project");
        assert!(b.store.create_webhook(&endpoint("we_batch", "p1", true), 10).await.expect("endpoint"));
        let mut ids = Vec::new();
        for i in 0..3 {
            let new = new_execution("p1", "u1", None, "f", 1_000 + i);
            b.store.create_execution(&new).await.expect("create");
            ids.push(new.id);
        }
        assert_eq!(b.store.claim("p1", &tools(), "w", 3, 1_100, 9_000).await.expect("claim").len(), 3);
        // The third was settled already: the batch's event for it is ignored.
        settle(&b.store, &ids[2], 1, Outcome::Success, 1_150).await;
        let settle_as = |outcome: Outcome| Event::Settle { worker_id: "w".into(), attempt: 1, outcome };
        let items = vec![
            (
                ids[0].clone(),
                settle_as(Outcome::Success),
                EventData { output_ct: Some(vec![7; 3]), payload_bytes: 3, ..Default::default() },
            ),
            (
                ids[1].clone(),
                settle_as(Outcome::ToolError { retryable: false }),
                EventData { error_message: Some("it broke".into()), ..Default::default() },
            ),
            (ids[2].clone(), settle_as(Outcome::Success), EventData::default()),
        ];
        let answers = b.store.apply_batch(&items, 1_200).await.expect("batch");
        let applied: Vec<bool> = answers.iter().map(|a| matches!(a, Some(Ok(_)))).collect();
        assert_eq!(applied, [true, true, false], "{}", b.name);

        for (id, status, success, kinds) in [
            (&ids[0], Status::Completed, true, ["created", "claimed", "settled"]),
            (&ids[1], Status::Failed, false, ["created", "claimed", "settled"]),
        ] {
            let row = b.store.get_execution(id).await.expect("get").expect("exists");
            assert_eq!((row.status(), row.finished_at), (status, Some(1_200)), "{}", b.name);
            let attempts = b.store.list_attempts(id).await.expect("attempts");
            assert_eq!(attempts.len(), 1, "{}", b.name);
            assert_eq!((attempts[0].success, attempts[0].finished_at), (Some(success), Some(1_200)), "{}", b.name);
            let events: Vec<&str> = b
                .store
                .list_events(id)
                .await
                .expect("events")
                .into_iter()
                .map(|e| e.kind.map_or("", |k| k.as_str()))
                .collect();
            assert_eq!(events, kinds, "{}", b.name);
        }
        let row = b.store.get_execution(&ids[1]).await.expect("get").expect("exists");
        assert_eq!(row.error_message.as_deref(), Some("it broke"), "{}", b.name);
        let attempts = b.store.list_attempts(&ids[0]).await.expect("attempts");
        assert_eq!(attempts[0].output_ct.as_deref(), Some(&[7u8; 3][..]), "{}", b.name);

        let mut signalled: Vec<(String, String)> = b
            .store
            .webhook_deliveries("we_batch", 10)
            .await
            .expect("deliveries")
            .into_iter()
            .map(|d| (d.execution_id, d.state))
            .collect();
        signalled.sort();
        let mut expected = vec![
            (ids[0].to_string(), "completed".into()),
            (ids[1].to_string(), "failed".into()),
            (ids[2].to_string(), "completed".into()),
        ];
        expected.sort();
        assert_eq!(signalled, expected, "{}: one signal per settlement, none for the ignored event", b.name);
    }
}

#[tokio::test]
async fn a_project_holds_at_most_its_cap_of_endpoints() {
    for b in backends().await {
        let s = &b.store;
        s.create_org("org_1", "o", 1).await.expect("org");
        for p in ["p1", "p2"] {
            s.create_project(p, "org_1", p, 1).await.expect("project");
        }
        assert!(s.create_webhook(&endpoint("wh_1", "p1", true), 2).await.expect("first"));
        assert!(s.create_webhook(&endpoint("wh_2", "p1", false), 2).await.expect("second"));
        assert!(!s.create_webhook(&endpoint("wh_3", "p1", true), 2).await.expect("third"), "{}", b.name);
        assert!(s.create_webhook(&endpoint("wh_4", "p2", true), 2).await.expect("another project"), "{}", b.name);
        assert_eq!(s.webhooks("p1").await.expect("list").len(), 2, "{}", b.name);
    }
}

/// A commit says whether it queued a delivery: the engine wakes the delivery
/// loop on that alone, so a project without endpoints (or with its only one
/// disabled) costs the loop no claim per settlement.
#[tokio::test]
async fn a_transition_says_whether_it_queued_a_delivery() {
    for b in backends().await {
        let s = &b.store;
        s.create_org("org_1", "o", 1).await.expect("org");
        for p in ["p1", "p2", "p3"] {
            s.create_project(p, "org_1", p, 1).await.expect("project");
        }
        assert!(s.create_webhook(&endpoint("we_on", "p1", true), 10).await.expect("endpoint"));
        assert!(s.create_webhook(&endpoint("we_off", "p3", false), 10).await.expect("endpoint"));
        let settle_as = Event::Settle { worker_id: "w".into(), attempt: 1, outcome: Outcome::Success };
        let mut queued = Vec::new();
        for (i, p) in ["p1", "p2", "p3"].into_iter().enumerate() {
            let new = new_execution(p, "u1", None, "f", 1_000 + i as i64);
            s.create_execution(&new).await.expect("create");
            let claimed = s.claim(p, &tools(), "w", 1, 1_100, 9_000).await.expect("claim");
            assert!(claimed.iter().all(|c| c.record.id == new.id), "{}", b.name);
            // One alone, two in a batch: both write paths answer it.
            let alone = s.apply(&new.id, &settle_as, &EventData::default(), 1_200).await.expect("apply");
            let Some(Ok(applied)) = alone else { panic!("{}: settled", b.name) };
            queued.push((p, applied.deliveries_queued));
        }
        assert_eq!(queued, [("p1", true), ("p2", false), ("p3", false)], "{}", b.name);

        let mut ids = Vec::new();
        for p in ["p2", "p2"] {
            let new = new_execution(p, "u1", None, "f", 2_000);
            s.create_execution(&new).await.expect("create");
            ids.push(new.id);
        }
        assert_eq!(s.claim("p2", &tools(), "w", 2, 2_100, 9_000).await.expect("claim").len(), 2, "{}", b.name);
        let items: Vec<_> = ids.iter().map(|id| (id.clone(), settle_as.clone(), EventData::default())).collect();
        let answers = s.apply_batch(&items, 2_200).await.expect("batch");
        let flags: Vec<Option<bool>> =
            answers.iter().map(|a| a.as_ref().and_then(|a| a.as_ref().ok()).map(|a| a.deliveries_queued)).collect();
        assert_eq!(flags, [Some(false), Some(false)], "{}: a project without endpoints", b.name);
        assert!(s.create_webhook(&endpoint("we_p2", "p2", true), 3_000).await.expect("endpoint"));
        let mut later = Vec::new();
        for _ in 0..2 {
            let new = new_execution("p2", "u1", None, "f", 3_000);
            s.create_execution(&new).await.expect("create");
            later.push(new.id);
        }
        assert_eq!(s.claim("p2", &tools(), "w", 2, 3_100, 9_000).await.expect("claim").len(), 2, "{}", b.name);
        let items: Vec<_> = later.iter().map(|id| (id.clone(), settle_as.clone(), EventData::default())).collect();
        let answers = s.apply_batch(&items, 3_200).await.expect("batch");
        let flags: Vec<Option<bool>> =
            answers.iter().map(|a| a.as_ref().and_then(|a| a.as_ref().ok()).map(|a| a.deliveries_queued)).collect();
        assert_eq!(flags, [Some(true), Some(true)], "{}: once the project has an endpoint", b.name);
    }
}
