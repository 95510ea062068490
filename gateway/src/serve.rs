//! The HTTP server: hyper-util's auto connection builder (HTTP/1.1 and h2c)
//! over the axum router, with the bounds a public listener needs.
//!
//! - A connection must bring a request within `header_read_timeout`, and one
//!   with no request in flight for that long is closed: a slowloris client
//!   that never finishes its request line or headers, or opens connections
//!   and sends nothing, holds a socket for that long at most. HTTP/1 also has
//!   hyper's own header-read timer, which runs while a head arrives and while
//!   a kept-alive connection waits for the next one.
//! - HTTP/2 connections are pinged, so a dead peer is noticed.
//! - TCP_NODELAY on every accepted socket.
//! - On shutdown the listener closes at once, every connection is told to
//!   finish (HTTP/1 closes after the response in flight, HTTP/2 sends
//!   GOAWAY), long polls answer at once on their own (`AppState::shutdown`),
//!   and whatever is still open after `drain_timeout` is dropped.

use axum::Router;
use axum::body::{Body, Bytes};
use http::Request;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// HTTP/2 pings: one after this long without a frame, and the connection is
/// dropped when its answer takes longer than the timeout.
const H2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(20);
const H2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// After an accept error that is not about one connection (out of file
/// descriptors), accepting pauses this long instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub header_read_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    pub drain_timeout: Duration,
}

/// Small responses must not wait for the client's delayed ACK (Nagle adds
/// ~40 ms to a response written in two pieces).
pub fn no_delay(tcp: &TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY not set");
    }
}

fn builder(limits: Limits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout).keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(H2_KEEPALIVE_INTERVAL)
        .keep_alive_timeout(H2_KEEPALIVE_TIMEOUT);
    builder
}

/// Serves `app` on `listener` until `shutdown`, then drains (see the module).
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, shutdown: CancellationToken) {
    let builder = Arc::new(builder(limits));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    no_delay(&tcp);
                    let connection = connection(Arc::clone(&builder), tcp, app.clone(), limits, shutdown.clone());
                    connections.spawn(connection);
                }
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            Some(ended) = connections.join_next(), if !connections.is_empty() => report(ended),
        }
    }
    drop(listener);
    let open = connections.len();
    let drained = tokio::time::timeout(limits.drain_timeout, async {
        while let Some(ended) = connections.join_next().await {
            report(ended);
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            of = open,
            "connections still open when the drain timeout passed; dropping them"
        );
        connections.shutdown().await;
    }
}

/// Errors about the one connection being accepted; the listener is fine.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset)
}

fn report(ended: Result<(), JoinError>) {
    if let Err(e) = ended
        && e.is_panic()
    {
        tracing::error!(error = %e, "an HTTP connection task panicked");
    }
}

/// Serves one connection: closes it when it brings no request within
/// `header_read_timeout` of opening, or idles for `idle_timeout` between
/// requests, and finishes it gracefully on shutdown.
async fn connection(
    builder: Arc<Builder<TokioExecutor>>,
    tcp: TcpStream,
    app: Router,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let idle = |a: &Activity| if a.served_any() { limits.idle_timeout } else { limits.header_read_timeout };
    let activity = Arc::new(Activity::new());
    let tracked = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let busy = tracked.begin();
        let app = app.clone();
        async move {
            let response = app.oneshot(request.map(Body::new)).await?;
            Ok::<_, Infallible>(response.map(|body| Body::new(Tracked { body, _busy: busy })))
        }
    });
    // With upgrades: the execution watch is a websocket (`rest::watch`).
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
    tokio::pin!(conn);
    let mut closing = false;
    let mut check = Instant::now() + limits.header_read_timeout;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(error = %e, "connection ended");
                }
                return;
            }
            () = shutdown.cancelled(), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            () = tokio::time::sleep_until(check), if !closing => match activity.idle_until(idle(&activity)) {
                Some(deadline) if deadline <= Instant::now() => {
                    tracing::debug!("closing an idle connection");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
                Some(deadline) => check = deadline,
                None => check = Instant::now() + idle(&activity),
            },
        }
    }
}

/// Requests in flight on one connection, and since when it has had none.
struct Activity {
    origin: Instant,
    in_flight: AtomicUsize,
    /// Requests begun on this connection, ever.
    begun: AtomicUsize,
    /// Milliseconds after `origin` when the last request ended.
    idle_since_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            origin: Instant::now(),
            in_flight: AtomicUsize::new(0),
            begun: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
        }
    }

    fn served_any(&self) -> bool {
        self.begun.load(Ordering::SeqCst) > 0
    }

    fn begin(self: &Arc<Self>) -> Busy {
        self.begun.fetch_add(1, Ordering::SeqCst);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(self))
    }

    /// When the connection will have idled for `idle`; `None` while busy.
    fn idle_until(&self, idle: Duration) -> Option<Instant> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        Some(self.origin + Duration::from_millis(self.idle_since_ms.load(Ordering::SeqCst)) + idle)
    }
}

/// One request in flight, until its response body is finished or dropped.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        let activity = &self.0;
        let now = u64::try_from(activity.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        activity.idle_since_ms.store(now, Ordering::SeqCst);
        activity.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request counted as in flight.
struct Tracked {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_connection_is_idle_only_without_requests() {
        let activity = Arc::new(Activity::new());
        let idle = Duration::from_secs(10);
        assert!(activity.idle_until(idle).is_some(), "idle before its first request");
        let first = activity.begin();
        let second = activity.begin();
        assert_eq!(activity.idle_until(idle), None);
        drop(first);
        assert_eq!(activity.idle_until(idle), None, "one request is still in flight");
        drop(second);
        let until = activity.idle_until(idle).expect("idle again");
        assert!(until >= Instant::now() + idle - Duration::from_millis(50));
    }
}
