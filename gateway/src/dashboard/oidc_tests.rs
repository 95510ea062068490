//! The sign-in flow with an OpenID provider, against the fake coordinator
//! (which scripts the provider's answers by code): the flow cookie binds the
//! callback to this browser, a tampered `state` and a flow from another
//! browser are refused, the coordinator's refusals (a replayed code, an
//! invalid ID token, a person without a grant, the provider down) each get a
//! clear page, and API-key sign-in can be turned off.

use super::oidc::FLOW_COOKIE;
use super::session;
use super::tests::{Answer, get, post, send};
use crate::mcp::tests::{Harness, harness_with};
use http::StatusCode;

const BASE: &str = "/dashboard/orgs/o1/projects/p1";
const CALLBACK: &str = "/dashboard/oidc/callback";

async fn with_oidc(api_key: bool) -> Harness {
    harness_with(|o| {
        o.dashboard_oidc = true;
        o.dashboard_api_key_sign_in = api_key;
    })
    .await
}

/// Starts a sign-in; the flow cookie as the browser sends it back.
async fn started(h: &Harness, base: &str) -> (Answer, String) {
    let a = send(h, get(&format!("{base}/sign-in/oidc?next={base}/tool-executions"), None)).await;
    let cookie = a
        .cookies()
        .into_iter()
        .find(|c| c.starts_with(FLOW_COOKIE))
        .and_then(|c| c.split(';').next())
        .unwrap_or_default()
        .to_owned();
    (a, cookie)
}

#[tokio::test]
async fn a_person_signs_in_through_the_provider() {
    let h = with_oidc(true).await;
    let form = send(&h, get(&format!("{BASE}/sign-in"), None)).await;
    assert!(form.body.contains("/sign-in/oidc?next="), "the form offers the provider");
    assert!(form.body.contains(r#"name="key""#), "and API keys, while they are on");

    let (a, flow) = started(&h, BASE).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert_eq!(a.header(http::header::LOCATION), "http://idp.test/auth?state=st-1");
    let set = a.cookies().join(" | ");
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Lax") && set.contains("Max-Age=600"), "{set}");
    for secret in ["st-1", "n-1", "v-1"] {
        assert!(!flow.contains(secret), "the flow's secrets are sealed");
    }

    let done = send(&h, get(&format!("{CALLBACK}?code=good&state=st-1"), Some(&flow))).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert!(done.body.contains("Signed in as ann@x.org") && done.body.contains("admin"), "{}", done.body);
    assert!(done.body.contains(&format!("url={BASE}/tool-executions")), "moves on to the page asked for");
    let cookies = done.cookies().join(" | ");
    assert!(cookies.contains(&format!("{}=bd1.", session::COOKIE)), "a session cookie: {cookies}");
    assert!(cookies.contains(&format!("{FLOW_COOKIE}=;")), "the flow's cookie is spent: {cookies}");
    assert!(!cookies.contains("bdp_fake"), "the session token is sealed");
}

#[tokio::test]
async fn a_tampered_state_another_browser_and_refusals_get_clear_pages() {
    let h = with_oidc(true).await;
    let (_, flow) = started(&h, BASE).await;
    let cases = [
        (format!("{CALLBACK}?code=good&state=st-2"), Some(flow.as_str()), StatusCode::FORBIDDEN, "was not the one"),
        (format!("{CALLBACK}?code=good"), Some(flow.as_str()), StatusCode::FORBIDDEN, "was not the one"),
        (format!("{CALLBACK}?code=good&state=st-1"), None, StatusCode::BAD_REQUEST, "another browser"),
        (format!("{CALLBACK}?code=used&state=st-1"), Some(flow.as_str()), StatusCode::FORBIDDEN, "already used"),
        (
            format!("{CALLBACK}?code=forged&state=st-1"),
            Some(flow.as_str()),
            StatusCode::FORBIDDEN,
            "could not be trusted",
        ),
        (
            format!("{CALLBACK}?code=nobody&state=st-1"),
            Some(flow.as_str()),
            StatusCode::FORBIDDEN,
            "no role in this project",
        ),
        (
            format!("{CALLBACK}?error=access_denied&state=st-1"),
            Some(flow.as_str()),
            StatusCode::FORBIDDEN,
            "access_denied",
        ),
    ];
    for (uri, cookie, status, says) in cases {
        let a = send(&h, get(&uri, cookie)).await;
        assert_eq!(a.status, status, "{uri}: {}", a.body);
        assert!(a.body.contains(says), "{uri}: {}", a.body);
        assert!(!a.cookies().iter().any(|c| c.starts_with(&format!("{}=bd1.", session::COOKIE))), "{uri}: no session");
        if says == "no role in this project" {
            // A person is offered another account of the provider, not another key.
            assert!(a.body.contains("Sign in with another account"), "{}", a.body);
            assert!(a.body.contains(&format!(r#"href="{BASE}/sign-in/oidc?account=another""#)), "{}", a.body);
            assert!(!a.body.contains("another key"), "{}", a.body);
        }
    }
    // Choosing another account: the provider is asked to authenticate again.
    let other = send(&h, get(&format!("{BASE}/sign-in/oidc?account=another"), None)).await;
    assert_eq!(other.header(http::header::LOCATION), "http://idp.test/auth?state=st-1&prompt=login");
    // A flow cookie sealed by another gateway key is no flow.
    let foreign = format!("{FLOW_COOKIE}={}", session::seal_value(&[1u8; 32], b"x", &"x").expect("seal"));
    let a = send(&h, get(&format!("{CALLBACK}?code=good&state=st-1"), Some(&foreign))).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    // The provider down: sign-in says so.
    let (down, _) = started(&h, "/dashboard/orgs/o1/projects/down").await;
    assert_eq!(down.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(down.body.contains("did not answer"), "{}", down.body);
}

#[tokio::test]
async fn api_key_sign_in_can_be_turned_off_and_the_provider_is_off_by_default() {
    let h = with_oidc(false).await;
    let form = send(&h, get(&format!("{BASE}/sign-in"), None)).await;
    assert!(!form.body.contains(r#"name="key""#), "no key field");
    let a = send(&h, post(&format!("{BASE}/sign-in"), None, "key=k&csrf=c&next=", None)).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(a.body.contains("turned off"), "{}", a.body);

    let plain = crate::mcp::tests::harness().await;
    let form = send(&plain, get(&format!("{BASE}/sign-in"), None)).await;
    assert!(!form.body.contains("/sign-in/oidc"), "no provider button unless configured");
    let a = send(&plain, get(&format!("{BASE}/sign-in/oidc"), None)).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_long_return_address_falls_back_to_the_list() {
    let h = with_oidc(true).await;
    let long = format!("{BASE}/tool-executions?tool_name={}", "x".repeat(600));
    let a = send(&h, get(&format!("{BASE}/sign-in/oidc?next={long}"), None)).await;
    let flow = a
        .cookies()
        .into_iter()
        .find(|c| c.starts_with(FLOW_COOKIE))
        .and_then(|c| c.split(';').next())
        .unwrap_or_default()
        .to_owned();
    assert!(flow.len() < 1024, "the flow cookie stays small: {}", flow.len());
    let done = send(&h, get(&format!("{CALLBACK}?code=good&state=st-1"), Some(&flow))).await;
    assert_eq!(done.status, StatusCode::OK);
    assert!(done.body.contains(&format!(r#"url={BASE}/tool-executions">"#)), "{}", done.body);
}

#[tokio::test]
async fn a_person_signing_out_is_sent_to_end_the_session_at_the_provider() {
    let h = with_oidc(true).await;
    let (_, flow) = started(&h, BASE).await;
    let done = send(&h, get(&format!("{CALLBACK}?code=good&state=st-1"), Some(&flow))).await;
    let cookie = done
        .cookies()
        .into_iter()
        .find(|c| c.starts_with(&format!("{}=bd1.", session::COOKIE)))
        .and_then(|c| c.split(';').next())
        .unwrap_or_default()
        .to_owned();
    let sealed = cookie.split_once('=').map(|(_, v)| v).unwrap_or_default();
    let claims = session::open(&[42u8; 32], sealed, baton_proto::clock::now_ms()).expect("the session cookie opens");
    assert_eq!(claims.session, "bdp_fake");
    let out = send(&h, post(&format!("{BASE}/sign-out"), Some(&cookie), &format!("csrf={}", claims.csrf), None)).await;
    assert_eq!(out.status, StatusCode::OK);
    assert!(out.body.contains(r#"content="0;url=http://idp.test/session/end?client_id=baton""#), "{}", out.body);
    assert!(out.body.contains("You are signed out"));
    assert!(out.cookies().iter().any(|c| c.starts_with(&format!("{}=;", session::COOKIE))), "the cookie is cleared");
}
