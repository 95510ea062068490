//! Signing people in with the organization's OpenID provider (decision 0050).
//! The coordinator holds the provider's configuration and does the trusted
//! steps; this gateway carries the browser through the authorization code
//! flow. `…/sign-in/oidc` asks the coordinator for the authorization URL and
//! the flow's secrets (`state`, `nonce`, PKCE verifier), seals them with the
//! project and the page to return to into a short-lived cookie bound to this
//! browser, and sends the browser to the provider. The provider sends it back
//! to `/dashboard/oidc/callback`, which refuses a `state` that is not the
//! cookie's (a forged or tampered callback), then has the coordinator
//! exchange the code and validate the ID token. A person with a role in the
//! project gets a dashboard session like an API key's; one without is told so.

use super::access::{self, message_page};
use super::html::{self, Header, esc};
use super::session;
use super::sign_in::{Opened, safe_next, session_cookie};
use super::{ProjectPath, html_response, see_other};
use crate::app::AppState;
use axum::extract::{OriginalUri, Path, Query, State};
use axum::response::Response;
use baton_proto::coordinator::v1 as pb;
use baton_proto::error::{ErrorCode, WireError};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The flow's cookie, on the dashboard's path, `SameSite=Lax`.
pub(crate) const FLOW_COOKIE: &str = "baton_dashboard_oidc";
/// How long a person has at the provider.
const FLOW_LIFETIME: Duration = Duration::from_secs(600);
const FLOW_AAD: &[u8] = b"baton/dashboard-oidc-flow/v1";

/// What the flow's cookie holds. Sealed: the browser cannot read or change it.
#[derive(Serialize, Deserialize)]
struct Flow {
    #[serde(rename = "o")]
    org_id: String,
    #[serde(rename = "p")]
    project_id: String,
    #[serde(rename = "s")]
    state: String,
    #[serde(rename = "n")]
    nonce: String,
    #[serde(rename = "v")]
    verifier: String,
    /// Where to go once signed in (a page of the project).
    #[serde(rename = "r")]
    next: String,
    #[serde(rename = "x")]
    expires_ms: i64,
}

#[derive(Deserialize, Default)]
pub(crate) struct StartQuery {
    next: Option<String>,
    /// `another`: the provider is asked to authenticate the person again, so
    /// they may choose another account than the one it remembers.
    account: Option<String>,
}

/// Sends the browser to the provider.
pub(crate) async fn start(
    State(state): State<AppState>,
    Path(path): Path<ProjectPath>,
    Query(q): Query<StartQuery>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Response {
    if !state.options.dashboard_oidc {
        return message_page(
            &path,
            StatusCode::NOT_FOUND,
            "Sign-in with an identity provider is not configured",
            "This Baton signs people in with a project API key only.",
        );
    }
    let secure = access::is_tls(&headers, &uri);
    let another_account = q.account.as_deref() == Some("another");
    let begun = match state.coordinator.begin_person_sign_in(&path.org_id, &path.project_id, another_account).await {
        Ok(begun) => begun,
        Err(e) => return failure(&path, &e),
    };
    let flow = Flow {
        org_id: path.org_id.clone(),
        project_id: path.project_id.clone(),
        state: begun.state,
        nonce: begun.nonce,
        verifier: begun.pkce_verifier,
        // A long return address would outgrow the cookie: the list, then.
        next: safe_next(&path, q.next.as_deref().filter(|n| n.len() <= 512)),
        expires_ms: baton_proto::clock::now_ms() + FLOW_LIFETIME.as_millis() as i64,
    };
    let Ok(sealed) = session::seal_value(&state.options.session_key, FLOW_AAD, &flow) else {
        return message_page(&path, StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong", "Try again.");
    };
    let mut r = see_other(&begun.authorize_url);
    access::set(&mut r, &session::set_lax_cookie(FLOW_COOKIE, &sealed, FLOW_LIFETIME, secure));
    r
}

#[derive(Deserialize, Default)]
pub(crate) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// A page about the sign-in itself, before any project is known for sure.
fn flow_page(status: StatusCode, title: &str, text: &str, retry: Option<&str>) -> Response {
    let header = Header { project_base: "", project_id: "", role: None, person: false, csrf: None };
    let again = retry
        .map(|base| format!(r#"<p><a class="button" href="{}/sign-in">Sign in again</a></p>"#, esc(base)))
        .unwrap_or_default();
    let body = format!(
        r#"<section class="message" aria-labelledby="message-title">
<h1 id="message-title">{}</h1>
<p>{}</p>
{again}
</section>"#,
        esc(title),
        esc(text)
    );
    html_response(status, html::page(title, &header, &body))
}

/// The provider's return: checks `state`, has the coordinator complete the
/// sign-in, and opens the session.
pub(crate) async fn callback(
    State(state): State<AppState>,
    Query(q): Query<CallbackQuery>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Response {
    let secure = access::is_tls(&headers, &uri);
    let clear = session::clear_cookie(FLOW_COOKIE, secure).replace("SameSite=Strict", "SameSite=Lax");
    let with_cleared = |mut r: Response| {
        access::set(&mut r, &clear);
        r
    };
    let flow: Option<Flow> = session::cookie(&headers, FLOW_COOKIE)
        .and_then(|c| session::open_value(&state.options.session_key, FLOW_AAD, c).ok())
        .filter(|f: &Flow| f.expires_ms > baton_proto::clock::now_ms());
    let Some(flow) = flow else {
        return with_cleared(flow_page(
            StatusCode::BAD_REQUEST,
            "This sign-in expired or began in another browser",
            "Nothing was signed in. Open the dashboard and sign in again.",
            None,
        ));
    };
    let path = ProjectPath { org_id: flow.org_id.clone(), project_id: flow.project_id.clone() };
    let base = path.base();
    if !q.state.as_deref().is_some_and(|s| session::same_secret(s, &flow.state)) {
        return with_cleared(flow_page(
            StatusCode::FORBIDDEN,
            "This sign-in was not the one this browser started",
            "Its state did not match, so it may have been forged or altered. Nothing was signed in.",
            Some(&base),
        ));
    }
    if let Some(error) = q.error.as_deref() {
        let text = format!(
            "The identity provider said: {}. Nothing was signed in.",
            error.chars().take(80).collect::<String>()
        );
        return with_cleared(flow_page(
            StatusCode::FORBIDDEN,
            "The identity provider refused the sign-in",
            &text,
            Some(&base),
        ));
    }
    let Some(code) = q.code.filter(|c| !c.is_empty() && c.len() <= 2048) else {
        return with_cleared(flow_page(StatusCode::BAD_REQUEST, "The sign-in brought no code", "", Some(&base)));
    };
    let request = pb::CompletePersonSignInRequest {
        org_id: flow.org_id.clone(),
        project_id: flow.project_id.clone(),
        code,
        pkce_verifier: flow.verifier.clone(),
        nonce: flow.nonce.clone(),
    };
    let opened = match state.coordinator.complete_person_sign_in(request).await {
        Ok(opened) => opened,
        Err(e) => return with_cleared(failure(&path, &e)),
    };
    let role = opened.role_name().to_owned();
    let session = Opened { token: opened.session_token, expires_at_ms: opened.expires_at_ms, person: true };
    let Ok(cookie) = session_cookie(&state, &path, session, secure) else {
        return with_cleared(message_page(&path, StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong", ""));
    };
    // The browser came here through the provider: a strict cookie set now is
    // not sent on a redirect of the same navigation, so a page moves it on.
    let header = Header { project_base: &base, project_id: &path.project_id, role: None, person: false, csrf: None };
    let body = format!(
        r#"<section class="message" aria-labelledby="message-title">
<h1 id="message-title">Signed in as {email}</h1>
<p>Your role in this project: <strong>{role}</strong>.</p>
<p><a class="button" id="continue" href="{next}">Continue</a></p>
</section>"#,
        email = esc(&opened.email),
        role = esc(&role),
        next = esc(&flow.next),
    );
    let page = html::page("Signed in", &header, &body).replacen(
        "<head>",
        &format!(r#"<head><meta http-equiv="refresh" content="0;url={}">"#, esc(&flow.next)),
        1,
    );
    let mut r = with_cleared(html_response(StatusCode::OK, page));
    access::set(&mut r, &cookie);
    r
}

/// The page for a sign-in the coordinator could not complete.
fn failure(path: &ProjectPath, e: &WireError) -> Response {
    let base = path.base();
    match e.code {
        ErrorCode::PermissionDenied => access::refusal_page(path, access::Refusal::NoGrant, None),
        ErrorCode::Unavailable => flow_page(
            StatusCode::SERVICE_UNAVAILABLE,
            "The identity provider did not answer",
            "Baton could not reach your organization's identity provider, so nobody can sign in with it just \
             now. People already signed in keep working. Try again shortly.",
            Some(&base),
        ),
        ErrorCode::InvalidRequest => flow_page(
            StatusCode::FORBIDDEN,
            "The identity provider refused this sign-in",
            "Its code was already used or has expired. Nothing was signed in.",
            Some(&base),
        ),
        ErrorCode::Unauthenticated => flow_page(
            StatusCode::FORBIDDEN,
            "The identity provider's answer could not be trusted",
            "Its ID token failed validation (signature, issuer, audience, expiry or nonce), or named no verified \
             email address. Nothing was signed in.",
            Some(&base),
        ),
        ErrorCode::NotFound => flow_page(
            StatusCode::NOT_FOUND,
            "Sign-in with an identity provider is not configured",
            "The coordinator has no OpenID provider configured.",
            Some(&base),
        ),
        _ => access::failure_page(path, e),
    }
}
