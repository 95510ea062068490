//! The store contract: every test runs against SQLite and Postgres, each on a
//! fresh database of its own so tests run in parallel.

use super::*;
use crate::crypto::{Field, KeyRing};
use crate::domain::{Event, ExecutionId, FailureReason, Outcome, Phase, Status};

const PG_URL_ENV: &str = "TEST_POSTGRES_URL";

pub(crate) struct Backend {
    pub(super) name: &'static str,
    pub(crate) store: Store,
    /// The database's URL, for a connection of a test's own.
    pub(crate) url: String,
    sqlite_path: Option<std::path::PathBuf>,
}

fn unique(prefix: &str) -> String {
    crate::domain::id::random_id(prefix, 64).to_lowercase()
}

pub(super) async fn sqlite() -> Backend {
    let path = std::env::temp_dir().join(format!("{}.db", unique("baton_t_")));
    let url = format!("sqlite://{}", path.display());
    let store = Store::connect(&url, 1).await.expect("sqlite");
    store.migrate().await.expect("migrate sqlite");
    starter(&store).await;
    Backend { name: "sqlite", store, url, sqlite_path: Some(path) }
}

pub(crate) async fn postgres() -> Backend {
    let base = std::env::var(PG_URL_ENV).unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let admin = Store::connect(&base, 2).await.expect("postgres reachable (set TEST_POSTGRES_URL)");
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let db = unique(&format!("baton_t_{created}_"));
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&admin.pool).await.expect("create db");
    admin.close().await;
    let (prefix, _) = base.rsplit_once('/').expect("url has a database");
    let url = format!("{prefix}/{db}");
    let store = Store::connect(&url, 4).await.expect("connect test db");
    store.migrate().await.expect("migrate postgres");
    starter(&store).await;
    Backend { name: "postgres", store, url, sqlite_path: None }
}

/// The live credential `cred_1` (of `org_fixture`) that [`new_execution`]s
/// are started by: a create checks its starter's credential in the statement
/// that writes it.
async fn starter(store: &Store) {
    store.create_org("org_fixture", "fixture", 0).await.expect("org");
    store.create_project("prj_fixture", "org_fixture", "fixture", 0).await.expect("project");
    store.create_credential(&fixture_key("cred_1", b"fixture"), 0).await.expect("starter");
}

/// A member API key `id` of the fixture's project.
pub(crate) fn fixture_key(id: &str, token_hash: &[u8]) -> super::NewCredential {
    super::NewCredential {
        id: id.into(),
        token_hash: token_hash.to_vec(),
        kind: super::CredentialKind::ApiKey,
        org_id: "org_fixture".into(),
        project_id: "prj_fixture".into(),
        gateway_id: None,
        user_id: None,
        role: Some("member".into()),
        permissions: Vec::new(),
        worker_group: None,
    }
}

/// A hosted tool `name` as a worker registers one: an object schema, one
/// attempt, enabled; tests change what they need.
pub(crate) fn tool_record(name: &str) -> super::ToolRecord {
    super::ToolRecord {
        name: name.into(),
        toolkit_name: "Test".into(),
        toolkit_version: "1.0.0".into(),
        description: String::new(),
        input_schema: r#"{"type":"object"}"#.into(),
        background: None,
        task_time_input: false,
        max_attempts: 1,
        max_ttl_ms: None,
        remote: false,
        required_client_capabilities: Vec::new(),
        cancel_unsupported: false,
        disabled: false,
        metadata: Default::default(),
    }
}

async fn credential_of(store: &Store, hash: &[u8]) -> Credential {
    store.credentials_by_hashes(&[hash]).await.expect("get").remove(hash).expect("found")
}

pub(super) async fn backends() -> Vec<Backend> {
    vec![sqlite().await, postgres().await]
}

pub(crate) fn new_execution(project: &str, user: &str, key: Option<&str>, fingerprint: &str, now: i64) -> NewExecution {
    NewExecution {
        id: ExecutionId::generate(),
        org_id: "org_1".into(),
        project_id: project.into(),
        gateway_id: "gw_1".into(),
        tool_name: "Demo.Echo".into(),
        toolkit_name: "Demo".into(),
        toolkit_version: "1.0.0".into(),
        user_id: user.into(),
        started_by: "cred_1".into(),
        surface: "rest".into(),
        created_at: now,
        run_at: None,
        execution_deadline: now + 60_000,
        retention_expires_at: now + 120_000,
        poll_interval_ms: 1000,
        max_attempts: 3,
        idempotency_key: key.map(str::to_owned),
        request_fingerprint: Some(fingerprint.into()),
        input_ct: vec![1, 2, 3],
        payload_bytes: 3,
        traceparent: None,
        admission_fence: None,
    }
}

pub(super) fn tools() -> Vec<String> {
    vec!["Demo.Echo".to_string()]
}

pub(super) async fn settle(s: &Store, id: &ExecutionId, attempt: u32, outcome: Outcome, now: i64) -> ExecutionRecord {
    let event = Event::Settle { worker_id: "w".into(), attempt, outcome };
    match s.apply(id, &event, &EventData::default(), now).await.expect("apply") {
        Some(Ok(a)) => a.record,
        other => panic!("settle not applied: {other:?}"),
    }
}

#[tokio::test]
async fn create_then_read_back_with_created_event() {
    for b in backends().await {
        let new = new_execution("p1", "u1", None, "f", 1_000);
        let created = b.store.create_execution(&new).await.expect("create");
        assert!(!created.replayed);
        let got = b.store.get_execution(&new.id).await.expect("get").expect("exists");
        assert_eq!(got, created.record, "{}", b.name);
        assert_eq!(got.status(), Status::Pending);
        assert_eq!(got.execution_type, "immediate");
        assert_eq!(got.input_ct.as_deref(), Some(&[1u8, 2, 3][..]));
        let events = b.store.list_events(&new.id).await.expect("events");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, Some(crate::domain::EventKind::Created));
        assert!(b.store.get_execution(&ExecutionId::generate()).await.expect("get").is_none());
    }
}

#[tokio::test]
async fn scheduled_runs_wait_for_run_at() {
    for b in backends().await {
        let mut new = new_execution("p1", "u1", None, "f", 1_000);
        new.run_at = Some(5_000);
        let rec = b.store.create_execution(&new).await.expect("create").record;
        assert_eq!(rec.execution_type, "scheduled", "{}", b.name);
        assert_eq!(rec.scheduled_at, Some(5_000));
        // The dispatcher's periodic probe agrees with the claims on either side of run_at.
        assert!(!b.store.any_claimable(4_999).await.expect("probe"), "{}", b.name);
        assert!(b.store.claim("p1", &tools(), "w", 10, 4_999, 20_000).await.expect("claim").is_empty());
        assert!(b.store.any_claimable(5_000).await.expect("probe"), "{}", b.name);
        assert_eq!(b.store.claim("p1", &tools(), "w", 10, 5_000, 20_000).await.expect("claim").len(), 1);
        assert!(!b.store.any_claimable(5_000).await.expect("probe"), "{}: claimed, nothing is left", b.name);
    }
}

#[tokio::test]
async fn idempotency_key_replays_same_work_and_refuses_other_work() {
    for b in backends().await {
        let first = b.store.create_execution(&new_execution("p1", "u1", Some("k"), "f1", 1_000)).await.expect("first");
        let again = b.store.create_execution(&new_execution("p1", "u1", Some("k"), "f1", 1_001)).await.expect("again");
        assert!(again.replayed, "{}", b.name);
        assert_eq!(again.record.id, first.record.id);
        let other = b.store.create_execution(&new_execution("p1", "u1", Some("k"), "f2", 1_002)).await;
        assert!(matches!(other, Err(Error::IdempotencyConflict)), "{}", b.name);
        // Keys are scoped to the end user.
        let u2 = b.store.create_execution(&new_execution("p1", "u2", Some("k"), "f2", 1_003)).await.expect("u2");
        assert!(!u2.replayed);
    }
}

#[tokio::test]
async fn a_key_past_its_holders_retention_starts_new_work() {
    for b in backends().await {
        let first = b.store.create_execution(&new_execution("p1", "u1", Some("k"), "f1", 1_000)).await.expect("first");
        let later = first.record.retention_expires_at + 1;
        let again = b.store.create_execution(&new_execution("p1", "u1", Some("k"), "f2", later)).await.expect("again");
        assert!(!again.replayed, "{}", b.name);
        assert_ne!(again.record.id, first.record.id, "{}", b.name);
        // The expired holder is not deleted by the create; it leaves with
        // the rest of the expired history.
        assert!(b.store.get_execution(&first.record.id).await.expect("get").is_some(), "{}", b.name);
        b.store.sweep(later, 5_000, 100).await;
        assert!(
            b.store.get_execution(&first.record.id).await.expect("get").is_none(),
            "{}: expired holder gone",
            b.name
        );
        let replay =
            b.store.create_execution(&new_execution("p1", "u1", Some("k"), "f2", later + 1)).await.expect("replay");
        assert_eq!(replay.record.id, again.record.id, "{}", b.name);
    }
}

#[tokio::test]
async fn batched_creates_insert_free_rows_and_leave_held_keys_to_the_single_path() {
    for b in backends().await {
        b.store.create_execution(&new_execution("p1", "u1", Some("held"), "f", 1_000)).await.expect("holder");
        let fresh = new_execution("p1", "u1", Some("fresh"), "f", 1_001);
        let keyless = new_execution("p1", "u1", None, "f", 1_002);
        let held = new_execution("p1", "u1", Some("held"), "f", 1_003);
        let (twin_a, twin_b) =
            (new_execution("p1", "u1", Some("twin"), "f", 1_004), new_execution("p1", "u1", Some("twin"), "f", 1_005));
        let created = b.store.create_many(&[&fresh, &keyless, &held, &twin_a, &twin_b]).await.expect("create many");
        let made: Vec<bool> = created.iter().map(Option::is_some).collect();
        match b.name {
            // SQLite creates one by one, through `create_execution`.
            "sqlite" => assert_eq!(made, [false; 5]),
            _ => {
                assert_eq!(made, [true, true, false, true, false], "{}: one row per key", b.name);
                let id = &created[0].as_ref().expect("fresh").record.id;
                let stored = b.store.get_execution(id).await.expect("get").expect("stored");
                assert_eq!((stored.status(), stored.idempotency_key.as_deref()), (Status::Pending, Some("fresh")));
                assert_eq!(b.store.list_events(id).await.expect("events").len(), 1, "its created event");
            }
        }
    }
}

#[tokio::test]
async fn concurrent_creates_with_one_key_make_one_execution() {
    for b in backends().await {
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let s = b.store.clone();
                tokio::spawn(async move {
                    s.create_execution(&new_execution("p1", "u1", Some("race"), "f", 1_000 + i)).await
                })
            })
            .collect();
        let mut ids = std::collections::HashSet::new();
        for t in tasks {
            ids.insert(t.await.expect("join").expect("create").record.id);
        }
        assert_eq!(ids.len(), 1, "{}", b.name);
    }
}

#[tokio::test]
async fn claims_lease_each_execution_once_and_record_attempts() {
    for b in backends().await {
        for i in 0..20 {
            b.store.create_execution(&new_execution("p1", "u1", None, "f", 1_000 + i)).await.expect("create");
        }
        b.store.create_execution(&new_execution("p2", "u1", None, "f", 1_000)).await.expect("other project");
        let claimers: Vec<_> = (0..4)
            .map(|w| {
                let s = b.store.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    loop {
                        let batch = s.claim("p1", &tools(), &format!("w{w}"), 3, 2_000, 9_000).await.expect("claim");
                        if batch.is_empty() {
                            return got;
                        }
                        got.extend(batch.into_iter().map(|c| c.record.id));
                    }
                })
            })
            .collect();
        let mut all = Vec::new();
        for c in claimers {
            all.extend(c.await.expect("join"));
        }
        let unique: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(all.len(), 20, "{}: every execution claimed", b.name);
        assert_eq!(unique.len(), 20, "{}: none claimed twice", b.name);
        let rec = b.store.get_execution(&all[0]).await.expect("get").expect("exists");
        assert_eq!(rec.status(), Status::Working);
        assert_eq!(rec.started_at, Some(2_000));
        let attempts = b.store.list_attempts(&all[0]).await.expect("attempts");
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].finished_at, None);
    }
}

#[tokio::test]
async fn settlement_completes_once_and_duplicates_are_ignored() {
    for b in backends().await {
        let new = new_execution("p1", "u1", None, "f", 1_000);
        b.store.create_execution(&new).await.expect("create");
        b.store.claim("p1", &tools(), "w", 1, 1_000, 9_000).await.expect("claim");
        let data = EventData { output_ct: Some(vec![9; 4]), payload_bytes: 4, ..Default::default() };
        let event = Event::Settle { worker_id: "w".into(), attempt: 1, outcome: Outcome::Success };
        let done = b.store.apply(&new.id, &event, &data, 1_500).await.expect("apply").expect("found").expect("applied");
        assert_eq!(done.record.status(), Status::Completed, "{}", b.name);
        let stored = b.store.get_execution(&new.id).await.expect("get").expect("exists");
        assert_eq!(done.record, stored, "{}: the returned record is what was written", b.name);
        assert_eq!(done.record.finished_at, Some(1_500));
        assert_eq!(done.record.payload_bytes, 7);
        assert!(done.effects.contains(&crate::domain::Effect::Terminal));
        let dup = b.store.apply(&new.id, &event, &data, 1_600).await.expect("apply").expect("found");
        assert!(matches!(dup, Err((crate::domain::Ignored::Terminal, _))), "{}", b.name);
        let attempts = b.store.list_attempts(&new.id).await.expect("attempts");
        assert_eq!(attempts[0].success, Some(true));
        assert_eq!(attempts[0].output_ct.as_deref(), Some(&[9u8; 4][..]));
        let kinds: Vec<&str> = b
            .store
            .list_events(&new.id)
            .await
            .expect("events")
            .into_iter()
            .map(|e| e.kind.map_or("", |k| k.as_str()))
            .collect();
        assert_eq!(kinds, ["created", "claimed", "settled"]);
    }
}

#[tokio::test]
async fn retryable_failures_make_new_attempts_with_backoff() {
    for b in backends().await {
        let new = new_execution("p1", "u1", None, "f", 1_000);
        b.store.create_execution(&new).await.expect("create");
        b.store.claim("p1", &tools(), "w", 1, 1_000, 9_000).await.expect("claim");
        let rec = settle(&b.store, &new.id, 1, Outcome::ToolError { retryable: true }, 1_100).await;
        assert_eq!(rec.state.phase, Phase::Pending { not_before: 1_300 }, "{}", b.name);
        assert!(b.store.claim("p1", &tools(), "w", 1, 1_200, 9_000).await.expect("claim").is_empty());
        let again = b.store.claim("p1", &tools(), "w", 1, 1_300, 9_000).await.expect("claim");
        assert_eq!(again[0].attempt, 2);
        let stored = b.store.get_execution(&new.id).await.expect("get").expect("exists");
        assert_eq!(again[0].record, stored, "{}: the claimed record is what was written", b.name);
        let rec = settle(&b.store, &new.id, 2, Outcome::Success, 1_400).await;
        assert_eq!(rec.status(), Status::Completed);
        let attempts = b.store.list_attempts(&new.id).await.expect("attempts");
        assert_eq!(attempts.iter().map(|a| a.success).collect::<Vec<_>>(), [Some(false), Some(true)]);
    }
}

#[tokio::test]
async fn sweeper_fails_deadlines_detects_owner_loss_and_deletes_past_retention() {
    for b in backends().await {
        let late = new_execution("p1", "u1", None, "f", 1_000);
        b.store.create_execution(&late).await.expect("create");
        let lost = new_execution("p1", "u1", None, "f", 1_000);
        b.store.create_execution(&lost).await.expect("create");
        b.store.claim("p1", &tools(), "w", 2, 1_000, 2_000).await.expect("claim");
        b.store
            .apply(
                &late.id,
                &Event::Heartbeat { worker_id: "w".into(), attempt: 1, lease_until: 100_000 },
                &EventData::default(),
                1_500,
            )
            .await
            .expect("heartbeat");

        let (r, _) = b.store.sweep(2_500, 5_000, 100).await;
        assert_eq!(r.lease_lapsed, 1, "{}", b.name);
        let rec = b.store.get_execution(&lost.id).await.expect("get").expect("exists");
        assert_eq!(rec.state.owner_loss_detection_at, Some(7_500));

        let (r, _) = b.store.sweep(7_500, 5_000, 100).await;
        assert_eq!(r.owner_lost, 1, "{}", b.name);
        let rec = b.store.get_execution(&lost.id).await.expect("get").expect("exists");
        assert_eq!(rec.failure_reason(), Some(FailureReason::OwnerLost));
        assert_eq!(b.store.list_attempts(&lost.id).await.expect("attempts")[0].success, Some(false));

        let (r, applied) = b.store.sweep(61_000, 5_000, 100).await;
        assert_eq!(r.deadline_exceeded, 1, "{}", b.name);
        assert!(applied[0].effects.iter().any(|e| matches!(e, crate::domain::Effect::Stop { .. })));
        let rec = b.store.get_execution(&late.id).await.expect("get").expect("exists");
        assert_eq!(rec.failure_reason(), Some(FailureReason::DeadlineExceeded));
        assert_eq!(rec.error_message.as_deref(), Some("the execution deadline passed before the tool finished"));

        let (r, _) = b.store.sweep(121_000, 5_000, 100).await;
        assert_eq!(r.deleted, 2, "{}", b.name);
        assert!(b.store.get_execution(&late.id).await.expect("get").is_none());
        assert!(b.store.list_events(&late.id).await.expect("events").is_empty());
    }
}

#[tokio::test]
async fn one_unreadable_row_never_stops_a_sweep() {
    for b in backends().await {
        let good = new_execution("p1", "u1", None, "f", 1_000);
        let bad = new_execution("p1", "u1", None, "f", 1_000);
        for n in [&good, &bad] {
            b.store.create_execution(n).await.expect("create");
        }
        // A row no reader can make sense of: working, but without its lease.
        sqlx::query("UPDATE executions SET status = 'working', worker_id = NULL WHERE id = $1")
            .bind(bad.id.as_str())
            .execute(&b.store.pool)
            .await
            .expect("corrupt");
        let (r, applied) = b.store.sweep(61_000, 5_000, 100).await;
        assert_eq!((r.deadline_exceeded, r.failed), (1, 1), "{}: {r:?}", b.name);
        assert_eq!(applied.len(), 1, "{}: the committed row's effects are returned", b.name);
        let rec = b.store.get_execution(&good.id).await.expect("get").expect("exists");
        assert_eq!(rec.failure_reason(), Some(FailureReason::DeadlineExceeded), "{}", b.name);
    }
}

#[tokio::test]
async fn lists_are_newest_first_scoped_and_paged() {
    for b in backends().await {
        let mut ids = Vec::new();
        for i in 0..5 {
            let n = new_execution("p1", "u1", None, "f", 1_000 + i);
            ids.push(n.id.clone());
            b.store.create_execution(&n).await.expect("create");
        }
        b.store.create_execution(&new_execution("p1", "u2", None, "f", 1_000)).await.expect("other user");
        let filter = ListFilter::User { project_id: "p1".into(), user_id: "u1".into(), gateway_id: None };
        let page1 = b.store.list_executions(&filter, 2_000, 3, None).await.expect("page1");
        let last = page1.last().expect("rows");
        let page2 =
            b.store.list_executions(&filter, 2_000, 3, Some((last.created_at, last.id.to_string()))).await.expect("p2");
        let got: Vec<ExecutionId> = page1.iter().chain(&page2).map(|r| r.id.clone()).collect();
        ids.reverse();
        assert_eq!(got, ids, "{}", b.name);
        // Past retention nothing is listed.
        assert!(b.store.list_executions(&filter, 500_000, 10, None).await.expect("list").is_empty());
    }
}

#[tokio::test]
async fn credentials_resolve_by_hash_and_revoke() {
    for b in backends().await {
        b.store.create_org("org_1", "Org", 1).await.expect("org");
        b.store.create_project("prj_1", "org_1", "Project", 1).await.expect("project");
        b.store.create_gateway("gw_1", "prj_1", "Gateway", 1).await.expect("gateway");
        assert_eq!(b.store.gateway_project("gw_1").await.expect("gw").as_deref(), Some("prj_1"));
        let c = NewCredential {
            id: "cred_a".into(),
            token_hash: vec![7; 32],
            kind: CredentialKind::ApiKey,
            org_id: "org_1".into(),
            project_id: "prj_1".into(),
            gateway_id: None,
            user_id: None,
            role: Some("admin".into()),
            permissions: vec!["status".into(), "cancel".into()],
            worker_group: None,
        };
        b.store.create_credential(&c, 1).await.expect("create");
        // The joined reads see the same credential, with or without the row they join.
        let exec = b.store.create_execution(&new_execution("prj_1", "u1", None, "f", 1)).await.expect("exec").record;
        let (cred, found) =
            b.store.credential_with_execution(&[7; 32], Some(&exec.id)).await.expect("join").expect("credential");
        assert_eq!((cred.id.as_str(), found.map(|r| r.id)), ("cred_a", Some(exec.id.clone())), "{}", b.name);
        let (_, missing) = b
            .store
            .credential_with_execution(&[7; 32], Some(&ExecutionId::generate()))
            .await
            .expect("join")
            .expect("cred");
        assert!(missing.is_none(), "{}", b.name);
        assert!(
            b.store.credential_with_execution(&[8; 32], Some(&exec.id)).await.expect("join").is_none(),
            "{}",
            b.name
        );
        let (_, tool, _) =
            b.store.credential_with_tool(&[7; 32], "prj_1", "Demo.Echo").await.expect("tool").expect("c");
        assert!(tool.is_none(), "{}: nothing registered yet", b.name);
        // Many starts at once answer as one each would, in order.
        // Five asks each: padded to eight on Postgres, the padding answers nothing.
        let asks: [(&[u8], &str, &str); 5] = [
            (&[8; 32], "prj_1", "Demo.Echo"),
            (&[7; 32], "prj_1", "Demo.Echo"),
            (&[7; 32], "prj_2", "X"),
            (&[9; 32], "", ""),
            (&[7; 32], "", ""),
        ];
        let answers = b.store.credentials_with_tools(&asks).await.expect("many starts");
        let ids: Vec<Option<&str>> = answers.iter().map(|a| a.as_ref().map(|(c, _, _)| c.id.as_str())).collect();
        assert_eq!(ids, [None, Some("cred_a"), Some("cred_a"), None, Some("cred_a")], "{}", b.name);
        let reads: [(Option<&[u8]>, Option<&ExecutionId>); 5] = [
            (Some(&[7; 32]), Some(&exec.id)),
            (Some(&[8; 32]), Some(&exec.id)),
            (None, Some(&exec.id)),
            (Some(&[7; 32]), None),
            (None, None),
        ];
        let found = b.store.credentials_with_executions(&reads).await.expect("many reads");
        let found: Vec<(Option<&str>, Option<&str>)> =
            found.iter().map(|(c, e)| (c.as_ref().map(|c| c.id.as_str()), e.as_ref().map(|e| e.id.as_str()))).collect();
        assert_eq!(
            found,
            [
                (Some("cred_a"), Some(exec.id.as_str())),
                (None, Some(exec.id.as_str())),
                (None, Some(exec.id.as_str())),
                (Some("cred_a"), None),
                (None, None)
            ],
            "{}",
            b.name
        );
        let many = b.store.credentials_by_hashes(&[&[7; 32], &[8; 32]]).await.expect("many credentials");
        assert_eq!(many.keys().collect::<Vec<_>>(), [&vec![7u8; 32]], "{}: unknown hashes are absent", b.name);
        let rows = b.store.executions_by_ids(&[&exec.id, &ExecutionId::generate()]).await.expect("many executions");
        assert_eq!(rows.keys().collect::<Vec<_>>(), [&exec.id], "{}", b.name);
        let got = credential_of(&b.store, &[7; 32]).await;
        assert_eq!(got.permissions, ["status", "cancel"], "{}", b.name);
        assert!(!got.revoked);
        assert!(b.store.revoke_credential("cred_a", 2).await.expect("revoke"));
        assert!(!b.store.revoke_credential("cred_a", 3).await.expect("revoke twice"));
        assert!(credential_of(&b.store, &[7; 32]).await.revoked);
        let (cred, _) = b.store.credential_with_execution(&[7; 32], Some(&exec.id)).await.expect("join").expect("cred");
        assert!(cred.revoked, "{}: a joined read sees the revocation at once", b.name);
    }
}

#[tokio::test]
async fn a_payload_canary_never_reaches_the_database_in_clear() {
    let ring = KeyRing::from_base64([("k1", KeyRing::generate_key_base64().as_str())]).expect("ring");
    let canary = "canary-7f3a9c-never-stored";
    for b in backends().await {
        let mut new = new_execution("p1", "u1", None, "f", 1_000);
        new.input_ct = ring.seal(new.id.as_str(), Field::Input, canary.as_bytes()).expect("seal");
        b.store.create_execution(&new).await.expect("create");
        b.store.claim("p1", &tools(), "w", 1, 1_000, 9_000).await.expect("claim");
        let data = EventData {
            output_ct: Some(ring.seal(new.id.as_str(), Field::Output, canary.as_bytes()).expect("seal")),
            ..Default::default()
        };
        b.store
            .apply(
                &new.id,
                &Event::Settle { worker_id: "w".into(), attempt: 1, outcome: Outcome::Success },
                &data,
                1_100,
            )
            .await
            .expect("apply");
        let rec = b.store.get_execution(&new.id).await.expect("get").expect("exists");
        let input = ring.open(new.id.as_str(), Field::Input, rec.input_ct.as_deref().expect("input")).expect("open");
        assert_eq!(input, canary.as_bytes());
        match &b.sqlite_path {
            Some(path) => {
                b.store.close().await;
                let mut bytes = std::fs::read(path).expect("db file");
                if let Ok(wal) = std::fs::read(path.with_extension("db-wal")) {
                    bytes.extend(wal);
                }
                assert!(!bytes.windows(canary.len()).any(|w| w == canary.as_bytes()), "sqlite file holds the canary");
            }
            None => {
                for table in ["executions", "attempts", "execution_events"] {
                    let sql = format!("SELECT CAST(t AS TEXT) AS row_text FROM {table} t");
                    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(&b.store.pool).await.expect("dump");
                    for row in rows {
                        let text: String = sqlx::Row::try_get(&row, "row_text").expect("text");
                        assert!(!text.contains(canary), "postgres {table} holds the canary");
                    }
                }
            }
        }
    }
}

#[tokio::test]
async fn ended_mcp_sessions_are_remembered_once() {
    for b in backends().await {
        assert!(!b.store.mcp_session_ended("sid-1").await.expect("read"), "{}", b.name);
        b.store.end_mcp_session("sid-1", "cred_1", 10).await.expect("end");
        b.store.end_mcp_session("sid-1", "cred_1", 11).await.expect("ending twice is a no-op");
        assert!(b.store.mcp_session_ended("sid-1").await.expect("read"), "{}", b.name);
        assert!(!b.store.mcp_session_ended("sid-2").await.expect("read"));
    }
}
