//! History counts from the kept sums equal counting every run, on SQLite and
//! Postgres, through each thing that moves a run in or out of them: a seal,
//! a listed run finishing and being moved, retention passing before the
//! sweeper deletes, and the sweeper deleting summed and listed runs.

use super::contract_tests::{backends, new_execution, settle, tools};
use super::history_counts::{self, SEAL_MARGIN_MS};
use super::*;
use crate::domain::{Event, FailureReason, Outcome, Status};
use sqlx::Row;

fn filters() -> Vec<(&'static str, HistoryFilter)> {
    let all = HistoryFilter { project_id: "p1".into(), ..Default::default() };
    let with = |edit: &dyn Fn(&mut HistoryFilter)| {
        let mut f = all.clone();
        edit(&mut f);
        f
    };
    vec![
        ("all", all.clone()),
        ("completed", with(&|f| f.status = Some(Status::Completed))),
        ("failed", with(&|f| f.status = Some(Status::Failed))),
        ("cancelled", with(&|f| f.status = Some(Status::Cancelled))),
        ("pending", with(&|f| f.status = Some(Status::Pending))),
        ("tool_error", with(&|f| f.failure_reason = Some(FailureReason::ToolError))),
        ("tool", with(&|f| f.tool_name = Some("Other.Tool".into()))),
        ("toolkit", with(&|f| f.toolkit_name = Some("Demo".into()))),
        (
            "toolkit+completed",
            with(&|f| {
                f.toolkit_name = Some("Demo".into());
                f.status = Some(Status::Completed);
            }),
        ),
    ]
}

/// Every filter's count at `now`, asserting the sums agree with a full count.
async fn counts(s: &Store, name: &str, step: &str, now: i64) -> Vec<(&'static str, u64)> {
    let mut out = Vec::new();
    for (label, f) in filters() {
        let kept = s.history_count(&f, now).await.expect("count");
        let scanned = s.history_count_by_scan(&f, now).await.expect("scan");
        assert_eq!(kept, scanned, "{name}, {step}: `{label}` at {now}");
        out.push((label, kept));
    }
    out
}

fn of(counts: &[(&str, u64)], label: &str) -> u64 {
    counts.iter().find(|(l, _)| *l == label).map(|(_, n)| *n).unwrap_or(u64::MAX)
}

async fn listed(s: &Store) -> i64 {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM history_unsealed").fetch_one(&s.pool).await.expect("listed");
    row.try_get("n").expect("n")
}

#[tokio::test]
async fn kept_counts_equal_full_counts_through_seals_finishes_expiry_and_deletion() {
    for b in backends().await {
        let (s, name) = (&b.store, b.name);
        // Finished before the seal: completed, failed with a tool error, cancelled.
        let done = new_execution("p1", "u1", None, "f", 1_000);
        s.create_execution(&done).await.expect("create");
        s.claim("p1", &tools(), "w", 1, 1_000, 9_000).await.expect("claim");
        settle(s, &done.id, 1, Outcome::Success, 1_100).await;
        let failed = new_execution("p1", "u1", None, "f", 2_000);
        s.create_execution(&failed).await.expect("create");
        s.claim("p1", &tools(), "w", 1, 2_000, 9_000).await.expect("claim");
        settle(s, &failed.id, 1, Outcome::ToolError { retryable: false }, 2_100).await;
        let cancelled = new_execution("p1", "u1", None, "f", 2_500);
        s.create_execution(&cancelled).await.expect("create");
        s.apply(&cancelled.id, &Event::RequestCancel, &EventData::default(), 2_600).await.expect("cancel");
        // Completed, retained only until 50_000.
        let mut short = new_execution("p1", "u1", None, "f", 1_500);
        short.retention_expires_at = 50_000;
        s.create_execution(&short).await.expect("create");
        s.claim("p1", &tools(), "w", 1, 1_500, 9_000).await.expect("claim");
        settle(s, &short.id, 1, Outcome::Success, 1_600).await;
        // Still pending when sealed: another tool; and one retained only until 70_000.
        let mut waiting = new_execution("p1", "u2", None, "f", 3_000);
        waiting.tool_name = "Other.Tool".into();
        waiting.toolkit_name = "Other".into();
        s.create_execution(&waiting).await.expect("create");
        let mut brief = new_execution("p1", "u2", None, "f", 4_000);
        brief.retention_expires_at = 70_000;
        s.create_execution(&brief).await.expect("create");
        // Another project's run is never counted.
        s.create_execution(&new_execution("p2", "u1", None, "f", 1_000)).await.expect("create");

        let before = counts(s, name, "nothing sealed", 10_000).await;
        assert_eq!(of(&before, "all"), 6, "{name}");

        // Seal everything created before 5_000; then a run created after.
        assert!(s.seal_history("org_1", "p1", 5_000 + SEAL_MARGIN_MS).await.expect("seal"), "{name}");
        assert_eq!(listed(s).await, 2, "{name}: the two pending runs are listed");
        let late = new_execution("p1", "u1", None, "f", 6_000);
        s.create_execution(&late).await.expect("create");
        let sealed = counts(s, name, "sealed", 10_000).await;
        assert_eq!(
            (of(&sealed, "all"), of(&sealed, "completed"), of(&sealed, "pending"), of(&sealed, "tool_error")),
            (7, 2, 3, 1),
            "{name}"
        );

        // A summed run past retention, not yet deleted, leaves the count.
        let expired = counts(s, name, "summed run expired", 60_000).await;
        assert_eq!((of(&expired, "all"), of(&expired, "completed")), (6, 1), "{name}");

        // A listed run finishes: counted by its new status, then moved to the sums.
        s.apply(&waiting.id, &Event::RequestCancel, &EventData::default(), 7_000).await.expect("cancel");
        let finished = counts(s, name, "listed run finished", 10_000).await;
        assert_eq!((of(&finished, "cancelled"), of(&finished, "tool")), (2, 1), "{name}");
        assert!(s.seal_history("org_1", "p1", 5_500 + SEAL_MARGIN_MS).await.expect("seal"), "{name}");
        assert_eq!(listed(s).await, 1, "{name}: the finished run left the list");
        counts(s, name, "moved", 10_000).await;
        counts(s, name, "moved", 60_000).await;

        // The sweeper deletes the expired summed run, then (later) the expired listed one.
        let (report, _) = s.sweep(60_000, 1_000, 500).await;
        assert!(report.deleted >= 1, "{name}: {report:?}");
        let swept = counts(s, name, "summed run deleted", 60_000).await;
        assert_eq!(of(&swept, "completed"), 1, "{name}");
        counts(s, name, "summed run deleted", 10_000).await;
        counts(s, name, "listed run expired", 75_000).await;
        s.sweep(80_000, 1_000, 500).await;
        assert_eq!(listed(s).await, 0, "{name}: a deleted listed run left the list");
        counts(s, name, "listed run deleted", 80_000).await;

        // A later seal picks up the run created after the first one.
        assert!(s.seal_history("org_1", "p1", 100_000 + SEAL_MARGIN_MS).await.expect("seal"), "{name}");
        counts(s, name, "sealed again", 80_000).await;
    }
}

const HOUR: i64 = 60 * 60 * 1000;
const MINUTE: i64 = 60 * 1000;

/// Ranges with partial hours at either end, one end only, exact hours, and
/// one within an hour (counted row by row), alone and with a status.
fn ranges(base: i64) -> Vec<(&'static str, HistoryFilter, bool)> {
    let range = |from: Option<i64>, before: Option<i64>| HistoryFilter {
        project_id: "p1".into(),
        created_from: from,
        created_before: before,
        ..Default::default()
    };
    let cancelled = |mut f: HistoryFilter| {
        f.status = Some(Status::Cancelled);
        f
    };
    vec![
        ("partial edges", range(Some(base + 10 * MINUTE), Some(base + 3 * HOUR + 5 * MINUTE)), true),
        ("from only", range(Some(base + 70 * MINUTE), None), true),
        ("before only", range(None, Some(base + 2 * HOUR + 40 * MINUTE)), true),
        ("whole hours", range(Some(base - 7 * MINUTE + HOUR), Some(base - 7 * MINUTE + 4 * HOUR)), true),
        ("within an hour", range(Some(base + 55 * MINUTE), Some(base + 65 * MINUTE)), false),
        ("cancelled, partial edges", cancelled(range(Some(base + 10 * MINUTE), Some(base + 4 * HOUR))), true),
    ]
}

async fn sums(s: &Store) -> (i64, i64) {
    let row = sqlx::query("SELECT COUNT(*) AS rows, CAST(COALESCE(MIN(n), 1) AS BIGINT) AS least FROM history_sealed")
        .fetch_one(&s.pool)
        .await
        .expect("sums");
    (row.try_get("rows").expect("rows"), row.try_get("least").expect("least"))
}

#[tokio::test]
async fn time_ranges_count_whole_hours_from_the_sums_and_their_edges_row_by_row() {
    for b in backends().await {
        let (s, name) = (&b.store, b.name);
        // Runs every 25 minutes over five hours from 10:07; two in three
        // cancelled (finished), the rest pending; the first four expire early.
        let base = 10 * HOUR + 7 * MINUTE;
        let mut ids = Vec::new();
        for i in 0..12 {
            let mut run = new_execution("p1", "u1", None, "f", base + i * 25 * MINUTE);
            run.retention_expires_at = if i < 4 { 20 * HOUR } else { 100 * HOUR };
            s.create_execution(&run).await.expect("create");
            if i % 3 != 2 {
                let at = run.created_at + MINUTE;
                s.apply(&run.id, &Event::RequestCancel, &EventData::default(), at).await.expect("cancel");
            }
            ids.push(run.id);
        }
        let check = |step: &'static str, now: i64| async move {
            for (label, f, by_sums) in ranges(base) {
                assert_eq!(history_counts::served(&f), by_sums, "{name}: `{label}`");
                let kept = s.history_count(&f, now).await.expect("count");
                let scanned = s.history_count_by_scan(&f, now).await.expect("scan");
                assert_eq!(kept, scanned, "{name}, {step}: `{label}` at {now}");
            }
        };
        check("nothing sealed", 15 * HOUR).await;
        assert!(s.seal_history("org_1", "p1", 16 * HOUR).await.expect("seal"), "{name}");
        let (rows, _) = sums(s).await;
        assert!(rows >= 5, "{name}: finished runs are summed by hour ({rows} sums)");
        check("sealed", 15 * HOUR).await;
        // 10:17 to 13:12 holds the runs from 10:32 to 13:02; three of them
        // are in the partial hours, counted row by row.
        let edges = &ranges(base)[0].1;
        assert_eq!(s.history_count(edges, 15 * HOUR).await.expect("count"), 7, "{name}");

        check("early runs expired", 21 * HOUR).await;
        let (report, _) = s.sweep(21 * HOUR, 1_000, 500).await;
        assert_eq!(report.deleted, 4, "{name}: {report:?}");
        check("early runs deleted", 21 * HOUR).await;
        assert_eq!(s.history_count(edges, 21 * HOUR).await.expect("count"), 4, "{name}");
        let (after, least) = sums(s).await;
        assert!(after < rows && least > 0, "{name}: an hour whose runs are all gone leaves no sum ({after}, {least})");
    }
}
