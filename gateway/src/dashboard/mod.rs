//! The dashboard: the project's Tool Executions page for people, served by the
//! gateway under `/dashboard/orgs/{org_id}/projects/{project_id}/…`. Pages are
//! HTML rendered here from the history and operator calls of the typed
//! coordinator client; one stylesheet and one small script (`gateway/assets/`,
//! embedded in the binary) add live updates, relative times, the reveal
//! toggles and the JSON viewer. Nothing is kept between requests: the session
//! is a sealed cookie (`session`) whose key is re-checked with the coordinator
//! on every request (`access`). Filters live in the URL (`filters`); the
//! reveal toggles never do, and payloads are fetched only when revealed.
//!
//! Who may call what: every route but sign-in and the assets needs a session
//! of an `admin` or `member` key (or person) of the project in the path; POSTs
//! also need the session's CSRF token. The coordinator decides each call
//! again: payloads and the audit log (`audit`) are for admins only.

mod access;
mod assets;
mod audit;
mod filters;
mod html;
mod list;
mod oidc;
#[cfg(test)]
mod oidc_tests;
mod panel;
mod session;
mod sign_in;
#[cfg(test)]
mod tests;

use crate::app::AppState;
use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use std::time::Duration;

pub(crate) const BASE: &str = "/dashboard/orgs/{org_id}/projects/{project_id}";
/// Forms are a key and a token; nothing the dashboard accepts is larger.
const MAX_BODY_BYTES: usize = 16 * 1024;
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// No script but our own file, no inline style or script, no framing, forms
/// and fetches to this origin only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub(crate) fn router() -> Router<AppState> {
    let executions = format!("{BASE}/tool-executions");
    Router::new()
        .route("/dashboard", get(index))
        .route("/dashboard/", get(index))
        .route("/dashboard/assets/{name}", get(assets::serve))
        .route(BASE, get(home))
        .route(&format!("{BASE}/"), get(home))
        .route(&format!("{BASE}/sign-in"), get(sign_in::form).post(sign_in::submit))
        .route(&format!("{BASE}/sign-out"), post(sign_in::sign_out))
        .route(&format!("{BASE}/sign-in/oidc"), get(oidc::start))
        .route("/dashboard/oidc/callback", get(oidc::callback))
        .route(&executions, get(list::page))
        .route(&format!("{executions}/live"), get(list::live))
        .route(&format!("{executions}/{{execution_id}}"), get(panel::page))
        .route(&format!("{executions}/{{execution_id}}/panel"), get(panel::live))
        .route(&format!("{executions}/{{execution_id}}/reveal"), post(panel::reveal))
        .route(&format!("{executions}/{{execution_id}}/cancel"), post(panel::cancel))
        .route(&format!("{BASE}/audit-log"), get(audit::page))
        .route("/dashboard/{*rest}", get(not_found).post(not_found))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(BODY_TIMEOUT))
        .layer(axum::middleware::map_response(security_headers))
}

/// The project of a dashboard URL.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct ProjectPath {
    pub(crate) org_id: String,
    pub(crate) project_id: String,
}

impl ProjectPath {
    /// `/dashboard/orgs/{org}/projects/{project}`, escaped for a URL.
    pub(crate) fn base(&self) -> String {
        format!("/dashboard/orgs/{}/projects/{}", html::url_part(&self.org_id), html::url_part(&self.project_id))
    }
}

/// The run of a details URL.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct ExecutionPath {
    pub(crate) org_id: String,
    pub(crate) project_id: String,
    pub(crate) execution_id: String,
}

impl ExecutionPath {
    pub(crate) fn project(&self) -> ProjectPath {
        ProjectPath { org_id: self.org_id.clone(), project_id: self.project_id.clone() }
    }
}

/// Every dashboard answer: a strict CSP, no framing, no sniffing, no
/// referrer to other sites (URLs carry filters), and nothing stored unless it
/// is an asset.
async fn security_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

pub(crate) fn html_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// 303 to a path of this dashboard.
pub(crate) fn see_other(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(v) => (StatusCode::SEE_OTHER, [(header::LOCATION, v)]).into_response(),
        Err(_) => StatusCode::BAD_REQUEST.into_response(),
    }
}

/// JSON for the script.
pub(crate) fn json(status: StatusCode, value: serde_json::Value) -> Response {
    (status, axum::Json(value)).into_response()
}

async fn home(Path(p): Path<ProjectPath>) -> Response {
    see_other(&format!("{}/tool-executions", p.base()))
}

async fn index() -> Response {
    let header = html::Header { project_base: "", project_id: "", role: None, person: false, csrf: None };
    let body = r#"<section class="message" aria-labelledby="message-title">
<h1 id="message-title">Open a project</h1>
<p>The dashboard lives at <code>/dashboard/orgs/{org_id}/projects/{project_id}</code>. <code>baton dev</code>
prints the URL of its project and writes it to <code>dev.json</code>.</p>
</section>"#;
    html_response(StatusCode::OK, html::page("Dashboard", &header, body))
}

async fn not_found() -> Response {
    let header = html::Header { project_base: "", project_id: "", role: None, person: false, csrf: None };
    let body = r#"<section class="message" aria-labelledby="message-title">
<h1 id="message-title">Page not found</h1>
<p>There is no dashboard page at this address. Dashboard pages live under
<code>/dashboard/orgs/{org_id}/projects/{project_id}</code>.</p>
</section>"#;
    html_response(StatusCode::NOT_FOUND, html::page("Not found", &header, body))
}
