//! Signing in and out. A person pastes a project API key into a form (never a
//! URL); the gateway asks the coordinator who the key is and, for an `admin`
//! or `member` key of this project, opens a coordinator session and answers
//! with it sealed in the cookie (the key itself is not kept).
//! The form itself is protected by a double-submit token (a cookie and a
//! hidden field that must match), so another site cannot sign a browser in
//! with the attacker's key. Signing out ends the session and clears the cookie.

use super::access::{self, Refusal};
use super::html::{self, Header, esc};
use super::session::{self, Claims};
use super::{ProjectPath, html_response, see_other};
use crate::app::AppState;
use crate::coordinator::Bearer;
use axum::Form;
use axum::extract::{OriginalUri, Path, Query, State};
use axum::response::Response;
use baton_proto::error::ErrorCode;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize, Default)]
pub(super) struct FormQuery {
    next: Option<String>,
    ended: Option<String>,
    signed_out: Option<String>,
}

/// No dot segment, plain or percent-encoded, in the path: a browser resolves
/// `…/p/../../q` to another project's page (or out of the dashboard).
fn stays_put(next: &str) -> bool {
    let path = next.split(['?', '#']).next().unwrap_or_default();
    let lower = path.to_ascii_lowercase();
    !path.split('/').any(|segment| segment == "." || segment == "..")
        && !["%2e", "%2f", "%5c"].iter().any(|encoded| lower.contains(encoded))
}

/// Where to go after signing in: a dashboard page of this project, else the list.
pub(crate) fn safe_next(path: &ProjectPath, next: Option<&str>) -> String {
    let base = path.base();
    match next {
        Some(n)
            if n.starts_with(&format!("{base}/"))
                && !n.contains("//")
                && !n.contains('\\')
                && !n.contains("/sign-")
                && n.chars().all(|c| c.is_ascii_graphic())
                && stays_put(n) =>
        {
            n.to_owned()
        }
        _ => format!("{base}/tool-executions"),
    }
}

/// The ways to sign in this gateway offers.
#[derive(Clone, Copy)]
pub(crate) struct Ways {
    pub api_key: bool,
    pub oidc: bool,
}

impl Ways {
    pub(crate) fn of(state: &AppState) -> Ways {
        Ways { api_key: state.options.dashboard_api_key_sign_in, oidc: state.options.dashboard_oidc }
    }
}

fn form_page(path: &ProjectPath, ways: Ways, next: &str, token: &str, notice: Option<(&str, &str)>) -> String {
    let base = path.base();
    let header = Header { project_base: &base, project_id: &path.project_id, role: None, person: false, csrf: None };
    let notice = notice
        .map(|(kind, text)| {
            let role = if kind == "error" { "alert" } else { "status" };
            format!(r#"<p class="notice notice-{kind}" role="{role}">{}</p>"#, esc(text))
        })
        .unwrap_or_default();
    let oidc = if ways.oidc {
        format!(
            r#"<p><a class="button" href="{}">Sign in with your organization's account</a></p>
<p class="help">Your project role comes from the grants an admin made to your email address or your groups.</p>"#,
            esc(&format!("{base}/sign-in/oidc?next={}", html::url_part(next)))
        )
    } else {
        String::new()
    };
    if !ways.api_key {
        let body = format!(
            r#"<section class="sign-in" aria-labelledby="sign-in-title">
<h1 id="sign-in-title">Sign in to Tool Executions</h1>
{notice}
{oidc}
</section>"#
        );
        return html::page("Sign in", &header, &body);
    }
    let body = format!(
        r#"<section class="sign-in" aria-labelledby="sign-in-title">
<h1 id="sign-in-title">Sign in to Tool Executions</h1>
{notice}
{oidc}
<p>Paste a project API key with the <strong>admin</strong> or <strong>member</strong> role. The key is not kept:
this browser gets a session that ends when you sign out, when the key is revoked, or after a while unused.</p>
<form method="post" action="{action}" class="stack" autocomplete="off">
<input type="hidden" name="csrf" value="{token}">
<input type="hidden" name="next" value="{next}">
<label for="key">Project API key</label>
<input id="key" name="key" type="password" required autofocus spellcheck="false" autocomplete="off"
 aria-describedby="key-help">
<p id="key-help" class="help">Admins can reveal recorded inputs and outputs; members see everything else.</p>
<button type="submit">Sign in</button>
</form>
</section>"#,
        action = esc(&format!("{base}/sign-in")),
        token = esc(token),
        next = esc(next),
    );
    html::page("Sign in", &header, &body)
}

/// A fresh form with its double-submit cookie.
fn fresh_form(
    path: &ProjectPath,
    ways: Ways,
    next: &str,
    status: StatusCode,
    notice: Option<(&str, &str)>,
    secure: bool,
) -> Response {
    let Ok(token) = session::random_token() else {
        return access::message_page(path, StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong", "Try again.");
    };
    let mut r = html_response(status, form_page(path, ways, next, &token, notice));
    access::set(&mut r, &session::set_cookie(session::SIGN_IN_COOKIE, &token, session::SIGN_IN_LIFETIME, secure));
    r
}

pub(super) async fn form(
    State(state): State<AppState>,
    Path(path): Path<ProjectPath>,
    Query(q): Query<FormQuery>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Response {
    let next = safe_next(&path, q.next.as_deref());
    let notice = if q.ended.is_some() {
        Some(("error", "Your session ended: the key is no longer valid. Sign in again."))
    } else if q.signed_out.is_some() {
        Some(("info", "You are signed out."))
    } else {
        None
    };
    fresh_form(&path, Ways::of(&state), &next, StatusCode::OK, notice, access::is_tls(&headers, &uri))
}

#[derive(Deserialize)]
pub(super) struct SignInForm {
    key: String,
    csrf: String,
    #[serde(default)]
    next: String,
}

pub(super) async fn submit(
    State(state): State<AppState>,
    Path(path): Path<ProjectPath>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Response {
    let secure = access::is_tls(&headers, &uri);
    let next = safe_next(&path, Some(&form.next));
    let ways = Ways::of(&state);
    if !ways.api_key {
        let text = "Signing in with an API key is turned off here. Sign in with your organization's account.";
        return fresh_form(&path, ways, &next, StatusCode::FORBIDDEN, Some(("error", text)), secure);
    }
    let cookie = session::cookie(&headers, session::SIGN_IN_COOKIE).unwrap_or_default();
    if !access::same_site(&headers) || !session::same_secret(cookie, &form.csrf) {
        let text = "The sign-in form expired or came from another site. Paste your key again.";
        return fresh_form(&path, ways, &next, StatusCode::FORBIDDEN, Some(("error", text)), secure);
    }
    let key = form.key.trim();
    if key.is_empty() || key.len() > 512 || !key.chars().all(|c| c.is_ascii_graphic()) {
        let text = "Paste a project API key: it has no spaces and is at most 512 characters.";
        return fresh_form(&path, ways, &next, StatusCode::BAD_REQUEST, Some(("error", text)), secure);
    }
    match access::check_key(&state, key, &path).await {
        Err(e) => access::failure_page(&path, &e),
        Ok(Err(Refusal::Unknown)) => {
            let r = Refusal::Unknown;
            let text = format!("{}. {}", r.title(), r.explanation());
            fresh_form(&path, ways, &next, r.status(), Some(("error", &text)), secure)
        }
        Ok(Err(refusal)) => access::refusal_page(&path, refusal, Some(&session::clear_cookie(session::COOKIE, secure))),
        Ok(Ok(_)) => {
            // The key leaves with this request: the cookie holds a session the
            // coordinator can end.
            let opened = match state.coordinator.open_dashboard_session(&Bearer(key.to_owned())).await {
                Ok(opened) => opened,
                Err(e) => return access::failure_page(&path, &e),
            };
            let session = Opened { token: opened.session_token, expires_at_ms: opened.expires_at_ms, person: false };
            let Ok(cookie) = session_cookie(&state, &path, session, secure) else {
                return access::message_page(&path, StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong", "");
            };
            let mut r = see_other(&next);
            access::set(&mut r, &cookie);
            access::set(&mut r, &session::clear_cookie(session::SIGN_IN_COOKIE, secure));
            r
        }
    }
}

/// A coordinator session just opened: a key's, or a person's.
pub(crate) struct Opened {
    pub(crate) token: String,
    pub(crate) expires_at_ms: i64,
    pub(crate) person: bool,
}

/// The `Set-Cookie` of a session just opened: its token sealed with a fresh
/// CSRF token, for its lifetime.
pub(crate) fn session_cookie(
    state: &AppState,
    path: &ProjectPath,
    opened: Opened,
    secure: bool,
) -> Result<String, session::Error> {
    let now = baton_proto::clock::now_ms();
    let lifetime = Duration::from_millis(u64::try_from(opened.expires_at_ms - now).unwrap_or(0));
    let claims = Claims {
        session: opened.token,
        org_id: path.org_id.clone(),
        project_id: path.project_id.clone(),
        csrf: session::random_token()?,
        expires_ms: opened.expires_at_ms,
        person: opened.person,
    };
    let sealed = session::seal(&state.options.session_key, &claims)?;
    Ok(session::set_cookie(session::COOKIE, &sealed, lifetime, secure))
}

#[derive(Deserialize)]
pub(super) struct SignOutForm {
    csrf: String,
}

/// Ends the session with the coordinator and clears the cookie. Needs the
/// session's CSRF token, so another site cannot sign a person out either.
pub(super) async fn sign_out(
    State(state): State<AppState>,
    Path(path): Path<ProjectPath>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    Form(form): Form<SignOutForm>,
) -> Response {
    let secure = access::is_tls(&headers, &uri);
    let Some(claims) = access::session_of(&state, &headers, &path) else {
        return see_other(&format!("{}/sign-in?signed_out=1", path.base()));
    };
    if !access::same_site(&headers) || !session::same_secret(&form.csrf, &claims.csrf) {
        return access::Denied::Forged.page(&path, "", secure);
    }
    // The session ends for every copy of the cookie, not only this browser's.
    let mut r = match state.coordinator.end_dashboard_session(&Bearer(claims.session)).await {
        // A person signed in with the provider: end the session there too.
        Ok(Some(provider_logout))
            if provider_logout.starts_with("https://") || provider_logout.starts_with("http://") =>
        {
            access::signed_out_here(&path, &provider_logout)
        }
        Ok(_) => see_other(&format!("{}/sign-in?signed_out=1", path.base())),
        Err(e) if e.code == ErrorCode::Unauthenticated => see_other(&format!("{}/sign-in?signed_out=1", path.base())),
        Err(e) => access::failure_page(&path, &e),
    };
    access::set(&mut r, &session::clear_cookie(session::COOKIE, secure));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pages_of_this_project_are_returned_to() {
        let p = ProjectPath { org_id: "o".into(), project_id: "p".into() };
        let list = "/dashboard/orgs/o/projects/p/tool-executions";
        assert_eq!(
            safe_next(&p, Some("/dashboard/orgs/o/projects/p/tool-executions?tool_name=x")),
            format!("{list}?tool_name=x")
        );
        for bad in [
            "https://evil.example/",
            "//evil.example/dashboard/orgs/o/projects/p/",
            "/dashboard/orgs/o/projects/q/tool-executions",
            "/dashboard/orgs/o/projects/p//evil",
            "/dashboard/orgs/o/projects/p/sign-out",
            "/dashboard/orgs/o/projects/p/\\evil",
            "/dashboard/orgs/o/projects/p/../q/tool-executions",
            "/dashboard/orgs/o/projects/p/../../../../admin",
            "/dashboard/orgs/o/projects/p/./tool-executions",
            "/dashboard/orgs/o/projects/p/%2e%2e/q/tool-executions",
            "/dashboard/orgs/o/projects/p/%2E./q",
            "/dashboard/orgs/o/projects/p/x%2f..%2fq",
        ] {
            assert_eq!(safe_next(&p, Some(bad)), list, "{bad}");
        }
        assert_eq!(safe_next(&p, None), list);
        // A query may say anything; only the path is walked by the browser.
        let query = "/dashboard/orgs/o/projects/p/tool-executions?user_id=a..b";
        assert_eq!(safe_next(&p, Some(query)), query);
    }
}
