//! The admission contract, run against every implementation.

use super::memory::MemoryAdmission;
use super::*;

pub fn bounds() -> Bounds {
    Bounds {
        principal_concurrency: 2,
        project_concurrency: 3,
        organization_concurrency: 4,
        backlog: 3,
        retained_payload_bytes: 100,
    }
}

pub fn ticket(id: &str, project: &str, user: &str, bytes: u64) -> Ticket {
    Ticket {
        execution_id: id.into(),
        org_id: "org".into(),
        project_id: project.into(),
        user_id: user.into(),
        payload_bytes: bytes,
        expires_at_ms: i64::MAX / 2,
    }
}

/// The behaviour every implementation must show, given a fresh instance with `bounds()`.
pub async fn contract(a: &dyn Admission) {
    let t = |id: &str, user: &str| ticket(id, "p1", user, 1);
    assert_eq!(a.admit(&t("e1", "u1"), 0).await.expect("admit"), Ok(()));
    assert_eq!(a.admit(&t("e1", "u1"), 0).await.expect("same id again"), Ok(()), "re-admitting is a no-op");
    assert_eq!(a.admit(&t("e2", "u1"), 0).await.expect("admit"), Ok(()));
    let r = a.admit(&t("e3", "u1"), 0).await.expect("admit").expect_err("principal full");
    assert_eq!(r.scope, Scope::Principal);
    assert!(r.retry_after_ms >= 1_000);
    assert_eq!(a.admit(&t("e3", "u2"), 0).await.expect("admit"), Ok(()));
    let r = a.admit(&t("e4", "u3"), 0).await.expect("admit").expect_err("project full");
    assert_eq!(r.scope, Scope::Project);
    // Releasing frees every scope, once.
    a.release(&t("e1", "u1"), 10).await.expect("release");
    a.release(&t("e1", "u1"), 10).await.expect("release twice");
    assert_eq!(a.admit(&t("e4", "u3"), 10).await.expect("admit"), Ok(()));
    let r = a.admit(&ticket("e5", "p2", "u9", 1), 10).await.expect("admit").expect_err("org full");
    assert_eq!(r.scope, Scope::Organization);
    // Payload bytes.
    for id in ["e2", "e3", "e4"] {
        a.release(&t(id, ""), 20).await.expect("release");
    }
    let r = a.admit(&ticket("big", "p1", "u1", 101), 20).await.expect("admit").expect_err("bytes");
    assert_eq!(r.scope, Scope::RetainedPayloadBytes);
    // Backlog: started executions leave it but still count for concurrency.
    for (id, user) in [("b1", "a"), ("b2", "b"), ("b3", "c")] {
        assert_eq!(a.admit(&t(id, user), 30).await.expect("admit"), Ok(()));
    }
    a.release(&t("b3", ""), 31).await.expect("release");
    let r = a.admit(&ticket("b4", "p1", "d", 1), 31).await.expect("admit");
    assert_eq!(r, Ok(()));
    a.release(&t("b4", ""), 31).await.expect("release");
    a.started(&t("b1", "a"), 32).await.expect("started");
    assert_eq!(a.admit(&t("b5", "e"), 33).await.expect("admit"), Ok(()));
}

#[tokio::test]
async fn memory_admission_meets_the_contract() {
    contract(&MemoryAdmission::new(bounds())).await;
}

#[tokio::test]
async fn memory_backlog_counts_unstarted_executions() {
    let a = MemoryAdmission::new(Bounds { backlog: 1, ..bounds() });
    assert_eq!(a.admit(&ticket("x", "p", "u1", 1), 0).await.expect("admit"), Ok(()));
    let r = a.admit(&ticket("y", "p", "u2", 1), 0).await.expect("admit").expect_err("backlog full");
    assert_eq!(r.scope, Scope::Backlog);
    a.started(&ticket("x", "p", "u1", 1), 5).await.expect("started");
    assert_eq!(a.admit(&ticket("y", "p", "u2", 1), 6).await.expect("admit"), Ok(()));
}
