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
use axum::extract::Request;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, header};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

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

/// The layer that answers 401 for unverified refusals (see the module). A
/// layer with a small future of its own rather than a `from_fn` middleware:
/// every parked long poll carries this future while it waits, and the
/// `from_fn` one held the request twice and the refusal's call inline.
#[derive(Clone)]
pub(crate) struct AuthenticateRefusals {
    state: AppState,
}

impl AuthenticateRefusals {
    pub(crate) fn new(state: AppState) -> Self {
        AuthenticateRefusals { state }
    }
}

impl<S> tower::Layer<S> for AuthenticateRefusals {
    type Service = Refusals<S>;

    fn layer(&self, inner: S) -> Refusals<S> {
        Refusals { inner, state: self.state.clone() }
    }
}

#[derive(Clone)]
pub(crate) struct Refusals<S> {
    inner: S,
    state: AppState,
}

/// What an unverified refusal needs to be checked: kept aside, small.
struct Check {
    surface: Surface,
    /// Copied out of the request, so no part of the request's buffer stays
    /// alive with it.
    authorization: Option<HeaderValue>,
    state: AppState,
}

impl Check {
    async fn refuse(self: Box<Self>, response: Response) -> Response {
        let mut headers = HeaderMap::new();
        if let Some(value) = self.authorization {
            headers.insert(header::AUTHORIZATION, value);
        }
        let refusal = match self.surface {
            Surface::Rest => rest::credential_refusal(&self.state, &headers).await,
            Surface::Mcp => mcp::credential_refusal(&self.state, &headers).await,
        };
        refusal.unwrap_or(response)
    }
}

impl<S> tower::Service<Request> for Refusals<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = RefusalsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let check = Surface::of(request.uri().path()).map(|surface| {
            let authorization =
                request.headers().get(header::AUTHORIZATION).and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok());
            Box::new(Check { surface, authorization, state: self.state.clone() })
        });
        RefusalsFuture::Running { inner: self.inner.call(request), check }
    }
}

pin_project_lite::pin_project! {
    #[project = RefusalsProj]
    pub(crate) enum RefusalsFuture<F> {
        Running { #[pin] inner: F, check: Option<Box<Check>> },
        Refusing { refusal: Pin<Box<dyn Future<Output = Response> + Send>> },
    }
}

impl<F> Future for RefusalsFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project() {
                RefusalsProj::Running { inner, check } => {
                    let Ok(response) = std::task::ready!(inner.poll(cx));
                    let Some(check) = check.take() else { return Poll::Ready(Ok(response)) };
                    if response.extensions().get::<Unverified>().is_none() {
                        return Poll::Ready(Ok(response));
                    }
                    let refusal = Box::pin(check.refuse(response));
                    self.set(RefusalsFuture::Refusing { refusal });
                }
                RefusalsProj::Refusing { refusal } => return refusal.as_mut().poll(cx).map(Ok),
            }
        }
    }
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
