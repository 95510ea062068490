//! A create inserts only under the current admission generation, and moving
//! the generation on waits for the creates holding it.

use super::super::contract_tests::{backends, new_execution};
use super::super::{ClaimedNew, Dialect, Error, NewExecution, Store};

fn admitted_under(fence: i64) -> NewExecution {
    NewExecution { admission_fence: Some(fence), ..new_execution("p1", "u1", None, "f", 1_000) }
}

async fn exists(s: &Store, new: &NewExecution) -> bool {
    s.get_execution(&new.id).await.expect("get").is_some()
}

/// Until a statement of another connection waits for the fence.
async fn until_waiting_on_the_fence(s: &Store) {
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%baton_admission_%' \
             AND datname = current_database()",
        )
        .fetch_one(&s.pool)
        .await
        .expect("pg_stat_activity");
        if waiting > 0 {
            return;
        }
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_create_admitted_under_an_older_generation_inserts_nothing() {
    for b in backends().await {
        let s = &b.store;
        assert_eq!(s.admission_fence().await.expect("read"), 0, "{}", b.name);
        assert_eq!(s.advance_admission_fence().await.expect("advance"), 1, "{}", b.name);
        let current = admitted_under(1);
        s.create_execution(&current).await.expect("current generation");
        assert!(exists(s, &current).await, "{}", b.name);
        let stale = admitted_under(0);
        let refused = s.create_execution(&stale).await;
        assert!(matches!(refused, Err(Error::StaleAdmission)), "{}: {refused:?}", b.name);
        assert!(!exists(s, &stale).await, "{}: nothing of a stale create is written", b.name);
        let unfenced = new_execution("p1", "u1", None, "f", 1_000);
        s.create_execution(&unfenced).await.expect("admission that cannot lose its state");
    }
}

#[tokio::test]
async fn a_batch_inserts_its_rows_of_the_current_generation_only() {
    let Some(b) = backends().await.into_iter().find(|b| b.name == "postgres") else { panic!("no postgres") };
    let s = &b.store;
    s.advance_admission_fence().await.expect("advance");
    let (a, old, c) = (admitted_under(1), admitted_under(0), admitted_under(1));
    let created = s.create_many(&[&a, &old, &c]).await.expect("batch");
    assert!(created[0].is_some() && created[2].is_some(), "{created:?}");
    assert!(created[1].is_none(), "the stale row is left to the one-by-one path");
    assert!(!exists(s, &old).await);

    let (d, e) = (admitted_under(0), admitted_under(0));
    let claimed = [
        ClaimedNew { new: &d, worker_id: "w1", lease_until: 31_000 },
        ClaimedNew { new: &e, worker_id: "w1", lease_until: 31_000 },
    ];
    let created = s.create_claimed(&claimed).await.expect("claimed batch");
    assert!(created.iter().all(Option::is_none), "a whole batch under a past generation inserts nothing");
    assert!(!exists(s, &d).await && !exists(s, &e).await);
}

#[tokio::test]
async fn moving_the_generation_on_waits_for_the_creates_holding_it() {
    let Some(b) = backends().await.into_iter().find(|b| b.name == "postgres") else { panic!("no postgres") };
    let s = b.store.clone();
    // A create's statement holds the fence until it commits.
    let mut holder = s.pool.begin().await.expect("begin");
    super::hold(&mut holder, Dialect::Postgres, Some(0)).await.expect("current");
    let mut advancing = tokio::spawn({
        let s = s.clone();
        async move { s.advance_admission_fence().await }
    });
    tokio::select! {
        () = until_waiting_on_the_fence(&s) => {}
        done = &mut advancing => panic!("the rebuild went ahead of a create holding the generation: {done:?}"),
    }
    holder.commit().await.expect("commit");
    assert_eq!(advancing.await.expect("join").expect("advance"), 1);
}

#[tokio::test]
async fn a_create_that_waited_for_a_rebuild_sees_the_new_generation() {
    let Some(b) = backends().await.into_iter().find(|b| b.name == "postgres") else { panic!("no postgres") };
    let s = b.store.clone();
    // The rebuild has moved the generation on but not committed yet.
    let mut rebuild = s.pool.begin().await.expect("begin");
    super::move_on(&mut rebuild, Dialect::Postgres).await.expect("move on");
    let stale = admitted_under(0);
    let mut creating = tokio::spawn({
        let (s, stale) = (s.clone(), stale.clone());
        async move { s.create_many(&[&stale]).await }
    });
    tokio::select! {
        () = until_waiting_on_the_fence(&s) => {}
        done = &mut creating => panic!("the create went ahead of the rebuild: {done:?}"),
    }
    rebuild.commit().await.expect("commit");
    let created = creating.await.expect("join").expect("create");
    assert!(created[0].is_none(), "read after the wait, the generation has moved on: {created:?}");
    assert!(!exists(&s, &stale).await);
}
