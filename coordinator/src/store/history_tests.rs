//! The history reads, on SQLite and Postgres alike (`baton dev` and clusters
//! answer the same): filters, order, offset paging, counts, project scope and
//! retention.

use super::contract_tests::{backends, new_execution, settle, tools};
use super::*;
use crate::domain::{Event, ExecutionId, FailureReason, Outcome, Status};

const NOW: i64 = 5_000;

fn all(project: &str) -> HistoryFilter {
    HistoryFilter { project_id: project.into(), ..Default::default() }
}

async fn ids(s: &Store, f: &HistoryFilter, limit: u32, offset: u32) -> Vec<ExecutionId> {
    s.history_page(f, NOW, limit, offset).await.expect("page").into_iter().map(|r| r.id).collect()
}

#[tokio::test]
async fn history_filters_orders_pages_and_counts() {
    for b in backends().await {
        let s = &b.store;
        let name = b.name;
        // Completed: claimed at 1_000, settled at 1_100.
        let done = new_execution("p1", "u1", None, "f", 1_000);
        s.create_execution(&done).await.expect("create");
        s.claim("p1", &tools(), "w", 1, 1_000, 9_000).await.expect("claim");
        settle(s, &done.id, 1, Outcome::Success, 1_100).await;
        // Failed with a tool error.
        let failed = new_execution("p1", "u1", None, "f", 3_000);
        s.create_execution(&failed).await.expect("create");
        s.claim("p1", &tools(), "w", 1, 3_000, 9_000).await.expect("claim");
        settle(s, &failed.id, 1, Outcome::ToolError { retryable: false }, 3_100).await;
        // Pending, another user, another tool and toolkit.
        let mut other_tool = new_execution("p1", "u2", None, "f", 2_000);
        other_tool.tool_name = "Other.Tool".into();
        other_tool.toolkit_name = "Other".into();
        s.create_execution(&other_tool).await.expect("create");
        // Pending, created in the same millisecond as `failed`.
        let twin = new_execution("p1", "u1", None, "f", 3_000);
        s.create_execution(&twin).await.expect("create");
        // Cancelled before it ran.
        let cancelled = new_execution("p1", "u1", None, "f", 2_500);
        s.create_execution(&cancelled).await.expect("create");
        s.apply(&cancelled.id, &Event::RequestCancel, &EventData::default(), 2_600).await.expect("cancel");
        // Another project, and a run past its retention.
        s.create_execution(&new_execution("p2", "u1", None, "f", 4_000)).await.expect("create");
        let mut expired = new_execution("p1", "u1", None, "f", 1_500);
        expired.retention_expires_at = NOW;
        s.create_execution(&expired).await.expect("create");

        // Newest first, ties by id, descending; other projects and expired runs never appear.
        let mut same_ms = [failed.id.clone(), twin.id.clone()];
        same_ms.sort();
        same_ms.reverse();
        let newest_first =
            [same_ms[0].clone(), same_ms[1].clone(), cancelled.id.clone(), other_tool.id.clone(), done.id.clone()];
        assert_eq!(ids(s, &all("p1"), 100, 0).await, newest_first, "{name}");
        assert_eq!(s.history_count(&all("p1"), NOW).await.expect("count"), 5, "{name}");
        assert_eq!(s.history_count(&all("p1"), 1_000).await.expect("count"), 6, "{name}: still retained at 1_000");
        assert_eq!(ids(s, &all("p1"), 2, 0).await, newest_first[..2], "{name}");
        assert_eq!(ids(s, &all("p1"), 2, 2).await, newest_first[2..4], "{name}");
        assert_eq!(ids(s, &all("p1"), 2, 4).await, newest_first[4..], "{name}");
        assert!(ids(s, &all("p1"), 2, 5).await.is_empty(), "{name}");
        assert_eq!(ids(s, &all("nobody"), 10, 0).await, Vec::<ExecutionId>::new());

        let row = &s.history_page(&all("p1"), NOW, 1, 4).await.expect("page")[0];
        assert_eq!(
            (row.status, row.execution_type.as_str(), row.started_at, row.finished_at),
            (Status::Completed, "immediate", Some(1_000), Some(1_100)),
            "{name}"
        );
        assert_eq!(
            (row.tool_name.as_str(), row.toolkit_name.as_str(), row.user_id.as_str()),
            ("Demo.Echo", "Demo", "u1")
        );

        let f = |edit: &dyn Fn(&mut HistoryFilter)| {
            let mut f = all("p1");
            edit(&mut f);
            f
        };
        let cases: Vec<(HistoryFilter, Vec<&ExecutionId>)> = vec![
            (f(&|f| f.tool_name = Some("Other.Tool".into())), vec![&other_tool.id]),
            (f(&|f| f.toolkit_name = Some("Other".into())), vec![&other_tool.id]),
            (f(&|f| f.user_id = Some("u2".into())), vec![&other_tool.id]),
            (f(&|f| f.status = Some(Status::Completed)), vec![&done.id]),
            (f(&|f| f.status = Some(Status::Failed)), vec![&failed.id]),
            (f(&|f| f.failure_reason = Some(FailureReason::ToolError)), vec![&failed.id]),
            (f(&|f| f.failure_reason = Some(FailureReason::OwnerLost)), vec![]),
            // The start is inclusive, the end exclusive.
            (f(&|f| f.created_before = Some(2_000)), vec![&done.id]),
            (
                f(&|f| (f.created_from, f.created_before) = (Some(2_000), Some(3_000))),
                vec![&cancelled.id, &other_tool.id],
            ),
            (
                f(&|f| {
                    (f.tool_name, f.status, f.created_from) =
                        (Some("Demo.Echo".into()), Some(Status::Failed), Some(3_000))
                }),
                vec![&failed.id],
            ),
        ];
        for (filter, expected) in cases {
            let got = ids(s, &filter, 100, 0).await;
            assert_eq!(got.iter().collect::<Vec<_>>(), expected, "{name}: {filter:?}");
            assert_eq!(
                s.history_count(&filter, NOW).await.expect("count"),
                expected.len() as u64,
                "{name}: {filter:?}"
            );
        }
        let from = f(&|f| f.created_from = Some(2_000));
        assert_eq!(s.history_count(&from, NOW).await.expect("count"), 4, "{name}");
    }
}
