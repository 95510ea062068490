//! Authenticate first, then validate. A request the gateway refused as
//! malformed before any coordinator call (its response is marked
//! [`Unverified`]) is answered 401 instead when its credential is missing or
//! invalid, so nobody without a valid credential learns what the gateway
//! accepts. Only that error path asks the coordinator (`WhoAmI`); requests
//! the gateway forwards are authenticated by the call itself, so the happy
//! path makes no extra round trip. MCP handlers do the same for their own
//! refusals, which need the JSON-RPC id; this layer covers the framework's.

use crate::app::AppState;
use crate::error::Unverified;
use crate::{mcp, rest};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderMap, header};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Surface {
    Rest,
    Mcp,
}

impl Surface {
    fn of(path: &str) -> Option<Surface> {
        if path.starts_with("/v1/orgs/") {
            Some(Surface::Rest)
        } else if path.starts_with("/mcp/") {
            Some(Surface::Mcp)
        } else {
            None
        }
    }
}

pub async fn authenticate_refusals(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(surface) = Surface::of(request.uri().path()) else {
        return next.run(request).await;
    };
    let authorization = request.headers().get(header::AUTHORIZATION).cloned();
    let response = next.run(request).await;
    if response.extensions().get::<Unverified>().is_none() {
        return response;
    }
    let mut headers = HeaderMap::new();
    if let Some(value) = authorization {
        headers.insert(header::AUTHORIZATION, value);
    }
    let refusal = match surface {
        Surface::Rest => rest::credential_refusal(&state, &headers).await,
        Surface::Mcp => mcp::credential_refusal(&state, &headers).await,
    };
    refusal.unwrap_or(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tests::harness;
    use axum::body::Body;
    use http::StatusCode;

    const START: &str = "/v1/orgs/org1/projects/proj1/tool-executions";

    fn start(token: Option<&str>, body: impl Into<Body>) -> http::Request<Body> {
        let mut builder = http::Request::post(START).header("content-type", "application/json");
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        builder.body(body.into()).expect("request")
    }

    #[tokio::test]
    async fn rest_refusals_hear_about_the_credential_first() {
        let h = harness().await;
        for token in [None, Some("mallory")] {
            let a = h.send(start(token, r#"{"tool_name": 7}"#)).await;
            assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{token:?}: bad body");
            assert_eq!(a.body()["error"]["code"], "unauthenticated");
            let a = h.send(start(token, vec![b' '; (1 << 20) + 1])).await;
            assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{token:?}: body over the limit");
        }
        let a = h.send(start(Some("alice"), r#"{"tool_name": 7}"#)).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST);
        assert!(a.body()["error"]["message"].as_str().is_some_and(|m| m.contains("gateway_id")));
        let a = h.send(start(Some("alice"), vec![b' '; (1 << 20) + 1])).await;
        assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(h.fake.count(), 0, "nothing started");
        let ok = h.send(start(Some("alice"), r#"{"gateway_id": "gw1", "tool_name": "echo"}"#)).await;
        assert_eq!(ok.status, StatusCode::ACCEPTED);
    }

    #[test]
    fn surfaces_are_told_apart_by_path() {
        assert_eq!(Surface::of("/v1/orgs/o/projects/p/tool-executions"), Some(Surface::Rest));
        assert_eq!(Surface::of("/mcp/gw1"), Some(Surface::Mcp));
        assert_eq!(Surface::of("/v1/openapi.json"), None);
        assert_eq!(Surface::of("/readyz"), None);
    }
}
