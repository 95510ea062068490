//! Router-level tests of what the gateway decides alone, before any
//! coordinator call: security headers, sign-in redirects, the sign-in form's
//! double-submit token, CSRF on state-changing requests, sealed cookies from
//! another key. (Key checks against a real coordinator: tests/it/dashboard.rs.)

use super::session::{self, Claims};
use crate::mcp::tests::Harness;
use axum::body::Body;
use http::{Request, StatusCode, header};
use tower::ServiceExt;

const BASE: &str = "/dashboard/orgs/o1/projects/p1";
/// The harness gateway's session key.
const KEY: [u8; 32] = [42u8; 32];

/// The gateway's router against the MCP tests' fake coordinator, which knows
/// `alice`, `bob` and `carol` as end users and refuses every other token.
async fn harness() -> Harness {
    crate::mcp::tests::harness().await
}

pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) headers: http::HeaderMap,
    pub(super) body: String,
}

impl Answer {
    pub(super) fn header(&self, name: header::HeaderName) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }

    pub(super) fn cookies(&self) -> Vec<&str> {
        self.headers.get_all(header::SET_COOKIE).iter().filter_map(|v| v.to_str().ok()).collect()
    }
}

pub(super) async fn send(h: &Harness, request: Request<Body>) -> Answer {
    let response = h.app.clone().oneshot(request).await.expect("router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
    Answer { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
}

pub(super) fn get(uri: &str, cookie: Option<&str>) -> Request<Body> {
    let mut b = Request::get(uri).header(header::HOST, "gw");
    if let Some(c) = cookie {
        b = b.header(header::COOKIE, c);
    }
    b.body(Body::empty()).expect("request")
}

pub(super) fn post(uri: &str, cookie: Option<&str>, form: &str, origin: Option<&str>) -> Request<Body> {
    let mut b =
        Request::post(uri).header(header::HOST, "gw").header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(c) = cookie {
        b = b.header(header::COOKIE, c);
    }
    if let Some(o) = origin {
        b = b.header(header::ORIGIN, o);
    }
    b.body(Body::from(form.to_owned())).expect("request")
}

fn session_cookie(key: &[u8; 32], project: &str, csrf: &str) -> String {
    session_with(key, "bds_key", project, csrf)
}

fn session_with(key: &[u8; 32], token: &str, project: &str, csrf: &str) -> String {
    let claims = Claims {
        session: token.into(),
        org_id: "o1".into(),
        project_id: project.into(),
        csrf: csrf.into(),
        expires_ms: baton_proto::clock::now_ms() + 60_000,
        person: token.starts_with("bdp_"),
    };
    format!("{}={}", session::COOKIE, session::seal(key, &claims).expect("seal"))
}

#[tokio::test]
async fn pages_carry_the_security_headers_and_no_store() {
    let h = harness().await;
    let a = send(&h, get(&format!("{BASE}/sign-in"), None)).await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.header(header::CONTENT_TYPE).starts_with("text/html"));
    let csp = a.header(header::CONTENT_SECURITY_POLICY);
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(a.header(header::X_FRAME_OPTIONS), "DENY");
    assert_eq!(a.header(header::CACHE_CONTROL), "no-store");
    assert_eq!(a.header(header::REFERRER_POLICY), "same-origin");
    assert!(!a.body.contains("<script>") && !a.body.contains("style="), "no inline script or style");
    let form_cookie = a.cookies().into_iter().find(|c| c.starts_with(session::SIGN_IN_COOKIE)).expect("form cookie");
    assert!(form_cookie.contains("HttpOnly") && form_cookie.contains("SameSite=Strict"), "{form_cookie}");
    let js = send(&h, get(&super::assets::url("dashboard.js"), None)).await;
    assert_eq!(js.status, StatusCode::OK);
    assert!(js.header(header::CONTENT_TYPE).starts_with("text/javascript"));
    assert_eq!(send(&h, get("/dashboard/assets/nope.js", None)).await.status, StatusCode::NOT_FOUND);
    // The REST surface keeps its JSON errors beside the dashboard's HTML ones.
    let api = send(&h, get("/v1/nope", None)).await;
    assert_eq!(api.status, StatusCode::NOT_FOUND);
    assert!(api.header(header::CONTENT_TYPE).starts_with("application/json"), "{}", api.body);
    let page = send(&h, get("/dashboard/nope", None)).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(page.header(header::CONTENT_TYPE).starts_with("text/html"));
}

#[tokio::test]
async fn the_audit_log_needs_a_session_of_the_project() {
    let h = harness().await;
    for cookie in [None, Some(session_cookie(&KEY, "p2", "t")), Some(session_cookie(&[7u8; 32], "p1", "t"))] {
        let a = send(&h, get(&format!("{BASE}/audit-log?action=history.reveal"), cookie.as_deref())).await;
        assert_eq!(a.status, StatusCode::SEE_OTHER, "{cookie:?}");
        assert_eq!(
            a.header(header::LOCATION),
            format!(
                "{BASE}/sign-in?next=%2Fdashboard%2Forgs%2Fo1%2Fprojects%2Fp1%2Faudit-log%3Faction%3Dhistory.reveal"
            )
        );
    }
    // A session whose key was revoked ends; an end user's token is refused, and offered another key.
    let a = send(&h, get(&format!("{BASE}/audit-log"), Some(&session_cookie(&KEY, "p1", "t")))).await;
    assert!(a.header(header::LOCATION).ends_with("&ended=1"), "{}", a.header(header::LOCATION));
    let a = send(&h, get(&format!("{BASE}/audit-log"), Some(&session_with(&KEY, "alice", "p1", "t")))).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(a.body.contains("End-user tokens cannot open the dashboard"), "{}", a.body);
    assert!(a.body.contains("Sign in with another key") && !a.body.contains("another account"), "{}", a.body);
}

#[tokio::test]
async fn without_a_session_of_this_project_pages_send_people_to_sign_in() {
    let h = harness().await;
    let list = format!("{BASE}/tool-executions?tool_name=Demo.Fail");
    let expected = format!(
        "{BASE}/sign-in?next=%2Fdashboard%2Forgs%2Fo1%2Fprojects%2Fp1%2Ftool-executions%3Ftool_name%3DDemo.Fail"
    );
    for cookie in [
        None,
        Some(session_cookie(&[7u8; 32], "p1", "t")), // sealed by another gateway key
        Some(session_cookie(&KEY, "p2", "t")),       // another project's session
        Some(format!("{}=bd1.garbage", session::COOKIE)), // tampered
    ] {
        let a = send(&h, get(&list, cookie.as_deref())).await;
        assert_eq!(a.status, StatusCode::SEE_OTHER, "{cookie:?}");
        assert_eq!(a.header(header::LOCATION), expected, "{cookie:?}");
    }
    let live = send(&h, get(&format!("{BASE}/tool-executions/live"), None)).await;
    assert_eq!(live.status, StatusCode::UNAUTHORIZED, "the script's polls answer JSON");
    assert!(live.body.contains("signed_out"));
}

#[tokio::test]
async fn the_sign_in_form_needs_its_own_token_and_this_site() {
    let h = harness().await;
    let form = send(&h, get(&format!("{BASE}/sign-in"), None)).await;
    let cookie = form.cookies().into_iter().find(|c| c.starts_with(session::SIGN_IN_COOKIE)).expect("cookie");
    let token = cookie.split(';').next().and_then(|kv| kv.split_once('=')).map(|(_, v)| v.to_owned()).expect("token");
    let sign_in = format!("{BASE}/sign-in");
    let jar = format!("{}={token}", session::SIGN_IN_COOKIE);
    for (cookie, form, origin) in [
        (None, format!("key=bk_x&csrf={token}"), None),
        (Some(jar.as_str()), "key=bk_x&csrf=other".to_owned(), None),
        (Some(jar.as_str()), format!("key=bk_x&csrf={token}"), Some("http://evil.example")),
    ] {
        let a = send(&h, post(&sign_in, cookie, &form, origin)).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{cookie:?} {form} {origin:?}");
        assert!(a.body.contains("expired or came from another site"));
        assert!(a.cookies().iter().all(|c| !c.starts_with(&format!("{}=", session::COOKIE))), "no session");
    }
    // With the right token the key goes to the coordinator, which decides.
    let a = send(&h, post(&sign_in, Some(&jar), &format!("key=bk_x&csrf={token}"), Some("http://gw"))).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}", a.body);
    assert!(a.body.contains("does not recognise this key"), "{}", a.body);
    assert!(a.cookies().iter().all(|c| !c.starts_with(&format!("{}=", session::COOKIE))));
    let a = send(&h, post(&sign_in, Some(&jar), &format!("key=alice&csrf={token}"), None)).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.body);
    assert!(a.body.contains("End-user tokens cannot open the dashboard"), "{}", a.body);
    assert!(a.cookies().iter().all(|c| !c.starts_with(&format!("{}=b", session::COOKIE))), "no session");
}

#[tokio::test]
async fn a_session_whose_key_no_longer_passes_ends_at_once() {
    let h = harness().await;
    let list = format!("{BASE}/tool-executions");
    // The fake knows no `bds_key`: as if it was signed out elsewhere, or its key revoked.
    let a = send(&h, get(&list, Some(&session_cookie(&KEY, "p1", "t")))).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert!(a.header(header::LOCATION).ends_with("&ended=1"), "{}", a.header(header::LOCATION));
    assert!(a.cookies().iter().any(|c| c.starts_with(&format!("{}=;", session::COOKIE))), "the cookie is cleared");
    // An end user's token inside a session (never admitted at sign-in) is still refused.
    let a = send(&h, get(&list, Some(&session_with(&KEY, "alice", "p1", "t")))).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(a.body.contains("End-user tokens cannot open the dashboard"));
}

#[tokio::test]
async fn state_changing_requests_need_the_session_token() {
    let h = harness().await;
    let cookie = session_cookie(&KEY, "p1", "right-token");
    let id = "te_000000000000000000000000000";
    for path in [format!("{BASE}/tool-executions/{id}/cancel"), format!("{BASE}/sign-out")] {
        for (form, origin) in [("csrf=wrong-token", None), ("csrf=right-token", Some("http://evil.example"))] {
            let a = send(&h, post(&path, Some(&cookie), form, origin)).await;
            assert_eq!(a.status, StatusCode::FORBIDDEN, "{path} {form} {origin:?}");
            assert!(a.body.contains("was not sent from the dashboard"), "{}", a.body);
        }
    }
    let reveal = send(
        &h,
        post(&format!("{BASE}/tool-executions/{id}/reveal"), Some(&cookie), "csrf=wrong-token&part=inputs", None),
    )
    .await;
    assert_eq!(reveal.status, StatusCode::FORBIDDEN);
    assert!(reveal.body.contains("forged"));
    // Signing out with the token ends the session with the coordinator and clears the cookie.
    let out = send(&h, post(&format!("{BASE}/sign-out"), Some(&cookie), "csrf=right-token", Some("http://gw"))).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(out.cookies().iter().any(|c| c.starts_with(&format!("{}=;", session::COOKIE)) && c.contains("Max-Age=0")));
}
