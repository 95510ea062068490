//! A run created already claimed is the row, event log and attempt that a
//! create followed by a claim leaves; a taken Idempotency-Key writes nothing.

use super::super::contract_tests::{backends, fixture_key, new_execution, tool_record};
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

/// A create checks its starter's credential and its tool in the statement
/// that writes it, on every path: a revoked credential's (or a disabled
/// tool's) row, event, attempt and key are not written, and the rows beside it
/// in the batch are.
#[tokio::test]
async fn a_create_whose_credential_was_revoked_or_tool_disabled_writes_nothing_on_any_path() {
    for b in backends().await {
        let s = &b.store;
        let now = 1_000;
        let gone = fixture_key("cred_gone", b"gone");
        s.create_credential(&gone, 0).await.expect("credential");
        assert!(s.revoke_credential("cred_gone", 1).await.expect("revoke"));
        let by_gone = |key: &str| NewExecution {
            started_by: "cred_gone".into(),
            ..new_execution("p1", "u1", Some(key), "f", now)
        };

        let alone = by_gone("k1");
        let refused = s.create_execution(&alone).await;
        assert!(matches!(refused, Err(crate::store::Error::CredentialRevoked)), "{}: {refused:?}", b.name);
        if b.name == "postgres" {
            let (batched, live) = (by_gone("k2"), new_execution("p1", "u2", Some("k2"), "f", now));
            let created = s.create_many(&[&batched, &live]).await.expect("batch");
            assert!(created[0].is_none() && created[1].is_some(), "only the live credential's row");
            let claimed = by_gone("k3");
            let batch = [ClaimedNew { new: &claimed, worker_id: "w1", lease_until: now + 30_000 }];
            assert!(s.create_claimed(&batch).await.expect("create claimed")[0].is_none());
            for refused in [&batched, &claimed] {
                assert!(s.get_execution(&refused.id).await.expect("get").is_none());
                assert!(s.list_events(&refused.id).await.expect("events").is_empty());
            }
        }
        assert!(s.get_execution(&alone.id).await.expect("get").is_none(), "{}", b.name);
        // Nor does a revoked caller's replay (a start refused by admission) learn of its key's holder.
        s.create_execution(&new_execution("p1", "u1", Some("kr"), "f", now)).await.expect("holder");
        let replayed = s.replay(&by_gone("kr"), now).await;
        assert!(matches!(replayed, Err(crate::store::Error::CredentialRevoked)), "{}: {replayed:?}", b.name);

        // A tool disabled since: refused the same way, with its own answer.
        s.create_project("p_tools", "org_fixture", "tools", 0).await.expect("project");
        let tool = tool_record("T.Off");
        s.register_tools("p_tools", "cred_1", &[tool], 0).await.expect("register").expect("owned");
        assert!(s.set_tool_disabled("p_tools", "T.Off", Some(1)).await.expect("disable"));
        let off =
            |user: &str| NewExecution { tool_name: "T.Off".into(), ..new_execution("p_tools", user, None, "f", now) };
        let refused = s.create_execution(&off("u1")).await;
        assert!(matches!(refused, Err(crate::store::Error::ToolDisabled)), "{}: {refused:?}", b.name);
        if b.name == "postgres" {
            let (many, claimed) = (off("u2"), off("u3"));
            assert!(
                s.create_many(&[&many, &new_execution("p_tools", "u4", None, "f", now)]).await.expect("batch")[0]
                    .is_none()
            );
            let batch = [ClaimedNew { new: &claimed, worker_id: "w1", lease_until: now + 30_000 }];
            assert!(s.create_claimed(&batch).await.expect("create claimed")[0].is_none());
        }
        // No key was taken: the same key starts new work for a live credential.
        for key in ["k1", "k3"] {
            let fresh = new_execution("p1", "u1", Some(key), "f", now);
            assert!(!s.create_execution(&fresh).await.expect("create").replayed, "{}: {key} was free", b.name);
        }
    }
}
