//! The Tool Executions list: newest first, the total that match, 50 a page,
//! every filter in the URL. A submitted filter form is redirected to the
//! canonical URL once, so what the address bar shows is exactly the view.
//! `live` answers the script's polls with the rows' current HTML.

use super::access::{self, Viewer};
use super::filters::{Filters, PAGE, local_input};
use super::html::{self, esc};
use super::{ExecutionPath, ProjectPath, html_response, json, see_other};
use crate::app::AppState;
use axum::extract::{OriginalUri, Path, Query, State};
use axum::response::Response;
use baton_proto::coordinator::v1::{self as pb, ExecutionOutcome, FailureReason};
use http::{HeaderMap, StatusCode};
use serde_json::json;

/// The current URL's path and query, to come back to after sign-in.
pub(super) fn here(uri: &http::Uri) -> String {
    uri.path_and_query().map(|pq| pq.as_str().to_owned()).unwrap_or_else(|| uri.path().to_owned())
}

/// What a page needs before it renders: a viewer and valid filters, or the
/// response that replaces the page (sign-in, refusal, canonical redirect).
pub(super) async fn prepare(
    state: &AppState,
    headers: &HeaderMap,
    uri: &http::Uri,
    path: &ProjectPath,
    pairs: &[(String, String)],
) -> Result<(Viewer, Result<Filters, String>), Response> {
    let viewer = access::viewer(state, headers, path, None)
        .await
        .map_err(|d| d.page(path, &here(uri), access::is_tls(headers, uri)))?;
    let filters = match Filters::parse(pairs) {
        Ok(f) => f,
        Err(e) => return Ok((viewer, Err(e.0))),
    };
    if uri.query().unwrap_or_default() != filters.query() {
        return Err(see_other(&format!("{}{}", uri.path(), filters.suffix())));
    }
    Ok((viewer, Ok(filters)))
}

pub(super) async fn page(
    State(state): State<AppState>,
    Path(path): Path<ProjectPath>,
    Query(pairs): Query<Vec<(String, String)>>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Response {
    let (viewer, filters) = match prepare(&state, &headers, &uri, &path, &pairs).await {
        Ok(ready) => ready,
        Err(response) => return response,
    };
    let body = match list_section(&state, &viewer, filters, None).await {
        Ok(section) => format!(r#"<div class="layout">{section}</div>"#),
        Err(e) => return access::failure_page(&path, &e),
    };
    html_response(StatusCode::OK, html::page("Tool Executions", &viewer.header(), &body))
}

/// The list (filters, summary, table, pager); `selected` marks the open run.
pub(super) async fn list_section(
    state: &AppState,
    viewer: &Viewer,
    filters: Result<Filters, String>,
    selected: Option<&str>,
) -> Result<String, baton_proto::error::WireError> {
    let filters = match filters {
        Ok(f) => f,
        Err(message) => {
            let form = filter_form(viewer, &Filters::default(), Some(&message));
            return Ok(format!(r#"<section class="list" aria-labelledby="list-title">{form}</section>"#));
        }
    };
    let page =
        state.coordinator.history_list(&viewer.bearer, &viewer.scope, &filters.history(), PAGE, filters.offset).await?;
    let now = baton_proto::clock::now_ms();
    let rows: String = page.items.iter().map(|i| row(viewer, &filters, i, selected, now)).collect();
    let total = page.total_count;
    let first = u64::from(filters.offset) + 1;
    let last = u64::from(filters.offset) + page.items.len() as u64;
    let summary = if page.items.is_empty() {
        format!(r#"<strong data-total>{total}</strong> {}"#, if total == 1 { "execution" } else { "executions" })
    } else {
        format!(
            r#"<strong data-total>{total}</strong> {} · showing {first}–{last}"#,
            if total == 1 { "execution" } else { "executions" }
        )
    };
    let table = if page.items.is_empty() {
        empty_state(viewer, &filters, total)
    } else {
        format!(
            r#"<table class="runs">
<caption class="visually-hidden">Tool executions, newest first</caption>
<thead><tr><th scope="col">Status</th><th scope="col">Tool</th><th scope="col">End user</th><th scope="col">Created</th><th scope="col">Duration</th><th scope="col">Execution ID</th></tr></thead>
<tbody>{rows}</tbody>
</table>"#
        )
    };
    let live = format!("{}/tool-executions/live{}", viewer.base, filters.suffix());
    Ok(format!(
        r#"<section class="list" aria-labelledby="list-title" data-live-url="{live}">
<h1 id="list-title">Tool Executions</h1>
{form}
<p class="summary" id="summary" aria-live="polite">{summary}</p>
<p class="new-runs" hidden><span>New runs match these filters.</span> <a href="{reload}">Show them</a></p>
{table}
{pager}
</section>"#,
        live = esc(&live),
        form = filter_form(viewer, &filters, None),
        reload = esc(&format!("{}/tool-executions{}", viewer.base, filters.suffix())),
        pager = pager(viewer, &filters, total),
    ))
}

fn empty_state(viewer: &Viewer, filters: &Filters, total: u64) -> String {
    let clear = esc(&format!("{}/tool-executions", viewer.base));
    if filters.offset > 0 && total > 0 {
        format!(
            r#"<div class="empty"><p>This page is past the last execution.</p><p><a href="{clear}">Back to the newest</a></p></div>"#
        )
    } else if filters.is_filtered() {
        format!(
            r#"<div class="empty"><p><strong>No executions match these filters.</strong></p><p>Widen the time range or <a href="{clear}">clear the filters</a>.</p></div>"#
        )
    } else {
        r#"<div class="empty"><p><strong>No executions yet.</strong></p><p>Runs appear here as soon as a tool is called through MCP or the REST API, and stay for the project's retention window.</p></div>"#.to_owned()
    }
}

fn row(viewer: &Viewer, filters: &Filters, i: &pb::HistoryItem, selected: Option<&str>, now: i64) -> String {
    let href = format!("{}/tool-executions/{}{}", viewer.base, html::url_part(&i.execution_id), filters.suffix());
    let current = selected == Some(i.execution_id.as_str());
    let toolkit = if i.toolkit_name.is_empty() {
        String::new()
    } else {
        format!(r#"<span class="sub">{} {}</span>"#, esc(&i.toolkit_name), esc(&i.toolkit_version))
    };
    let duration = match (i.started_at_ms, i.finished_at_ms) {
        (Some(s), Some(f)) => html::duration(f - s),
        (Some(_), None) => r#"<span class="sub">running…</span>"#.to_owned(),
        _ => r#"<span class="none">—</span>"#.to_owned(),
    };
    let user = if i.user_id.is_empty() { r#"<span class="none">—</span>"#.to_owned() } else { esc(&i.user_id) };
    format!(
        r#"<tr data-id="{id}" data-status="{status}"{class}>
<td data-label="Status"><div>{badge}</div></td>
<td data-label="Tool"><div><a href="{href}"{aria}>{tool}</a>{toolkit}</div></td>
<td data-label="End user"><div>{user}</div></td>
<td data-label="Created"><div>{created}</div></td>
<td data-label="Duration"><div>{duration}</div></td>
<td data-label="Execution ID"><div><code>{id}</code></div></td>
</tr>"#,
        id = esc(&i.execution_id),
        status = i.status().name(),
        class = if current { r#" class="selected""# } else { "" },
        badge = html::status_badge(i.status()),
        href = esc(&href),
        aria = if current { r#" aria-current="true""# } else { "" },
        tool = esc(&i.tool_name),
        created = html::time(i.created_at_ms, now),
    )
}

fn option(value: &str, label: &str, selected: bool) -> String {
    format!(r#"<option value="{}"{}>{}</option>"#, esc(value), if selected { " selected" } else { "" }, esc(label))
}

fn filter_form(viewer: &Viewer, f: &Filters, error: Option<&str>) -> String {
    let text = |name: &str, id: &str, label: &str, value: &Option<String>, hint: &str| {
        format!(
            r#"<div class="field"><label for="{id}">{label}</label><input id="{id}" name="{name}" value="{}" placeholder="{hint}" spellcheck="false"></div>"#,
            esc(value.as_deref().unwrap_or_default())
        )
    };
    let outcomes: String = std::iter::once(option("", "Any", f.outcome.is_none()))
        .chain(ExecutionOutcome::ALL.iter().map(|o| option(o.name(), o.name(), f.outcome == Some(*o))))
        .collect();
    let reasons: String = std::iter::once(option("", "Any", f.failure_reason.is_none()))
        .chain(
            FailureReason::ALL
                .iter()
                .map(|r| option(r.name(), &r.name().replace('_', " "), f.failure_reason == Some(*r))),
        )
        .collect();
    let moment = |name: &str, id: &str, label: &str, ms: Option<i64>| {
        format!(
            r#"<div class="field"><label for="{id}">{label} <span class="sub">(UTC)</span></label><input id="{id}" name="{name}" type="datetime-local" step="1" value="{}"></div>"#,
            ms.map(local_input).unwrap_or_default()
        )
    };
    let error = error
        .map(|e| format!(r#"<p class="notice notice-error" role="alert">{} <a href="{}/tool-executions">Clear the filters</a></p>"#, esc(e), esc(&viewer.base)))
        .unwrap_or_default();
    format!(
        r#"{error}<form class="filters" method="get" action="{action}" role="search" aria-label="Filter executions">
{tool}{toolkit}{user}
<div class="field"><label for="f-outcome">Outcome</label><select id="f-outcome" name="outcome">{outcomes}</select></div>
<div class="field"><label for="f-reason">Failure reason</label><select id="f-reason" name="failure_reason">{reasons}</select></div>
{from}{to}
<div class="actions"><button type="submit">Apply filters</button> <a href="{action}">Clear</a></div>
</form>"#,
        action = esc(&format!("{}/tool-executions", viewer.base)),
        tool = text("tool_name", "f-tool", "Tool", &f.tool_name, "e.g. Demo.Fail"),
        toolkit = text("toolkit_name", "f-toolkit", "Toolkit", &f.toolkit_name, "e.g. Demo"),
        user = text("user_id", "f-user", "User ID", &f.user_id, "e.g. someone@example.com"),
        from = moment("start_time", "f-from", "Created from", f.start_ms),
        to = moment("end_time", "f-to", "Created before", f.end_ms),
    )
}

fn pager(viewer: &Viewer, f: &Filters, total: u64) -> String {
    let link = |offset: u32, rel: &str, label: &str| {
        let href = format!("{}/tool-executions{}", viewer.base, f.at(offset).suffix());
        format!(r#"<a href="{}" rel="{rel}">{label}</a>"#, esc(&href))
    };
    let pages = total.div_ceil(u64::from(PAGE)).max(1);
    let current = u64::from(f.offset / PAGE) + 1;
    let newer = if f.offset > 0 { link(f.offset.saturating_sub(PAGE), "prev", "← Newer") } else { String::new() };
    let older_offset = f.offset.saturating_add(PAGE);
    let older = if u64::from(older_offset) < total { link(older_offset, "next", "Older →") } else { String::new() };
    if newer.is_empty() && older.is_empty() {
        return String::new();
    }
    format!(r#"<nav class="pager" aria-label="Pages">{newer} <span>Page {current} of {pages}</span> {older}</nav>"#)
}

/// The script's poll: the page's rows as they are now, and the total.
pub(super) async fn live(
    State(state): State<AppState>,
    Path(path): Path<ProjectPath>,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let viewer = match access::viewer(&state, &headers, &path, None).await {
        Ok(v) => v,
        Err(denied) => return denied.json(),
    };
    let Ok(filters) = Filters::parse(&pairs) else {
        return json(StatusCode::BAD_REQUEST, json!({"error": {"code": "invalid_request", "message": "bad filters"}}));
    };
    let page = match state
        .coordinator
        .history_list(&viewer.bearer, &viewer.scope, &filters.history(), PAGE, filters.offset)
        .await
    {
        Ok(p) => p,
        Err(e) => return access::failure_json(&e),
    };
    let now = baton_proto::clock::now_ms();
    let rows: Vec<_> = page
        .items
        .iter()
        .map(|i| json!({"id": i.execution_id, "status": i.status().name(), "html": row(&viewer, &filters, i, None, now)}))
        .collect();
    json(StatusCode::OK, json!({"total_count": page.total_count, "rows": rows}))
}

/// For the details page: the list of the same filters beside the panel.
pub(super) async fn with_panel(
    state: &AppState,
    viewer: &Viewer,
    path: &ExecutionPath,
    filters: Result<Filters, String>,
    panel: &str,
) -> Result<String, baton_proto::error::WireError> {
    let list = list_section(state, viewer, filters, Some(&path.execution_id)).await?;
    Ok(format!(r#"<div class="layout has-panel">{list}{panel}</div>"#))
}
