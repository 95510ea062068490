//! A seeded run is the row, event log and attempts the real create and
//! transition path writes for the same events at the same times.

use super::super::contract_tests::{backends, new_execution, postgres};
use super::super::migrations::MigrateOptions;
use super::*;
use crate::domain::{Event, ExecutionId, Outcome};

fn claim(at: Millis) -> Step {
    (at, Event::Claim { worker_id: "w1".into(), lease_until: at + 30_000 }, EventData::default())
}

fn settle(at: Millis, attempt: u32, outcome: Outcome, data: EventData) -> Step {
    (at, Event::Settle { worker_id: "w1".into(), attempt, outcome }, data)
}

/// Scripts covering every path the bench seeds: retry then success, a final
/// tool error, a lost owner, a deadline, a refusal, a cancellation, a
/// scheduled run still pending and one still working.
fn scripts(now: Millis) -> Vec<(NewExecution, Vec<Step>)> {
    let output = EventData { output_ct: Some(vec![9; 40]), payload_bytes: 40, ..Default::default() };
    let tool_error = EventData {
        error_message: Some("upstream said no".into()),
        error_detail_ct: Some(vec![7; 20]),
        payload_bytes: 20,
        ..Default::default()
    };
    let mut scheduled = new_execution("p1", "u1", None, "f", now);
    scheduled.run_at = Some(now + 60_000);
    let mut refused = new_execution("p1", "u2", None, "f", now);
    refused.run_at = Some(now + 1_000);
    vec![
        (
            new_execution("p1", "u1", Some("k1"), "f", now),
            vec![
                claim(now + 10),
                settle(now + 50, 1, Outcome::ToolError { retryable: true }, tool_error.clone()),
                claim(now + 5_000),
                settle(now + 5_100, 2, Outcome::Success, output),
            ],
        ),
        (
            new_execution("p1", "u1", None, "f", now),
            vec![claim(now + 10), settle(now + 90, 1, Outcome::ToolError { retryable: false }, tool_error)],
        ),
        (
            new_execution("p1", "u1", None, "f", now),
            vec![
                claim(now + 10),
                (now + 40_000, Event::LeaseLapsed { detect_at: now + 70_000 }, EventData::default()),
                (now + 70_000, Event::OwnerLossDue, EventData::default()),
            ],
        ),
        (
            new_execution("p1", "u1", None, "f", now),
            vec![claim(now + 10), { (now + 60_000, Event::DeadlinePassed, EventData::default()) }],
        ),
        (refused, vec![(now + 1_000, Event::Refuse, EventData::default())]),
        (
            new_execution("p1", "u1", None, "f", now),
            vec![
                claim(now + 10),
                (now + 20, Event::RequestCancel, EventData::default()),
                settle(now + 30, 1, Outcome::Cancelled, EventData::default()),
            ],
        ),
        (scheduled, vec![]),
        (new_execution("p1", "u3", None, "f", now), vec![claim(now + 10)]),
    ]
}

#[tokio::test]
async fn a_seeded_run_is_what_the_transition_path_writes() {
    let Some(b) = backends().await.into_iter().find(|b| b.name == "postgres") else { panic!("no postgres") };
    let s = &b.store;
    let mut seeds = Vec::new();
    let mut real_ids = Vec::new();
    for (new, events) in scripts(1_000) {
        s.create_execution(&new).await.expect("create");
        for (at, event, data) in &events {
            match s.apply(&new.id, event, data, *at).await.expect("apply") {
                Some(Ok(_)) => {}
                other => panic!("{} not applied: {other:?}", event.name()),
            }
        }
        real_ids.push(new.id.clone());
        let mut twin = new.clone();
        twin.id = crate::domain::ExecutionId::generate();
        twin.idempotency_key = new.idempotency_key.as_ref().map(|k| format!("{k}-twin"));
        seeds.push(SeedRun { new: twin, events });
    }
    let seeded = s.seed_runs(&seeds).await.expect("seed");
    assert_eq!(seeded.executions, seeds.len() as u64);
    for (real_id, seed) in real_ids.iter().zip(&seeds) {
        let real = s.get_execution(real_id).await.expect("get").expect("real row");
        let mut twin = s.get_execution(&seed.new.id).await.expect("get").expect("seeded row");
        twin.id.clone_from(&real.id);
        twin.idempotency_key.clone_from(&real.idempotency_key);
        assert_eq!(twin, real, "row after {:?}", seed.events.iter().map(|e| e.1.name()).collect::<Vec<_>>());
        assert_eq!(s.list_events(&seed.new.id).await.expect("events"), s.list_events(real_id).await.expect("events"));
        assert_eq!(
            s.list_attempts(&seed.new.id).await.expect("attempts"),
            s.list_attempts(real_id).await.expect("attempts")
        );
    }
    // The event details too (the `created` event carries the execution type).
    for (real_id, seed) in real_ids.iter().zip(&seeds) {
        let details = |id: ExecutionId| async move {
            sqlx::query_scalar::<_, Option<String>>(
                "SELECT detail FROM execution_events WHERE execution_id = $1 ORDER BY seq",
            )
            .bind(id.into_string())
            .fetch_all(&s.pool)
            .await
            .expect("details")
        };
        assert_eq!(details(seed.new.id.clone()).await, details(real_id.clone()).await);
    }
    s.seed_settle().await.expect("vacuum");
}

/// A fresh Postgres database migrated up to `version` only.
async fn at_schema(version: i64) -> Store {
    let base =
        std::env::var("TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let admin = Store::connect(&base, 2).await.expect("postgres reachable (set TEST_POSTGRES_URL)");
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let db = crate::domain::id::random_id(&format!("baton_t_{created}_"), 64).to_lowercase();
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&admin.pool).await.expect("create db");
    admin.close().await;
    let (prefix, _) = base.rsplit_once('/').expect("url has a database");
    let store = Store::connect(&format!("{prefix}/{db}"), 4).await.expect("connect test db");
    let options = MigrateOptions { up_to: Some(version), ..MigrateOptions::default() };
    store.apply_migrations(&options).await.expect("migrate part way");
    store
}

/// Seeded into the schema before 0008 (what `baton bench migrate` does) and
/// migrated from there, a run reads as one seeded into the newest schema: the
/// seeder wrote the rows that schema held, and the migrations carried them on.
#[tokio::test]
async fn runs_seeded_into_an_older_schema_read_the_same_once_migrated() {
    let newest = postgres().await.store;
    let old = at_schema(7).await;
    let seeds: Vec<SeedRun> = scripts(1_000).into_iter().map(|(new, events)| SeedRun { new, events }).collect();
    let seeded = old.seed_runs(&seeds).await.expect("seed the older schema");
    assert_eq!(seeded, newest.seed_runs(&seeds).await.expect("seed the newest schema"));
    old.migrate().await.expect("migrate the rest");
    for seed in &seeds {
        let id = &seed.new.id;
        let mut migrated = old.get_execution(id).await.expect("get").expect("migrated row");
        let seeded_newest = newest.get_execution(id).await.expect("get").expect("seeded row");
        // 0017 gives every run it finds the first change's version.
        assert_eq!(migrated.changed_version, 1);
        migrated.changed_version = seeded_newest.changed_version;
        assert_eq!(migrated, seeded_newest);
        assert_eq!(old.list_events(id).await.expect("events"), newest.list_events(id).await.expect("events"));
        assert_eq!(old.list_attempts(id).await.expect("attempts"), newest.list_attempts(id).await.expect("attempts"));
    }
    let keys = |s: &Store| {
        let pool = s.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM execution_keys").fetch_one(&pool).await.expect("keys")
        }
    };
    assert_eq!(keys(&old).await, 1);
    assert_eq!(keys(&newest).await, 1);
}

#[test]
fn rows_written_as_text_read_back_as_one_json_array() {
    assert_eq!(JsonRows::default().into_text().expect("text"), "[]");
    let mut rows = JsonRows::default();
    for (i, text) in [(1, "a \"quoted\" line\n"), (2, "é")] {
        push_row!(rows; "i": i, "text": text, "none": None::<i64>, "ct": hex(&Some(vec![0xab, 1]))).expect("row");
    }
    let back: serde_json::Value = serde_json::from_str(&rows.into_text().expect("text")).expect("JSON");
    assert_eq!(
        back,
        serde_json::json!([
            {"i": 1, "text": "a \"quoted\" line\n", "none": null, "ct": "\\xab01"},
            {"i": 2, "text": "é", "none": null, "ct": "\\xab01"},
        ])
    );
}
