//! The history's day partitions on Postgres: a run and every row of it live
//! in the day its retention ends; a day that is over leaves whole, with the
//! history sums and Idempotency-Keys kept true; rows that waited in the
//! default partition move into their day when it is created; a retention
//! change moves a run's rows with it.

use super::contract_tests::{new_execution, postgres, settle, tools};
use super::history_counts::SEAL_MARGIN_MS;
use super::partitions::{DAY_MS, partition_name};
use super::*;
use crate::domain::{ExecutionId, Outcome};
use sqlx::Row;

/// The partitions holding `table`'s rows of execution `id`.
async fn homes(s: &Store, table: &str, id: &ExecutionId) -> Vec<String> {
    let column = if table == "executions" { "id" } else { "execution_id" };
    let sql = format!("SELECT DISTINCT tableoid::regclass::text AS home FROM {table} WHERE {column} = $1");
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id.as_str()).fetch_all(&s.pool).await.expect("homes");
    rows.iter().map(|r| r.try_get("home").expect("home")).collect()
}

/// A run of `p1` created at `at` whose retention ends at `expires`.
fn run(key: Option<&str>, at: i64, expires: i64) -> NewExecution {
    let mut new = new_execution("p1", "u1", key, "f", at);
    new.execution_deadline = at + 60_000;
    new.retention_expires_at = expires;
    new
}

async fn complete(s: &Store, id: &ExecutionId, at: i64) {
    s.claim("p1", &tools(), "w", 1, at, at + 9_000).await.expect("claim");
    settle(s, id, 1, Outcome::Success, at + 100).await;
}

fn all_of_p1() -> HistoryFilter {
    HistoryFilter { project_id: "p1".into(), ..Default::default() }
}

#[tokio::test]
async fn a_day_that_is_over_leaves_whole_and_the_sums_and_keys_stay_true() {
    let b = postgres().await;
    let s = &b.store;
    const D: i64 = 20_000;
    let base = D * DAY_MS;
    assert_eq!(s.ensure_partitions(base, base + 3 * DAY_MS).await.expect("ensure"), 4);
    let days = s.partition_days().await.expect("days");
    assert!((D..=D + 3).all(|d| days.contains(&d)), "{days:?}");

    // Three runs expire on day D+1 (one keyed, one never finishing), one on D+3.
    let day1 = (D + 1) * DAY_MS + 5;
    let done = run(None, base + 1_000, day1);
    s.create_execution(&done).await.expect("create");
    complete(s, &done.id, base + 1_000).await;
    let keyed = run(Some("k"), base + 2_000, day1);
    s.create_execution(&keyed).await.expect("create");
    complete(s, &keyed.id, base + 2_000).await;
    let kept = run(None, base + 3_000, (D + 3) * DAY_MS + 5);
    s.create_execution(&kept).await.expect("create");
    complete(s, &kept.id, base + 3_000).await;
    let waiting = run(None, base + 4_000, day1);
    s.create_execution(&waiting).await.expect("create");
    for table in ["executions", "execution_events", "attempts"] {
        assert_eq!(homes(s, table, &done.id).await, [partition_name(table, D + 1)], "{table}");
    }
    assert!(s.seal_history("org_1", "p1", base + 10_000 + SEAL_MARGIN_MS).await.expect("seal"));
    let kept_events = s.list_events(&kept.id).await.expect("events").len();
    assert!(kept_events >= 3, "{kept_events}");

    // Day D+2 begins: days D and D+1 leave, D+3 stays.
    let now = (D + 2) * DAY_MS;
    let (report, _) = s.sweep(now, 1_000, 500).await;
    assert_eq!((report.days_dropped, report.keys_deleted, report.failed), (2, 1, 0), "{report:?}");
    let keys: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM execution_keys").fetch_one(&s.pool).await.expect("n");
    assert_eq!(keys, 0, "the expired run's key row is gone too");
    let days = s.partition_days().await.expect("days");
    assert!(!days.contains(&D) && !days.contains(&(D + 1)) && days.contains(&(D + 3)), "{days:?}");
    for id in [&done.id, &keyed.id, &waiting.id] {
        assert!(s.get_execution(id).await.expect("get").is_none(), "{id} left with its day");
        assert!(s.list_events(id).await.expect("events").is_empty(), "{id}'s events left too");
    }
    assert!(s.get_execution(&kept.id).await.expect("get").is_some());
    assert_eq!(s.list_events(&kept.id).await.expect("events").len(), kept_events);

    // The sums forgot the summed runs and the list the listed one.
    let counted = s.history_count(&all_of_p1(), now).await.expect("count");
    assert_eq!(counted, s.history_count_by_scan(&all_of_p1(), now).await.expect("scan"));
    assert_eq!(counted, 1);
    let listed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM history_unsealed").fetch_one(&s.pool).await.expect("n");
    assert_eq!(listed, 0, "the never-finished run left the list");

    // The expired run's Idempotency-Key is free for new work.
    let mut again = run(Some("k"), now, now + 2 * DAY_MS);
    again.request_fingerprint = Some("other".into());
    let created = s.create_execution(&again).await.expect("key free again");
    assert!(!created.replayed);
}

#[tokio::test]
async fn rows_that_waited_in_the_default_partition_move_into_their_day() {
    let b = postgres().await;
    let s = &b.store;
    const D: i64 = 20_100;
    let early = run(None, D * DAY_MS - 10_000, D * DAY_MS + 5);
    s.create_execution(&early).await.expect("create");
    assert_eq!(homes(s, "executions", &early.id).await, ["executions_default"]);
    assert_eq!(homes(s, "execution_events", &early.id).await, ["execution_events_default"]);

    assert_eq!(s.ensure_partitions(D * DAY_MS, D * DAY_MS).await.expect("ensure"), 1);
    assert_eq!(homes(s, "executions", &early.id).await, [partition_name("executions", D)]);
    assert_eq!(homes(s, "execution_events", &early.id).await, [partition_name("execution_events", D)]);
    assert_eq!(s.ensure_partitions(D * DAY_MS, D * DAY_MS).await.expect("again"), 0, "a day is created once");
}

#[tokio::test]
async fn a_retention_change_moves_a_run_and_its_rows_to_their_new_day() {
    let b = postgres().await;
    let s = &b.store;
    s.create_org("org_1", "o", 0).await.expect("org");
    s.create_project("p1", "org_1", "a", 0).await.expect("project");
    let now = baton_proto::clock::now_ms();
    let today = now.div_euclid(DAY_MS);
    s.ensure_partitions(now, now + 40 * DAY_MS).await.expect("ensure");
    let new = run(Some("k2"), now, now + 60_000 + 7 * DAY_MS);
    s.create_execution(&new).await.expect("create");
    complete(s, &new.id, now).await;

    // A 30-day window moves the run, its events, attempts and key to its new day.
    assert!(s.set_project_retention("org_1", "p1", Some(30 * DAY_MS), 7 * DAY_MS, now).await.expect("set"));
    let expires = s.get_execution(&new.id).await.expect("get").expect("kept").retention_expires_at;
    assert_eq!(expires, new.execution_deadline + 30 * DAY_MS);
    let day = expires.div_euclid(DAY_MS);
    assert!(day > today + 29, "{day}");
    for table in ["executions", "execution_events", "attempts"] {
        assert_eq!(homes(s, table, &new.id).await, [partition_name(table, day)], "{table}");
    }
    let key_expires: i64 =
        sqlx::query_scalar("SELECT retention_expires_at FROM execution_keys WHERE execution_id = $1")
            .bind(new.id.as_str())
            .fetch_one(&s.pool)
            .await
            .expect("key");
    assert_eq!(key_expires, expires, "the key expires with its run");
}

#[tokio::test]
async fn the_audit_log_leaves_by_whole_periods_and_repeats_still_fold_into_one_row() {
    use super::partitions::AUDIT_PERIOD_MS;
    let b = postgres().await;
    let s = &b.store;
    const P: i64 = 700;
    let start = P * AUDIT_PERIOD_MS;
    assert_eq!(s.ensure_audit_partitions(start).await.expect("ensure"), 2, "this period and the next");
    let entry = |id: &str, at: i64| AuditEntry {
        id: id.into(),
        org_id: "org_1".into(),
        project_id: Some("p1".into()),
        at,
        actor_id: "cred_a".into(),
        actor_kind: "api_key".into(),
        action: "operator.list".into(),
        target: None,
        outcome: "refused".into(),
        detail: None,
        occurrences: 1,
    };
    // A refusal repeated within its minute is one row, in its period's partition.
    for at in [start + 1_000, start + 2_000, start + 3_000] {
        s.append_audit(&entry("aud_rfold", at)).await.expect("append");
    }
    s.append_audit(&entry("aud_next", start + AUDIT_PERIOD_MS + 5)).await.expect("append");
    s.append_audit(&entry("aud_early", start - 10)).await.expect("append");
    let home = |id: &'static str| async move {
        sqlx::query_scalar::<_, String>(
            "SELECT tableoid::regclass::text || ':' || occurrences::text FROM audit_logs WHERE id = $1",
        )
        .bind(id)
        .fetch_all(&s.pool)
        .await
        .expect("home")
    };
    assert_eq!(home("aud_rfold").await, [format!("{}:3", partition_name("audit_logs", P))]);
    assert_eq!(home("aud_early").await, ["audit_logs_default:1"]);

    // Past the period's end, the period leaves whole and the early row one by one.
    assert_eq!(s.delete_audit_before(start + AUDIT_PERIOD_MS, 10).await.expect("delete"), 1, "the default's row");
    assert!(home("aud_rfold").await.is_empty() && home("aud_early").await.is_empty());
    assert_eq!(home("aud_next").await.len(), 1, "the next period stays");
    assert!(!s.attached("audit_logs").await.expect("periods").contains(&P));
}
