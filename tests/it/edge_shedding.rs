//! Load shedding with honest answers at the gateway: slow clients are cut
//! off, parked waits are bounded per credential, a long poll says why it
//! ended (`timed_out`, `shutdown`), SIGTERM ends parked waits at once, and a
//! bad credential is heard about before a bad request.

use crate::harness::{Cluster, Rest, Settings, eventually};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

/// Generous bound for anything the gateway should do on its own; never a pass criterion.
const PATIENCE: Duration = Duration::from_secs(20);

/// One coordinator, one gateway with `gateway_env`, one worker.
async fn cluster(gateway_env: &[(&str, &str)]) -> Cluster {
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    c.start_coordinator().await.expect("coordinator");
    let env: Vec<(&str, String)> = gateway_env.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    c.start_gateway_with(0, &env).await.expect("gateway");
    c.start_worker(0).await.expect("worker");
    c
}

/// An execution of `rest`'s end user that runs for a minute; its id once it works.
async fn sleeping(rest: &Rest) -> String {
    let body = json!({"gateway_id": rest.gateway_id, "tool_name": "Demo.Sleep", "input": {"seconds": 60}});
    let started = rest.post("/tool-executions", body).await.expect("start");
    assert_eq!(started.status, 202, "{}", started.json());
    let id = started.json()["execution_id"].as_str().expect("id").to_owned();
    eventually(PATIENCE, "working", || async {
        Ok((rest.get(&format!("/tool-executions/{id}")).await?.json()["status"] == "working").then_some(()))
    })
    .await
    .expect("working");
    id
}

async fn long_poll(rest: &Rest, id: &str, wait_ms: u64) -> (u16, Value, Option<String>) {
    let r = rest.get(&format!("/tool-executions/{id}?wait_ms={wait_ms}")).await.expect("long poll");
    let retry = r.headers.get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
    (r.status, r.json(), retry)
}

/// A long poll that, like a good client, comes back after a 429 (the
/// probes of `until_waits_refused` hold a place for a moment).
async fn parked_poll(rest: Rest, id: String, wait_ms: u64) -> (u16, Value, Option<String>) {
    loop {
        let answer = long_poll(&rest, &id, wait_ms).await;
        if answer.0 != 429 {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Until a 1 ms wait of `rest` is refused: then its other waits are parked.
async fn until_waits_refused(rest: &Rest, id: &str) -> (Value, Option<String>) {
    eventually(PATIENCE, "the wait bound to be reached", || async {
        let (status, body, retry) = long_poll(rest, id, 1).await;
        Ok((status == 429).then_some((body, retry)))
    })
    .await
    .expect("refused")
}

/// Reads until the peer closes; what it sent meanwhile.
async fn until_closed(mut tcp: TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    let read = timeout(PATIENCE, async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the gateway kept the connection open; it sent {:?}", String::from_utf8_lossy(&seen));
    seen
}

#[tokio::test]
async fn slow_and_idle_connections_are_closed_and_waits_say_how_they_ended() {
    let c =
        cluster(&[("BATON_GATEWAY__HEADER_READ_TIMEOUT_MS", "500"), ("BATON_GATEWAY__IDLE_TIMEOUT_MS", "500")]).await;
    let addr = c.gateways[0].addr.clone();

    // Slowloris: a request line and part of the headers, then nothing.
    let mut slow = TcpStream::connect(&addr).await.expect("connect");
    slow.write_all(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").await.expect("partial request");
    let sent = until_closed(slow).await;
    assert!(!String::from_utf8_lossy(&sent).contains(" 200 "), "the partial request was not served");

    // A connection that never says anything.
    until_closed(TcpStream::connect(&addr).await.expect("connect")).await;

    // A kept-alive connection is served, then closed once idle.
    let mut idle = TcpStream::connect(&addr).await.expect("connect");
    idle.write_all(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.expect("request");
    let answer = String::from_utf8_lossy(&until_closed(idle).await).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // A request in flight is not idle: a long poll longer than the header
    // timeout runs to its end and says it timed out. Fresh connections only,
    // since the gateway closes idle ones quickly here.
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("client");
    let alice = Rest { http, ..c.rest(0, &c.id.user_token) };
    let id = sleeping(&alice).await;
    let (status, view, _) = long_poll(&alice, &id, 2_000).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!((view["timed_out"].as_bool(), view["shutdown"].as_bool()), (Some(true), Some(false)), "{view}");
    assert_eq!(view["status"], "working");

    // h2c (HTTP/2 with prior knowledge) is told from HTTP/1.1 by its first
    // bytes and served the same, a long poll included.
    let h2 = reqwest::Client::builder().http2_prior_knowledge().build().expect("client");
    let live = h2.get(format!("http://{addr}/livez")).send().await.expect("h2c request");
    assert_eq!((live.status().as_u16(), live.version()), (200, reqwest::Version::HTTP_2));
    let alice_h2 = Rest { http: h2, ..c.rest(0, &c.id.user_token) };
    let (status, view, _) = long_poll(&alice_h2, &id, 1_000).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!((view["timed_out"].as_bool(), view["status"].as_str()), (Some(true), Some("working")), "{view}");

    // A wait that ends because of a change says it did not time out.
    let done = alice.start("Demo.Echo", json!({"text": "hi"}), None).await.expect("start").json();
    let done = done["execution_id"].as_str().expect("id").to_owned();
    alice.until_terminal(&done, PATIENCE).await.expect("terminal");
    let (status, view, _) = long_poll(&alice, &done, 10_000).await;
    assert_eq!(status, 200);
    assert_eq!((view["timed_out"].as_bool(), view["shutdown"].as_bool()), (Some(false), Some(false)), "{view}");
    let (_, plain, _) = long_poll(&alice, &done, 0).await;
    assert_eq!((plain["timed_out"].as_bool(), plain["shutdown"].as_bool()), (Some(false), Some(false)));
}

#[tokio::test]
async fn a_credential_over_its_wait_bound_gets_429_while_others_are_served() {
    let c = cluster(&[("BATON_GATEWAY__MAX_WAITS_PER_PRINCIPAL", "2")]).await;
    let alice = c.rest(0, &c.id.user_token);
    let id = sleeping(&alice).await;
    let parked: Vec<_> =
        (0..2).map(|_| tokio::spawn(parked_poll(c.rest(0, &c.id.user_token), id.clone(), 20_000))).collect();
    let (body, retry) = until_waits_refused(&alice, &id).await;
    assert_eq!(body["error"]["code"], "too_many_waits", "{body}");
    assert_eq!(body["error"]["scope"], "principal");
    assert!(body["error"]["message"].is_string());
    assert!(retry.and_then(|r| r.parse::<u64>().ok()).is_some_and(|s| s >= 1), "Retry-After in seconds");

    // Reads that do not wait are not bounded; other credentials still wait.
    let read = alice.get(&format!("/tool-executions/{id}")).await.expect("read");
    assert_eq!(read.status, 200);
    let bob = c.rest(0, &c.id.other_user_token);
    let theirs = sleeping(&bob).await;
    let (status, view, _) = long_poll(&bob, &theirs, 500).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["timed_out"], true);
    for p in parked {
        p.abort();
    }
}

#[tokio::test]
async fn sigterm_ends_a_parked_long_poll_at_once_saying_so() {
    // A bound of one wait lets the test see when its long poll is parked;
    // header and drain bounds longer than the test's patience show that a
    // connection that never said anything does not hold up the exit.
    let mut c = cluster(&[
        ("BATON_GATEWAY__MAX_WAITS_PER_PRINCIPAL", "1"),
        ("BATON_GATEWAY__HEADER_READ_TIMEOUT_MS", "60000"),
        ("BATON_GATEWAY__DRAIN_TIMEOUT_MS", "60000"),
    ])
    .await;
    let _silent = TcpStream::connect(&c.gateways[0].addr).await.expect("connect");
    let alice = c.rest(0, &c.id.user_token);
    let id = sleeping(&alice).await;
    let began = Instant::now();
    let parked = tokio::spawn(parked_poll(c.rest(0, &c.id.user_token), id.clone(), 30_000));
    until_waits_refused(&alice, &id).await;

    let pid = c.gateways[0].child.id().expect("gateway pid").to_string();
    let kill = tokio::process::Command::new("kill").args(["-TERM", &pid]).status().await.expect("kill");
    assert!(kill.success());
    let (status, view, _) = timeout(Duration::from_secs(30), parked).await.expect("answered").expect("join");
    assert!(began.elapsed() < Duration::from_secs(30), "answered before its own 30 s end");
    assert_eq!(status, 200, "{view}");
    assert_eq!((view["shutdown"].as_bool(), view["timed_out"].as_bool()), (Some(true), Some(false)), "{view}");
    assert_eq!((view["execution_id"].as_str(), view["status"].as_str()), (Some(id.as_str()), Some("working")));

    let exited = timeout(PATIENCE, c.gateways[0].child.wait()).await.expect("the gateway exits").expect("wait");
    assert!(exited.success(), "{exited:?}");
}

#[tokio::test]
async fn a_bad_credential_is_401_before_a_bad_request_is_400() {
    let c = Cluster::single(Settings::default()).await.expect("cluster");
    let good = c.rest(0, &c.id.user_token);
    let bad = c.rest(0, "not-a-token");
    let bad_start = json!({"gateway_id": c.id.gateway_id, "tool_name": 7});
    let cases: [(reqwest::Method, &str, Option<Value>); 5] = [
        (reqwest::Method::POST, "/tool-executions", Some(bad_start)),
        (reqwest::Method::GET, "/tool-executions?limit=0", None),
        (reqwest::Method::GET, "/tool-executions/te_x?wait_ms=soon", None),
        (reqwest::Method::POST, "/tool-executions/te_x/cancel", Some(json!([1]))),
        (reqwest::Method::POST, "/tool-executions/te_x/input", Some(json!({"request_key": 1}))),
    ];
    for (method, path, body) in cases {
        let r = bad.send(method.clone(), path, body.clone(), None).await.expect("bad token");
        assert_eq!(r.status, 401, "{method} {path}: {}", r.json());
        assert_eq!(r.json()["error"]["code"], "unauthenticated");
        let mut anonymous = c.http.request(method.clone(), format!("{}{path}", good.base));
        if let Some(b) = &body {
            anonymous = anonymous.json(b);
        }
        let r = anonymous.send().await.expect("no token");
        assert_eq!(r.status(), 401, "{method} {path} without a token");
        let r = good.send(method.clone(), path, body, None).await.expect("good token");
        assert_eq!(r.status, 400, "{method} {path}: {}", r.json());
        assert_eq!(r.json()["error"]["code"], "invalid_request");
    }
    let long_key = "k".repeat(300);
    let r = bad.start("Demo.Echo", json!({"text": "x"}), Some(&long_key)).await.expect("bad key");
    assert_eq!(r.status, 401);

    // MCP: a malformed message with a bad credential.
    let mcp = format!("http://{}/mcp/{}", c.gateways[0].addr, c.id.gateway_id);
    let garbage = |token: &str| {
        c.http
            .post(&mcp)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body("{not json")
    };
    assert_eq!(garbage("not-a-token").send().await.expect("mcp").status(), 401);
    assert_eq!(garbage(&c.id.user_token).send().await.expect("mcp").status(), 400);

    // The happy path is unchanged.
    let ok = good.start("Demo.Echo", json!({"text": "x"}), None).await.expect("start");
    assert_eq!(ok.status, 202);
}
