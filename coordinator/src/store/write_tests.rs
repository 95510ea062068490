//! The unlocked write (Postgres): rows read without a lock, every transition
//! written as one statement that commits itself. A row another writer moved
//! between the read and the write keeps nothing of the stale transition: no
//! row change, no event, no finished attempt, no webhook delivery.

use super::contract_tests::{new_execution, postgres, tools};
use super::webhooks_tests::endpoint;
use super::write::{EventData, Pending, persist_unlocked};
use crate::domain::{self, Event, Outcome, Status};

/// Organization `org_1` and its project `p1`, which the rows here belong to.
async fn org_and_project(s: &super::Store) {
    s.create_org("org_1", "o", 1).await.expect("org");
    s.create_project("p1", "org_1", "p1", 1).await.expect("project");
}

#[tokio::test]
async fn an_unlocked_write_leaves_a_row_moved_since_its_read_untouched_and_writes_the_others() {
    let b = postgres().await;
    let s = &b.store;
    org_and_project(s).await;
    assert!(s.create_webhook(&endpoint("we_race", "p1", true), 10).await.expect("endpoint"));
    let mut ids = Vec::new();
    for i in 0..2 {
        let new = new_execution("p1", "u1", None, "f", 1_000 + i);
        s.create_execution(&new).await.expect("create");
        ids.push(new.id);
    }
    assert_eq!(s.claim("p1", &tools(), "w", 2, 1_100, 9_000).await.expect("claim").len(), 2);
    let read: Vec<_> = {
        let mut read = Vec::new();
        for id in &ids {
            read.push(s.get_execution(id).await.expect("get").expect("exists"));
        }
        read
    };
    // Another writer moves the second row after it was read: a heartbeat.
    let beat = Event::Heartbeat { worker_id: "w".into(), attempt: 1, lease_until: 12_000 };
    assert!(matches!(s.apply(&ids[1], &beat, &EventData::default(), 1_150).await, Ok(Some(Ok(_)))));

    let settle = Event::Settle { worker_id: "w".into(), attempt: 1, outcome: Outcome::Success };
    let data = EventData { output_ct: Some(vec![5; 2]), payload_bytes: 2, ..Default::default() };
    let transitions: Vec<_> =
        read.iter().map(|r| domain::apply(&r.state, &settle, 1_200).expect("a settlement applies")).collect();
    let pending: Vec<Pending> = read
        .iter()
        .zip(&transitions)
        .map(|(before, transition)| Pending { before, event: &settle, transition, data: &data })
        .collect();
    let (written, queued) = persist_unlocked(s, &pending, 1_200).await.expect("write").expect("one statement");
    assert!(queued);
    assert_eq!(written.iter().map(Option::is_some).collect::<Vec<_>>(), [true, false]);

    let kinds = |events: Vec<super::EventRecord>| -> Vec<String> {
        events.into_iter().map(|e| e.kind.map_or("", |k| k.as_str()).to_owned()).collect()
    };
    let first = s.get_execution(&ids[0]).await.expect("get").expect("exists");
    assert_eq!(first.status(), Status::Completed);
    assert_eq!(kinds(s.list_events(&ids[0]).await.expect("events")), ["created", "claimed", "settled"]);
    assert_eq!(s.list_attempts(&ids[0]).await.expect("attempts")[0].success, Some(true));

    let moved = s.get_execution(&ids[1]).await.expect("get").expect("exists");
    assert_eq!(moved.status(), Status::Working, "the moved row keeps its state");
    assert_eq!(kinds(s.list_events(&ids[1]).await.expect("events")), ["created", "claimed"]);
    let attempt = &s.list_attempts(&ids[1]).await.expect("attempts")[0];
    assert_eq!((attempt.finished_at, attempt.success), (None, None), "its attempt is not finished");
    let signalled: Vec<String> =
        s.webhook_deliveries("we_race", 10).await.expect("deliveries").into_iter().map(|d| d.execution_id).collect();
    assert_eq!(signalled, [ids[0].to_string()], "no delivery for the moved row");

    // Through the batch, the moved row is read again and settled.
    let answers = s.apply_batch(&[(ids[1].clone(), settle, data)], 1_300).await.expect("batch");
    assert!(matches!(&answers[0], Some(Ok(a)) if a.record.status() == Status::Completed));
}

/// Two replicas on one database: the first keeps the row as it claimed it,
/// the second moves it on (a retry, then a claim of attempt 2).
async fn kept_by_one_moved_by_another() -> (super::contract_tests::Backend, super::Store, crate::domain::ExecutionId) {
    let b = postgres().await;
    let other = super::Store::connect(&b.url, 2).await.expect("a second replica");
    let new = new_execution("p1", "u1", None, "f", 1_000);
    b.store.create_execution(&new).await.expect("create");
    assert_eq!(b.store.claim("p1", &tools(), "w", 1, 1_000, 9_000).await.expect("claim").len(), 1);
    assert_eq!(b.store.last_written.len(), 1, "the claim's row is kept");
    super::contract_tests::settle(&other, &new.id, 1, Outcome::ToolError { retryable: true }, 1_100).await;
    assert_eq!(other.claim("p1", &tools(), "w", 1, 1_300, 9_000).await.expect("claim")[0].attempt, 2);
    (b, other, new.id)
}

#[tokio::test]
async fn a_settlement_the_kept_row_would_ignore_is_decided_on_a_fresh_read() {
    let (b, _other, id) = kept_by_one_moved_by_another().await;
    // On the kept row attempt 2 is not running; on the row as it is, it is.
    let settle = Event::Settle { worker_id: "w".into(), attempt: 2, outcome: Outcome::Success };
    let answers = b.store.apply_batch(&[(id.clone(), settle, EventData::default())], 1_400).await.expect("batch");
    assert!(matches!(&answers[0], Some(Ok(a)) if a.record.status() == Status::Completed), "{answers:?}");
    assert_eq!(b.store.get_execution(&id).await.expect("get").expect("exists").status(), Status::Completed);
    assert_eq!(b.store.last_written.len(), 0, "a terminal row is let go");
}

#[tokio::test]
async fn a_transition_decided_on_a_kept_row_moved_since_is_decided_again_and_written_once() {
    let (b, _other, id) = kept_by_one_moved_by_another().await;
    // A heartbeat of attempt 1 applies to the kept row, but the row has moved
    // on to attempt 2: the version guard sends it to a fresh read, which ignores it.
    let beat = Event::Heartbeat { worker_id: "w".into(), attempt: 1, lease_until: 20_000 };
    let answers = b.store.apply_batch(&[(id.clone(), beat, EventData::default())], 1_400).await.expect("batch");
    assert!(matches!(&answers[0], Some(Err(_))), "{answers:?}");
    let row = b.store.get_execution(&id).await.expect("get").expect("exists");
    assert_eq!((row.status(), row.state.attempts), (Status::Working, 2));
    assert_eq!(row.state.phase.lease().map(|l| l.expires_at), Some(9_000), "the stale heartbeat renewed nothing");
}

#[tokio::test]
async fn the_hot_path_plans_once_and_every_other_read_as_postgres_chooses() {
    let b = postgres().await;
    let mode = |pool: &sqlx::AnyPool| {
        let pool = pool.clone();
        async move { sqlx::query_scalar::<_, String>("SHOW plan_cache_mode").fetch_one(&pool).await.expect("show") }
    };
    assert_eq!(mode(&b.store.hot).await, "force_generic_plan");
    assert_eq!(mode(&b.store.pool).await, "auto", "history and listings plan with their values");
}

#[tokio::test]
async fn a_row_with_a_large_payload_is_not_kept_and_still_settles() {
    let b = postgres().await;
    let big = 64 * 1024;
    let new = super::NewExecution {
        input_ct: vec![7; big],
        payload_bytes: big as i64,
        ..new_execution("p1", "u1", None, "f", 1_000)
    };
    b.store.create_execution(&new).await.expect("create");
    assert_eq!(b.store.claim("p1", &tools(), "w", 1, 1_000, 9_000).await.expect("claim").len(), 1);
    assert_eq!(b.store.last_written.len(), 0, "a 64 KiB input is read again, not kept");
    let settle = Event::Settle { worker_id: "w".into(), attempt: 1, outcome: Outcome::Success };
    let answers = b.store.apply_batch(&[(new.id.clone(), settle, EventData::default())], 1_100).await.expect("batch");
    assert!(matches!(&answers[0], Some(Ok(a)) if a.record.status() == Status::Completed), "{answers:?}");
}

/// `n` executions of p1 created and claimed by worker `w`, as read back.
async fn claimed(s: &super::Store, n: usize) -> Vec<super::ExecutionRecord> {
    let mut read = Vec::new();
    for i in 0..n {
        let new = new_execution("p1", "u1", None, "f", 1_000 + i as i64);
        s.create_execution(&new).await.expect("create");
        read.push(new.id);
    }
    assert_eq!(s.claim("p1", &tools(), "w", n as u32, 1_100, 9_000).await.expect("claim").len(), n);
    let mut rows = Vec::new();
    for id in &read {
        rows.push(s.get_execution(id).await.expect("get").expect("exists"));
    }
    rows
}

/// Each row's settlement as a transition to write.
fn settlements<'a>(
    read: &'a [super::ExecutionRecord],
    transitions: &'a [domain::Transition],
    settle: &'a Event,
    data: &'a EventData,
) -> Vec<Pending<'a>> {
    read.iter()
        .zip(transitions)
        .map(|(before, transition)| Pending { before, event: settle, transition, data })
        .collect()
}

/// Attempt 1's success, and what it makes of each row.
fn settled(read: &[super::ExecutionRecord]) -> (Event, Vec<domain::Transition>) {
    let settle = Event::Settle { worker_id: "w".into(), attempt: 1, outcome: Outcome::Success };
    let transitions = read.iter().map(|r| domain::apply(&r.state, &settle, 1_200).expect("applies")).collect();
    (settle, transitions)
}

#[tokio::test]
async fn a_padded_batch_writes_its_own_rows_and_nothing_of_its_padding() {
    let b = postgres().await;
    let s = &b.store;
    org_and_project(s).await;
    assert!(s.create_webhook(&endpoint("we_pad", "p1", true), 10).await.expect("endpoint"));
    let read = claimed(s, 5).await;
    let (settle, transitions) = settled(&read);
    let data = EventData { output_ct: Some(vec![5; 2]), payload_bytes: 2, ..Default::default() };
    let pending = settlements(&read, &transitions, &settle, &data);
    let (written, queued) = persist_unlocked(s, &pending, 1_200).await.expect("write").expect("one statement");
    assert!(queued);
    assert!(written.iter().all(Option::is_some), "all five rows written");
    for r in &read {
        let row = s.get_execution(&r.id).await.expect("get").expect("exists");
        assert_eq!(row.status(), Status::Completed);
        assert_eq!(s.list_events(&r.id).await.expect("events").len(), 3, "created, claimed, settled");
        assert_eq!(s.list_attempts(&r.id).await.expect("attempts")[0].success, Some(true));
    }
    let deliveries = s.webhook_deliveries("we_pad", 20).await.expect("deliveries");
    assert_eq!(deliveries.len(), 5, "one delivery per settled row, none for the padding");
    let padding: i64 = sqlx::query_scalar(
        "SELECT (SELECT COUNT(*) FROM execution_events WHERE execution_id = '') \
         + (SELECT COUNT(*) FROM attempts WHERE execution_id = '') \
         + (SELECT COUNT(*) FROM webhook_deliveries WHERE execution_id = '')",
    )
    .fetch_one(&s.pool)
    .await
    .expect("count");
    assert_eq!(padding, 0);
}

#[tokio::test]
async fn batches_of_five_to_eight_settlements_share_one_statement() {
    let b = postgres().await;
    let read = claimed(&b.store, 8).await;
    let (settle, transitions) = settled(&read);
    let data = EventData::default();
    let pending = settlements(&read, &transitions, &settle, &data);
    let text = |n: usize| super::write::one_statement_of(&pending[..n], 1_200).expect("statement").0;
    assert_eq!(text(5), text(8), "padded to eight rows, the text recurs and stays prepared");
    assert_ne!(text(4), text(5));
}

#[tokio::test]
async fn the_hot_path_writes_by_key_even_when_planned_over_an_empty_partition() {
    let b = postgres().await;
    let read = claimed(&b.store, 5).await;
    let (settle, transitions) = settled(&read);
    let data = EventData::default();
    let pending = settlements(&read, &transitions, &settle, &data);
    let (sql, args) = super::write::one_statement_of(&pending, 1_200).expect("statement");
    // Five rows in a fresh partition: left to its statistics, Postgres would
    // scan it and hash-join the batch against it, and keep that plan.
    let plan: Vec<String> = sqlx::query_scalar_with(sqlx::AssertSqlSafe(format!("EXPLAIN {sql}")), args)
        .fetch_all(&b.store.hot)
        .await
        .expect("explain");
    let plan = plan.join("\n");
    assert!(!plan.contains("Seq Scan on executions"), "{plan}");
    assert!(!plan.contains("Hash Join"), "{plan}");
}

#[tokio::test]
async fn an_owner_read_looks_in_the_day_it_was_written_to_and_finds_a_row_re_dated_since() {
    let b = postgres().await;
    let s = &b.store;
    org_and_project(s).await;
    let row = claimed(s, 1).await.remove(0);
    let day = s.last_written.retention_of(&row.id);
    assert_eq!(day, Some(row.retention_expires_at), "the claim names the row's day");
    let read = |s: &super::Store, id: &crate::domain::ExecutionId| {
        let (s, id) = (s.clone(), id.clone());
        async move { s.credentials_with_executions(&[(None, Some(&id))]).await.expect("read").remove(0).1 }
    };
    assert_eq!(read(s, &row.id).await.map(|r| r.id), Some(row.id.clone()));
    // The project's window changes: the row moves to another day, and the day
    // this replica wrote it to no longer holds it.
    assert!(s.set_project_retention("org_1", "p1", Some(90_000_000), 60_000, 2_000).await.expect("re-date"));
    let moved = s.get_execution(&row.id).await.expect("get").expect("exists");
    assert_ne!(Some(moved.retention_expires_at), day);
    assert_eq!(read(s, &row.id).await.map(|r| r.retention_expires_at), Some(moved.retention_expires_at));
}
