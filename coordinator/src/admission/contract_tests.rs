//! The admission contract, run against every implementation.

use super::memory::MemoryAdmission;
use super::*;

pub(super) fn bounds() -> Bounds {
    Bounds {
        principal_concurrency: 2,
        project_concurrency: 3,
        organization_concurrency: 4,
        backlog: 3,
        retained_payload_bytes: 100,
    }
}

pub(super) fn ticket(id: &str, project: &str, user: &str, bytes: u64) -> Ticket {
    Ticket {
        execution_id: id.into(),
        org_id: "org".into(),
        project_id: project.into(),
        user_id: user.into(),
        payload_bytes: bytes,
        expires_at_ms: i64::MAX / 2,
        retained_until_ms: i64::MAX / 4,
    }
}

/// A rebuild after a loss publishing `generation`, with no retained bytes in Postgres.
fn publish(generation: i64) -> Option<super::redis::Publish<'static>> {
    Some(super::redis::Publish { generation, retained: &[] })
}

/// The behaviour every implementation must show, given a fresh instance with `bounds()`.
pub(super) async fn contract(a: &dyn Admission) {
    let t = |id: &str, user: &str| ticket(id, "p1", user, 1);
    assert_eq!(a.admit(&t("e1", "u1"), 0).await.expect("admit").map(|_| ()), Ok(()));
    assert_eq!(a.admit(&t("e1", "u1"), 0).await.expect("same id again").map(|_| ()), Ok(()), "re-admitting is a no-op");
    assert_eq!(a.admit(&t("e2", "u1"), 0).await.expect("admit").map(|_| ()), Ok(()));
    let r = a.admit(&t("e3", "u1"), 0).await.expect("admit").expect_err("principal full");
    assert_eq!(r.scope, Scope::Principal);
    assert!(r.retry_after_ms >= 1_000);
    assert_eq!(a.admit(&t("e3", "u2"), 0).await.expect("admit").map(|_| ()), Ok(()));
    let r = a.admit(&t("e4", "u3"), 0).await.expect("admit").expect_err("project full");
    assert_eq!(r.scope, Scope::Project);
    // Releasing frees every scope, once.
    a.release(&t("e1", "u1"), 10).await.expect("release");
    a.release(&t("e1", "u1"), 10).await.expect("release twice");
    assert_eq!(a.admit(&t("e4", "u3"), 10).await.expect("admit").map(|_| ()), Ok(()));
    assert_eq!(a.admit(&ticket("e5", "p2", "u9", 1), 10).await.expect("admit").map(|_| ()), Ok(()));
    let r = a.admit(&ticket("e6", "p2", "u8", 1), 10).await.expect("admit").expect_err("org full");
    assert_eq!(r.scope, Scope::Organization);
    a.release(&ticket("e5", "p2", "u9", 1), 10).await.expect("release");
    // Payload bytes.
    for id in ["e2", "e3", "e4"] {
        a.release(&t(id, ""), 20).await.expect("release");
    }
    let r = a.admit(&ticket("big", "p1", "u1", 101), 20).await.expect("admit").expect_err("bytes");
    assert_eq!(r.scope, Scope::RetainedPayloadBytes);
    // Backlog: started executions leave it but still count for concurrency.
    for (id, user) in [("b1", "a"), ("b2", "b"), ("b3", "c")] {
        assert_eq!(a.admit(&t(id, user), 30).await.expect("admit").map(|_| ()), Ok(()));
    }
    a.release(&t("b3", ""), 31).await.expect("release");
    let r = a.admit(&ticket("b4", "p1", "d", 1), 31).await.expect("admit");
    assert_eq!(r.map(|_| ()), Ok(()));
    a.release(&t("b4", ""), 31).await.expect("release");
    a.started(&t("b1", "a"), 32).await.expect("started");
    assert_eq!(a.admit(&t("b5", "e"), 33).await.expect("admit").map(|_| ()), Ok(()));
    retained_bytes(a).await;
}

/// Retained payload bytes count what a project keeps until its retention
/// ends, results included, not only the inputs of running work.
async fn retained_bytes(a: &dyn Admission) {
    let hour = 3_600_000;
    let t = |id: &str, bytes: u64| Ticket { retained_until_ms: hour / 2, ..ticket(id, "pb", id, bytes) };
    let ok = |r: Result<Result<Admitted, Rejection>, Error>| r.expect("admit").map(|_| ());
    assert_eq!(ok(a.admit(&t("x1", 40), 0).await), Ok(()));
    // It ends keeping 90 bytes (its input and its result): they stay counted.
    a.release(&t("x1", 90), 10).await.expect("release");
    a.release(&t("x1", 90), 11).await.expect("a second release changes nothing");
    let r = a.admit(&t("x2", 20), 20).await.expect("admit").expect_err("bytes retained");
    assert_eq!(r.scope, Scope::RetainedPayloadBytes);
    assert_eq!(ok(a.admit(&t("x2", 10), 20).await), Ok(()));
    // Work never created gives its bytes back.
    a.withdraw(&t("x2", 10), 21).await.expect("withdraw");
    assert_eq!(ok(a.admit(&t("x3", 10), 22).await), Ok(()));
    a.release(&t("x3", 10), 23).await.expect("release");
    assert!(a.admit(&t("x4", 1), 24).await.expect("admit").is_err(), "100 of 100 held");
    // Their retention hour ends: the bytes are no longer held.
    assert_eq!(ok(a.admit(&t("x4", 100), hour + 1).await), Ok(()));
}

#[tokio::test]
async fn memory_admission_meets_the_contract() {
    contract(&MemoryAdmission::new(bounds())).await;
}

#[tokio::test]
async fn memory_backlog_counts_unstarted_executions() {
    let a = MemoryAdmission::new(Bounds { backlog: 1, ..bounds() });
    assert_eq!(a.admit(&ticket("x", "p", "u1", 1), 0).await.expect("admit").map(|_| ()), Ok(()));
    let r = a.admit(&ticket("y", "p", "u2", 1), 0).await.expect("admit").expect_err("backlog full");
    assert_eq!(r.scope, Scope::Backlog);
    a.started(&ticket("x", "p", "u1", 1), 5).await.expect("started");
    assert_eq!(a.admit(&ticket("y", "p", "u2", 1), 6).await.expect("admit").map(|_| ()), Ok(()));
}

/// A place kept for a create whose commit answer was lost, where the
/// execution never came to exist, is let go at the deadline it would have had.
#[tokio::test]
async fn memory_lets_go_of_a_place_past_its_deadline() {
    let a = MemoryAdmission::new(bounds());
    let due = |id: &str, deadline: i64| Ticket { expires_at_ms: deadline, ..ticket(id, "p1", "u1", 1) };
    assert_eq!(a.admit(&due("e1", 100), 0).await.expect("admit").map(|_| ()), Ok(()));
    assert_eq!(a.admit(&due("e2", 1_000), 0).await.expect("admit").map(|_| ()), Ok(()));
    let full = a.admit(&due("e3", 5_000), 99).await.expect("admit").expect_err("principal full");
    assert_eq!(full.scope, Scope::Principal);
    assert_eq!(a.admit(&due("e3", 5_000), 100).await.expect("admit").map(|_| ()), Ok(()), "e1's deadline passed");
    a.release(&due("e1", 100), 200).await.expect("a late release of a let-go place changes nothing");
    let full = a.admit(&due("e4", 5_000), 200).await.expect("admit").expect_err("e2 and e3 hold the bound");
    assert_eq!(full.scope, Scope::Principal);
}

async fn redis(bounds: Bounds) -> super::redis::RedisAdmission {
    let url = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let prefix = crate::domain::id::random_id("baton_t_", 64);
    let a = super::redis::RedisAdmission::connect(&crate::redis_link::Target::Node(url), &prefix, bounds)
        .await
        .expect("redis reachable (TEST_REDIS_URL)");
    // A coordinator rebuilds before it serves; until then nothing is admitted.
    a.rebuild_alone(&[], 0, publish(1)).await.expect("first rebuild");
    a
}

#[tokio::test]
async fn nothing_is_admitted_while_redis_has_lost_its_state() {
    let a = redis(bounds()).await;
    assert_eq!(a.admit(&ticket("w1", "p1", "u1", 1), 0).await.expect("admit").map(|_| ()), Ok(()));
    a.wipe_for_tests().await;
    let refused = a.admit(&ticket("w2", "p1", "u1", 1), 10).await;
    assert!(matches!(refused, Err(Error::Unavailable(_))), "{refused:?}");
    a.rebuild_alone(&[(ticket("w1", "p1", "u1", 1), true)], 20, publish(2)).await.expect("rebuild");
    assert_eq!(a.admit(&ticket("w2", "p1", "u1", 1), 30).await.expect("admit").map(|_| ()), Ok(()));
    let full = a.admit(&ticket("w3", "p1", "u1", 1), 40).await.expect("admit").expect_err("principal full again");
    assert_eq!(full.scope, Scope::Principal);
}

#[tokio::test]
async fn redis_admission_meets_the_contract() {
    contract(&redis(bounds()).await).await;
}

#[tokio::test]
async fn redis_backlog_counts_unstarted_executions() {
    let a = redis(Bounds { backlog: 1, ..bounds() }).await;
    assert_eq!(a.admit(&ticket("x", "p", "u1", 1), 0).await.expect("admit").map(|_| ()), Ok(()));
    let r = a.admit(&ticket("y", "p", "u2", 1), 0).await.expect("admit").expect_err("backlog full");
    assert_eq!(r.scope, Scope::Backlog);
    a.started(&ticket("x", "p", "u1", 1), 5).await.expect("started");
    assert_eq!(a.admit(&ticket("y", "p", "u2", 1), 6).await.expect("admit").map(|_| ()), Ok(()));
    // A start sent in one call with an admission after it makes room for it there too.
    let (y, z) = (ticket("y", "p", "u2", 1), ticket("z", "p", "u3", 1));
    let (started, admitted) = tokio::join!(a.started(&y, 7), a.admit(&z, 7));
    started.expect("started");
    assert_eq!(verdict(admitted), Ok(()));
}

#[tokio::test]
async fn concurrent_admissions_never_exceed_a_bound() {
    let a = std::sync::Arc::new(redis(bounds()).await);
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let a = a.clone();
            tokio::spawn(async move { a.admit(&ticket(&format!("c{i}"), "p1", "u1", 1), 0).await })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        if t.await.expect("join").expect("admit").is_ok() {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 2, "principal bound is 2");
}

/// What an admission decided: admitted, or refused in which scope.
fn verdict(r: Result<Result<Admitted, Rejection>, Error>) -> Result<(), Scope> {
    r.expect("admit").map(|_| ()).map_err(|r| r.scope)
}

/// Steps made together go to Redis as one call per shard, and decide as
/// they would one by one, in the order they came: the bounds hold within a
/// call, a repeated id counts once, and a release frees its place and bytes
/// for an admission after it in the same call.
#[tokio::test]
async fn steps_gathered_into_one_call_decide_as_if_made_one_by_one() {
    use futures_util::future::join_all;
    use std::sync::atomic::Ordering;
    let a = redis(bounds()).await;
    let elsewhere = |id: &str| Ticket { org_id: "org_far".into(), ..ticket(id, "pf", id, 1) };
    assert_ne!(super::redis_keys::shard_of("org"), super::redis_keys::shard_of("org_far"));
    let calls = a.ops.calls.load(Ordering::Relaxed);
    let here = ["j1", "j2", "j1", "j3", "j4"].map(|id| ticket(id, "p1", id, 1));
    let there = ["f1", "f2"].map(elsewhere);
    let (j4, j5) = (ticket("j4", "p1", "j4", 1), ticket("j5", "p1", "j5", 1));
    let (near, released, later, far) = tokio::join!(
        join_all(here.iter().map(|t| a.admit(t, 0))),
        a.release(&here[0], 0),
        join_all([&j4, &j5].map(|t| a.admit(t, 0))),
        join_all(there.iter().map(|t| a.admit(t, 0))),
    );
    let near: Vec<_> = near.into_iter().map(verdict).collect();
    assert_eq!(near, [Ok(()), Ok(()), Ok(()), Ok(()), Err(Scope::Project)], "the bound is 3, and j1 came twice");
    released.expect("release");
    let later: Vec<_> = later.into_iter().map(verdict).collect();
    assert_eq!(later, [Ok(()), Err(Scope::Project)], "j1's place went to j4");
    assert!(far.into_iter().all(|r| r.expect("admit").is_ok()));
    assert_eq!(a.ops.calls.load(Ordering::Relaxed) - calls, 2, "one call for each of the two shards");
    // Bytes, in an organization with room: the first admission holds 60 of 100; its release keeps 10.
    let b = |id: &str, bytes: u64| Ticket { org_id: "org_bytes".into(), ..ticket(id, "pb", id, bytes) };
    let [x, y, x_kept] = [b("x", 60), b("y", 50), b("x", 10)];
    let (x, too_big, released, fits) =
        tokio::join!(a.admit(&x, 1), a.admit(&y, 1), a.release(&x_kept, 1), a.admit(&y, 1));
    assert_eq!(verdict(x), Ok(()));
    assert_eq!(verdict(too_big), Err(Scope::RetainedPayloadBytes));
    released.expect("release");
    assert_eq!(verdict(fits), Ok(()), "60 held became 10 kept");
    assert_eq!(a.ops.calls.load(Ordering::Relaxed) - calls, 3);
}

/// An admission whose caller stopped waiting before it was sent is not
/// made: it would hold a place nobody creates an execution for.
#[tokio::test]
async fn an_admission_nobody_waits_for_holds_no_place() {
    use futures_util::FutureExt;
    let a = redis(bounds()).await;
    let abandoned = ticket("n1", "p1", "u1", 1);
    assert!(a.admit(&abandoned, 0).now_or_never().is_none(), "queued, not yet answered");
    for id in ["n2", "n3"] {
        assert_eq!(a.admit(&ticket(id, "p1", "u1", 1), 0).await.expect("admit").map(|_| ()), Ok(()));
    }
    let full = a.admit(&ticket("n4", "p1", "u1", 1), 0).await.expect("admit").expect_err("principal bound is 2");
    assert_eq!(full.scope, Scope::Principal);
}

#[tokio::test]
async fn entries_expire_at_their_deadline() {
    let a = redis(bounds()).await;
    let mut short = ticket("s1", "p1", "u1", 1);
    short.expires_at_ms = 100;
    assert_eq!(a.admit(&short, 0).await.expect("admit").map(|_| ()), Ok(()));
    short.execution_id = "s2".into();
    assert_eq!(a.admit(&short, 0).await.expect("admit").map(|_| ()), Ok(()));
    // Nobody released them, but their deadline passed: the place is free again.
    assert_eq!(a.admit(&ticket("s3", "p1", "u1", 1), 101).await.expect("admit").map(|_| ()), Ok(()));
}

#[tokio::test]
async fn rebuild_restores_the_bounds_after_the_keys_are_lost() {
    let a = redis(bounds()).await;
    let open = vec![(ticket("r1", "p1", "u1", 10), true), (ticket("r2", "p1", "u1", 10), false)];
    for (t, _) in &open {
        assert_eq!(a.admit(t, 0).await.expect("admit").map(|_| ()), Ok(()));
    }
    a.rebuild_alone(&open, 0, None).await.expect("rebuild");
    assert_eq!(a.epoch().await.expect("epoch"), Some(1));
    a.wipe_for_tests().await;
    assert_eq!(a.epoch().await.expect("epoch"), None, "a flush is detectable");
    a.rebuild_alone(&open, 1_000, publish(2)).await.expect("rebuild");
    let r = a.admit(&ticket("r3", "p1", "u1", 1), 1_000).await.expect("admit").expect_err("principal full again");
    assert_eq!(r.scope, Scope::Principal);
    // A stale member (terminal in the truth, admitted long ago) is removed by the next rebuild.
    a.rebuild_alone(&open[..1], 120_000, None).await.expect("rebuild");
    assert_eq!(a.admit(&ticket("r3", "p1", "u1", 1), 120_000).await.expect("admit").map(|_| ()), Ok(()));
}

#[tokio::test]
async fn a_rebuild_from_an_older_snapshot_never_adds_back_a_released_execution() {
    let a = redis(bounds()).await;
    let open = vec![(ticket("q1", "p1", "u1", 10), true), (ticket("q2", "p1", "u1", 10), true)];
    for (t, _) in &open {
        assert_eq!(a.admit(t, 0).await.expect("admit").map(|_| ()), Ok(()));
    }
    // The snapshot was read while q1 was open; q1 turns terminal before the rebuild writes.
    a.release(&open[0].0, 10).await.expect("release");
    let report = a.rebuild_alone(&open, 20, None).await.expect("rebuild");
    assert_eq!(report.skipped_released, 1);
    assert_eq!(
        a.admit(&ticket("q3", "p1", "u1", 1), 30).await.expect("admit").map(|_| ()),
        Ok(()),
        "the principal has room: q1 was not added back"
    );
}

#[tokio::test]
async fn an_admission_answers_the_generation_it_was_granted_under() {
    let a = redis(bounds()).await;
    let first = a.admit(&ticket("g1", "p1", "u1", 1), 0).await.expect("admit").expect("room");
    assert_eq!(first.fence, Some(1), "the generation the first rebuild published");
    a.wipe_for_tests().await;
    a.rebuild_alone(&[(ticket("g1", "p1", "u1", 1), true)], 10, publish(7)).await.expect("rebuild");
    let second = a.admit(&ticket("g2", "p1", "u1", 1), 20).await.expect("admit").expect("room");
    assert_eq!(second.fence, Some(7));
}

#[tokio::test]
async fn a_rebuild_that_straddles_a_flush_writes_nothing_after_it() {
    let a = redis(bounds()).await;
    let lock = a.lock_rebuild().await.expect("lock").expect("free");
    assert!(a.lock_rebuild().await.expect("lock").is_none(), "one rebuild at a time");
    // Redis loses its state while the rebuild works from what it read before.
    a.wipe_for_tests().await;
    let open = [(ticket("s1", "p1", "u1", 1), true)];
    let stale = a.rebuild(&lock, &open, 10, publish(5)).await;
    assert!(matches!(stale, Err(Error::Unavailable(_))), "{stale:?}");
    a.unlock_rebuild(lock).await;
    assert_eq!(a.epoch().await.expect("epoch"), None, "no epoch published: admission stays shut");
    let refused = a.admit(&ticket("s2", "p1", "u1", 1), 20).await;
    assert!(matches!(refused, Err(Error::Unavailable(_))), "{refused:?}");
    // The next rebuild, from a snapshot read after the loss, opens it again.
    a.rebuild_alone(&open, 30, publish(6)).await.expect("rebuild");
    assert_eq!(a.admit(&ticket("s2", "p1", "u1", 1), 40).await.expect("admit").map(|a| a.fence), Ok(Some(6)));
}

#[tokio::test]
async fn a_redis_restarted_from_an_older_snapshot_counts_as_having_lost_its_state() {
    let a = redis(bounds()).await;
    assert_eq!(a.admit(&ticket("o1", "p1", "u1", 1), 0).await.expect("admit").map(|_| ()), Ok(()));
    // The snapshot holds the epoch, but admissions after it are gone: the
    // server run that answers is not the one the epoch was published on.
    a.pretend_restarted_for_tests(None).await;
    assert_eq!(a.epoch().await.expect("epoch"), None, "a restart is detectable");
    let refused = a.admit(&ticket("o2", "p1", "u1", 1), 10).await;
    assert!(matches!(refused, Err(Error::Unavailable(_))), "{refused:?}");
    a.rebuild_alone(&[(ticket("o1", "p1", "u1", 1), true)], 20, publish(2)).await.expect("rebuild");
    assert_eq!(a.admit(&ticket("o2", "p1", "u1", 1), 30).await.expect("admit").map(|a| a.fence), Ok(Some(2)));
}

#[tokio::test]
async fn a_rebuild_lock_restored_from_a_snapshot_writes_nothing() {
    let a = redis(bounds()).await;
    let lock = a.lock_rebuild().await.expect("lock").expect("free");
    let restored = a.pretend_restarted_for_tests(Some(&lock)).await.expect("restored lock");
    let stale = a.rebuild(&restored, &[(ticket("l1", "p1", "u1", 1), true)], 10, publish(5)).await;
    assert!(matches!(stale, Err(Error::Unavailable(_))), "{stale:?}");
    assert_eq!(a.epoch().await.expect("epoch"), None, "no epoch published on the new run");
    // Nobody waits for that lock to expire: the next rebuild takes it over.
    let next = a.lock_rebuild().await.expect("lock").expect("a leftover of another run binds nobody");
    assert!(a.lock_rebuild().await.expect("lock").is_none(), "one rebuild at a time on this run");
    a.rebuild(&next, &[], 20, publish(6)).await.expect("rebuild");
    a.unlock_rebuild(next).await;
    assert_eq!(a.epoch().await.expect("epoch"), Some(6));
}

#[tokio::test]
async fn a_rebuild_after_a_loss_counts_the_bytes_postgres_retains() {
    let a = redis(bounds()).await;
    let finished = Ticket { retained_until_ms: 10_000_000, ..ticket("k1", "pk", "u1", 30) };
    assert_eq!(a.admit(&finished, 0).await.expect("admit").map(|_| ()), Ok(()));
    a.release(&Ticket { payload_bytes: 90, ..finished.clone() }, 10).await.expect("release");
    let stale = Ticket { retained_until_ms: 10_000_000, ..ticket("k0", "gone", "u1", 50) };
    assert_eq!(a.admit(&stale, 10).await.expect("admit").map(|_| ()), Ok(()));
    a.release(&stale, 10).await.expect("release");
    // Redis comes back from a snapshot: what it counted may be stale.
    a.pretend_restarted_for_tests(None).await;
    // Postgres retains k1's 90 bytes; the project "gone" retains nothing any more.
    let retained = [RetainedBytes {
        org_id: "org".into(),
        project_id: "pk".into(),
        bucket: retention_bucket(10_000_000),
        bytes: 90,
    }];
    let publish = super::redis::Publish { generation: 2, retained: &retained };
    a.rebuild_alone(&[], 20, Some(publish)).await.expect("rebuild");
    let r = a.admit(&ticket("k2", "pk", "u2", 20), 30).await.expect("admit").expect_err("bytes retained");
    assert_eq!(r.scope, Scope::RetainedPayloadBytes);
    assert_eq!(a.admit(&ticket("k2", "pk", "u2", 10), 30).await.expect("admit").map(|_| ()), Ok(()));
    let fresh = ticket("k4", "gone", "u4", 60);
    assert_eq!(a.admit(&fresh, 30).await.expect("admit").map(|_| ()), Ok(()), "nothing retained there now");
    // The bytes leave with their retention hour.
    let later = retention_bucket(10_000_000) + 1;
    assert_eq!(a.admit(&ticket("k3", "pk", "u3", 80), later).await.expect("admit").map(|_| ()), Ok(()));
}
