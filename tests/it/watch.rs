//! Push delivery of one execution through real processes: a websocket watch
//! (`?delivery=websocket|any`) with a single-use URL, a connect deadline and a
//! `wait_id` polling fallback; wait answers that say why they ended
//! (`timed_out`, `shutdown`) on REST and on the compatibility tool; configured
//! limits refused rather than clamped; foreign and revoked callers refused.
//! (Declared as `execution_watch`: `chaos::watch` is the chaos suite's own.)

use crate::harness::{Cluster, Rest, Settings, eventually};
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::time::{Instant, timeout};
use tokio_tungstenite::tungstenite::{self, Message};

/// The key two gateway replicas share, so a watch URL of one opens on the other.
const SHARED_KEY: (&str, &str) = ("BATON_SECURITY__MCP_SESSION_KEY", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");

/// Generous bound for anything the system should do on its own; never a pass criterion.
const PATIENCE: Duration = Duration::from_secs(30);

/// One coordinator, one gateway with `gateway_env`, one worker.
async fn cluster(gateway_env: &[(&str, &str)]) -> Cluster {
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    c.start_coordinator().await.expect("coordinator");
    let env: Vec<(&str, String)> = gateway_env.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    c.start_gateway_with(0, &env).await.expect("gateway");
    c.start_worker(0).await.expect("worker");
    c
}

fn id_of(reply: &Value) -> String {
    reply["execution_id"].as_str().expect("execution_id").to_owned()
}

/// A Demo.Sleep of `seconds`, once it is working.
async fn sleeping(rest: &Rest, seconds: u64) -> String {
    let started = rest.start("Demo.Sleep", json!({"seconds": seconds}), None).await.expect("start");
    assert_eq!(started.status, 202, "{}", started.json());
    let id = id_of(&started.json());
    eventually(PATIENCE, "working", || async {
        Ok((rest.get(&format!("/tool-executions/{id}")).await?.json()["status"] == "working").then_some(()))
    })
    .await
    .expect("working");
    id
}

/// Asks for a watch of `id`; the whole answer.
async fn offer(rest: &Rest, id: &str, query: &str) -> Value {
    let r = rest.get(&format!("/tool-executions/{id}?{query}")).await.expect("offer");
    assert_eq!(r.status, 200, "{query}: {}", r.json());
    r.json()
}

/// What a refused websocket handshake answered: status and JSON body.
async fn refused(url: &str) -> (u16, Value) {
    match tokio_tungstenite::connect_async(url).await {
        Ok(_) => panic!("the socket opened"),
        Err(tungstenite::Error::Http(response)) => {
            let body = response.body().as_deref().and_then(|b| serde_json::from_slice(b).ok());
            (response.status().as_u16(), body.unwrap_or(Value::Null))
        }
        Err(e) => panic!("not an HTTP refusal: {e}"),
    }
}

/// Every message of a socket until the server closes it, and the close code.
async fn messages_until_closed(url: &str) -> (Vec<Value>, Option<u16>) {
    let (socket, _) = tokio_tungstenite::connect_async(url).await.expect("socket opens");
    until_closed(socket).await
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Every message of an open socket until the server closes it, and the close code.
async fn until_closed(mut socket: Socket) -> (Vec<Value>, Option<u16>) {
    let mut seen = Vec::new();
    let closed = timeout(PATIENCE, async {
        while let Some(frame) = socket.next().await {
            match frame.expect("frame") {
                Message::Text(text) => seen.push(serde_json::from_str(text.as_str()).expect("JSON message")),
                Message::Close(frame) => return frame.map(|f| u16::from(f.code)),
                _ => {}
            }
        }
        None
    })
    .await
    .expect("the server ends the watch");
    (seen, closed)
}

fn kinds(messages: &[Value]) -> Vec<&str> {
    messages.iter().map(|m| m["type"].as_str().unwrap_or_default()).collect()
}

/// An MCP `tools/call` (2026-07-28, stateless) of the compatibility tool `Baton_GetToolExecution`.
async fn compat_get(c: &Cluster, token: &str, arguments: Value) -> Value {
    let to = (c.http.clone(), c.gateways[0].addr.clone(), c.id.gateway_id.clone(), token.to_owned());
    compat_get_with(to, arguments).await
}

/// As [`compat_get`], to (client, gateway address, gateway id, token). Like a
/// good client it comes back after a `too_many_waits` refusal (a probe of the
/// test may hold a place for a moment).
async fn compat_get_with(to: (reqwest::Client, String, String, String), arguments: Value) -> Value {
    loop {
        let answer = compat_message(&to, &arguments).await;
        if answer["error"]["data"]["code"] == "too_many_waits" {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let result = answer.get("result").cloned();
        return result.unwrap_or_else(|| panic!("tools/call answered {answer}"));
    }
}

/// The JSON-RPC answer to one `tools/call` of `Baton_GetToolExecution`.
async fn compat_message(to: &(reqwest::Client, String, String, String), arguments: &Value) -> Value {
    let (http, addr, gateway_id, token) = to;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "baton-it-watch", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let tool = "Baton_GetToolExecution";
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta}});
    let text = http
        .post(format!("http://{addr}/mcp/{gateway_id}"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .send()
        .await
        .expect("mcp")
        .text()
        .await
        .expect("mcp body");
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .chain(std::iter::once(text.trim()))
        .find_map(|d| serde_json::from_str::<Value>(d).ok().filter(|v| v["id"] == 9))
        .unwrap_or_else(|| panic!("tools/call answered {text}"))
}

/// A member API key of the project, not yet revoked: (id, token).
async fn member_key(c: &Cluster) -> (String, String) {
    let key = c.admin(&["create-api-key", "--project", &c.id.project_id, "--role", "member"]).await.expect("key");
    (key["id"].as_str().expect("id").to_owned(), key["token"].as_str().expect("token").to_owned())
}

#[tokio::test]
async fn a_watch_socket_streams_to_terminal_once_on_any_replica_and_its_wait_id_polls() {
    let mut c = cluster(&[SHARED_KEY]).await;
    c.start_gateway_with(0, &[(SHARED_KEY.0, SHARED_KEY.1.to_owned())]).await.expect("second gateway");
    let alice = c.rest(0, &c.id.user_token);
    let started = alice.start("Demo.Sleep", json!({"seconds": 2}), None).await.expect("start");
    let id = id_of(&started.json());

    let watch = offer(&alice, &id, "delivery=websocket&timeout_seconds=60").await;
    assert_eq!((watch["execution_id"].as_str(), watch["delivery"].as_str()), (Some(id.as_str()), Some("websocket")));
    let url = watch["websocket_url"].as_str().expect("websocket_url").to_owned();
    assert!(url.starts_with(&format!("ws://{}/v1/watch?token=", c.gateways[0].addr)), "{url}");
    assert!(!url.contains(&c.id.user_token), "the credential travels sealed");
    assert!(watch["connect_deadline"].is_string() && watch["wait_id"].is_string(), "{watch}");
    assert_eq!(watch["timeout_seconds"], 60);
    assert!(watch["wait_expires_at"].as_str() >= watch["watch_expires_at"].as_str(), "{watch}");

    // Without Upgrade (a proxy that strips it) the route says so, and the token stays unused.
    let plain = url.replacen("ws://", "http://", 1);
    let stripped = c.http.get(&plain).send().await.expect("plain GET");
    assert_eq!(stripped.status(), 400);
    let body: Value = stripped.json().await.expect("json");
    assert_eq!(
        (body["error"]["code"].as_str(), body["error"]["reason"].as_str()),
        (Some("invalid_request"), Some("upgrade_required"))
    );

    // The socket, opened on the other replica: the view as it stands, every
    // status change, the end.
    let elsewhere = url.replacen(&c.gateways[0].addr, &c.gateways[1].addr, 1);
    let (messages, close) = messages_until_closed(&elsewhere).await;
    let statuses: Vec<&str> = messages
        .iter()
        .filter(|m| m["type"] == "execution")
        .filter_map(|m| m["execution"]["status"].as_str())
        .collect();
    assert_eq!(statuses.last(), Some(&"completed"), "{messages:?}");
    assert!(statuses.windows(2).all(|w| w[0] != w[1]), "one message per status change: {statuses:?}");
    assert!(statuses.len() >= 2, "it saw the execution before it ended: {statuses:?}");
    let end = messages.last().expect("an end message");
    assert_eq!((end["type"].as_str(), end["reason"].as_str()), (Some("end"), Some("terminal")), "{end}");
    assert_eq!((end["timed_out"].as_bool(), end["shutdown"].as_bool()), (Some(false), Some(false)));
    assert_eq!(close, Some(1000));
    assert!(messages.iter().all(|m| m["execution"].get("result").is_none()), "the owner view has no payload");

    // Single use, on every replica.
    let (status, body) = refused(&url).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["reason"], "token_used");
    let (status, body) = refused(&format!("ws://{}/v1/watch?token=bw1.forged", c.gateways[0].addr)).await;
    assert_eq!((status, body["error"]["reason"].as_str()), (401, Some("token_invalid")));

    // The wait_id fallback: the read of GET …/{id}, by its owner only.
    let wait_url = watch["wait_url"].as_str().expect("wait_url");
    let expected_url = format!("/v1/orgs/{}/projects/{}/tool-executions/{id}/waits/", c.id.org_id, c.id.project_id);
    assert!(wait_url.starts_with(&expected_url), "{wait_url}");
    let polled = c
        .http
        .get(format!("http://{}{wait_url}?wait_ms=200", c.gateways[0].addr))
        .bearer_auth(&c.id.user_token)
        .send()
        .await
        .expect("poll");
    assert_eq!(polled.status(), 200);
    let polled: Value = polled.json().await.expect("json");
    assert_eq!((polled["status"].as_str(), polled["wait_id"].as_str()), (Some("completed"), watch["wait_id"].as_str()));
    assert_eq!((polled["timed_out"].as_bool(), polled["shutdown"].as_bool()), (Some(false), Some(false)));
    let (key_id, revoked) = member_key(&c).await;
    c.admin(&["revoke", "--id", &key_id]).await.expect("revoke");
    let forged = format!("{expected_url}bwait1.forged");
    let cases = [
        ("another end user", wait_url, c.id.other_user_token.as_str(), 404),
        ("a revoked key", wait_url, revoked.as_str(), 401),
        ("a bad token", wait_url, "nope", 401),
        ("a forged wait id", forged.as_str(), c.id.user_token.as_str(), 404),
    ];
    for (who, path, token, status) in cases {
        let r = c.http.get(format!("http://{}{path}", c.gateways[0].addr)).bearer_auth(token).send().await;
        assert_eq!(r.expect("poll").status(), status, "{who}");
    }

    // `any` offers the same, and a foreign caller is not offered a watch at all.
    let other = sleeping(&alice, 60).await;
    let any = offer(&alice, &other, "delivery=any").await;
    assert_eq!((any["delivery"].as_str(), any["execution"]["status"].as_str()), (Some("any"), Some("working")));
    let bob = c.rest(0, &c.id.other_user_token);
    let foreign = bob.get(&format!("/tool-executions/{other}?delivery=websocket")).await.expect("foreign");
    assert_eq!(foreign.status, 404);
    let r = bob.get(&format!("/tool-executions/{other}?delivery=sometimes")).await.expect("bad delivery");
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn watch_deadlines_limits_and_timed_out_answers() {
    let c = cluster(&[
        ("BATON_GATEWAY__WATCH_CONNECT_TTL_MS", "400"),
        ("BATON_GATEWAY__MAX_WAIT_MS", "2000"),
        ("BATON_GATEWAY__MAX_WATCH_SECONDS", "2"),
    ])
    .await;
    let alice = c.rest(0, &c.id.user_token);
    let id = sleeping(&alice, 60).await;

    // Over a configured limit: 400 naming the limit, never a shorter wait.
    let over = alice.get(&format!("/tool-executions/{id}?wait_ms=2001")).await.expect("over");
    assert_eq!(over.status, 400, "{}", over.json());
    assert!(over.json()["error"]["message"].as_str().is_some_and(|m| m.contains("gateway.max_wait_ms")));
    let over = alice.get(&format!("/tool-executions/{id}?delivery=websocket&timeout_seconds=3")).await.expect("over");
    assert_eq!(over.status, 400, "{}", over.json());
    assert!(over.json()["error"]["message"].as_str().is_some_and(|m| m.contains("gateway.max_watch_seconds")));
    let over = compat_get(&c, &c.id.user_token, json!({"execution_id": id, "wait_ms": 2001})).await;
    assert_eq!(over["isError"], true, "{over}");
    assert!(over["content"][0]["text"].as_str().is_some_and(|t| t.contains("gateway.max_wait_ms")), "{over}");

    // A wait that sees no change says it timed out, on REST and on the compatibility tool.
    let polled = alice.get(&format!("/tool-executions/{id}?wait_ms=500")).await.expect("poll").json();
    assert_eq!((polled["timed_out"].as_bool(), polled["shutdown"].as_bool()), (Some(true), Some(false)), "{polled}");
    let got = compat_get(&c, &c.id.user_token, json!({"execution_id": id, "wait_ms": 500})).await;
    let structured = &got["structuredContent"];
    assert_eq!(
        (structured["timed_out"].as_bool(), structured["shutdown"].as_bool()),
        (Some(true), Some(false)),
        "{got}"
    );
    assert_eq!(structured["execution_id"].as_str(), Some(id.as_str()));
    let at_once = compat_get(&c, &c.id.user_token, json!({"execution_id": id})).await;
    assert_eq!(at_once["structuredContent"]["timed_out"], false, "{at_once}");

    // A watch ends after its timeout_seconds, saying so.
    let watch = offer(&alice, &id, "delivery=websocket&timeout_seconds=1").await;
    let (messages, close) = messages_until_closed(watch["websocket_url"].as_str().expect("url")).await;
    assert_eq!(kinds(&messages), ["execution", "end"], "{messages:?}");
    assert_eq!(messages[0]["execution"]["status"], "working");
    assert_eq!((messages[1]["reason"].as_str(), messages[1]["timed_out"].as_bool()), (Some("timed_out"), Some(true)));
    assert_eq!(close, Some(1000));
    // …while its wait_id still answers.
    let wait_url = format!("http://{}{}", c.gateways[0].addr, watch["wait_url"].as_str().expect("wait_url"));
    let r = c.http.get(&wait_url).bearer_auth(&c.id.user_token).send().await.expect("poll");
    assert_eq!(r.status(), 200);

    // A URL opened after its connect deadline is refused.
    let late = offer(&alice, &id, "delivery=websocket").await;
    let deadline = Instant::now() + Duration::from_millis(400);
    tokio::time::sleep_until(deadline + Duration::from_millis(200)).await;
    let (status, body) = refused(late["websocket_url"].as_str().expect("url")).await;
    assert_eq!((status, body["error"]["reason"].as_str()), (401, Some("token_expired")), "{body}");
}

#[tokio::test]
async fn a_revoked_credential_is_refused_at_connect_and_ends_an_open_watch() {
    let c = cluster(&[]).await;
    let (key_id, key) = member_key(&c).await;
    let member = c.rest(0, &key);
    let id = sleeping(&member, 60).await;
    let before_revocation = offer(&member, &id, "delivery=websocket").await;
    let open = offer(&member, &id, "delivery=websocket").await;
    let (mut socket, _) =
        tokio_tungstenite::connect_async(open["websocket_url"].as_str().expect("url")).await.expect("opens");
    let first = timeout(PATIENCE, socket.next()).await.expect("first message").expect("frame").expect("ok");
    let first: Value = serde_json::from_str(first.to_text().expect("text")).expect("json");
    assert_eq!(first["execution"]["status"], "working");

    c.admin(&["revoke", "--id", &key_id]).await.expect("revoke");
    // The open socket re-checks the credential before anything else is sent.
    let ended = timeout(PATIENCE, async {
        let mut seen = Vec::new();
        while let Some(Ok(frame)) = socket.next().await {
            match frame {
                Message::Text(t) => seen.push(serde_json::from_str::<Value>(t.as_str()).expect("json")),
                Message::Close(f) => return (seen, f.map(|f| u16::from(f.code))),
                _ => {}
            }
        }
        (seen, None)
    })
    .await
    .expect("the watch ends");
    assert_eq!(kinds(&ended.0), ["error"], "{:?}", ended.0);
    assert_eq!(ended.0[0]["error"]["code"], "unauthenticated");
    assert_eq!(ended.1, Some(1008));
    // A URL issued before the revocation opens nothing after it.
    let (status, body) = refused(before_revocation["websocket_url"].as_str().expect("url")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("unauthenticated")), "{body}");
}

#[tokio::test]
async fn sigterm_answers_every_kind_of_wait_at_once_saying_so() {
    // A bound of three waits lets the test see when all three are parked.
    let mut c = cluster(&[("BATON_GATEWAY__MAX_WAITS_PER_PRINCIPAL", "3")]).await;
    let alice = c.rest(0, &c.id.user_token);
    let id = sleeping(&alice, 60).await;
    let began = Instant::now();

    let watch = offer(&alice, &id, "delivery=websocket&timeout_seconds=30").await;
    let url = watch["websocket_url"].as_str().expect("url").to_owned();
    let (socket, _) = tokio_tungstenite::connect_async(&url).await.expect("socket opens");
    let socket = tokio::spawn(until_closed(socket));
    let rest_wait = {
        let rest = c.rest(0, &c.id.user_token);
        let id = id.clone();
        tokio::spawn(async move {
            loop {
                let r = rest.get(&format!("/tool-executions/{id}?wait_ms=30000")).await.expect("poll");
                // A probe may hold a place for a moment: come back, as a good client does.
                if r.status != 429 {
                    return r.json();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let compat_wait = {
        let to = (c.http.clone(), c.gateways[0].addr.clone(), c.id.gateway_id.clone(), c.id.user_token.clone());
        let id = id.clone();
        tokio::spawn(async move { compat_get_with(to, json!({"execution_id": id, "wait_ms": 30000})).await })
    };
    eventually(PATIENCE, "three parked waits", || async {
        let r = alice.get(&format!("/tool-executions/{id}?wait_ms=1")).await?;
        Ok((r.status == 429).then_some(()))
    })
    .await
    .expect("parked");

    let pid = c.gateways[0].child.id().expect("gateway pid").to_string();
    let kill = tokio::process::Command::new("kill").args(["-TERM", &pid]).status().await.expect("kill");
    assert!(kill.success());

    let polled = timeout(PATIENCE, rest_wait).await.expect("REST answered").expect("join");
    assert_eq!((polled["shutdown"].as_bool(), polled["timed_out"].as_bool()), (Some(true), Some(false)), "{polled}");
    let got = timeout(PATIENCE, compat_wait).await.expect("tool answered").expect("join");
    let structured = &got["structuredContent"];
    assert_eq!(
        (structured["shutdown"].as_bool(), structured["timed_out"].as_bool()),
        (Some(true), Some(false)),
        "{got}"
    );
    let (messages, close) = timeout(PATIENCE, socket).await.expect("socket ended").expect("join");
    let end = messages.last().expect("an end message");
    assert_eq!(
        (end["reason"].as_str(), end["shutdown"].as_bool(), end["timed_out"].as_bool()),
        (Some("shutdown"), Some(true), Some(false))
    );
    assert_eq!(close, Some(1001));
    assert!(began.elapsed() < Duration::from_secs(30), "answered before the waits' own 30 s end");
    let exited = timeout(PATIENCE, c.gateways[0].child.wait()).await.expect("the gateway exits").expect("wait");
    assert!(exited.success(), "{exited:?}");
}

/// The example remote MCP server (fastmcp, 2026-07-28) whose `ask_name` asks
/// for input while it runs; killed when dropped. Its port.
async fn asking_server() -> (tokio::process::Child, u16) {
    use tokio::io::AsyncBufReadExt;
    let python = crate::remote_mcp::fastmcp_python().await.expect("fastmcp venv");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/remote/v2_server.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONWARNINGS", "ignore::DeprecationWarning")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("server starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let port = timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(p) = line.strip_prefix("PORT ") {
                return p.trim().parse::<u16>().ok();
            }
        }
        None
    })
    .await
    .expect("the server listens in time")
    .expect("the server printed its port");
    (child, port)
}

#[tokio::test]
async fn a_watch_socket_delivers_input_requests_as_they_appear() {
    let (_server, port) = asking_server().await;
    let mut c = Cluster::new(Settings::default()).await.expect("cluster");
    c.start_coordinator().await.expect("coordinator");
    c.start_gateway(0).await.expect("gateway");
    let remote = format!("[{{url: \"http://127.0.0.1:{port}/mcp\", toolkit_name: Py, toolkit_version: \"1\"}}]");
    c.start_worker_remote(0, &remote).await.expect("worker");
    let alice = c.rest(0, &c.id.user_token);
    let started = alice.start("ask_name", json!({}), None).await.expect("start");
    assert_eq!(started.status, 202, "{}", started.json());
    let id = id_of(&started.json());

    let watch = offer(&alice, &id, "delivery=websocket").await;
    let (mut socket, _) =
        tokio_tungstenite::connect_async(watch["websocket_url"].as_str().expect("url")).await.expect("opens");
    let mut seen: Vec<Value> = Vec::new();
    let asked = timeout(PATIENCE, async {
        while let Some(Ok(frame)) = socket.next().await {
            if let Message::Text(t) = frame {
                let m: Value = serde_json::from_str(t.as_str()).expect("json");
                seen.push(m.clone());
                if m["type"] == "input_request" {
                    return Some(m);
                }
            }
        }
        None
    })
    .await
    .expect("an input request arrives")
    .unwrap_or_else(|| panic!("the socket ended first: {seen:?}"));
    assert_eq!(asked["execution_id"].as_str(), Some(id.as_str()));
    assert_eq!(asked["input_request"]["message"], "Your name?", "{asked}");
    let key = asked["input_request"]["request_key"].as_str().expect("request_key");
    assert!(
        seen.iter().any(|m| m["type"] == "execution" && m["execution"]["status"] == "input_required"),
        "the status change came too: {seen:?}"
    );

    let answer = json!({"request_key": key, "response": {"action": "accept", "content": {"name": "Ada"}}});
    assert_eq!(alice.post(&format!("/tool-executions/{id}/input"), answer).await.expect("answer").status, 200);
    let (rest_of_it, close) = until_closed(socket).await;
    let last_status = rest_of_it
        .iter()
        .filter(|m| m["type"] == "execution")
        .filter_map(|m| m["execution"]["status"].as_str())
        .next_back()
        .map(str::to_owned);
    assert_eq!(last_status.as_deref(), Some("completed"), "{rest_of_it:?}");
    assert!(rest_of_it.iter().all(|m| m["type"] != "input_request"), "each request is sent once: {rest_of_it:?}");
    assert_eq!(close, Some(1000));
}

/// A watch outlives its coordinator going away: while it is gone the socket
/// stays open (the wait answers unavailable and is asked again after the
/// pause it names), and the terminal view still arrives once it is back.
#[tokio::test]
async fn a_watch_rides_out_a_coordinator_restart() {
    let mut c = cluster(&[]).await;
    let alice = c.rest(0, &c.id.user_token);
    let id = sleeping(&alice, 600).await;
    let watch = offer(&alice, &id, "delivery=websocket&timeout_seconds=120").await;
    let url = watch["websocket_url"].as_str().expect("websocket_url").to_owned();
    let (mut socket, _) = tokio_tungstenite::connect_async(&url).await.expect("socket opens");
    let first = timeout(PATIENCE, socket.next()).await.expect("a first message").expect("open").expect("frame");
    let first: Value = serde_json::from_str(first.to_text().expect("text")).expect("JSON");
    assert_eq!(first["execution"]["status"], "working", "{first}");

    c.coordinators[0].kill9();
    c.restart_coordinator(0).await.expect("coordinator back");
    eventually(PATIENCE, "cancelled", || async {
        let r = alice.post(&format!("/tool-executions/{id}/cancel"), json!({})).await?;
        Ok((r.status < 300).then_some(()))
    })
    .await
    .expect("cancel once the coordinator is back");

    let (messages, close) = until_closed(socket).await;
    assert!(messages.iter().all(|m| m["type"] != "error"), "the outage did not end the watch: {messages:?}");
    let last_view = messages.iter().rev().find(|m| m["type"] == "execution").expect("a view after the outage");
    assert_eq!(last_view["execution"]["status"], "cancelled", "{messages:?}");
    let end = messages.last().expect("an end message");
    assert_eq!((end["type"].as_str(), end["reason"].as_str()), (Some("end"), Some("terminal")), "{end}");
    assert_eq!(close, Some(1000));
}
