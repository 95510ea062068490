//! Streamable HTTP checks made before any method runs: DNS-rebinding
//! protection, content negotiation, credentials, and the verbs.

use super::*;

fn discover_with(builder: http::request::Builder) -> Request<Body> {
    builder
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", "Bearer alice")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "server/discover")
        .body(modern_body("server/discover", json!({}), false))
        .expect("request")
}

#[tokio::test]
async fn foreign_host_or_origin_is_refused_with_403() {
    let h = harness().await;
    let evil_host = Request::post(URL).header("host", "evil.example.com").header("origin", "http://evil.example.com");
    assert_eq!(h.send(discover_with(evil_host)).await.status, StatusCode::FORBIDDEN);
    let evil_origin = Request::post(URL).header("host", "localhost:3000").header("origin", "http://evil.example.com");
    assert_eq!(h.send(discover_with(evil_origin)).await.status, StatusCode::FORBIDDEN);
    let get = Request::get(URL).header("host", "evil.example.com").body(Body::empty()).expect("get");
    assert_eq!(h.send(get).await.status, StatusCode::FORBIDDEN);
    assert_eq!(h.fake.count(), 0);
}

#[tokio::test]
async fn loopback_and_configured_hosts_are_served() {
    let h = harness_with(|o| o.allowed_hosts = vec!["mcp.example.com".into()]).await;
    for (host, origin) in [
        ("localhost:3000", "http://localhost:3000"),
        ("127.0.0.1:3000", "http://127.0.0.1:3000"),
        ("[::1]:3000", "http://[::1]:3000"),
        ("mcp.example.com", "https://mcp.example.com"),
    ] {
        let a = h.send(discover_with(Request::post(URL).header("host", host).header("origin", origin))).await;
        assert_eq!(a.status, StatusCode::OK, "{host}");
    }
}

#[tokio::test]
async fn content_negotiation_is_enforced() {
    let h = harness().await;
    let body = || modern_body("server/discover", json!({}), false);
    let json_only = Request::post(URL)
        .header("host", "localhost")
        .header("authorization", "Bearer alice")
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(body())
        .expect("request");
    assert_eq!(h.send(json_only).await.status, StatusCode::NOT_ACCEPTABLE);
    let text = Request::post(URL)
        .header("host", "localhost")
        .header("authorization", "Bearer alice")
        .header("content-type", "text/plain")
        .header("accept", "application/json, text/event-stream")
        .body(body())
        .expect("request");
    assert_eq!(h.send(text).await.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let garbage = post("alice").body(Body::from("{not json")).expect("request");
    let a = h.send(garbage).await;
    assert_eq!((a.status, a.error_code()), (StatusCode::BAD_REQUEST, -32700));
}

#[tokio::test]
async fn missing_credentials_are_401_unless_anonymous_is_configured() {
    let h = harness().await;
    let a = h.modern("", "tools/list", json!({}), false).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert_eq!(a.headers["www-authenticate"], "Bearer");
    let a = h.modern("mallory", "tools/list", json!({}), false).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);

    let h = harness_with(|o| o.anonymous_mcp_token = Some("alice".into())).await;
    let a = h.modern("", "tools/call", json!({"name": "echo", "arguments": {"text": "anon"}}), false).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.result()["content"][0]["text"], "echo anon");
    let a = h.modern("mallory", "tools/list", json!({}), false).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "a wrong credential is not replaced by the anonymous one");
}

#[tokio::test]
async fn a_token_of_another_gateway_is_refused() {
    let h = harness().await;
    let a = h.modern("carol", "tools/list", json!({}), false).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn get_offers_no_stream_and_delete_needs_a_session() {
    let h = harness().await;
    let get = Request::get(URL).header("host", "localhost").header("accept", "text/event-stream").body(Body::empty());
    let a = h.send(get.expect("get")).await;
    assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED);
    let delete = Request::delete(URL).header("host", "localhost").body(Body::empty()).expect("delete");
    assert_eq!(h.send(delete).await.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn notifications_are_accepted_with_202() {
    let h = harness().await;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}});
    let request =
        post("alice").header("mcp-protocol-version", "2026-07-28").header("mcp-method", "notifications/progress");
    let a = h.send(request.body(Body::from(note.to_string())).expect("request")).await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
    assert!(a.messages.is_empty());
}

/// Authenticate first, then validate: whatever else is wrong with a request,
/// a missing or invalid credential is what it hears about.
#[tokio::test]
async fn a_bad_credential_is_401_before_any_other_refusal() {
    let h = harness().await;
    for token in ["", "mallory"] {
        let mut bad_accept = Request::post(URL)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .header("accept", "application/json");
        if !token.is_empty() {
            bad_accept = bad_accept.header("authorization", format!("Bearer {token}"));
        }
        let a = h.send(bad_accept.body(modern_body("server/discover", json!({}), false)).expect("request")).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{token:?}: bad Accept");
        let garbage = h.send(post(token).body(Body::from("{not json")).expect("request")).await;
        assert_eq!(garbage.status, StatusCode::UNAUTHORIZED, "{token:?}: bad JSON");
        assert_eq!(garbage.headers["www-authenticate"], "Bearer");
        let mut no_meta = modern_request(token, "tools/list", json!({}), false);
        *no_meta.body_mut() = Body::from(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).to_string());
        let a = h.send(no_meta).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{token:?}: bad envelope");
        assert_eq!(a.body()["id"], 3, "the answer keeps the request's id");
        let a = h.legacy(token, "not-a-session", "tools/list", json!({})).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{token:?}: unknown session");
        let oversized = post(token).body(Body::from(vec![b' '; (1 << 20) + 1])).expect("request");
        assert_eq!(h.send(oversized).await.status, StatusCode::UNAUTHORIZED, "{token:?}: body over the limit");
    }
    // A good credential hears about the real problem.
    let garbage = h.send(post("alice").body(Body::from("{not json")).expect("request")).await;
    assert_eq!((garbage.status, garbage.error_code()), (StatusCode::BAD_REQUEST, -32700));
    let a = h.legacy("alice", "not-a-session", "tools/list", json!({})).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    let oversized = post("alice").body(Body::from(vec![b' '; (1 << 20) + 1])).expect("request");
    assert_eq!(h.send(oversized).await.status, StatusCode::PAYLOAD_TOO_LARGE);
}
