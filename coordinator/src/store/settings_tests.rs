//! The audit log and retention windows, on SQLite and Postgres alike (`baton
//! dev` and clusters answer the same).

use super::contract_tests::{backends, new_execution, settle, tools};
use super::*;
use crate::domain::{ExecutionId, Outcome};

fn entry(id: &str, project: Option<&str>, at: i64, action: &str, outcome: &str) -> AuditEntry {
    AuditEntry {
        id: id.into(),
        org_id: "org_1".into(),
        project_id: project.map(str::to_owned),
        at,
        actor_id: "cred_a".into(),
        actor_kind: "api_key".into(),
        action: action.into(),
        target: None,
        outcome: outcome.into(),
        detail: None,
        occurrences: 1,
    }
}

#[tokio::test]
async fn a_repeat_of_a_rows_id_counts_into_it() {
    for b in backends().await {
        let s = &b.store;
        for _ in 0..3 {
            s.append_audit(&entry("aud_r1", Some("p1"), 100, "operator.list", "refused")).await.expect("append");
        }
        s.append_audit(&entry("aud_2", Some("p1"), 150, "operator.list", "refused")).await.expect("append");
        let f = AuditFilter { org_id: "org_1".into(), project_id: "p1".into(), ..Default::default() };
        let rows = s.audit_page(&f, 10, 0).await.expect("page");
        let seen: Vec<(&str, i64)> = rows.iter().map(|r| (r.id.as_str(), r.occurrences)).collect();
        assert_eq!(seen, [("aud_2", 1), ("aud_r1", 3)], "{}", b.name);
    }
}

#[tokio::test]
async fn audit_rows_are_scoped_filtered_paged_and_expire() {
    for b in backends().await {
        let s = &b.store;
        for e in [
            entry("a1", Some("p1"), 100, "operator.cancel", "accepted"),
            entry("a2", Some("p1"), 200, "operator.cancel", "refused"),
            entry("a3", None, 300, "retention.set", "allowed"),
            entry("a4", Some("p2"), 400, "operator.cancel", "accepted"),
        ] {
            s.append_audit(&e).await.expect("append");
        }
        let p1 = AuditFilter { org_id: "org_1".into(), project_id: "p1".into(), ..Default::default() };
        let ids = |v: Vec<AuditEntry>| v.into_iter().map(|e| e.id).collect::<Vec<_>>();
        // The project's rows and the organization's, newest first; never another project's.
        assert_eq!(ids(s.audit_page(&p1, 10, 0).await.expect("page")), ["a3", "a2", "a1"], "{}", b.name);
        assert_eq!(s.audit_count(&p1).await.expect("count"), 3, "{}", b.name);
        assert_eq!(ids(s.audit_page(&p1, 1, 1).await.expect("page")), ["a2"], "{}", b.name);
        let refused = AuditFilter { outcome: Some("refused".into()), ..p1.clone() };
        assert_eq!(ids(s.audit_page(&refused, 10, 0).await.expect("page")), ["a2"], "{}", b.name);
        let window = AuditFilter { from: Some(150), before: Some(300), ..p1.clone() };
        assert_eq!(ids(s.audit_page(&window, 10, 0).await.expect("page")), ["a2"], "{}", b.name);
        let other_org = AuditFilter { org_id: "org_2".into(), ..p1.clone() };
        assert_eq!(s.audit_count(&other_org).await.expect("count"), 0, "{}", b.name);
        assert_eq!(s.delete_audit_before(250, 10).await.expect("delete"), 2, "{}", b.name);
        assert_eq!(ids(s.audit_page(&p1, 10, 0).await.expect("page")), ["a3"], "{}", b.name);
    }
}

#[tokio::test]
async fn retention_windows_redate_what_they_govern_and_logging_off_expires_the_finished() {
    const DAY: i64 = 86_400_000;
    for b in backends().await {
        let s = &b.store;
        let n = b.name;
        s.create_org("org_1", "o", 0).await.expect("org");
        s.create_project("p1", "org_1", "a", 0).await.expect("project");
        s.create_project("p2", "org_1", "b", 0).await.expect("project");
        let expiry =
            |id: ExecutionId| async move { s.get_execution(&id).await.expect("get").map(|r| r.retention_expires_at) };
        let finished = new_execution("p1", "u", None, "f", 1_000);
        s.create_execution(&finished).await.expect("create");
        s.claim("p1", &tools(), "w", 1, 1_000, 9_000).await.expect("claim");
        settle(s, &finished.id, 1, Outcome::Success, 1_100).await;
        let running = new_execution("p1", "u", None, "f", 2_000);
        s.create_execution(&running).await.expect("create");
        let other = new_execution("p2", "u", None, "f", 2_000);
        s.create_execution(&other).await.expect("create");
        let deadline = finished.execution_deadline;

        assert!(s.set_project_retention("org_1", "p1", Some(DAY), 7 * DAY, 5_000).await.expect("set"), "{n}");
        assert_eq!(expiry(finished.id.clone()).await, Some(deadline + DAY), "{n}");
        assert_eq!(expiry(other.id.clone()).await, Some(other.retention_expires_at), "{n}: another project");
        // The organization's default governs the projects without their own window.
        assert!(s.set_organization_retention("org_1", Some(2 * DAY), 7 * DAY, 5_000).await.expect("set"), "{n}");
        assert_eq!(expiry(other.id.clone()).await, Some(other.execution_deadline + 2 * DAY), "{n}");
        assert_eq!(expiry(finished.id.clone()).await, Some(deadline + DAY), "{n}: the override stands");
        let settings = s.retention_settings("org_1", "p1").await.expect("read").expect("exists");
        assert_eq!((settings.project_ms, settings.organization_ms), (Some(DAY), Some(2 * DAY)), "{n}");
        assert_eq!(settings.effective_ms(7 * DAY), DAY, "{n}");
        assert!(!s.set_project_retention("org_2", "p1", None, 7 * DAY, 5_000).await.expect("set"), "{n}: scoped");

        // Off: the finished run expires now, the running one at its deadline.
        assert!(s.set_execution_logging("org_1", false, 7 * DAY, 5_000).await.expect("off"), "{n}");
        assert!(!s.execution_logging("org_1").await.expect("read"), "{n}");
        assert_eq!(expiry(finished.id.clone()).await, Some(5_000), "{n}");
        assert_eq!(expiry(running.id.clone()).await, Some(running.execution_deadline), "{n}");
        assert_eq!(s.retention_settings("org_1", "p1").await.expect("read").expect("exists").effective_ms(DAY), 0);
        // Back on: the windows return for what is left; what expired stays expired.
        assert!(s.set_execution_logging("org_1", true, 7 * DAY, 6_000).await.expect("on"), "{n}");
        assert_eq!(expiry(finished.id.clone()).await, Some(5_000), "{n}");
        assert_eq!(expiry(running.id.clone()).await, Some(running.execution_deadline + DAY), "{n}");
    }
}
