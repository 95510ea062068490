//! Who may see the dashboard, decided on every request: the session cookie
//! opens to a coordinator session token, and that session is checked with
//! the coordinator (`WhoAmI`) each time, so sign-out, the key's revocation
//! and the session's lifetimes take effect on the next request. Only
//! `admin` and `member` keys of the project in the URL are admitted; read-only
//! keys, end-user tokens, worker tokens and other projects' keys are refused
//! with a page that says why. State-changing requests also need the session's
//! CSRF token and must not come from another site.

use super::ProjectPath;
use super::html::{self, Header, esc, url_part};
use super::session::{self, Claims};
use crate::app::AppState;
use crate::coordinator::{Bearer, Scope};
use axum::response::{IntoResponse, Response};
use baton_proto::coordinator::v1::{PrincipalKind, Role, WhoAmIResponse};
use baton_proto::error::{ErrorCode, WireError};
use http::{HeaderMap, StatusCode, header};

/// A signed-in person, as checked on this request.
#[derive(Debug)]
pub(super) struct Viewer {
    pub(crate) bearer: Bearer,
    pub(crate) scope: Scope,
    /// `/dashboard/orgs/{org}/projects/{project}`
    pub(crate) base: String,
    pub(crate) admin: bool,
    /// The key holds the operator `cancel` permission (and may act).
    pub(crate) can_cancel: bool,
    /// The key holds the operator `status` permission: deadlines are shown.
    pub(crate) can_status: bool,
    pub(crate) csrf: String,
    /// Signed in with the OpenID provider (not with an API key).
    pub(crate) person: bool,
}

impl Viewer {
    pub(super) fn header(&self) -> Header<'_> {
        Header {
            project_base: &self.base,
            project_id: &self.scope.project_id,
            role: Some(if self.admin { Role::Admin } else { Role::Member }.name()),
            person: self.person,
            csrf: Some(&self.csrf),
        }
    }
}

/// Why a key cannot open this project's dashboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Unknown, mistyped, revoked or expired.
    Unknown,
    EndUser,
    Worker,
    ReadOnly,
    OtherProject,
    /// A person signed in with the OpenID provider holds no grant in the project.
    NoGrant,
}

impl Refusal {
    pub(super) fn status(self) -> StatusCode {
        match self {
            Refusal::Unknown => StatusCode::UNAUTHORIZED,
            _ => StatusCode::FORBIDDEN,
        }
    }

    pub(super) fn title(self) -> &'static str {
        match self {
            Refusal::Unknown => "Baton does not recognise this key",
            Refusal::EndUser => "End-user tokens cannot open the dashboard",
            Refusal::Worker => "Worker tokens cannot open the dashboard",
            Refusal::ReadOnly => "Read-only keys cannot open the dashboard",
            Refusal::OtherProject => "This key belongs to another project",
            Refusal::NoGrant => "You have no role in this project",
        }
    }

    pub(super) fn explanation(self) -> &'static str {
        match self {
            Refusal::Unknown => "It may be mistyped, revoked or expired. Paste a current project API key.",
            Refusal::EndUser => {
                "This is an end user's token, the kind MCP clients hold. The dashboard shows every run of the \
                 project, whoever started it, so it takes a project API key with the admin or member role."
            }
            Refusal::Worker => {
                "Workers run tools; they cannot read the project's history. Sign in with a project API key with \
                 the admin or member role."
            }
            Refusal::ReadOnly => {
                "The execution history takes a project API key with the admin or member role. Ask a project admin \
                 for a member key."
            }
            Refusal::OtherProject => {
                "It cannot open this project's dashboard. Paste a key of this project, or open the dashboard of \
                 the project the key belongs to."
            }
            Refusal::NoGrant => {
                "Your identity provider signed you in, but no project admin has granted your email address or one \
                 of your groups a role here (or the grant was revoked). Ask a project admin for one."
            }
        }
    }
}

/// What the coordinator says about a key, for this project.
pub(super) struct Access {
    pub(crate) admin: bool,
    pub(crate) permissions: Vec<String>,
}

/// Checks `key` for the project of `path`: who it is, and whether it may look.
pub(super) async fn check_key(
    state: &AppState,
    key: &str,
    path: &ProjectPath,
) -> Result<Result<Access, Refusal>, WireError> {
    let who = match state.coordinator.who_am_i(&Bearer(key.to_owned()), None).await {
        Ok(who) => who,
        Err(e) if e.code == ErrorCode::Unauthenticated => return Ok(Err(Refusal::Unknown)),
        // A person's session whose grants no longer give a role here.
        Err(e) if e.code == ErrorCode::PermissionDenied && e.message.starts_with("no_role") => {
            return Ok(Err(Refusal::NoGrant));
        }
        Err(e) => return Err(e),
    };
    Ok(decide(who, path))
}

/// Whether the key `who` describes may look at the project of `path`.
fn decide(who: WhoAmIResponse, path: &ProjectPath) -> Result<Access, Refusal> {
    let refusal = match who.kind() {
        PrincipalKind::EndUser => Some(Refusal::EndUser),
        PrincipalKind::Worker => Some(Refusal::Worker),
        PrincipalKind::ApiKey if who.org_id != path.org_id || who.project_id != path.project_id => {
            Some(Refusal::OtherProject)
        }
        // A role this release does not know (a newer coordinator's) reads as
        // unspecified and is refused, as a read-only key is.
        PrincipalKind::ApiKey if matches!(who.read_role(), Role::Admin | Role::Member) => None,
        PrincipalKind::ApiKey => Some(Refusal::ReadOnly),
        PrincipalKind::Unspecified => Some(Refusal::Unknown),
    };
    match refusal {
        Some(r) => Err(r),
        None => Ok(Access { admin: who.read_role() == Role::Admin, permissions: who.permissions }),
    }
}

/// Why a request gets no [`Viewer`].
#[derive(Debug)]
pub(super) enum Denied {
    /// No session for this project (none, expired, tampered, or its key was
    /// revoked): sign in again. `ended` says a session existed and ended.
    SignIn { ended: bool },
    /// The key is known but may not look.
    Refused(Refusal),
    /// A state-changing request without the session's CSRF token, or from another site.
    Forged,
    /// The coordinator could not answer.
    Failed(WireError),
}

impl Denied {
    /// The answer for a page: a redirect to sign-in (coming back to `next`), or a page saying why.
    pub(super) fn page(self, path: &ProjectPath, next: &str, secure: bool) -> Response {
        let base = path.base();
        match self {
            Denied::SignIn { ended } => {
                let mut target = format!("{base}/sign-in?next={}", url_part(next));
                if ended {
                    target.push_str("&ended=1");
                }
                let mut r = super::see_other(&target);
                if ended {
                    set(&mut r, &session::clear_cookie(session::COOKIE, secure));
                }
                r
            }
            Denied::Refused(refusal) => refusal_page(path, refusal, None),
            Denied::Forged => message_page(
                path,
                StatusCode::FORBIDDEN,
                "This request was not sent from the dashboard",
                "It lacked the page's security token or came from another site, so nothing was changed. Go back, \
                 reload the page and try again.",
            ),
            Denied::Failed(e) => failure_page(path, &e),
        }
    }

    /// The answer for the script's requests: JSON with a status the script understands.
    pub(super) fn json(self) -> Response {
        let (status, code, message) = match self {
            Denied::SignIn { .. } => (StatusCode::UNAUTHORIZED, "signed_out", "Your session ended. Sign in again."),
            Denied::Refused(r) => (r.status(), "refused", r.title()),
            Denied::Forged => (StatusCode::FORBIDDEN, "forged", "The request lacked the page's security token."),
            Denied::Failed(e) => return failure_json(&e),
        };
        let body = serde_json::json!({"error": {"code": code, "message": message}});
        (status, axum::Json(body)).into_response()
    }
}

pub(super) fn set(r: &mut Response, cookie: &str) {
    if let Ok(v) = http::HeaderValue::from_str(cookie) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// Whether the page reached the gateway over TLS (directly or through a proxy
/// that says so): cookies are then `Secure`. A forged header only makes the
/// cookie stricter.
pub(super) fn is_tls(headers: &HeaderMap, uri: &http::Uri) -> bool {
    uri.scheme_str() == Some("https")
        || headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

/// False for a request a browser marks as sent by another site, or whose
/// `Origin` is not this host. Browsers that send `Sec-Fetch-Site` are judged by
/// it; others by `Origin`. (The CSRF token is checked as well, always.)
pub(super) fn same_site(headers: &HeaderMap) -> bool {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        return site == "same-origin" || site == "none";
    }
    match (text("origin"), text("host")) {
        (Some(origin), Some(host)) => origin.split_once("://").is_some_and(|(_, rest)| rest == host),
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// The signed-in viewer of the project in `path`. `csrf` is the token a
/// state-changing request carried (`None` for reads).
pub(super) async fn viewer(
    state: &AppState,
    headers: &HeaderMap,
    path: &ProjectPath,
    csrf: Option<&str>,
) -> Result<Viewer, Denied> {
    let claims = session_of(state, headers, path).ok_or(Denied::SignIn { ended: false })?;
    if let Some(sent) = csrf
        && (!same_site(headers) || !session::same_secret(sent, &claims.csrf))
    {
        return Err(Denied::Forged);
    }
    let access = match check_key(state, &claims.session, path).await {
        Ok(Ok(access)) => access,
        Ok(Err(Refusal::Unknown)) => return Err(Denied::SignIn { ended: true }),
        Ok(Err(refusal)) => return Err(Denied::Refused(refusal)),
        Err(e) => return Err(Denied::Failed(e)),
    };
    let held = |p: &str| access.permissions.iter().any(|h| h == p);
    Ok(Viewer {
        bearer: Bearer(claims.session),
        scope: Scope { org_id: path.org_id.clone(), project_id: path.project_id.clone(), gateway_id: None },
        base: path.base(),
        admin: access.admin,
        can_cancel: held("cancel"),
        can_status: held("status"),
        csrf: claims.csrf,
        person: claims.person,
    })
}

/// The session for this project, if the request carries one that opens.
pub(super) fn session_of(state: &AppState, headers: &HeaderMap, path: &ProjectPath) -> Option<Claims> {
    let token = session::cookie(headers, session::COOKIE)?;
    let claims = session::open(&state.options.session_key, token, baton_proto::clock::now_ms()).ok()?;
    (claims.org_id == path.org_id && claims.project_id == path.project_id).then_some(claims)
}

/// A page explaining a refusal, with a way to sign in as someone else: a
/// person with no grant is offered another account of the identity provider
/// (which is asked to authenticate again), a key another key.
pub(super) fn refusal_page(path: &ProjectPath, refusal: Refusal, set_cookie: Option<&str>) -> Response {
    let base = path.base();
    let way_on = match refusal {
        Refusal::NoGrant => (format!("{base}/sign-in/oidc?account=another"), "Sign in with another account"),
        _ => (format!("{base}/sign-in"), "Sign in with another key"),
    };
    let mut r = page_with(path, refusal.status(), refusal.title(), refusal.explanation(), way_on);
    if let Some(c) = set_cookie {
        set(&mut r, c);
    }
    r
}

/// A page with a heading, a sentence and a way on: back to the project's list.
pub(super) fn message_page(path: &ProjectPath, status: StatusCode, title: &str, text: &str) -> Response {
    let way_on = (format!("{}/tool-executions", path.base()), "Back to Tool Executions");
    page_with(path, status, title, text, way_on)
}

fn page_with(path: &ProjectPath, status: StatusCode, title: &str, text: &str, way_on: (String, &str)) -> Response {
    let base = path.base();
    let header = Header { project_base: &base, project_id: &path.project_id, role: None, person: false, csrf: None };
    let body = format!(
        r#"<section class="message" aria-labelledby="message-title">
<h1 id="message-title">{}</h1>
<p>{}</p>
<p><a class="button" id="way-on" href="{}">{}</a></p>
</section>"#,
        esc(title),
        esc(text),
        esc(&way_on.0),
        esc(way_on.1),
    );
    super::html_response(status, html::page(title, &header, &body))
}

/// Signed out here; the page moves on to end the session at the provider too.
/// (A page, not a redirect: the page's `form-action 'self'` would stop a
/// sign-out form's redirect to another origin.)
pub(crate) fn signed_out_here(path: &ProjectPath, provider_logout: &str) -> Response {
    let base = path.base();
    let header = Header { project_base: &base, project_id: &path.project_id, role: None, person: false, csrf: None };
    let body = format!(
        r#"<section class="message" aria-labelledby="message-title">
<h1 id="message-title">You are signed out</h1>
<p>Your session here has ended. Ending it at your organization's identity provider too…</p>
<p><a class="button" id="provider-sign-out" href="{url}">Sign out at the identity provider</a></p>
</section>"#,
        url = esc(provider_logout)
    );
    let page = html::page("Signed out", &header, &body).replacen(
        "<head>",
        &format!(r#"<head><meta http-equiv="refresh" content="0;url={}">"#, esc(provider_logout)),
        1,
    );
    super::html_response(StatusCode::OK, page)
}

fn failure_text(e: &WireError) -> (StatusCode, &'static str, &'static str) {
    match e.code {
        ErrorCode::Unavailable | ErrorCode::CapacityExceeded => (
            StatusCode::SERVICE_UNAVAILABLE,
            "Baton is busy or restarting",
            "The coordinator did not answer in time. Wait a moment and reload the page.",
        ),
        ErrorCode::NotFound => (
            StatusCode::NOT_FOUND,
            "Execution not found",
            "No execution with this id exists in this project, or it is past the project's retention window.",
        ),
        ErrorCode::PermissionDenied => {
            (StatusCode::FORBIDDEN, "Your key may not do this", "The coordinator refused this request for your key.")
        }
        ErrorCode::InvalidRequest | ErrorCode::InvalidInput => {
            (StatusCode::BAD_REQUEST, "This request is not valid", "Check the address and the filters, then try again.")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong", "Baton could not answer. Try again shortly."),
    }
}

/// A page for a coordinator error.
pub(super) fn failure_page(path: &ProjectPath, e: &WireError) -> Response {
    let (status, title, text) = failure_text(e);
    message_page(path, status, title, text)
}

/// JSON for a coordinator error, for the script.
pub(super) fn failure_json(e: &WireError) -> Response {
    let (status, title, text) = failure_text(e);
    let body = serde_json::json!({"error": {"code": e.code.as_str(), "message": format!("{title}. {text}")}});
    (status, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(http::HeaderName::from_bytes(k.as_bytes()).expect("name"), v.parse().expect("value"));
        }
        h
    }

    /// An API key of project `p` as a coordinator of `release` describes it.
    #[allow(deprecated)]
    fn key(role: Role, release: &str) -> WhoAmIResponse {
        let mut who = WhoAmIResponse {
            kind: PrincipalKind::ApiKey as i32,
            org_id: "o".into(),
            project_id: "p".into(),
            ..Default::default()
        };
        match release {
            // 0.1 spelled the role only.
            "0.1" => who = WhoAmIResponse { role: role.name().into(), ..who },
            _ => who.write_role(role),
        }
        who
    }

    #[test]
    #[allow(deprecated)]
    fn a_role_is_read_from_either_release_and_an_unknown_one_is_refused() {
        let path = ProjectPath { org_id: "o".into(), project_id: "p".into() };
        for release in ["0.1", "today"] {
            let admin = decide(key(Role::Admin, release), &path);
            assert!(matches!(admin, Ok(Access { admin: true, .. })), "{release}");
            let member = decide(key(Role::Member, release), &path);
            assert!(matches!(member, Ok(Access { admin: false, .. })), "{release}");
            for refused in [Role::ReadOnly, Role::Operator] {
                assert!(matches!(decide(key(refused, release), &path), Err(Refusal::ReadOnly)), "{release}");
            }
        }
        // A newer coordinator's role: neither field names one this release knows.
        let newer = WhoAmIResponse { project_role: 42, role: "auditor".into(), ..key(Role::Admin, "today") };
        assert!(matches!(decide(newer, &path), Err(Refusal::ReadOnly)));
    }

    #[test]
    fn requests_from_other_sites_are_told_apart() {
        assert!(same_site(&headers(&[("host", "a:1")])));
        assert!(same_site(&headers(&[("host", "a:1"), ("origin", "http://a:1"), ("sec-fetch-site", "same-origin")])));
        assert!(!same_site(&headers(&[("host", "a:1"), ("origin", "http://evil:1")])));
        assert!(!same_site(&headers(&[("host", "a:1"), ("sec-fetch-site", "cross-site")])));
        assert!(!same_site(&headers(&[("host", "a:1"), ("sec-fetch-site", "same-site")])));
        assert!(!same_site(&headers(&[("origin", "null")])));
        assert!(same_site(&headers(&[("host", "a:1"), ("origin", "null"), ("sec-fetch-site", "same-origin")])));
    }

    #[test]
    fn tls_is_seen_directly_or_through_a_proxy() {
        let plain: http::Uri = "/dashboard/".parse().expect("uri");
        assert!(!is_tls(&HeaderMap::new(), &plain));
        assert!(is_tls(&headers(&[("x-forwarded-proto", "HTTPS")]), &plain));
        assert!(is_tls(&HeaderMap::new(), &"https://h/dashboard/".parse().expect("uri")));
    }
}
