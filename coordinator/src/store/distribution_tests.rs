//! Ready to distribute by organization (Citus-style), read from the catalog of
//! a migrated Postgres: every table is either distributed by `org_id` (it holds
//! the column, NOT NULL, and every unique key includes it) or a small reference
//! table copied to every node. A new table fails here until it is classified.

use super::contract_tests::postgres;
use sqlx::Row;
use std::collections::BTreeSet;

/// The tables that grow with a tenant's traffic.
const DISTRIBUTED: [&str; 10] = [
    "executions",
    "execution_events",
    "attempts",
    "input_requests",
    "execution_keys",
    "audit_logs",
    "history_seals",
    "history_sealed",
    "history_unsealed",
    "webhook_deliveries",
];
/// Small, rarely written tables (catalog, identities, cluster bookkeeping).
const REFERENCE: [&str; 17] = [
    "organizations",
    "projects",
    "gateways",
    "credentials",
    "tools",
    "workers",
    "worker_bindings",
    "webhook_endpoints",
    "dashboard_sessions",
    "person_sessions",
    "project_role_grants",
    "coordinators",
    "admission_fence",
    "mcp_sessions_ended",
    "watch_tokens_used",
    "payload_keys_in_use",
    "_sqlx_migrations",
];

#[tokio::test]
async fn every_table_is_distributed_by_organization_or_a_reference_table() {
    let b = postgres().await;
    let pool = &b.store.pool;
    let tables = sqlx::query(
        "SELECT c.relname::text AS name, \
         COALESCE((SELECT a.attnotnull FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'org_id'), \
         false) AS org_not_null, \
         (SELECT COUNT(*) FROM pg_index i WHERE i.indrelid = c.oid AND i.indisunique AND NOT EXISTS \
         (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'org_id' \
         AND a.attnum = ANY (i.indkey))) AS keys_without_org \
         FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') \
         AND NOT c.relispartition",
    )
    .fetch_all(pool)
    .await
    .expect("catalog");
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for t in &tables {
        let name: String = t.try_get("name").expect("name");
        let org_not_null: bool = t.try_get("org_not_null").expect("org");
        let keys_without_org: i64 = t.try_get("keys_without_org").expect("keys");
        if DISTRIBUTED.contains(&name.as_str()) {
            if !org_not_null {
                problems.push(format!("{name}: no NOT NULL org_id"));
            }
            if keys_without_org > 0 {
                problems.push(format!("{name}: {keys_without_org} unique key(s) without org_id"));
            }
        } else if !REFERENCE.contains(&name.as_str()) {
            problems.push(format!("{name}: neither distributed nor a reference table"));
        }
        seen.insert(name);
    }
    for name in DISTRIBUTED.iter().chain(REFERENCE.iter()) {
        if !seen.contains(*name) {
            problems.push(format!("{name}: classified but not in the schema"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
