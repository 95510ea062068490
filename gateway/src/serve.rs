//! The HTTP server: hyper's HTTP/1.1 and h2c connections over the axum
//! router, with the bounds a public listener needs.
//!
//! - Which protocol a connection speaks is told by peeking at its first
//!   bytes (the HTTP/2 preface or not), so nothing is read before hyper reads
//!   it. hyper-util's auto builder read the first 24 bytes itself and handed
//!   them back in front of the socket; hyper's 8 KiB read buffer then took
//!   those 24 bytes first and had to grow to 16 KiB for the rest of the
//!   request, and an HTTP/1.1 connection keeps that buffer while a long poll
//!   is parked on it: half of a parked poll's memory.
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
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
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

/// Connections the kernel may hold accepted-but-not-yet-taken (capped by
/// `net.core.somaxconn`): a burst of clients opening at once (10,000 waits
/// reconnecting after a deploy) must not find the queue full, or their SYNs
/// are dropped and each connect waits out the retransmits (1 s, then 3 s…).
/// tokio's own default is 1,024.
const ACCEPT_BACKLOG: u32 = 4096;

/// The listener a gateway serves on, with a deep accept queue.
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    // As std's and tokio's own `bind` do: a restarted gateway rebinds at once.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

/// HTTP/2 pings: one after this long without a frame, and the connection is
/// dropped when its answer takes longer than the timeout.
const H2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(20);
const H2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// After an accept error that is not about one connection (out of file
/// descriptors), accepting pauses this long instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) header_read_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request.
    pub(crate) idle_timeout: Duration,
    pub(crate) drain_timeout: Duration,
}

/// Small responses must not wait for the client's delayed ACK (Nagle adds
/// ~40 ms to a response written in two pieces).
pub fn no_delay(tcp: &TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY not set");
    }
}

/// The HTTP/2 connection preface: a connection that opens with it speaks h2c.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// How soon a connection that sent only part of the preface is peeked at again.
const PREFACE_RECHECK: Duration = Duration::from_millis(5);

/// The protocol a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    Http1,
    Http2,
}

/// Tells the connection's protocol from its first bytes, leaving them
/// unread; `None` when it closed first.
async fn sniff(tcp: &TcpStream) -> std::io::Result<Option<Version>> {
    let mut first = [0u8; H2_PREFACE.len()];
    loop {
        let n = tcp.peek(&mut first).await?;
        let seen = &first[..n];
        if n == 0 {
            return Ok(None);
        }
        if !H2_PREFACE.starts_with(seen) {
            return Ok(Some(Version::Http1));
        }
        if n == H2_PREFACE.len() {
            return Ok(Some(Version::Http2));
        }
        // Part of the preface so far (peeking again at once would spin on
        // the same bytes); the caller's timeout bounds the wait.
        tokio::time::sleep(PREFACE_RECHECK).await;
    }
}

/// The connection builders, made once per listener.
struct Builders {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

fn builders(limits: Limits) -> Builders {
    let mut http1 = http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout).keep_alive(true);
    let mut http2 = http2::Builder::new(TokioExecutor::new());
    http2.timer(TokioTimer::new()).keep_alive_interval(H2_KEEPALIVE_INTERVAL).keep_alive_timeout(H2_KEEPALIVE_TIMEOUT);
    Builders { http1, http2 }
}

/// Serves `app` on `listener` until `shutdown`, then drains (see the module).
pub(crate) async fn serve(listener: TcpListener, app: Router, limits: Limits, shutdown: CancellationToken) {
    let builders = Arc::new(builders(limits));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    no_delay(&tcp);
                    let connection = connection(Arc::clone(&builders), tcp, app.clone(), limits, shutdown.clone());
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
async fn connection(builders: Arc<Builders>, tcp: TcpStream, app: Router, limits: Limits, shutdown: CancellationToken) {
    let opened = Instant::now();
    let version = tokio::select! {
        sniffed = tokio::time::timeout(limits.header_read_timeout, sniff(&tcp)) => match sniffed {
            Ok(Ok(Some(version))) => version,
            // Closed, failed, or silent past the header timeout: nothing to serve.
            Ok(Ok(None) | Err(_)) | Err(_) => return,
        },
        // Nothing was asked yet, so nothing is owed: a silent connection
        // must not hold up the drain.
        () = shutdown.cancelled() => return,
    };
    let activity = Arc::new(Activity::new(opened));
    let tracked = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let busy = tracked.begin();
        let app = app.clone();
        async move {
            let response = app.oneshot(request.map(Body::new)).await?;
            Ok::<_, Infallible>(response.map(|body| Body::new(Tracked { body, _busy: busy })))
        }
    });
    let io = TokioIo::new(tcp);
    let watch = Watch { activity, limits, shutdown, opened };
    // Each protocol's connection boxed on its own: inline, every HTTP/1.1
    // connection's task would be laid out for the larger HTTP/2 one too.
    match version {
        // With upgrades: the execution watch is a websocket (`rest::watch`).
        Version::Http1 => {
            let conn = builders.http1.serve_connection(io, service).with_upgrades();
            Box::pin(watch.drive(conn, |c| c.graceful_shutdown())).await;
        }
        Version::Http2 => {
            let conn = builders.http2.serve_connection(io, service);
            Box::pin(watch.drive(conn, |c| c.graceful_shutdown())).await;
        }
    }
}

/// What a connection is watched for while hyper serves it.
struct Watch {
    activity: Arc<Activity>,
    limits: Limits,
    shutdown: CancellationToken,
    opened: Instant,
}

impl Watch {
    /// Runs `conn` to its end, asking it to finish (`graceful`) when it
    /// idles too long or the gateway shuts down.
    async fn drive<C>(self, conn: C, graceful: impl Fn(Pin<&mut C>))
    where
        C: Future<Output = Result<(), hyper::Error>>,
    {
        let Watch { activity, limits, shutdown, opened } = self;
        let idle = |a: &Activity| if a.served_any() { limits.idle_timeout } else { limits.header_read_timeout };
        tokio::pin!(conn);
        let mut closing = false;
        let mut check = opened + limits.header_read_timeout;
        loop {
            tokio::select! {
                served = conn.as_mut() => {
                    if let Err(e) = served {
                        tracing::debug!(error = %e, "connection ended");
                    }
                    return;
                }
                () = shutdown.cancelled(), if !closing => {
                    graceful(conn.as_mut());
                    closing = true;
                }
                () = tokio::time::sleep_until(check), if !closing => match activity.idle_until(idle(&activity)) {
                    Some(deadline) if deadline <= Instant::now() => {
                        tracing::debug!("closing an idle connection");
                        graceful(conn.as_mut());
                        closing = true;
                    }
                    Some(deadline) => check = deadline,
                    None => check = Instant::now() + idle(&activity),
                },
            }
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
    /// A connection opened at `origin`.
    fn new(origin: Instant) -> Self {
        Activity {
            origin,
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
    use tokio::io::AsyncWriteExt;

    /// A loopback connection: the client's end and the accepted one.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).await.expect("connect");
        let (accepted, _) = listener.accept().await.expect("accept");
        (client, accepted)
    }

    #[tokio::test]
    async fn the_protocol_is_told_from_the_first_bytes_without_reading_them() {
        let (mut client, server) = pair().await;
        client.write_all(b"GET /livez HTTP/1.1\r\n").await.expect("write");
        assert_eq!(sniff(&server).await.expect("sniff"), Some(Version::Http1));
        let mut left = [0u8; 4];
        server.peek(&mut left).await.expect("peek");
        assert_eq!(&left, b"GET ", "the bytes are still there for hyper");

        // A preface that arrives in two pieces is waited for.
        let (mut client, server) = pair().await;
        client.write_all(&H2_PREFACE[..9]).await.expect("write");
        let sniffing = tokio::spawn(async move { sniff(&server).await.map(|v| (v, server)) });
        tokio::time::sleep(PREFACE_RECHECK * 4).await;
        assert!(!sniffing.is_finished(), "part of the preface decides nothing");
        client.write_all(&H2_PREFACE[9..]).await.expect("write");
        let (version, _server) = sniffing.await.expect("join").expect("sniff");
        assert_eq!(version, Some(Version::Http2));

        // A client that leaves without a byte.
        let (client, server) = pair().await;
        drop(client);
        assert_eq!(sniff(&server).await.expect("sniff"), None);
    }

    #[tokio::test]
    async fn a_connection_is_idle_only_without_requests() {
        let activity = Arc::new(Activity::new(Instant::now()));
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
