//! The signal outbox against both backends: rows are written with the
//! transition that enters a signalled state, once per enabled endpoint of the
//! project, and each is claimed by one deliverer at a time until its lease ends.

use super::contract_tests::{backends, new_execution, settle, tools};
use super::*;
use crate::domain::Outcome;

fn endpoint(id: &str, project_id: &str, enabled: bool) -> EndpointRecord {
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
        s.create_webhook(&endpoint("wh_a", "p1", true)).await.expect("endpoint");
        s.create_webhook(&endpoint("wh_b", "p1", true)).await.expect("endpoint");
        s.create_webhook(&endpoint("wh_off", "p2", false)).await.expect("endpoint");
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
