//! The Audit log page: who did what in the project, newest first, 50 a page,
//! from the coordinator's `ListAuditLogs` (the same rows and the same rule as
//! `GET …/audit_logs`: the project's admins only, decided by the coordinator
//! in `authz::admin`). A person signed in with the OpenID provider is shown by
//! the email address and the provider's subject their rows carry; a key by its
//! id. The filters (`action`, `actor_id`, `outcome`) and the page live in the
//! URL.
//!
//! Who may call it: a dashboard session of the project (`access::viewer`); an
//! admin's sees the rows, a member's gets a page saying the log is for admins
//! (and the refusal is itself audited, as `audit.read`).

use super::access::{self, Viewer};
use super::filters::{Invalid, PAGE, bounded_text, offset};
use super::html::{self, esc, url_part};
use super::list::here;
use super::{ProjectPath, html_response};
use crate::app::AppState;
use crate::coordinator::admin::AuditQuery;
use axum::extract::{OriginalUri, Path, Query, State};
use axum::response::Response;
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::ErrorCode;
use http::{HeaderMap, StatusCode};

/// A filter value is at most this many characters (as the coordinator allows).
const MAX_CHARS: usize = 128;

/// The page's filters, as they live in the URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct AuditFilters {
    pub(crate) action: Option<String>,
    pub(crate) actor_id: Option<String>,
    pub(crate) outcome: Option<String>,
    pub(crate) offset: u32,
}

impl AuditFilters {
    /// Reads the query's pairs; unknown names are ignored. An unusable value is named.
    pub(super) fn parse(pairs: &[(String, String)]) -> Result<AuditFilters, String> {
        let text = |label: &str, v: &str| bounded_text(label, v, MAX_CHARS).map_err(|Invalid(m)| m);
        let mut f = AuditFilters::default();
        for (name, v) in pairs {
            match name.as_str() {
                "action" => f.action = text("Action", v)?,
                "actor_id" => f.actor_id = text("Who", v)?,
                "outcome" => f.outcome = text("Outcome", v)?,
                "offset" => f.offset = offset(v).map_err(|Invalid(m)| m)?,
                _ => {}
            }
        }
        Ok(f)
    }

    /// `?query` (nothing when there is no filter), `offset` when not 0.
    pub(super) fn suffix(&self) -> String {
        let parts: Vec<String> = [
            ("action", self.action.clone()),
            ("actor_id", self.actor_id.clone()),
            ("outcome", self.outcome.clone()),
            ("offset", (self.offset > 0).then(|| self.offset.to_string())),
        ]
        .into_iter()
        .filter_map(|(name, v)| v.map(|v| format!("{name}={}", url_part(&v))))
        .collect();
        if parts.is_empty() { String::new() } else { format!("?{}", parts.join("&")) }
    }

    fn query(&self) -> AuditQuery {
        AuditQuery {
            action: self.action.clone(),
            actor_id: self.actor_id.clone(),
            outcome: self.outcome.clone(),
            start_ms: None,
            end_ms: None,
        }
    }
}

pub(super) async fn page(
    State(state): State<AppState>,
    Path(path): Path<ProjectPath>,
    Query(pairs): Query<Vec<(String, String)>>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Response {
    let viewer = match access::viewer(&state, &headers, &path, None).await {
        Ok(v) => v,
        Err(denied) => return denied.page(&path, &here(&uri), access::is_tls(&headers, &uri)),
    };
    let (filters, notice) = match AuditFilters::parse(&pairs) {
        Ok(f) => (f, None),
        Err(message) => (AuditFilters::default(), Some(message)),
    };
    let page =
        match state.coordinator.audit_logs(&viewer.bearer, &viewer.scope, &filters.query(), PAGE, filters.offset).await
        {
            Ok(page) => page,
            Err(e) if e.code == ErrorCode::PermissionDenied => {
                return access::message_page(
                    &path,
                    StatusCode::FORBIDDEN,
                    "The audit log is for project admins",
                    "It records who revealed payloads, cancelled runs and changed the project's settings, so only a \
                 project admin may read it. Ask a project admin.",
                );
            }
            Err(e) => return access::failure_page(&path, &e),
        };
    let body = section(&viewer, &filters, notice.as_deref(), &page, baton_proto::clock::now_ms());
    html_response(StatusCode::OK, html::page("Audit log", &viewer.header(), &body))
}

/// The whole section: filters, summary, rows, pager.
fn section(
    viewer: &Viewer,
    f: &AuditFilters,
    notice: Option<&str>,
    page: &pb::ListAuditLogsResponse,
    now: i64,
) -> String {
    let action_url = format!("{}/audit-log", viewer.base);
    let notice =
        notice.map(|n| format!(r#"<p class="notice notice-error" role="alert">{}</p>"#, esc(n))).unwrap_or_default();
    let field = |name: &str, id: &str, label: &str, value: &Option<String>, hint: &str| {
        format!(
            r#"<div class="field"><label for="{id}">{label}</label><input id="{id}" name="{name}" value="{}" placeholder="{hint}" spellcheck="false"></div>"#,
            esc(value.as_deref().unwrap_or_default())
        )
    };
    let total = page.total_count;
    let rows: String = page.items.iter().map(|e| row(viewer, e, now)).collect();
    let table = if page.items.is_empty() {
        r#"<div class="empty"><p><strong>No audit rows match.</strong></p></div>"#.to_owned()
    } else {
        format!(
            r#"<table class="runs audit">
<caption class="visually-hidden">Audit log, newest first</caption>
<thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Outcome</th><th scope="col">Detail</th></tr></thead>
<tbody>{rows}</tbody>
</table>"#
        )
    };
    let first = u64::from(f.offset) + 1;
    let last = u64::from(f.offset) + page.items.len() as u64;
    let shown = if page.items.is_empty() { String::new() } else { format!(" · showing {first}–{last}") };
    format!(
        r#"<div class="layout"><section class="list" aria-labelledby="audit-title">
<h1 id="audit-title">Audit log</h1>
<p class="help">Who revealed payloads, cancelled runs, changed roles and settings, and who was refused, newest first. Rows are kept 400 days.</p>
{notice}<form class="filters" method="get" action="{action}" role="search" aria-label="Filter the audit log">
{who}{what}{outcome}
<div class="actions"><button type="submit">Apply filters</button> <a href="{action}">Clear</a></div>
</form>
<p class="summary" id="summary"><strong data-total>{total}</strong> {rows_word}{shown}</p>
{table}
{pager}
</section></div>"#,
        action = esc(&action_url),
        who = field("actor_id", "a-who", "Who", &f.actor_id, "e.g. person:ann@example.org/…"),
        what = field("action", "a-action", "Action", &f.action, "e.g. history.reveal"),
        outcome = field("outcome", "a-outcome", "Outcome", &f.outcome, "e.g. refused"),
        rows_word = if total == 1 { "row" } else { "rows" },
        pager = pager(&action_url, f, total),
    )
}

/// Who acted, for a person reading the log: a person's email (and their
/// subject at the identity provider), a key's id, `baton admin`. Links to the
/// same log narrowed to them.
fn who(viewer: &Viewer, kind: &str, actor_id: &str) -> String {
    let (name, about) = match kind {
        "person" => {
            let rest = actor_id.strip_prefix("person:").unwrap_or(actor_id);
            // The email's domain holds no `/`: the subject starts after the first one following the `@`.
            let split = rest.find('@').and_then(|at| rest[at..].find('/').map(|slash| at + slash));
            match split {
                Some(i) => (
                    format!("<strong>{}</strong>", esc(&rest[..i])),
                    format!("person · subject <code>{}</code>", esc(&rest[i + 1..])),
                ),
                None => (format!("<strong>{}</strong>", esc(rest)), "person".to_owned()),
            }
        }
        "cli" => ("<strong>baton admin</strong>".to_owned(), "command line".to_owned()),
        "api_key" => (format!("<code>{}</code>", esc(actor_id)), "API key".to_owned()),
        "end_user" => (format!("<code>{}</code>", esc(actor_id)), "end-user token".to_owned()),
        "worker" => (format!("<code>{}</code>", esc(actor_id)), "worker token".to_owned()),
        other => (format!("<code>{}</code>", esc(actor_id)), esc(other)),
    };
    let narrowed = format!("{}/audit-log?actor_id={}", viewer.base, url_part(actor_id));
    format!(
        r#"<a href="{}" class="actor" title="Only this actor's rows">{name}</a><span class="sub">{about}</span>"#,
        esc(&narrowed)
    )
}

fn row(viewer: &Viewer, e: &pb::AuditLogEntry, now: i64) -> String {
    let none = || r#"<span class="none">—</span>"#.to_owned();
    let times = if e.occurrences > 1 {
        format!(r#"<span class="sub">{} times within the minute</span>"#, e.occurrences)
    } else {
        String::new()
    };
    let outcome_class = match e.outcome.as_str() {
        "allowed" | "accepted" => "ok",
        "refused" | "not_found" => "bad",
        _ => "other",
    };
    let scope = if e.project_id.is_none() { r#"<span class="sub">organization-wide</span>"# } else { "" };
    format!(
        r#"<tr data-id="{id}" data-action="{action}">
<td data-label="When"><div>{when}{times}</div></td>
<td data-label="Who"><div>{who}</div></td>
<td data-label="Action"><div><code class="action">{action}</code>{scope}</div></td>
<td data-label="Target"><div>{target}</div></td>
<td data-label="Outcome"><div><span class="outcome outcome-{outcome_class}">{outcome}</span></div></td>
<td data-label="Detail"><div>{detail}</div></td>
</tr>"#,
        id = esc(&e.id),
        action = esc(&e.action),
        when = html::time(e.at_ms, now),
        who = who(viewer, &e.actor_kind, &e.actor_id),
        target = e.target.as_deref().map(|t| format!("<code>{}</code>", esc(t))).unwrap_or_else(none),
        outcome = esc(&e.outcome),
        detail = e.detail.as_deref().map(|d| format!(r#"<span class="detail">{}</span>"#, esc(d))).unwrap_or_else(none),
    )
}

fn pager(action_url: &str, f: &AuditFilters, total: u64) -> String {
    let link = |offset: u32, rel: &str, label: &str| {
        let href = format!("{action_url}{}", AuditFilters { offset, ..f.clone() }.suffix());
        format!(r#"<a href="{}" rel="{rel}">{label}</a>"#, esc(&href))
    };
    let newer = if f.offset > 0 { link(f.offset.saturating_sub(PAGE), "prev", "← Newer") } else { String::new() };
    let older_offset = f.offset.saturating_add(PAGE);
    let older = if u64::from(older_offset) < total { link(older_offset, "next", "Older →") } else { String::new() };
    if newer.is_empty() && older.is_empty() {
        return String::new();
    }
    let pages = total.div_ceil(u64::from(PAGE)).max(1);
    let current = u64::from(f.offset / PAGE) + 1;
    format!(r#"<nav class="pager" aria-label="Pages">{newer} <span>Page {current} of {pages}</span> {older}</nav>"#)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::{Bearer, Scope};

    fn viewer() -> Viewer {
        Viewer {
            bearer: Bearer("k".into()),
            scope: Scope { org_id: "o".into(), project_id: "p".into(), gateway_id: None },
            base: "/dashboard/orgs/o/projects/p".into(),
            admin: true,
            can_cancel: true,
            can_status: true,
            csrf: "tok".into(),
            person: true,
        }
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn rows_name_the_person_by_email_and_subject_and_keys_by_id() {
        let v = viewer();
        let person = who(&v, "person", "person:ann@example.org/sub/with/slashes");
        assert!(person.contains("<strong>ann@example.org</strong>"), "{person}");
        assert!(person.contains("subject <code>sub/with/slashes</code>"), "{person}");
        assert!(
            person.contains("actor_id=person%3Aann%40example.org%2Fsub%2Fwith%2Fslashes"),
            "a link narrows to them"
        );
        let key = who(&v, "api_key", "key_123");
        assert!(key.contains("<code>key_123</code>") && key.contains("API key"), "{key}");
        assert!(who(&v, "cli", "cli").contains("baton admin"));
        // Whatever a row holds is shown as text.
        let hostile = pb::AuditLogEntry {
            id: "aud_1".into(),
            at_ms: 1_786_147_200_000,
            actor_id: "person:<b>@x/<script>".into(),
            actor_kind: "person".into(),
            action: "history.reveal".into(),
            target: Some("te_<i>".into()),
            outcome: "allowed".into(),
            detail: Some("<img src=x>".into()),
            project_id: Some("p".into()),
            occurrences: 3,
        };
        let html = row(&v, &hostile, 1_786_147_200_000);
        assert!(!html.contains("<script>") && !html.contains("<img") && !html.contains("<b>") && !html.contains("<i>"));
        assert!(html.contains("3 times within the minute") && html.contains("outcome-ok"), "{html}");
    }

    #[test]
    fn filters_live_in_the_url_and_bad_values_are_named() {
        let f = AuditFilters::parse(&pairs(&[("action", " history.reveal "), ("outcome", ""), ("offset", "50")]))
            .expect("valid");
        assert_eq!(f.suffix(), "?action=history.reveal&offset=50");
        assert_eq!(AuditFilters::default().suffix(), "");
        assert!(AuditFilters::parse(&pairs(&[("actor_id", "a\u{1}")])).expect_err("control").contains("Who"));
        assert!(AuditFilters::parse(&pairs(&[("action", &"x".repeat(129))])).is_err());
        assert!(AuditFilters::parse(&pairs(&[("offset", "-1")])).expect_err("offset").contains("offset"));
    }

    #[test]
    fn the_pager_keeps_the_filters() {
        let f = AuditFilters { action: Some("role.grant".into()), ..AuditFilters::default() };
        let p = pager("/a", &f, 120);
        assert!(p.contains(r#"href="/a?action=role.grant&amp;offset=50""#) && !p.contains("Newer"), "{p}");
        assert_eq!(pager("/a", &f, 50), "");
    }
}
