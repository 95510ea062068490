//! `baton admin list-…`: what the database holds about organizations,
//! projects, gateways and credentials, as a table or (`--json`) one array.
//! Credentials are listed by metadata only (the store never reads their token
//! hash for a listing), revoked ones included and marked, because "which keys
//! are still live" is the question an operator asks before rotating.

use crate::ops_cli::table::{or_dash, render};
use baton_coordinator::store::Store;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub(crate) struct Listing {
    pub table: String,
    pub json: Value,
}

fn time(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

fn days(ms: Option<i64>) -> String {
    match ms {
        Some(ms) => format!("{} d", ms as f64 / 86_400_000.0),
        None => "default".to_owned(),
    }
}

pub(crate) async fn orgs(store: &Store) -> anyhow::Result<Listing> {
    let orgs = store.list_orgs().await?;
    let rows: Vec<Vec<String>> = orgs
        .iter()
        .map(|o| {
            let logging = if o.execution_logging { "on" } else { "off" };
            vec![o.id.clone(), o.name.clone(), time(o.created_at), days(o.retention_ms), logging.to_owned()]
        })
        .collect();
    let json = orgs
        .iter()
        .map(|o| {
            json!({"id": o.id, "name": o.name, "created_at": time(o.created_at),
                "retention_ms": o.retention_ms, "execution_logging": o.execution_logging})
        })
        .collect();
    Ok(Listing { table: render(&["ID", "NAME", "CREATED", "RETENTION", "EXECUTION LOGGING"], &rows), json })
}

pub(crate) async fn projects(store: &Store, org: Option<&str>) -> anyhow::Result<Listing> {
    let projects = store.list_projects(org).await?;
    let rows: Vec<Vec<String>> = projects
        .iter()
        .map(|p| vec![p.id.clone(), p.org_id.clone(), p.name.clone(), time(p.created_at), days(p.retention_ms)])
        .collect();
    let json = projects
        .iter()
        .map(|p| {
            json!({"id": p.id, "org_id": p.org_id, "name": p.name, "created_at": time(p.created_at),
                "retention_ms": p.retention_ms})
        })
        .collect();
    Ok(Listing { table: render(&["ID", "ORG", "NAME", "CREATED", "RETENTION"], &rows), json })
}

pub(crate) async fn gateways(store: &Store, project: Option<&str>) -> anyhow::Result<Listing> {
    let gateways = store.list_gateways(project).await?;
    let rows: Vec<Vec<String>> =
        gateways.iter().map(|g| vec![g.id.clone(), g.project_id.clone(), g.name.clone(), time(g.created_at)]).collect();
    let json = gateways
        .iter()
        .map(|g| json!({"id": g.id, "project_id": g.project_id, "name": g.name, "created_at": time(g.created_at)}))
        .collect();
    Ok(Listing { table: render(&["ID", "PROJECT", "NAME", "CREATED"], &rows), json })
}

pub(crate) async fn credentials(store: &Store, project: Option<&str>) -> anyhow::Result<Listing> {
    let credentials = store.list_credentials(project).await?;
    let rows: Vec<Vec<String>> = credentials
        .iter()
        .map(|c| {
            let state = match c.revoked_at {
                Some(at) => format!("revoked {}", time(at)),
                None => "live".to_owned(),
            };
            // The one column that says whom or what a credential stands for.
            let holder = match (&c.user_id, &c.role) {
                (Some(user), _) => format!("user {user}"),
                (None, Some(role)) if c.permissions.is_empty() => format!("role {role}"),
                (None, Some(role)) => format!("role {role}, permissions {}", c.permissions.join(",")),
                (None, None) => match &c.worker_group {
                    Some(group) if *group != c.id => format!("identity {group}"),
                    _ => "-".to_owned(),
                },
            };
            vec![
                c.id.clone(),
                c.kind.clone(),
                c.project_id.clone(),
                or_dash(c.gateway_id.as_deref()),
                holder,
                time(c.created_at),
                state,
            ]
        })
        .collect();
    let json = credentials
        .iter()
        .map(|c| {
            json!({"id": c.id, "kind": c.kind, "org_id": c.org_id, "project_id": c.project_id,
                "gateway_id": c.gateway_id, "user_id": c.user_id, "role": c.role, "permissions": c.permissions,
                "worker_identity": c.worker_group,
                "created_at": time(c.created_at), "revoked": c.revoked_at.is_some(),
                "revoked_at": c.revoked_at.map(time)})
        })
        .collect();
    let headers = ["ID", "KIND", "PROJECT", "GATEWAY", "HOLDER", "CREATED", "STATE"];
    Ok(Listing { table: render(&headers, &rows), json })
}
