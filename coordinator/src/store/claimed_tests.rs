//! A run created already claimed is the row, event log and attempt that a
//! create followed by a claim leaves; a taken Idempotency-Key writes nothing.

use super::super::contract_tests::{backends, new_execution};
use super::*;

#[tokio::test]
async fn a_run_created_claimed_is_what_a_create_and_a_claim_write() {
    let Some(b) = backends().await.into_iter().find(|b| b.name == "postgres") else { panic!("no postgres") };
    let s = &b.store;
    let now = 1_000;
    let real = new_execution("p1", "u1", Some("k1"), "f", now);
    s.create_execution(&real).await.expect("create");
    let claimed =
        s.claim("p1", std::slice::from_ref(&real.tool_name), "w1", 1, now, now + 30_000).await.expect("claim");
    assert_eq!(claimed.len(), 1);

    let mut twin = real.clone();
    twin.id = crate::domain::ExecutionId::generate();
    twin.idempotency_key = Some("k2".into());
    let taken = new_execution("p1", "u1", Some("k1"), "f", now);
    let batch = [
        ClaimedNew { new: &twin, worker_id: "w1", lease_until: now + 30_000 },
        ClaimedNew { new: &taken, worker_id: "w1", lease_until: now + 30_000 },
    ];
    let created = s.create_claimed(&batch).await.expect("create claimed");
    let record = created[0].clone().expect("created claimed");
    assert!(created[1].is_none(), "a taken key creates nothing");
    assert!(s.get_execution(&taken.id).await.expect("get").is_none());
    assert!(s.list_events(&taken.id).await.expect("events").is_empty());

    let stored = s.get_execution(&twin.id).await.expect("get").expect("row");
    assert_eq!(stored, record, "the answer is the row written");
    let mut as_real = stored.clone();
    as_real.id.clone_from(&real.id);
    as_real.idempotency_key.clone_from(&real.idempotency_key);
    assert_eq!(as_real, claimed[0].record, "the same row as a create and a claim");
    assert_eq!(s.list_events(&twin.id).await.expect("events"), s.list_events(&real.id).await.expect("events"));
    assert_eq!(s.list_attempts(&twin.id).await.expect("attempts"), s.list_attempts(&real.id).await.expect("attempts"));
}

#[tokio::test]
async fn sqlite_creates_nothing_claimed() {
    let Some(b) = backends().await.into_iter().find(|b| b.name == "sqlite") else { panic!("no sqlite") };
    let new = new_execution("p1", "u1", None, "f", 1_000);
    let batch = [ClaimedNew { new: &new, worker_id: "w1", lease_until: 31_000 }];
    assert!(b.store.create_claimed(&batch).await.expect("answer")[0].is_none());
    assert!(b.store.get_execution(&new.id).await.expect("get").is_none());
}
